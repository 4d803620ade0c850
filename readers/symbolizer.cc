#include "readers/symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace dlprof {
namespace {

std::string Hex(const void* bytes, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  const auto* b = static_cast<const unsigned char*>(bytes);
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[b[i] >> 4];
    out += kDigits[b[i] & 15];
  }
  return out;
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// What the symbolizer needs from the module's own ELF headers.
struct ElfInfo {
  bool ok = false;
  std::string build_id;
  std::vector<GElf_Phdr> loads;  // PT_LOAD segments
};

ElfInfo ReadElfInfo(const std::string& path) {
  ElfInfo info;
  elf_version(EV_CURRENT);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return info;
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (elf != nullptr && elf_kind(elf) == ELF_K_ELF) {
    info.ok = true;
    const void* id = nullptr;
    ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
    if (n > 0) info.build_id = Hex(id, static_cast<size_t>(n));
    size_t count = 0;
    if (elf_getphdrnum(elf, &count) == 0) {
      for (size_t i = 0; i < count; ++i) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, static_cast<int>(i), &ph) != nullptr && ph.p_type == PT_LOAD) {
          info.loads.push_back(ph);
        }
      }
    }
  }
  if (elf != nullptr) elf_end(elf);
  close(fd);
  return info;
}

std::string Demangle(const char* name) {
  if (name == nullptr) return "";
  if (name[0] == '_' && name[1] == 'Z') {
    int status = 0;
    char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (status == 0 && out != nullptr) {
      std::string s(out);
      std::free(out);
      return s;
    }
    std::free(out);
  }
  return name;
}

// The linkage name demangled carries namespaces, classes and parameters, which
// DW_AT_name lacks; dwarf_attr_integrate follows abstract_origin (inlined
// copies) and specification (out-of-class definitions) to find it.
std::string DieName(Dwarf_Die* die) {
  // C names renamed by asm labels (glibc's "__GI_qsort") keep DW_AT_name.
  Dwarf_Attribute attr;
  for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name}) {
    if (dwarf_attr_integrate(die, at, &attr) != nullptr) {
      const char* s = dwarf_formstring(&attr);
      if (s != nullptr && s[0] == '_' && s[1] == 'Z') return Demangle(s);
    }
  }
  if (dwarf_attr_integrate(die, DW_AT_name, &attr) != nullptr) {
    if (const char* s = dwarf_formstring(&attr)) return s;
  }
  return "";
}

std::string JoinDir(const char* comp_dir, const char* file) {
  if (file == nullptr) return "";
  if (file[0] == '/' || comp_dir == nullptr || comp_dir[0] == '\0') return file;
  std::string out(comp_dir);
  if (out.back() != '/') out += '/';
  return out + file;
}

bool FileExists(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

// `objcopy --only-keep-debug` zeroes the file offsets and sizes of PT_LOAD
// segments but keeps their addresses and memory sizes. Rebuild the offsets
// as GNU ld and lld lay them out: in address order, each at the first offset
// past the previous segment that is congruent to its address modulo the page.
void RebuildDebugFileOffsets(std::vector<GElf_Phdr>* loads) {
  bool zeroed = false;
  for (size_t i = 1; i < loads->size(); ++i) zeroed |= (*loads)[i].p_offset == 0;
  if (!zeroed) return;
  const uint64_t kPage = 0x1000;
  uint64_t next = 0;
  for (GElf_Phdr& ph : *loads) {
    uint64_t off = (next & ~(kPage - 1)) | (ph.p_vaddr & (kPage - 1));
    if (off < next) off += kPage;
    ph.p_offset = off;
    ph.p_filesz = ph.p_memsz;
    next = off + ph.p_memsz;
  }
}

}  // namespace

std::string ReadElfBuildId(const std::string& path) { return ReadElfInfo(path).build_id; }

struct Symbolizer::Module {
  std::string basename;
  std::vector<GElf_Phdr> loads;  // of the file the recorded offsets refer to
  Dwfl_Callbacks callbacks{};    // libdwfl keeps a pointer to it
  Dwfl* dwfl = nullptr;
  Dwfl_Module* mod = nullptr;   // null: nothing trustworthy to read
  Dwarf_Addr bias = 0;          // libdwfl address = ELF vaddr + bias
  std::unordered_map<uint64_t, std::vector<Frame>> cache;  // by lookup vaddr

  ~Module() {
    if (dwfl != nullptr) dwfl_end(dwfl);
  }
};

