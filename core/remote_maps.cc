#include "core/remote_maps.h"

#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/maps_line.h"

namespace dlprof {
namespace {

// Bounds on what a read may cost, whatever the process or its files hold.
constexpr size_t kMaxNoteBytes = 64u << 10;        // one PT_NOTE or SHT_NOTE
constexpr size_t kMaxBuildIdBytes = 64;            // GNU ld writes 20 (sha1)
constexpr size_t kMaxHeadersInMemory = 64u << 10;  // read of an image's start from memory
constexpr size_t kMaxPhdrs = 256;
constexpr size_t kMaxSections = 4096;
constexpr int kMaxObjectsPerRead = 4096;   // the rest wait for the next read
constexpr size_t kMaxCached = 16384;       // then the cache starts over

struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

struct ElfHandle {
  Elf* elf;
  explicit ElfHandle(Elf* e) : elf(e) {}
  ~ElfHandle() { elf_end(elf); }
  ElfHandle(const ElfHandle&) = delete;
  ElfHandle& operator=(const ElfHandle&) = delete;
};

std::string BuildIdInNotes(const Elf_Data* data) {
  const char* buf = static_cast<const char*>(data->d_buf);
  size_t offset = 0;
  GElf_Nhdr nh;
  size_t name_offset, desc_offset;
  while (offset < data->d_size) {
    const size_t next = gelf_getnote(const_cast<Elf_Data*>(data), offset, &nh, &name_offset,
                                     &desc_offset);
    if (next == 0) break;
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
        memcmp(buf + name_offset, "GNU", 4) == 0 && nh.n_descsz > 0 &&
        nh.n_descsz <= kMaxBuildIdBytes) {
      return std::string(buf + desc_offset, nh.n_descsz);
    }
    offset = next;
  }
  return {};
}

// The notes of the program headers first (what the loader maps, so what the
// in-process reader sees), then of the sections.
std::string BuildIdOfElf(Elf* elf) {
  if (elf_kind(elf) != ELF_K_ELF) return {};
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) == 0) {
    for (size_t i = 0; i < phnum && i < kMaxPhdrs; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_NOTE ||
          ph.p_filesz == 0 || ph.p_filesz > kMaxNoteBytes) {
        continue;
      }
      Elf_Data* data = elf_getdata_rawchunk(elf, static_cast<int64_t>(ph.p_offset), ph.p_filesz,
                                            ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
      if (data == nullptr) continue;
      std::string id = BuildIdInNotes(data);
      if (!id.empty()) return id;
    }
  }
  Elf_Scn* scn = nullptr;
  for (size_t n = 0; n < kMaxSections && (scn = elf_nextscn(elf, scn)) != nullptr; ++n) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != SHT_NOTE || sh.sh_size > kMaxNoteBytes) {
      continue;
    }
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr) continue;
    std::string id = BuildIdInNotes(data);
    if (!id.empty()) return id;
  }
  return {};
}

// ELF_C_READ, not ELF_C_READ_MMAP: a file truncated while mapped by libelf
// would raise SIGBUS here; pread just comes up short.
std::string BuildIdOfFile(int fd) {
  ElfHandle h(elf_begin(fd, ELF_C_READ, nullptr));
  return h.elf == nullptr ? std::string() : BuildIdOfElf(h.elf);
}

// The image's headers as mapped at `base` in process `pid` (its offset-0
// mapping, `len` bytes). Only the start of the image is there, so the
// section header fields are cleared: libelf refuses an image whose section
// headers lie outside it, and only the program headers' notes are wanted.
// False when the memory could not be read (no permission, gone): worth
// another try later, unlike an image without a build-id.
bool BuildIdInMemory(pid_t pid, uint64_t base, uint64_t len, std::string* id) {
  id->clear();
  std::string buf(std::min<uint64_t>(len, kMaxHeadersInMemory), '\0');
  iovec local = {buf.data(), buf.size()};
  iovec remote = {reinterpret_cast<void*>(base), buf.size()};
  const ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (n < 0) return false;
  if (n < static_cast<ssize_t>(sizeof(Elf64_Ehdr)) || memcmp(buf.data(), ELFMAG, SELFMAG) != 0) {
    return true;
  }
  buf.resize(static_cast<size_t>(n));
  if (buf[EI_CLASS] == ELFCLASS64) {
    Elf64_Ehdr eh;
    memcpy(&eh, buf.data(), sizeof(eh));
    eh.e_shoff = 0, eh.e_shnum = 0, eh.e_shstrndx = 0;
    memcpy(buf.data(), &eh, sizeof(eh));
  } else if (buf[EI_CLASS] == ELFCLASS32) {
    Elf32_Ehdr eh;
    memcpy(&eh, buf.data(), sizeof(eh));
    eh.e_shoff = 0, eh.e_shnum = 0, eh.e_shstrndx = 0;
    memcpy(buf.data(), &eh, sizeof(eh));
  } else {
    return true;
  }
  ElfHandle h(elf_memory(buf.data(), buf.size()));
  if (h.elf != nullptr) *id = BuildIdOfElf(h.elf);
  return true;
}

