#include "readers/symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "readers/python_merge.h"

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
  dev_t dev = 0;  // the file's identity: spellings of one path share it
  ino_t ino = 0;
  std::string build_id;
  std::vector<GElf_Phdr> loads;  // PT_LOAD segments
};

ElfInfo ReadElfInfo(const std::string& path) {
  ElfInfo info;
  elf_version(EV_CURRENT);
  // Paths come from profiles, which may be hostile: a FIFO or a device
  // ("/dev/stdin" in a gperftools memory map) would block or never end.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return info;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return info;
  }
  info.dev = st.st_dev;
  info.ino = st.st_ino;
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
// copies) and specification (out-of-class definitions) to find it. Returns
// the name as stored (mangled or not), or null.
const char* DieName(Dwarf_Die* die) {
  // C names renamed by asm labels (glibc's "__GI_qsort") keep DW_AT_name.
  Dwarf_Attribute attr;
  for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name}) {
    if (dwarf_attr_integrate(die, at, &attr) != nullptr) {
      const char* s = dwarf_formstring(&attr);
      if (s != nullptr && s[0] == '_' && s[1] == 'Z') return s;
    }
  }
  if (dwarf_attr_integrate(die, DW_AT_name, &attr) != nullptr) return dwarf_formstring(&attr);
  return nullptr;
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

// One address range of a concrete (out-of-line) function.
struct FunctionRange {
  Dwarf_Addr low, high;
  Dwarf_Die die;
};

// Collects the functions of a compilation unit, looking through namespaces
// and classes (where some compilers nest definitions) but not into bodies.
void IndexFunctions(Dwarf_Die* parent, std::vector<FunctionRange>* out) {
  Dwarf_Die child;
  if (dwarf_child(parent, &child) != 0) return;
  do {
    switch (dwarf_tag(&child)) {
      case DW_TAG_subprogram: {
        Dwarf_Addr base, low, high;
        ptrdiff_t offset = 0;
        while ((offset = dwarf_ranges(&child, offset, &base, &low, &high)) > 0) {
          out->push_back(FunctionRange{low, high, child});
        }
        break;
      }
      case DW_TAG_namespace:
      case DW_TAG_class_type:
      case DW_TAG_structure_type:
      case DW_TAG_union_type:
      case DW_TAG_module:
        IndexFunctions(&child, out);
        break;
      default:
        break;
    }
  } while (dwarf_siblingof(&child, &child) == 0);
}

// The scopes containing `pc` from `function` inwards: the function, then the
// lexical blocks and inlined copies nested in it.
void ScopesIn(const Dwarf_Die& function, Dwarf_Addr pc, std::vector<Dwarf_Die>* out) {
  std::vector<Dwarf_Die>& chain = *out;
  chain.assign(1, function);
  while (true) {
    Dwarf_Die child;
    bool deeper = false;
    if (dwarf_child(&chain.back(), &child) == 0) {
      do {
        if (dwarf_haspc(&child, pc) == 1) {
          chain.push_back(child);
          deeper = true;
          break;
        }
      } while (dwarf_siblingof(&child, &child) == 0);
    }
    if (!deeper) return;
  }
}

// A function symbol; `name` points into the module's string table.
struct Symbol {
  GElf_Addr addr, size;
  const char* name;
  int rank;  // global before weak before local, as addr2line prefers
};

// All function symbols (.symtab, else .dynsym) sorted by address, one per
// address: dwfl_module_addrinfo scans every symbol for every lookup.
std::vector<Symbol> LoadSymbols(Dwfl_Module* mod) {
  std::vector<Symbol> out;
  int n = dwfl_module_getsymtab(mod);
  for (int i = 1; i < n; ++i) {
    GElf_Sym sym;
    GElf_Addr addr = 0;
    GElf_Word shndx = 0;
    const char* name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, nullptr, nullptr);
    int type = GELF_ST_TYPE(sym.st_info);
    if (name == nullptr || name[0] == '\0' || sym.st_shndx == SHN_UNDEF ||
        (type != STT_FUNC && type != STT_GNU_IFUNC)) {
      continue;
    }
    int bind = GELF_ST_BIND(sym.st_info);
    int rank = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
    out.push_back(Symbol{addr, sym.st_size, name, rank});
  }
  std::sort(out.begin(), out.end(), [](const Symbol& a, const Symbol& b) {
    return a.addr != b.addr ? a.addr < b.addr : a.rank < b.rank;
  });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const Symbol& a, const Symbol& b) { return a.addr == b.addr; }),
            out.end());
  return out;
}

