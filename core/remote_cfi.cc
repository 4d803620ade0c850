#include "core/remote_cfi.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "core/maps_line.h"
#include "core/memory_view.h"
#include "core/shared_arena.h"
#include "core/signal_handler.h"

namespace dlprof {
namespace {

constexpr uintptr_t kPage = 4096;


// The lines of `pid`'s maps, pointing into *text.
bool ReadMapsLines(pid_t pid, std::string* text, std::vector<MapsLine>* out, std::string* error) {
  if (!ReadMapsText(pid, text, error)) return false;
  ForEachMapsLine(*text, [out](const MapsLine& m) { out->push_back(m); });
  return true;
}

// The executable mappings by file (device, inode): a lookup per object, not
// a pass over every line (20,000 mappings of one file made that quadratic:
// 2.8 s of the helper's CPU).
using ExecByFile = std::multimap<std::pair<uint64_t, uint64_t>, const MapsLine*>;

// What the ELF headers in mapping `head` (offset 0 of a file, or the vdso)
// give, read from the process's memory.
RemoteHeader ReadHeader(pid_t pid, const MapsLine& head) {
  RemoteHeader h;
  ElfW(Ehdr) eh;
  if (CopyFromProcess(pid, &eh, head.lo, sizeof(eh)) != sizeof(eh)) {
    h.unreadable = true;
    return h;
  }
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum == 0 || eh.e_phnum > 256) {
    return h;
  }
  std::vector<ElfW(Phdr)> phdrs(eh.e_phnum);
  const size_t bytes = phdrs.size() * sizeof(ElfW(Phdr));
  if (eh.e_phoff > head.hi - head.lo ||
      CopyFromProcess(pid, phdrs.data(), head.lo + eh.e_phoff, bytes) != bytes) {
    h.unreadable = eh.e_phoff <= head.hi - head.lo;
    return h;
  }
  uintptr_t first_load = UINTPTR_MAX, text_lo = UINTPTR_MAX, text_hi = 0;
  for (const ElfW(Phdr)& ph : phdrs) {
    if (ph.p_type != PT_LOAD) continue;
    first_load = std::min<uintptr_t>(first_load, ph.p_vaddr & ~(kPage - 1));
    if (ph.p_flags & PF_X) {
      text_lo = std::min<uintptr_t>(text_lo, ph.p_vaddr);
      text_hi = std::max<uintptr_t>(text_hi, ph.p_vaddr + ph.p_memsz);
    }
  }
  if (first_load == UINTPTR_MAX || text_hi == 0 || head.lo < first_load) return h;
  h.elf = true;
  h.bias = head.lo - first_load;
  h.text_lo = text_lo;
  h.text_hi = text_hi;
  h.phdrs = std::move(phdrs);
  return h;
}

// The object headed by mapping `head`, if its headers describe one that is
// loaded: an executable mapping of the same file covers part of its text.
bool DescribeObject(const MapsLine& head, const RemoteHeader& h, const ExecByFile& exec,
                    RemoteObject* out) {
  if (!h.elf) return false;
  const bool vdso = head.path == "[vdso]";
  bool loaded = vdso && head.executable();
  for (auto [it, end] = exec.equal_range({head.dev(), head.inode}); !vdso && it != end; ++it) {
    const MapsLine& m = *it->second;
    if (m.lo < h.bias + h.text_hi && m.hi > h.bias + h.text_lo) {
      loaded = true;
      break;
    }
  }
  if (!loaded) return false;
  out->name = std::string(head.path);
  out->bias = h.bias;
  out->phdrs = h.phdrs;
  return true;
}

}  // namespace