// An executable or offset-0 mapping of a file, as Read keeps it.
struct Mapping {
  unsigned long start, end, offset, inode;
  std::string path;
};

bool EndsWith(const std::string& s, const char* tail) {
  const size_t n = strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

uint64_t MtimeNs(const struct stat& st) {
  return static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000u +
         static_cast<uint64_t>(st.st_mtim.tv_nsec);
}

}  // namespace

RemoteMaps::RemoteMaps(bool use_map_files) : use_map_files_(use_map_files) {
  elf_version(EV_CURRENT);
}

bool RemoteMaps::Read(pid_t pid, std::vector<MapEntry>* out, std::string* error,
                      const std::string* maps_text) {
  try {
    std::string own_text;
    if (maps_text == nullptr && !ReadMapsText(pid, &own_text, error)) return false;
    const std::string& text = maps_text != nullptr ? *maps_text : own_text;
    const std::string proc = "/proc/" + std::to_string(pid);

    // The start of each object's offset-0 mapping, for reading its headers
    // from memory: by (dev, inode, path), updated in address order, so a file
    // mapped twice (dlmopen) gets each copy's own.
    std::map<Object, std::pair<unsigned long, unsigned long>> base_of;  // start, length
    // What this read resolved through files, per object (found, build-id):
    // a file mapped in many pieces is stat()ed once.
    std::map<Object, std::pair<bool, std::string>> by_file;
    int objects_this_read = 0;

    auto file_build_id = [&](const Mapping& m, std::string* id) {
      struct Source {
        std::string path;
        bool check_inode;
      };
      std::vector<Source> sources;
      if (use_map_files_) {
        char name[64];
        snprintf(name, sizeof(name), "/map_files/%lx-%lx", m.start, m.end);
        sources.push_back({proc + name, false});
      }
      // The name is the mapped file's only while it is not "(deleted)", and
      // even then another file may be there now: the inode must be the one
      // mapped.
      if (m.path[0] == '/' && !EndsWith(m.path, " (deleted)")) {
        sources.push_back({proc + "/root" + m.path, true});
        sources.push_back({m.path, true});
      }
      for (const Source& s : sources) {
        struct stat st;
        if (stat(s.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
            (s.check_inode && st.st_ino != m.inode)) {
          continue;
        }
        Key key{st.st_dev, st.st_ino, MtimeNs(st), 0};
        auto hit = build_ids_.find(key);
        if (hit != build_ids_.end()) {
          *id = hit->second;
          return true;
        }
        if (objects_this_read >= kMaxObjectsPerRead) return false;
        // O_NONBLOCK: should the name be a FIFO by now, open() must not wait.
        Fd f(open(s.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
        if (f.fd < 0 || fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode) ||
            (s.check_inode && st.st_ino != m.inode)) {
          continue;
        }
        ++files_opened_, ++objects_this_read;
        *id = BuildIdOfFile(f.fd);
        if (build_ids_.size() >= kMaxCached) build_ids_.clear();
        build_ids_[Key{st.st_dev, st.st_ino, MtimeNs(st), 0}] = *id;
        return true;
      }
      return false;
    };

    auto memory_build_id = [&](const Mapping& m, unsigned long base, unsigned long base_len) {
      Key key{static_cast<uint64_t>(pid), m.inode, base, 1};
      auto hit = build_ids_.find(key);
      if (hit != build_ids_.end()) return hit->second;
      if (objects_this_read >= kMaxObjectsPerRead) return std::string();
      ++memory_reads_, ++objects_this_read;
      std::string id;
      if (!BuildIdInMemory(pid, base, base_len, &id)) return id;
      if (build_ids_.size() >= kMaxCached) build_ids_.clear();
      build_ids_[key] = id;
      return id;
    };

    std::vector<MapEntry> result;
    ForEachMapsLine(text, [&](const MapsLine& v) {
      if (v.path.empty() || (v.offset != 0 && !v.executable())) return;
      Mapping m{v.lo, v.hi, v.offset, v.inode, std::string(v.path)};
      const Object object(v.dev_major, v.dev_minor, v.inode, m.path);
      if (m.offset == 0) base_of[object] = {m.start, m.end - m.start};
      if (!v.executable()) return;

      // [vsyscall] and named anonymous memory have no image to read; the
      // vdso is one, in memory only.
      const bool vdso = m.path == "[vdso]";
      if (m.path[0] == '[' && !vdso) {
        result.push_back(MapEntry{m.start, m.end, m.offset, std::move(m.path), {}});
        return;
      }
      std::string id;
      bool found = false;
      if (!vdso) {
        auto done = by_file.find(object);
        if (done == by_file.end()) {
          std::pair<bool, std::string> resolved;
          auto before = still_mapped_.find(object);
          if (before != still_mapped_.end()) {
            resolved = {true, before->second};
          } else {
            resolved.first = file_build_id(m, &resolved.second);
          }
          done = by_file.emplace(object, std::move(resolved)).first;
        }
        found = done->second.first;
        id = done->second.second;
      }
      if (!found) {
        auto base = base_of.find(object);
        if (base != base_of.end()) id = memory_build_id(m, base->second.first, base->second.second);
      }
      result.push_back(MapEntry{m.start, m.end, m.offset, std::move(m.path), std::move(id)});
    });
    *out = std::move(result);
    // Found through their files only: one the read's bound left unresolved
    // is tried again next time.
    still_mapped_.clear();
    for (auto& [object, found] : by_file) {
      if (found.first) still_mapped_.emplace(object, std::move(found.second));
    }
    return true;
  } catch (const std::exception& e) {
    try {
      *error = "/proc/" + std::to_string(pid) + "/maps: " + e.what();
    } catch (...) {
    }
    return false;
  }
}

// Entries: device, inode, mtime (8 bytes each), the build-id's length (1)
// and bytes.
std::string RemoteMaps::ExportFiles() const {
  std::string out;
  for (const auto& [key, id] : build_ids_) {
    if (std::get<3>(key) != 0 || id.size() > kMaxBuildIdBytes) continue;
    const uint64_t words[3] = {std::get<0>(key), std::get<1>(key), std::get<2>(key)};
    out.append(reinterpret_cast<const char*>(words), sizeof(words));
    out.push_back(static_cast<char>(id.size()));
    out.append(id);
  }
  return out;
}

void RemoteMaps::ImportFiles(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t at = 0;
  while (at + 25 <= size && build_ids_.size() < kMaxCached) {
    uint64_t words[3];
    memcpy(words, p + at, sizeof(words));
    const size_t n = p[at + 24];
    if (n > kMaxBuildIdBytes || at + 25 + n > size) break;
    build_ids_[Key{words[0], words[1], words[2], 0}] =
        std::string(reinterpret_cast<const char*>(p + at + 25), n);
    at += 25 + n;
  }
}

bool ReadProcessMappings(pid_t pid, std::vector<MapEntry>* out, std::string* error) {
  RemoteMaps maps;
  return maps.Read(pid, out, error);
}

uint64_t MappingsFingerprint(const std::vector<MapEntry>& maps) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  auto mix = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (const MapEntry& m : maps) {
    mix(&m.start, sizeof(m.start));
    mix(&m.end, sizeof(m.end));
    mix(&m.offset, sizeof(m.offset));
    mix(m.path.data(), m.path.size() + 1);  // with its NUL: "ab"+"c" differs from "a"+"bc"
    const uint64_t id_size = m.build_id.size();
    mix(&id_size, sizeof(id_size));
    mix(m.build_id.data(), m.build_id.size());
  }
  return h;
}

}  // namespace dlprof