Symbolizer::Symbolizer(std::string debuginfo_path)
    : debuginfo_path_(std::move(debuginfo_path)), debuginfo_path_c_(debuginfo_path_.data()) {}

Symbolizer::~Symbolizer() = default;

Symbolizer::Module* Symbolizer::GetModule(const std::string& path, const std::string& build_id) {
  std::string key = path + '\0' + build_id;
  auto it = modules_.find(key);
  if (it != modules_.end()) return it->second.get();
  auto module = std::make_unique<Module>();
  Module* m = module.get();
  modules_.emplace(key, std::move(module));
  m->basename = Basename(path);

  // /proc/pid/maps marks files replaced after mapping; the build-id check
  // below tells whether the file now at that path is still the same one.
  std::string file = path;
  const std::string kDeleted = " (deleted)";
  if (file.size() > kDeleted.size() &&
      file.compare(file.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0) {
    file.resize(file.size() - kDeleted.size());
  }
  ElfInfo info;
  if (!file.empty() && file[0] != '[') info = ReadElfInfo(file);
  bool trusted = info.ok;
  if (info.ok && !build_id.empty() && !info.build_id.empty() && info.build_id != build_id) {
    warnings_.push_back(path + ": build-id on disk " + info.build_id + " differs from recorded " +
                        build_id + "; not using its symbols");
    trusted = false;
  }
  if (!trusted && build_id.size() > 2) {
    // The module's own debug file, named by the recorded build-id, is still right.
    size_t start = 0;
    while (start <= debuginfo_path_.size()) {
      size_t end = debuginfo_path_.find(':', start);
      if (end == std::string::npos) end = debuginfo_path_.size();
      std::string dir = debuginfo_path_.substr(start, end - start);
      if (!dir.empty() && (dir[0] == '+' || dir[0] == '-')) dir.erase(0, 1);
      start = end + 1;
      if (dir.empty() || dir[0] != '/') continue;
      std::string candidate =
          dir + "/.build-id/" + build_id.substr(0, 2) + "/" + build_id.substr(2) + ".debug";
      if (!FileExists(candidate)) continue;
      ElfInfo debug = ReadElfInfo(candidate);
      if (debug.ok && debug.build_id == build_id) {
        file = candidate;
        info = std::move(debug);
        RebuildDebugFileOffsets(&info.loads);
        trusted = true;
        break;
      }
    }
  }
  if (!trusted) {
    if (!info.ok && !file.empty() && file[0] != '[') {
      warnings_.push_back(path + ": cannot read the module; addresses stay unsymbolized");
    }
    return m;
  }
  m->loads = std::move(info.loads);
  m->callbacks.find_elf = dwfl_build_id_find_elf;
  m->callbacks.find_debuginfo = dwfl_standard_find_debuginfo;
  m->callbacks.section_address = dwfl_offline_section_address;
  m->callbacks.debuginfo_path = &debuginfo_path_c_;
  m->dwfl = dwfl_begin(&m->callbacks);
  if (m->dwfl == nullptr) return m;
  dwfl_report_begin(m->dwfl);
  // Base 0 relative to p_vaddr: libdwfl addresses are then the ELF's own
  // virtual addresses for PIE, shared libraries and fixed executables alike.
  m->mod = dwfl_report_elf(m->dwfl, m->basename.c_str(), file.c_str(), -1, 0, true);
  dwfl_report_end(m->dwfl, nullptr, nullptr);
  if (m->mod == nullptr) {
    warnings_.push_back(path + ": " + dwfl_errmsg(-1));
    return m;
  }
  Dwarf_Addr bias = 0;
  if (dwfl_module_getelf(m->mod, &bias) != nullptr) m->bias = bias;
  return m;
}

std::vector<Frame> Symbolizer::Lookup(const Location& loc, bool is_return) {
  std::vector<Frame> frames;
  char buf[64];
  if (loc.module.empty()) {
    std::snprintf(buf, sizeof(buf), "0x%" PRIx64, loc.address);
    frames.push_back(Frame{buf, "", 0});
    return frames;
  }
  Module* m = GetModule(loc.module, loc.build_id);
  std::snprintf(buf, sizeof(buf), "+0x%" PRIx64, loc.module_offset);
  Frame unknown{m->basename + buf, "", 0};
  if (m->mod == nullptr) return {unknown};

  // The recorded offset is a file offset; DWARF speaks in virtual addresses.
  bool found = false;
  uint64_t vaddr = 0;
  for (const GElf_Phdr& ph : m->loads) {
    if (loc.module_offset >= ph.p_offset && loc.module_offset < ph.p_offset + ph.p_filesz) {
      vaddr = loc.module_offset - ph.p_offset + ph.p_vaddr;
      found = true;
      break;
    }
  }
  if (!found) return {unknown};
  if (is_return && vaddr > 0) --vaddr;

  auto cached = m->cache.find(vaddr);
  if (cached != m->cache.end()) return cached->second;

  Dwarf_Addr addr = vaddr + m->bias;
  Dwarf_Addr cu_bias = 0;
  Dwarf_Die* cudie = dwfl_module_addrdie(m->mod, addr, &cu_bias);
  if (cudie != nullptr) {
    Dwarf_Attribute attr;
    const char* comp_dir = dwarf_formstring(dwarf_attr(cudie, DW_AT_comp_dir, &attr));
    std::string file;
    int line = 0;
    if (Dwfl_Line* l = dwfl_module_getsrc(m->mod, addr)) {
      file = JoinDir(comp_dir, dwfl_lineinfo(l, nullptr, &line, nullptr, nullptr, nullptr));
    }
    Dwarf_Files* files = nullptr;
    if (dwarf_getsrcfiles(cudie, &files, nullptr) != 0) files = nullptr;
    Dwarf_Die* scopes = nullptr;
    int n = dwarf_getscopes(cudie, addr - cu_bias, &scopes);
    if (n > 0) {
      // dwarf_getscopes continues into the abstract origin of an inlined
      // instance; dwarf_getscopes_die gives the physical nesting we need.
      Dwarf_Die* chain = nullptr;
      int k = dwarf_getscopes_die(&scopes[0], &chain);
      for (int i = 0; i < k; ++i) {
        int tag = dwarf_tag(&chain[i]);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram) continue;
        frames.push_back(Frame{DieName(&chain[i]), file, line});
        if (tag == DW_TAG_subprogram) break;
        // The caller's frame is at this inlined copy's call site.
        Dwarf_Word value = 0;
        file.clear();
        line = 0;
        if (files != nullptr &&
            dwarf_formudata(dwarf_attr(&chain[i], DW_AT_call_file, &attr), &value) == 0) {
          file = JoinDir(comp_dir, dwarf_filesrc(files, value, nullptr, nullptr));
        }
        if (dwarf_formudata(dwarf_attr(&chain[i], DW_AT_call_line, &attr), &value) == 0) {
          line = static_cast<int>(value);
        }
      }
      std::free(chain);
    }
    std::free(scopes);
    if (frames.empty() && !file.empty()) frames.push_back(Frame{"", file, line});
  }
  // Without DWARF, or for a nameless DIE, the symbol table still names the
  // outermost function (exported ones at least, via .dynsym).
  if (frames.empty() || frames.back().function.empty()) {
    GElf_Off offset = 0;
    GElf_Sym sym;
    const char* name = dwfl_module_addrinfo(m->mod, addr, &offset, &sym, nullptr, nullptr, nullptr);
    // A symbol that ends before the address is only the nearest export.
    if (name != nullptr && (sym.st_size == 0 || offset < sym.st_size)) {
      if (frames.empty()) frames.push_back(Frame{});
      frames.back().function = Demangle(name);
    }
  }
  for (Frame& f : frames) {
    if (f.function.empty()) f.function = unknown.function;
  }
  if (frames.empty()) frames.push_back(unknown);
  m->cache.emplace(vaddr, frames);
  return frames;
}

void Symbolizer::Symbolize(std::vector<Location>* locs, const std::vector<bool>& is_return) {
  for (size_t i = 0; i < locs->size(); ++i) {
    Location& loc = (*locs)[i];
    if (loc.pseudo || !loc.frames.empty()) continue;
    loc.frames = Lookup(loc, i < is_return.size() && is_return[i]);
  }
}

void Symbolizer::SymbolizeProfile(Profile* profile) {
  std::vector<bool> is_return(profile->locations.size(), false);
  for (const std::vector<uint32_t>& stack : profile->stacks) {
    for (size_t i = 1; i < stack.size(); ++i) {
      if (stack[i] < is_return.size()) is_return[stack[i]] = true;
    }
  }
  size_t first_new = warnings_.size();
  Symbolize(&profile->locations, is_return);
  profile->warnings.insert(profile->warnings.end(), warnings_.begin() + first_new,
                           warnings_.end());
}

}  // namespace dlprof
