#include "core/remote_cfi.h"

#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>

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

#include "core/memory_view.h"
#include "core/shared_arena.h"
#include "core/signal_handler.h"

namespace dlprof {
namespace {

constexpr uintptr_t kPage = 4096;


struct MapsLine {
  uintptr_t lo = 0, hi = 0, offset = 0;
  bool readable = false, executable = false;
  uint64_t dev = 0, inode = 0;
  std::string path;
};

bool ReadMapsLines(pid_t pid, std::vector<MapsLine>* out, std::string* error) {
  const std::string path = "/proc/" + std::to_string(pid) + "/maps";
  FILE* f = fopen(path.c_str(), "re");
  if (f == nullptr) {
    *error = path + ": " + strerror(errno);
    return false;
  }
  char line[4096 + 256];
  while (fgets(line, sizeof(line), f) != nullptr) {
    MapsLine m;
    char perms[8] = {};
    unsigned major = 0, minor = 0;
    unsigned long long inode = 0;
    int name_at = 0;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %" SCNxPTR " %x:%x %llu %n", &m.lo, &m.hi,
               perms, &m.offset, &major, &minor, &inode, &name_at) < 7) {
      continue;
    }
    m.readable = perms[0] == 'r';
    m.executable = perms[2] == 'x';
    m.dev = (static_cast<uint64_t>(major) << 32) | minor;
    m.inode = inode;
    if (name_at > 0) {
      m.path = line + name_at;
      while (!m.path.empty() && (m.path.back() == '\n' || m.path.back() == ' ')) m.path.pop_back();
    }
    out->push_back(std::move(m));
  }
  fclose(f);
  return true;
}

// The executable mappings by file (device, inode): a lookup per object, not
// a pass over every line (20,000 mappings of one file made that quadratic:
// 2.8 s of the helper's CPU).
using ExecByFile = std::multimap<std::pair<uint64_t, uint64_t>, const MapsLine*>;

// The object headed by mapping `head` (offset 0 of a file, or the vdso), if
// it is a loaded ELF object.
bool DescribeObject(pid_t pid, const MapsLine& head, const ExecByFile& exec, RemoteObject* out) {
  ElfW(Ehdr) eh;
  if (CopyFromProcess(pid, &eh, head.lo, sizeof(eh)) != sizeof(eh)) return false;
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum == 0 || eh.e_phnum > 256) {
    return false;
  }
  std::vector<ElfW(Phdr)> phdrs(eh.e_phnum);
  const size_t bytes = phdrs.size() * sizeof(ElfW(Phdr));
  if (eh.e_phoff > head.hi - head.lo ||
      CopyFromProcess(pid, phdrs.data(), head.lo + eh.e_phoff, bytes) != bytes) {
    return false;
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
  if (first_load == UINTPTR_MAX || text_hi == 0 || head.lo < first_load) return false;
  const uintptr_t bias = head.lo - first_load;
  // Loaded: an executable mapping of the same file covers part of its text.
  const bool vdso = head.path == "[vdso]";
  bool loaded = vdso && head.executable;
  for (auto [it, end] = exec.equal_range({head.dev, head.inode}); !vdso && it != end; ++it) {
    const MapsLine& m = *it->second;
    if (m.lo < bias + text_hi && m.hi > bias + text_lo) {
      loaded = true;
      break;
    }
  }
  if (!loaded) return false;
  out->name = head.path;
  out->bias = bias;
  out->phdrs = std::move(phdrs);
  return true;
}

}  // namespace

bool ReadRemoteObjects(pid_t pid, std::vector<RemoteObject>* out, std::string* error) {
  std::vector<MapsLine> lines;
  if (!ReadMapsLines(pid, &lines, error)) return false;
  out->clear();
  std::set<uintptr_t> biases;
  ExecByFile exec;
  for (const MapsLine& m : lines) {
    if (m.executable && m.inode != 0) exec.emplace(std::make_pair(m.dev, m.inode), &m);
  }
  for (const MapsLine& m : lines) {
    if (m.offset != 0 || !m.readable || m.path.empty()) continue;
    if (m.inode == 0 && m.path != "[vdso]") continue;
    // A file mapped many times without being loaded (20,000 read-only
    // mmaps of a library): only an offset-0 mapping near where one of the
    // file's executable mappings puts offset 0 (a loaded object's segments
    // keep their file offsets, give or take their alignment) is read.
    if (m.path != "[vdso]") {
      bool near = false;
      int checked = 0;
      for (auto [it, end] = exec.equal_range({m.dev, m.inode});
           !near && it != end && checked++ < 64; ++it) {
        const uintptr_t zero = it->second->lo - it->second->offset;
        near = (zero > m.lo ? zero - m.lo : m.lo - zero) < (uintptr_t{16} << 20);
      }
      if (!near) continue;
    }
    RemoteObject o;
    if (!DescribeObject(pid, m, exec, &o)) continue;
    // The same object headed twice (never in practice): the first one.
    if (biases.insert(o.bias).second) out->push_back(std::move(o));
  }
  return true;
}

RemoteCfiHost::RemoteCfiHost(pid_t pid, CfiRegion* region) : pid_(pid), region_(region) {}

void RemoteCfiHost::RefreshIfDue() {
  const int64_t now = MonotonicNs();
  const uint64_t no_object = region_->state.no_object.load(std::memory_order_relaxed);
  const int64_t since = now - last_read_ns_;
  const bool missed = no_object != no_object_seen_ && since >= miss_wait_ns_;
  const bool due = last_read_ns_ == 0 || since >= 1000000000 || missed;
  if (!due) return;
  last_read_ns_ = now;
  no_object_seen_ = no_object;
  std::vector<RemoteObject> objects;
  std::string error;
  if (!ReadRemoteObjects(pid_, &objects, &error)) {
    read_error_ = error;
    return;  // gone: the last ones stand
  }
  read_error_.clear();
  ++scans_;
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