bool ReadRemoteObjects(pid_t pid, std::vector<RemoteObject>* out, std::string* error,
                       RemoteHeaders* headers, std::string* maps_text) {
  std::string own_text;
  std::string& text = maps_text != nullptr ? *maps_text : own_text;
  std::vector<MapsLine> lines;
  if (!ReadMapsLines(pid, &text, &lines, error)) return false;
  out->clear();
  RemoteHeaders seen;
  std::set<uintptr_t> biases;
  ExecByFile exec;
  for (const MapsLine& m : lines) {
    if (m.executable() && m.inode != 0) exec.emplace(std::make_pair(m.dev(), m.inode), &m);
  }
  for (const MapsLine& m : lines) {
    if (m.offset != 0 || !m.readable() || m.path.empty()) continue;
    if (m.inode == 0 && m.path != "[vdso]") continue;
    // A file mapped many times without being loaded (20,000 read-only
    // mmaps of a library): only an offset-0 mapping near where one of the
    // file's executable mappings puts offset 0 (a loaded object's segments
    // keep their file offsets, give or take their alignment) is read.
    if (m.path != "[vdso]") {
      bool near = false;
      int checked = 0;
      for (auto [it, end] = exec.equal_range({m.dev(), m.inode});
           !near && it != end && checked++ < 64; ++it) {
        const uintptr_t zero = it->second->lo - it->second->offset;
        near = (zero > m.lo ? zero - m.lo : m.lo - zero) < (uintptr_t{16} << 20);
      }
      if (!near) continue;
    }
    RemoteHeaders::key_type key(m.lo, m.hi, m.dev(), m.inode, std::string(m.path));
    auto known = headers == nullptr ? RemoteHeaders::iterator() : headers->find(key);
    const RemoteHeader& h =
        seen.emplace(key, headers != nullptr && known != headers->end() ? std::move(known->second)
                                                                         : ReadHeader(pid, m))
            .first->second;
    RemoteObject o;
    if (!DescribeObject(m, h, exec, &o)) continue;
    // The same object headed twice (never in practice): the first one.
    if (biases.insert(o.bias).second) out->push_back(std::move(o));
  }
  if (headers != nullptr) {
    for (auto it = seen.begin(); it != seen.end();) it = it->second.unreadable ? seen.erase(it) : std::next(it);
    *headers = std::move(seen);
  }
  return true;
}

RemoteCfiHost::RemoteCfiHost(pid_t pid, CfiRegion* region) : pid_(pid), region_(region) {}

RemoteCfiHost::~RemoteCfiHost() {
  if (status_fd_ >= 0) close(status_fd_);
}

bool RemoteCfiHost::ReadExecKb(uint64_t* kb) {
  if (status_fd_ < 0) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", static_cast<int>(pid_));
    status_fd_ = open(path, O_RDONLY | O_CLOEXEC);
    if (status_fd_ < 0) return false;
  }
  char buf[4096];
  const ssize_t n = pread(status_fd_, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return false;
  buf[n] = '\0';
  return ParseExecKb(buf, kb);
}

bool ParseExecKb(const char* status, uint64_t* kb) {
  uint64_t sum = 0;
  for (const char* key : {"\nVmExe:", "\nVmLib:"}) {
    const char* at = strstr(status, key);
    if (at == nullptr) return false;
    const char* digits = at + strlen(key);
    char* end = nullptr;
    sum += strtoull(digits, &end, 10);
    if (end == digits) return false;
  }
  *kb = sum;
  return true;
}

void RemoteCfiHost::RefreshIfDue() {
  const int64_t now = MonotonicNs();
  const uint64_t no_object = region_->state.no_object.load(std::memory_order_relaxed);
  const int64_t since = now - last_read_ns_;
  const bool missed = no_object != no_object_seen_ && since >= miss_wait_ns_;
  const bool due = last_read_ns_ == 0 || since >= 1000000000 || missed;
  if (!due) return;
  last_read_ns_ = now;
  no_object_seen_ = no_object;
  // Whether a library came or went is first asked of the size of the
  // program's executable mappings (VmExe + VmLib of its status, kept by the
  // kernel as a count: one small read), and the maps are read only when it
  // changed, or every kFullReadNs. The maps of a torch process are ~1,700
  // lines; their read each second was a tenth of a DataLoader worker's
  // helper. The text read last is then still the executable mappings now.
  // A sample in no known object still reads them: a library unloaded and
  // loaded again elsewhere (a dlopen/dlclose loop) leaves the size as it
  // was. (The size is read before the maps: a library mapped after it
  // changes it for the next read.)
  uint64_t exec_kb = 0;
  const bool sized = ReadExecKb(&exec_kb);
  if (!missed && generation_ != 0 && sized && exec_kb == exec_kb_ &&
      now - last_full_read_ns_ < kFullReadNs) {
    maps_text_ns_ = now;
    ++size_checks_;
    return;
  }
  exec_kb_ = sized ? exec_kb : 0;
  last_full_read_ns_ = now;
  std::vector<RemoteObject> objects;
  std::string error, text;
  if (!ReadRemoteObjects(pid_, &objects, &error, &headers_, &text)) {
    read_error_ = error;
    return;  // gone: the last ones stand
  }
  read_error_.clear();
  ++scans_;
  maps_text_.swap(text);
  maps_text_ns_ = now;
  uint64_t fp = 1469598103934665603ull;
  for (const RemoteObject& o : objects) {
    fp = (fp ^ std::hash<std::string>()(o.name)) * 1099511628211ull;
    fp = (fp ^ o.bias) * 1099511628211ull;
    fp = (fp ^ o.phdrs.size()) * 1099511628211ull;
  }
  const bool changed = fp != fingerprint_ || generation_ == 0;
  if (changed) {
    fingerprint_ = fp;
    ++generation_;
    objects_ = std::move(objects);
  }
  // Samples in no known object: libraries loading (an import, every 20 ms
  // then, so that their samples soon have rows), or JIT code, which no read
  // of the maps will find: the wait doubles up to the second while reads
  // find nothing new (JIT code had the objects read 10 times a second).
  if (missed) {
    miss_wait_ns_ = changed ? kFirstMissWaitNs : std::min<int64_t>(miss_wait_ns_ * 2, 1000000000);
  }
}