// The symbol containing `addr`; a size-0 symbol (hand-written assembly)
// reaches up to the next one.
const char* SymbolAt(const std::vector<Symbol>& symbols, GElf_Addr addr) {
  auto it = std::upper_bound(symbols.begin(), symbols.end(), addr,
                             [](GElf_Addr v, const Symbol& s) { return v < s.addr; });
  if (it == symbols.begin()) return nullptr;
  --it;
  return it->size == 0 || addr < it->addr + it->size ? it->name : nullptr;
}

std::string LineFile(Dwfl_Line* line, int* lineno) {
  // libdw already joins relative names to the line table's directories.
  const char* file = dwfl_lineinfo(line, nullptr, lineno, nullptr, nullptr, nullptr);
  return file != nullptr ? file : "";
}

// The search path of the Symbolizer that is looking addresses up (libdwfl
// calls find_debuginfo lazily, from inside a lookup, without it).
thread_local const std::string* t_debuginfo_path = nullptr;

bool ExistsAndIsNotRegular(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
}

// dwfl_standard_find_debuginfo, unless a file it would open is there and is
// not a regular file: it opens each candidate with a blocking open(), and a
// FIFO planted beside a module the profile names (its .gnu_debuglink, or
// "<basename>.debug" without one, in its folder or .debug/) would hang the
// report. Such a module is read without a separate debug file (its own
// symbols still name functions).
int FindRegularDebuginfo(Dwfl_Module* mod, void** userdata, const char* modname, GElf_Addr base,
                         const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                         char** debuginfo_file_name) {
  std::vector<std::string> candidates;
  const std::string path = t_debuginfo_path != nullptr ? *t_debuginfo_path : "";
  std::string module_dir, link = debuglink_file != nullptr ? debuglink_file : "";
  if (file_name != nullptr) {
    const std::string f = file_name;
    const size_t slash = f.rfind('/');
    module_dir = slash == std::string::npos ? "." : f.substr(0, slash);
    // Without a .gnu_debuglink libdwfl tries "<basename>.debug".
    if (link.empty()) link = (slash == std::string::npos ? f : f.substr(slash + 1)) + ".debug";
  }
  const unsigned char* id = nullptr;
  GElf_Addr id_vaddr = 0;
  const int id_len = dwfl_module_build_id(mod, &id, &id_vaddr);
  const std::string build_id = id_len > 1 ? Hex(id, static_cast<size_t>(id_len)) : "";
  if (!link.empty() && link[0] == '/') candidates.push_back(link);
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    start = end + 1;
    if (!dir.empty() && (dir[0] == '+' || dir[0] == '-')) dir.erase(0, 1);
    if (!dir.empty() && dir[0] == '/' && !build_id.empty()) {
      candidates.push_back(dir + "/.build-id/" + build_id.substr(0, 2) + "/" + build_id.substr(2) +
                           ".debug");
    }
    if (link.empty() || link[0] == '/' || module_dir.empty()) continue;
    if (dir.empty()) candidates.push_back(module_dir + "/" + link);
    else if (dir[0] != '/') candidates.push_back(module_dir + "/" + dir + "/" + link);
    else candidates.push_back(dir + "/" + module_dir + "/" + link);
  }
  for (const std::string& c : candidates) {
    if (ExistsAndIsNotRegular(c)) {
      errno = ENOENT;
      return -1;
    }
  }
  return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                      debuglink_crc, debuginfo_file_name);
}

}  // namespace

std::string ReadElfBuildId(const std::string& path) { return ReadElfInfo(path).build_id; }

