#include "backends/cfi_row_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

namespace dlprof {
namespace {

// Set before the collector starts, read by it only. A plain array: the
// library has no dynamic initializers (its constructor runs before them).
char g_folder[PATH_MAX] = {};

std::atomic<uint64_t> g_loaded{0}, g_stored{0}, g_rejected{0};
std::atomic<uint64_t> g_temp_seq{0};

constexpr char kMagic[8] = {'D', 'L', 'P', 'C', 'F', 'I', 'R', '1'};
constexpr size_t kMaxBuildId = 40;
// More than any object gets (kMaxRowsPerObject rows, 8M, and their index):
// a bigger file is not ours.
constexpr uint64_t kMaxFileBytes = uint64_t{256} << 20;

// The last bytes of a cache file.
struct Trailer {
  char magic[8];
  uint32_t row_count;
  uint32_t index_count;
  uint64_t text_offset;
  uint64_t header_offset;
  uint32_t build_id_size;
  uint32_t row_size;  // sizeof(CfiRow): a layout change makes old files unusable
  unsigned char build_id[kMaxBuildId];
};
static_assert(sizeof(Trailer) == 80, "the trailer is part of the file format");

std::string FileName(const CfiRowKey& key) {
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : key.build_id) {
    hex.push_back(kHex[c >> 4]);
    hex.push_back(kHex[c & 15]);
  }
  char offsets[64];
  snprintf(offsets, sizeof(offsets), "-%llx-%llx.rows",
           static_cast<unsigned long long>(key.text_offset),
           static_cast<unsigned long long>(key.header_offset));
  return std::string(g_folder) + "/cfi-" + hex + offsets;
}

bool Usable(const CfiRowKey& key) {
  return g_folder[0] != '\0' && !key.build_id.empty() && key.build_id.size() <= kMaxBuildId;
}

bool ReadAll(int fd, void* to, size_t n) {
  auto* p = static_cast<unsigned char*>(to);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteAll(int fd, const void* from, size_t n) {
  const auto* p = static_cast<const unsigned char*>(from);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// The trailer matches the key and the file's size, and the rows and index
// are what the handler's searches assume: rows strictly ascending, index
// entries ascending and inside the rows.
bool Valid(const Trailer& t, const CfiRowKey& key, uint64_t file_bytes, const CfiRow* rows,
           const uint32_t* index) {
  if (memcmp(t.magic, kMagic, sizeof(kMagic)) != 0 || t.row_size != sizeof(CfiRow) ||
      t.row_count == 0 || t.index_count == 0 || t.text_offset != key.text_offset ||
      t.header_offset != key.header_offset || t.build_id_size != key.build_id.size() ||
      memcmp(t.build_id, key.build_id.data(), key.build_id.size()) != 0) {
    return false;
  }
  const uint64_t expected = uint64_t{t.row_count} * sizeof(CfiRow) +
                            uint64_t{t.index_count} * sizeof(uint32_t) + sizeof(Trailer);
  if (expected != file_bytes) return false;
  for (uint32_t i = 1; i < t.row_count; ++i) {
    if (rows[i].pc_offset <= rows[i - 1].pc_offset) return false;
  }
  for (uint32_t g = 0; g < t.index_count; ++g) {
    if (index[g] >= t.row_count || (g > 0 && index[g] < index[g - 1])) return false;
  }
  return true;
}

}  // namespace

void CfiSetRowCacheFolder(const std::string& folder) {
  g_folder[0] = '\0';
  if (folder.empty() || folder.size() >= sizeof(g_folder) - 64) return;
  if (mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST) return;
  struct stat st;
  // Ours alone: a directory (not a link to one) of this user, closed to others.
  if (lstat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 077) != 0) {
    return;
  }
  memcpy(g_folder, folder.c_str(), folder.size() + 1);
}

bool CfiRowCacheLoad(const CfiRowKey& key, CfiCachedTable* out) {
  if (!Usable(key)) return false;
  const int fd = open(FileName(key).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return false;  // not cached yet
  struct stat st;
  const bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
                       st.st_size >= static_cast<off_t>(sizeof(Trailer)) &&
                       static_cast<uint64_t>(st.st_size) <= kMaxFileBytes;
  if (!regular) {
    close(fd);
    g_rejected.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // Read into private pages, not mapped from the file: a file cut short
  // under a mapping would raise SIGBUS in the signal handler's reads.
  const size_t bytes = static_cast<size_t>(st.st_size);
  void* pages = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (pages == MAP_FAILED) {
    close(fd);
    return false;
  }
  const bool read_whole = ReadAll(fd, pages, bytes);
  close(fd);
  Trailer t;
  if (read_whole) {
    memcpy(&t, static_cast<unsigned char*>(pages) + bytes - sizeof(Trailer), sizeof(t));
  }
  const auto* rows = static_cast<const CfiRow*>(pages);
  const auto* index = reinterpret_cast<const uint32_t*>(static_cast<unsigned char*>(pages) +
                                                        size_t{t.row_count} * sizeof(CfiRow));
  if (!read_whole || !Valid(t, key, bytes, rows, index)) {
    munmap(pages, bytes);
    g_rejected.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  mprotect(pages, bytes, PROT_READ);
  out->rows = rows;
  out->index = index;
  out->row_count = t.row_count;
  out->index_count = t.index_count;
  out->mapped = bytes;
  g_loaded.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void CfiRowCacheStore(const CfiRowKey& key, const CfiRow* rows, uint32_t row_count,
                      const uint32_t* index, uint32_t index_count) {
  if (!Usable(key) || row_count == 0 || index_count == 0) return;
  Trailer t{};
  memcpy(t.magic, kMagic, sizeof(kMagic));
  t.row_count = row_count;
  t.index_count = index_count;
  t.text_offset = key.text_offset;
  t.header_offset = key.header_offset;
  t.build_id_size = static_cast<uint32_t>(key.build_id.size());
  t.row_size = sizeof(CfiRow);
  memcpy(t.build_id, key.build_id.data(), key.build_id.size());
  const size_t row_bytes = size_t{row_count} * sizeof(CfiRow);
  const size_t index_bytes = size_t{index_count} * sizeof(uint32_t);
  rlimit limit;
  if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      row_bytes + index_bytes + sizeof(t) > limit.rlim_cur) {
    return;
  }
  char suffix[64];
  snprintf(suffix, sizeof(suffix), "/.tmp-%d-%llu", static_cast<int>(getpid()),
           static_cast<unsigned long long>(g_temp_seq.fetch_add(1)));
  const std::string temp = std::string(g_folder) + suffix;
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  const bool written = WriteAll(fd, rows, row_bytes) && WriteAll(fd, index, index_bytes) &&
                       WriteAll(fd, &t, sizeof(t));
  const bool closed = close(fd) == 0;
  if (!written || !closed || rename(temp.c_str(), FileName(key).c_str()) != 0) {
    unlink(temp.c_str());
    return;
  }
  g_stored.fetch_add(1, std::memory_order_relaxed);
}

CfiRowCacheStats CfiRowCacheTableStats() {
  return CfiRowCacheStats{g_loaded.load(std::memory_order_relaxed),
                          g_stored.load(std::memory_order_relaxed),
                          g_rejected.load(std::memory_order_relaxed)};
}

}  // namespace dlprof