std::string RemoteCfiHost::Unreadable() const {
  if (!objects_.empty()) return "";
  if (!read_error_.empty()) return read_error_;
  if (scans_ == 0) return "";
  // The maps were read but no header could be (process_vm_readv refused:
  // a seccomp filter, an undumpable program).
  ElfW(Ehdr) probe;
  errno = 0;
  iovec local{&probe, sizeof(probe)};
  iovec remote{reinterpret_cast<void*>(region_), sizeof(probe)};
  if (process_vm_readv(pid_, &local, 1, &remote, 1, 0) < 0) {
    return std::string("process_vm_readv: ") + strerror(errno);
  }
  return "no loaded object found in its maps";
}

bool RemoteCfiHost::IterateObjects(int (*callback)(dl_phdr_info*, size_t, void*), void* data) {
  RefreshIfDue();
  for (const RemoteObject& o : objects_) {
    dl_phdr_info info{};
    info.dlpi_addr = o.bias;
    info.dlpi_name = o.name.c_str();
    info.dlpi_phdr = o.phdrs.data();
    info.dlpi_phnum = static_cast<ElfW(Half)>(o.phdrs.size());
    info.dlpi_adds = generation_;
    info.dlpi_subs = generation_;
    if (callback(&info, sizeof(info), data) != 0) break;
  }
  return true;
}

size_t RemoteCfiHost::Copy(void* to, uintptr_t from, size_t n) {
  return CopyFromProcess(pid_, to, from, n);
}

void* RemoteCfiHost::Map(size_t bytes, bool) {
  if (bytes == 0) return nullptr;
  bytes = (bytes + kPage - 1) & ~(kPage - 1);
  uintptr_t at = 0;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < bytes) continue;
    at = it->first;
    const size_t left = it->second - bytes;
    free_.erase(it);
    if (left > 0) free_.emplace(at + bytes, left);
    break;
  }
  if (at == 0) {
    const uint64_t used = region_->used.load(std::memory_order_relaxed);
    if (used > region_->bytes || bytes > region_->bytes - used) return nullptr;
    region_->used.store(used + bytes, std::memory_order_relaxed);
    at = reinterpret_cast<uintptr_t>(region_) + used;
  }
  // Zeroed: freed runs were removed (zero), but past the cursor a fork
  // child's copy may hold what its parent's helper wrote after the cursor
  // was copied.
  memset(reinterpret_cast<void*>(at), 0, bytes);
  in_use_ += bytes;
  return reinterpret_cast<void*>(at);
}

void RemoteCfiHost::Unmap(void* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return;
  bytes = (bytes + kPage - 1) & ~(kPage - 1);
  uintptr_t at = reinterpret_cast<uintptr_t>(p);
  // The memfd's pages go back to the system (and a fork's copy skips them).
  madvise(p, bytes, MADV_REMOVE);
  in_use_ -= std::min<uint64_t>(in_use_, bytes);
  auto next = free_.lower_bound(at);
  if (next != free_.end() && next->first == at + bytes) {
    bytes += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == at) {
      at = prev->first;
      bytes += prev->second;
      free_.erase(prev);
    }
  }
  free_.emplace(at, bytes);
}

bool RemoteCfiHost::Quiet(int64_t readers) {
  return readers == 0 && !ArenaForkCopyUnderway();
}

}  // namespace dlprof