struct Symbolizer::Module {
  std::string basename;
  std::vector<GElf_Phdr> loads;  // of the file the recorded offsets refer to
  Dwfl_Callbacks callbacks{};    // libdwfl keeps a pointer to it
  Dwfl* dwfl = nullptr;
  Dwfl_Module* mod = nullptr;  // null: nothing trustworthy to read
  Dwarf_Addr bias = 0;         // libdwfl address = ELF vaddr + bias
  // Per compilation unit (by DIE offset), its functions sorted by address:
  // dwarf_getscopes would walk the whole unit for every address, which
  // costs milliseconds in template-heavy C++ units.
  std::unordered_map<Dwarf_Off, std::vector<FunctionRange>> functions;
  std::vector<Symbol> symbols;
  bool symbols_loaded = false;
  std::vector<Dwarf_Die> scopes;  // scratch, reused by every lookup
  // Demangled names by the address of the stored name, which lives as long
  // as the Dwfl: most addresses share their function with others.
  std::unordered_map<const char*, std::string> names;

  const std::string& Name(const char* stored) {
    auto [it, added] = names.try_emplace(stored);
    if (added) it->second = Demangle(stored);
    return it->second;
  }

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
  if (it != modules_.end()) return it->second;
  // Another spelling of a module already open ("/usr/lib/../lib/libc.so.6"):
  // the same build-id, else the same file (device, inode). Each open module
  // holds its DWARF, tens of MB for libc: 100 spellings took 1.6 GB.
  if (!build_id.empty()) {
    auto same = by_build_id_.find(build_id);
    if (same != by_build_id_.end()) return modules_[key] = same->second;
  }

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
  const std::string file_key = info.ok ? std::to_string(info.dev) + ':' + std::to_string(info.ino) +
                                             '\0' + build_id
                                       : std::string();
  if (!file_key.empty()) {
    auto same = by_file_.find(file_key);
    if (same != by_file_.end()) return modules_[key] = same->second;
  }
  owned_.push_back(std::make_unique<Module>());
  Module* m = owned_.back().get();
  modules_[key] = m;
  if (!file_key.empty()) by_file_[file_key] = m;
  m->basename = Basename(path);
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
  m->callbacks.find_debuginfo = FindRegularDebuginfo;
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
  if (!build_id.empty()) by_build_id_.emplace(build_id, m);
  return m;
}

// What is known of an address no debug info or symbol covers.
Frame UnknownFrame(const std::string& module_name, uint64_t module_offset) {
  Frame f{ModuleOffsetName(module_name, module_offset), "", 0};
  f.unnamed = true;
  return f;
}

std::vector<Frame> Symbolizer::Frames(Module* m, uint64_t vaddr, uint64_t module_offset) {
  std::vector<Frame> frames;
  Dwarf_Addr addr = vaddr + m->bias;
  Dwarf_Addr cu_bias = 0;
  Dwarf_Die* cudie = dwfl_module_addrdie(m->mod, addr, &cu_bias);
  if (cudie != nullptr) {
    const Dwarf_Addr pc = addr - cu_bias;
    std::string file;
    int line = 0;
    if (Dwfl_Line* l = dwfl_module_getsrc(m->mod, addr)) file = LineFile(l, &line);

    auto [index, added] = m->functions.try_emplace(dwarf_dieoffset(cudie));
    std::vector<FunctionRange>& ranges = index->second;
    if (added) {
      IndexFunctions(cudie, &ranges);
      std::sort(ranges.begin(), ranges.end(),
                [](const FunctionRange& a, const FunctionRange& b) { return a.low < b.low; });
    }
    auto it = std::upper_bound(ranges.begin(), ranges.end(), pc,
                               [](Dwarf_Addr v, const FunctionRange& r) { return v < r.low; });
    const FunctionRange* function = nullptr;
    // Ranges of distinct functions do not overlap; look back a little for
    // the odd nested one (GNU C nested functions).
    for (int back = 0; back < 4 && it != ranges.begin(); ++back) {
      --it;
      if (pc < it->high) {
        function = &*it;
        break;
      }
    }
    if (function != nullptr) {
      Dwarf_Files* files = nullptr;
      if (dwarf_getsrcfiles(cudie, &files, nullptr) != 0) files = nullptr;
      std::vector<Dwarf_Die>& chain = m->scopes;
      ScopesIn(function->die, pc, &chain);
      for (auto scope = chain.rbegin(); scope != chain.rend(); ++scope) {
        int tag = dwarf_tag(&*scope);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram) continue;
        frames.push_back(Frame{m->Name(DieName(&*scope)), file, line});
        // Where the function starts (pprof's start_line, as llvm-symbolizer
        // gives it): its DW_AT_decl_line, through abstract_origin and
        // specification.
        int decl_line = 0;
        if (dwarf_decl_line(&*scope, &decl_line) == 0 && decl_line > 0) {
          frames.back().start_line = decl_line;
        }
        if (tag != DW_TAG_inlined_subroutine) continue;
        // The caller's frame is at this inlined copy's call site.
        Dwarf_Attribute attr;
        Dwarf_Word value = 0;
        file.clear();
        line = 0;
        if (files != nullptr &&
            dwarf_formudata(dwarf_attr(&*scope, DW_AT_call_file, &attr), &value) == 0) {
          const char* name = dwarf_filesrc(files, value, nullptr, nullptr);
          if (name != nullptr) file = name;
        }
        if (dwarf_formudata(dwarf_attr(&*scope, DW_AT_call_line, &attr), &value) == 0) {
          line = static_cast<int>(value);
        }
      }
    }
    if (frames.empty() && !file.empty()) frames.push_back(Frame{"", file, line});
  }
  // Without DWARF, or for a nameless DIE, the symbol table still names the
  // outermost function (exported ones at least, via .dynsym).
  if (frames.empty() || frames.back().function.empty()) {
    if (!m->symbols_loaded) {
      m->symbols = LoadSymbols(m->mod);
      m->symbols_loaded = true;
    }
    if (const char* name = SymbolAt(m->symbols, addr)) {
      if (frames.empty()) frames.push_back(Frame{});
      frames.back().function = m->Name(name);
    }
  }
  if (frames.empty()) return {UnknownFrame(m->basename, module_offset)};
  for (Frame& f : frames) {
    if (f.function.empty()) {
      f.function = UnknownFrame(m->basename, module_offset).function;
      f.unnamed = true;
    }
  }
  return frames;
}

void Symbolizer::Symbolize(std::vector<Location>* locs, const std::vector<bool>& is_return) {
  // Each distinct (module, address) is looked up once per call.
  struct KeyHash {
    size_t operator()(const std::pair<const Module*, uint64_t>& k) const {
      return std::hash<const void*>()(k.first) ^ (k.second * 0x9e3779b97f4a7c15ULL);
    }
  };
  std::unordered_map<std::pair<const Module*, uint64_t>, size_t, KeyHash> done;
  t_debuginfo_path = &debuginfo_path_;
  Module* m = nullptr;
  const Location* m_of = nullptr;  // a location of module m
  for (size_t i = 0; i < locs->size(); ++i) {
    Location& loc = (*locs)[i];
    if (loc.pseudo || loc.python || !loc.frames.empty()) continue;
    if (loc.module.empty()) {
      loc.frames.push_back(Frame{UnsymbolizedName(loc), "", 0});
      loc.frames.back().unnamed = true;
      continue;
    }
    if (m_of == nullptr || m_of->module != loc.module || m_of->build_id != loc.build_id) {
      m = GetModule(loc.module, loc.build_id);
    }
    m_of = &loc;
    // The recorded offset is a file offset; DWARF speaks in virtual addresses.
    const GElf_Phdr* segment = nullptr;
    if (m->mod != nullptr) {
      for (const GElf_Phdr& ph : m->loads) {
        if (loc.module_offset >= ph.p_offset && loc.module_offset < ph.p_offset + ph.p_filesz) {
          segment = &ph;
          break;
        }
      }
    }
    if (segment == nullptr) {
      loc.frames.push_back(UnknownFrame(m->basename, loc.module_offset));
      continue;
    }
    uint64_t vaddr = loc.module_offset - segment->p_offset + segment->p_vaddr;
    if (i < is_return.size() && is_return[i] && vaddr > 0) --vaddr;
    auto [it, added] = done.emplace(std::make_pair(m, vaddr), i);
    loc.frames = added ? Frames(m, vaddr, loc.module_offset) : (*locs)[it->second].frames;
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
  profile->warnings.insert(profile->warnings.end(), warnings_.begin() + first_new, warnings_.end());
  MergePythonStacks(profile);
}

}  // namespace dlprof
