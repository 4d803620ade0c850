#include "backends/eh_frame.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_map>

#include "backends/private_fd.h"

namespace dlprof {
namespace {

// DWARF register numbers on x86_64.
constexpr uint64_t kRegFp = 6;   // %rbp
constexpr uint64_t kRegSp = 7;   // %rsp
constexpr uint64_t kRegRa = 16;  // the return address column
// The most of a .plt expression's range made into rows (two per entry).
constexpr uint64_t kMaxPltBytes = uint64_t{1} << 16;

// Pointer encodings (DW_EH_PE_*).
constexpr uint8_t kPeOmit = 0xff;
constexpr uint8_t kPeIndirect = 0x80;
constexpr uint8_t kPeFormatMask = 0x0f;
constexpr uint8_t kPeApplyMask = 0x70;
constexpr uint8_t kPePcrel = 0x10;
constexpr uint8_t kPeDatarel = 0x30;

// Reads bytes of this process's memory, never outside [lo, hi): a corrupt
// length or offset ends the entry, not the process.
class Reader {
 public:
  Reader(uintptr_t lo, uintptr_t hi, uintptr_t at, const unsigned char* copy, CopyFiller* filler)
      : lo_(lo), hi_(hi), pos_(at), copy_(copy), filler_(filler) {}
  Reader(const EhFrameSource& src, uintptr_t at)
      : Reader(src.readable_lo, src.readable_hi, at, src.copy, src.filler) {}
  bool ok() const { return ok_; }
  uintptr_t pos() const { return pos_; }
  void Seek(uintptr_t at) { pos_ = at; }
  void Limit(uintptr_t end) {  // an entry ends here: nothing past it is read
    if (end < hi_) hi_ = end;
  }

  template <typename T>
  T Fixed() {
    T v{};
    if (!Need(sizeof(T))) return v;
    const void* from = copy_ != nullptr ? static_cast<const void*>(copy_ + (pos_ - lo_))
                                        : reinterpret_cast<const void*>(pos_);
    std::memcpy(&v, from, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint64_t Uleb() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t b = Fixed<uint8_t>();
      if (!ok_) return 0;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    ok_ = false;  // longer than any 64-bit value
    return 0;
  }
  int64_t Sleb() {
    uint64_t v = 0;
    int shift = 0;
    uint8_t b = 0;
    do {
      if (shift >= 64) {
        ok_ = false;
        return 0;
      }
      b = Fixed<uint8_t>();
      if (!ok_) return 0;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= ~uint64_t{0} << shift;
    return static_cast<int64_t>(v);
  }
  void Skip(uint64_t n) {
    if (Need(n)) pos_ += n;
  }
  // A pointer in encoding `enc`; `data_base` for datarel.
  uint64_t Encoded(uint8_t enc, uintptr_t data_base) {
    if (enc == kPeOmit) return 0;
    const uintptr_t field = pos_;
    uint64_t v = 0;
    switch (enc & kPeFormatMask) {
      case 0x00: v = Fixed<uint64_t>(); break;                       // absptr
      case 0x01: v = Uleb(); break;                                  // uleb128
      case 0x02: v = Fixed<uint16_t>(); break;                       // udata2
      case 0x03: v = Fixed<uint32_t>(); break;                       // udata4
      case 0x04: v = Fixed<uint64_t>(); break;                       // udata8
      case 0x09: v = static_cast<uint64_t>(Sleb()); break;           // sleb128
      case 0x0a: v = static_cast<uint64_t>(Fixed<int16_t>()); break;  // sdata2
      case 0x0b: v = static_cast<uint64_t>(Fixed<int32_t>()); break;  // sdata4
      case 0x0c: v = Fixed<uint64_t>(); break;                       // sdata8
      default: ok_ = false; return 0;
    }
    switch (enc & kPeApplyMask) {
      case 0x00: break;
      case kPePcrel: v += field; break;
      case kPeDatarel: v += data_base; break;
      default: ok_ = false; return 0;  // textrel, funcrel, aligned: not in .eh_frame on Linux
    }
    if (enc & kPeIndirect) {
      Reader at(lo_, hi_, static_cast<uintptr_t>(v), copy_, filler_);
      v = at.Fixed<uint64_t>();
      if (!at.ok()) ok_ = false;
    }
    return v;
  }

 private:
  bool Need(uint64_t n) {
    if (!ok_ || pos_ < lo_ || pos_ > hi_ || hi_ - pos_ < n) ok_ = false;
    if (ok_ && filler_ != nullptr && (pos_ < ready_lo_ || pos_ >= ready_hi_ || n > ready_hi_ - pos_) &&
        !filler_->Ensure(pos_, n, &ready_lo_, &ready_hi_)) {
      ok_ = false;
    }
    return ok_;
  }
  uintptr_t lo_, hi_, pos_;
  const unsigned char* copy_;
  CopyFiller* filler_;
  uintptr_t ready_lo_ = 0, ready_hi_ = 0;  // filled already (filler_)
  bool ok_ = true;
};

// The extent of one CIE or FDE: its body starts after the length field.
struct Entry {
  uintptr_t body = 0, end = 0;
  bool is64 = false;
};

bool ReadEntry(Reader* r, Entry* e) {
  uint64_t len = r->Fixed<uint32_t>();
  e->is64 = len == 0xffffffffu;
  if (e->is64) len = r->Fixed<uint64_t>();
  e->body = r->pos();
  if (!r->ok() || len == 0 || len > (uint64_t{1} << 32) || e->body + len < e->body) return false;
  e->end = e->body + len;
  return true;
}

struct Rule {
  enum : uint8_t { kSame, kOffset, kUndefined, kOther } kind = kSame;
  int64_t offset = 0;
};

// The one CFA expression followed: the GNU linkers' for a .plt, whose
// 16-byte entries push once at instruction `threshold` (11 for the lazy
// `jmp *GOT; push $n; jmp .plt0`):
//   CFA = %rsp + base + (((%rip & 15) >= threshold) << shift)
// (DW_OP_breg7 base; DW_OP_breg16 0; lit15; and; lit<threshold>; ge;
// lit<shift>; shl; plus). A thread sampled in a PLT stub, as glibc's own
// calls of memcpy through its IFUNC slots are, stopped the walk there.
struct PltCfa {
  bool on = false;
  int64_t base = 0;
  uint8_t threshold = 0, shift = 0;
};

struct State {
  uint64_t cfa_reg = kRegSp;
  int64_t cfa_offset = 8;
  bool cfa_expression = false;
  PltCfa plt;  // when cfa_expression is the .plt one
  Rule fp, ra;
};

struct Cie {
  uint64_t code_align = 1;
  int64_t data_align = -8;
  uint64_t ra_reg = kRegRa;
  uint8_t fde_encoding = 0;
  bool augmented = false;  // 'z': FDEs carry an augmentation length
  bool signal = false;     // 'S': a signal trampoline
  State initial;           // after the CIE's instructions
  bool ok = false;
};

// Applies one register rule change, for the registers the rows keep.
void SetRule(State* s, const Cie& cie, uint64_t reg, Rule rule) {
  if (reg == kRegFp) s->fp = rule;
  if (reg == cie.ra_reg) s->ra = rule;
}

// An offset times the data alignment, saturated: hostile tables overflow
// it, and a saturated offset is out of every row's range (Pack).
int64_t Scaled(int64_t offset, int64_t align) {
  int64_t out;
  if (__builtin_mul_overflow(offset, align, &out)) {
    return (offset < 0) != (align < 0) ? std::numeric_limits<int64_t>::min()
                                       : std::numeric_limits<int64_t>::max();
  }
  return out;
}

Rule InitialRule(const Cie& cie, uint64_t reg) {
  if (reg == kRegFp) return cie.initial.fp;
  if (reg == cie.ra_reg) return cie.initial.ra;
  return Rule{};
}

// Reads a DW_CFA_def_cfa_expression of `length` bytes: the .plt one
// (PltCfa) or any other, which is skipped.
PltCfa ReadCfaExpression(Reader* r, uint64_t length) {
  const uintptr_t start = r->pos();
  PltCfa plt;
  if (length >= 11 && length <= 32) {
    Reader e = *r;  // reads nothing past the expression
    e.Limit(start + length);
    auto op = [&] { return e.Fixed<uint8_t>(); };
    if (op() == 0x77) {  // DW_OP_breg7 (%rsp)
      plt.base = e.Sleb();
      if (op() == 0x80 && e.Sleb() == 0 && op() == 0x3f && op() == 0x1a) {  // breg16 0; lit15; and
        const uint8_t lit = op();
        if (lit >= 0x30 && lit <= 0x3f && op() == 0x2a) {  // lit<threshold>; ge
          plt.threshold = static_cast<uint8_t>(lit - 0x30);
          const uint8_t shift = op();
          plt.shift = static_cast<uint8_t>(shift - 0x30);
          plt.on = shift >= 0x30 && shift <= 0x35 && op() == 0x24 && op() == 0x22 &&  // shl; plus
                   e.ok() && e.pos() - start == length && plt.base >= 0 && plt.base <= 4096;
        }
      }
    }
  }
  if (!plt.on) plt = PltCfa{};
  r->Skip(length);
  return plt;
}

// Runs a CFA program. `emit(loc, end, state)` is called before each advance
// (the state holds for [loc, end)) and at the end (end 0: up to the FDE's
// end); the CIE's initial program passes nullptr (it has no rows).
// Bounded by the program's length: every instruction consumes a byte.
template <typename Emit>
bool RunProgram(Reader* r, uintptr_t end, const Cie& cie, State* s, uint64_t loc, Emit* emit,
                uintptr_t data_base) {
  constexpr int kMaxRemembered = 16;
  State remembered[kMaxRemembered];
  int depth = 0;
  while (r->ok() && r->pos() < end) {
    const uint8_t op = r->Fixed<uint8_t>();
    const uint8_t high = op & 0xc0, low = op & 0x3f;
    uint64_t advance = 0;
    if (high == 0x40) {
      advance = low * cie.code_align;
    } else if (high == 0x80) {
      SetRule(s, cie, low, Rule{Rule::kOffset, Scaled(static_cast<int64_t>(r->Uleb()), cie.data_align)});
    } else if (high == 0xc0) {
      SetRule(s, cie, low, InitialRule(cie, low));
    } else {
      switch (op) {
        case 0x00: break;  // nop
        case 0x01: {       // set_loc
          const uint64_t to = r->Encoded(cie.fde_encoding, data_base);
          if (to < loc) return false;
          advance = to - loc;
          break;
        }
        case 0x02: advance = r->Fixed<uint8_t>() * cie.code_align; break;
        case 0x03: advance = r->Fixed<uint16_t>() * cie.code_align; break;
        case 0x04: advance = r->Fixed<uint32_t>() * cie.code_align; break;
        case 0x05: {  // offset_extended
          const uint64_t reg = r->Uleb();
          SetRule(s, cie, reg, Rule{Rule::kOffset, Scaled(static_cast<int64_t>(r->Uleb()), cie.data_align)});
          break;
        }
        case 0x06: {  // restore_extended
          const uint64_t reg = r->Uleb();
          SetRule(s, cie, reg, InitialRule(cie, reg));
          break;
        }
        case 0x07: SetRule(s, cie, r->Uleb(), Rule{Rule::kUndefined, 0}); break;
        case 0x08: SetRule(s, cie, r->Uleb(), Rule{Rule::kSame, 0}); break;
        case 0x09: {  // register
          const uint64_t reg = r->Uleb();
          r->Uleb();
          SetRule(s, cie, reg, Rule{Rule::kOther, 0});
          break;
        }
        case 0x0a:  // remember_state
          if (depth == kMaxRemembered) return false;
          remembered[depth++] = *s;
          break;
        case 0x0b:  // restore_state
          if (depth == 0) return false;
          *s = remembered[--depth];
          break;
        case 0x0c:  // def_cfa
          s->cfa_reg = r->Uleb();
          s->cfa_offset = static_cast<int64_t>(r->Uleb());
          s->cfa_expression = false;
          break;
        case 0x0d: s->cfa_reg = r->Uleb(); s->cfa_expression = false; break;
        case 0x0e: s->cfa_offset = static_cast<int64_t>(r->Uleb()); break;
        case 0x0f:  // def_cfa_expression
          s->cfa_expression = true;
          s->plt = ReadCfaExpression(r, r->Uleb());
          break;
        case 0x10:  // expression
        case 0x16: {  // val_expression
          const uint64_t reg = r->Uleb();
          r->Skip(r->Uleb());
          SetRule(s, cie, reg, Rule{Rule::kOther, 0});
          break;
        }
        case 0x11: {  // offset_extended_sf
          const uint64_t reg = r->Uleb();
          SetRule(s, cie, reg, Rule{Rule::kOffset, Scaled(r->Sleb(), cie.data_align)});
          break;
        }
        case 0x12:  // def_cfa_sf
          s->cfa_reg = r->Uleb();
          s->cfa_offset = Scaled(r->Sleb(), cie.data_align);
          s->cfa_expression = false;
          break;
        case 0x13: s->cfa_offset = Scaled(r->Sleb(), cie.data_align); break;  // def_cfa_offset_sf
        case 0x14:  // val_offset
        case 0x15: {  // val_offset_sf
          const uint64_t reg = r->Uleb();
          if (op == 0x14) r->Uleb(); else r->Sleb();
          SetRule(s, cie, reg, Rule{Rule::kOther, 0});
          break;
        }
        case 0x2d: break;          // GNU_window_save / AArch64 negate_ra_state
        case 0x2e: r->Uleb(); break;  // GNU_args_size: the CFA does not change
        case 0x2f: {               // GNU_negative_offset_extended
          const uint64_t reg = r->Uleb();
          SetRule(s, cie, reg,
                  Rule{Rule::kOffset, Scaled(Scaled(static_cast<int64_t>(r->Uleb()), cie.data_align), -1)});
          break;
        }
        default: return false;  // an opcode we do not know: its operands are unknown too
      }
    }
    if (advance != 0) {
      if (emit == nullptr) return false;  // a CIE does not advance
      (*emit)(loc, loc + advance, *s);
      loc += advance;
    }
  }
  if (!r->ok()) return false;
  if (emit != nullptr) (*emit)(loc, 0, *s);
  return true;
}

bool ParseCie(uintptr_t at, const EhFrameSource& src, uintptr_t data_base, Cie* cie) {
  Reader r(src, at);
  Entry e;
  if (!ReadEntry(&r, &e)) return false;
  r.Limit(e.end);
  const uint64_t id = e.is64 ? r.Fixed<uint64_t>() : r.Fixed<uint32_t>();
  if (!r.ok() || id != 0) return false;
  const uint8_t version = r.Fixed<uint8_t>();
  if (version != 1 && version != 3 && version != 4) return false;
  char aug[16] = {};
  size_t n = 0;
  for (;;) {
    const char c = static_cast<char>(r.Fixed<uint8_t>());
    if (!r.ok() || n + 1 >= sizeof(aug)) return false;
    if (c == 0) break;
    aug[n++] = c;
  }
  if (aug[0] == 'e' && aug[1] == 'h') r.Skip(8);  // an old GCC's EH data pointer
  if (version == 4) r.Skip(2);                     // address and segment sizes
  cie->code_align = r.Uleb();
  cie->data_align = r.Sleb();
  cie->ra_reg = version == 1 ? r.Fixed<uint8_t>() : r.Uleb();
  if (aug[0] == 'z') {
    cie->augmented = true;
    const uint64_t len = r.Uleb();
    const uintptr_t aug_end = r.pos() + len;
    for (size_t i = 1; i < n && r.ok(); ++i) {
      switch (aug[i]) {
        case 'L': r.Fixed<uint8_t>(); break;
        case 'P': {
          const uint8_t enc = r.Fixed<uint8_t>();
          r.Encoded(static_cast<uint8_t>(enc & ~kPeIndirect), data_base);
          break;
        }
        case 'R': cie->fde_encoding = r.Fixed<uint8_t>(); break;
        case 'S': cie->signal = true; break;
        default: i = n; break;  // 'B', 'G' and the unknown: the length skips them
      }
    }
    r.Seek(aug_end);
  } else if (aug[0] != 0) {
    return false;  // an augmentation without 'z' has no length: nothing after it is knowable
  }
  if (!r.ok() || cie->code_align == 0) return false;
  cie->initial = State{};
  using NoRows = void(uint64_t, uint64_t, const State&);
  if (!RunProgram<NoRows>(&r, e.end, *cie, &cie->initial, 0, nullptr, data_base)) {
    return false;
  }
  cie->ok = true;
  return true;
}

// The row for one state, or false when the state cannot be packed.
CfiRow Pack(uint64_t pc, uintptr_t base, const State& s, const Cie& cie) {
  CfiRow row{};
  row.pc_offset = static_cast<uint32_t>(pc - base);
  if (cie.signal) {
    row.kind = kCfiSignal;
    return row;
  }
  if (s.ra.kind == Rule::kUndefined) {
    row.kind = kCfiOutermost;
    return row;
  }
  // x86_64: the call pushed the return address right below the CFA.
  const bool ra_ok = s.ra.kind == Rule::kOffset && s.ra.offset == -8;
  const bool cfa_ok = !s.cfa_expression && (s.cfa_reg == kRegSp || s.cfa_reg == kRegFp) &&
                      s.cfa_offset >= std::numeric_limits<int32_t>::min() &&
                      s.cfa_offset <= std::numeric_limits<int32_t>::max();
  if (!ra_ok || !cfa_ok) {
    row.kind = kCfiUnknown;
    return row;
  }
  row.kind = s.cfa_reg == kRegSp ? kCfiSp : kCfiFp;
  row.cfa_offset = static_cast<int32_t>(s.cfa_offset);
  if (s.fp.kind == Rule::kOffset && s.fp.offset != 0 &&
      s.fp.offset > std::numeric_limits<int16_t>::min() &&
      s.fp.offset <= std::numeric_limits<int16_t>::max()) {
    row.fp_offset = static_cast<int16_t>(s.fp.offset);
  } else if (s.fp.kind != Rule::kSame) {
    row.fp_offset = std::numeric_limits<int16_t>::min();  // %rbp is lost past this frame
  }
  return row;
}

bool SameRule(const CfiRow& a, const CfiRow& b) {
  return a.kind == b.kind && a.cfa_offset == b.cfa_offset && a.fp_offset == b.fp_offset;
}

// Appends a row, keeping the vector sorted and free of repeats: a row at the
// same pc replaces the one before (an FDE starting where a gap row was put).
void Append(CfiRowVector* rows, const CfiRow& row) {
  if (!rows->empty()) {
    CfiRow& last = rows->back();
    if (row.pc_offset < last.pc_offset) return;  // overlapping FDEs: the first one wins
    if (row.pc_offset == last.pc_offset) {
      last = row;
      if (rows->size() >= 2 && SameRule((*rows)[rows->size() - 2], last)) rows->pop_back();
      return;
    }
    if (SameRule(last, row)) return;
  }
  rows->push_back(row);
}

struct Header {
  uintptr_t frame = 0;  // eh_frame_ptr: where .eh_frame starts (0: unknown)
  uintptr_t table = 0;
  uint8_t table_encoding = 0;
  long count = -1;
};

Header ReadHeader(const EhFrameSource& src) {
  Header h;
  Reader r(src, src.eh_frame_hdr);
  const uint8_t version = r.Fixed<uint8_t>();
  const uint8_t ptr_enc = r.Fixed<uint8_t>();
  const uint8_t count_enc = r.Fixed<uint8_t>();
  h.table_encoding = r.Fixed<uint8_t>();
  if (!r.ok() || version != 1 || count_enc == kPeOmit || h.table_encoding == kPeOmit) return h;
  const uint64_t frame = r.Encoded(ptr_enc, src.eh_frame_hdr);
  if (r.ok() && ptr_enc != kPeOmit) h.frame = static_cast<uintptr_t>(frame);
  const uint64_t count = r.Encoded(count_enc, src.eh_frame_hdr);
  // Each table entry takes at least two bytes: a count the rest of the
  // segment cannot hold is a damaged header.
  if (!r.ok() || count > (src.readable_hi - r.pos()) / 2) return h;
  h.table = r.pos();
  h.count = static_cast<long>(count);
  return h;
}

}  // namespace

uintptr_t EhFrameStart(const EhFrameSource& source) { return ReadHeader(source).frame; }

namespace {

// The address and size of the allocated section `want` in the ELF file at
// `path`, from its section headers (pread; bounded: at most 4096 headers and
// 1 MiB of names). False when the file, its headers or the section are
// missing.
bool FindAllocatedSection(const char* path, const char* want, uint64_t* addr, uint64_t* size) {
  const int fd = OpenOwn(AT_FDCWD, path, O_RDONLY);
  if (fd < 0) return false;
  auto read_at = [fd](void* to, size_t n, uint64_t at) {
    return pread(fd, to, n, static_cast<off_t>(at)) == static_cast<ssize_t>(n);
  };
  bool found = false;
  ElfW(Ehdr) eh;
  if (read_at(&eh, sizeof(eh), 0) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == (sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32) && eh.e_shentsize == sizeof(ElfW(Shdr)) &&
      eh.e_shnum > 0 && eh.e_shnum <= 4096 && eh.e_shstrndx < eh.e_shnum) {
    std::vector<ElfW(Shdr)> sections(eh.e_shnum);
    ElfW(Shdr)& names = sections[eh.e_shstrndx];
    if (read_at(sections.data(), sections.size() * sizeof(ElfW(Shdr)), eh.e_shoff) &&
        names.sh_size > 0 && names.sh_size <= (1u << 20)) {
      std::string table(names.sh_size, '\0');
      if (read_at(&table[0], table.size(), names.sh_offset)) {
        for (const ElfW(Shdr)& sh : sections) {
          if (sh.sh_name >= table.size() || (sh.sh_flags & SHF_ALLOC) == 0) continue;
          if (strcmp(table.c_str() + sh.sh_name, want) != 0) continue;
          *addr = sh.sh_addr;
          *size = sh.sh_size;
          found = true;
          break;
        }
      }
    }
  }
  close(fd);
  return found;
}

// Appends the rows of the FDE at `fde_at`; false if it is corrupt (its rows
// then say kCfiUnknown). `initial`, when not 0, is the pc the header's table
// gave it, which the FDE must agree with.
bool DecodeFde(const EhFrameSource& src, uintptr_t fde_at, uint64_t initial,
               std::unordered_map<uintptr_t, Cie>* cies, CfiRowVector* rows) {
  Reader r(src, fde_at);
  Entry e;
  if (!ReadEntry(&r, &e)) return false;
  r.Limit(e.end);
  const uintptr_t cie_field = r.pos();
  const uint64_t cie_offset = e.is64 ? r.Fixed<uint64_t>() : r.Fixed<uint32_t>();
  if (!r.ok() || cie_offset == 0 || cie_offset > cie_field) return false;
  const uintptr_t cie_at = cie_field - static_cast<uintptr_t>(cie_offset);
  auto [it, fresh] = cies->try_emplace(cie_at);
  if (fresh) ParseCie(cie_at, src, src.eh_frame_hdr, &it->second);
  const Cie& cie = it->second;
  if (!cie.ok) return false;
  const uint64_t pc_begin = r.Encoded(cie.fde_encoding, src.eh_frame_hdr);
  const uint64_t pc_range = r.Encoded(cie.fde_encoding & kPeFormatMask, src.eh_frame_hdr);
  if (cie.augmented) r.Skip(r.Uleb());
  const uint64_t pc_end = pc_begin + pc_range;
  if (!r.ok() || (initial != 0 && pc_begin != initial) || pc_begin < src.base ||
      pc_end < pc_begin || pc_end - src.base > std::numeric_limits<uint32_t>::max()) {
    return false;
  }
  State s = cie.initial;
  auto emit = [&](uint64_t loc, uint64_t end, const State& st) {
    if (loc >= pc_end) return;
    if (end == 0 || end > pc_end) end = pc_end;
    if (!st.cfa_expression || !st.plt.on || end - loc > kMaxPltBytes) {
      Append(rows, Pack(loc, src.base, st, cie));
      return;
    }
    // The .plt expression: two rows per 16-byte entry, before and after
    // its push.
    State plain = st;
    plain.cfa_expression = false;
    plain.cfa_reg = kRegSp;
    for (uint64_t at = loc; at < end;) {
      const uint64_t entry = at & ~uint64_t{15};
      const bool pushed = (at & 15) >= st.plt.threshold;
      plain.cfa_offset = st.plt.base + (pushed ? int64_t{1} << st.plt.shift : 0);
      Append(rows, Pack(at, src.base, plain, cie));
      at = pushed ? entry + 16 : entry + st.plt.threshold;
    }
  };
  const size_t before = rows->size();
  bool ok = true;
  if (!RunProgram(&r, e.end, cie, &s, pc_begin, &emit, src.eh_frame_hdr)) {
    // Keep nothing of an FDE we could not follow to its end: its later rows
    // are unknown, and a half-read row may be wrong.
    rows->resize(before);
    Append(rows, CfiRow{static_cast<uint32_t>(pc_begin - src.base), 0, 0, kCfiUnknown, 0});
    ok = false;
  }
  Append(rows, CfiRow{static_cast<uint32_t>(pc_end - src.base), 0, 0, kCfiNone, 0});
  return ok;
}

// The FDEs of a .eh_frame without a header, as (pc_begin, entry) sorted by
// pc, found by walking its entries to the terminator or its end.
std::vector<std::pair<uint64_t, uintptr_t>> ListFdes(const EhFrameSource& src, long* bad) {
  std::vector<std::pair<uint64_t, uintptr_t>> fdes;
  std::unordered_map<uintptr_t, Cie> cies;
  const uintptr_t end = src.eh_frame + src.eh_frame_size;
  Reader r(src, src.eh_frame);
  while (r.ok() && r.pos() + 4 <= end) {
    const uintptr_t at = r.pos();
    Entry e;
    if (!ReadEntry(&r, &e) || e.end > end) break;  // the terminator, or damage
    const uintptr_t id_field = r.pos();
    const uint64_t id = e.is64 ? r.Fixed<uint64_t>() : r.Fixed<uint32_t>();
    if (r.ok() && id != 0 && id <= id_field) {  // an FDE (a CIE's id is 0)
      const uintptr_t cie_at = id_field - static_cast<uintptr_t>(id);
      auto [it, fresh] = cies.try_emplace(cie_at);
      if (fresh) ParseCie(cie_at, src, src.eh_frame_hdr, &it->second);
      const uint64_t pc = it->second.ok ? r.Encoded(it->second.fde_encoding, 0) : 0;
      if (r.ok() && pc >= src.base) {
        fdes.push_back({pc, at});
      } else {
        ++*bad;
      }
    }
    r.Seek(e.end);
  }
  std::sort(fdes.begin(), fdes.end());
  return fdes;
}

}  // namespace

bool DecodeEhFrame(const EhFrameSource& src, CfiRowVector* rows, std::string* error,
                   long* skipped) {
  long bad = 0;
  std::unordered_map<uintptr_t, Cie> cies;
  if (src.eh_frame_hdr == 0) {
    if (src.eh_frame == 0) {
      *error = "no .eh_frame_hdr and no .eh_frame";
      return false;
    }
    for (const auto& [pc, fde_at] : ListFdes(src, &bad)) {
      if (!DecodeFde(src, fde_at, pc, &cies, rows)) ++bad;
    }
    if (skipped != nullptr) *skipped = bad;
    return true;
  }
  const Header h = ReadHeader(src);
  if (h.count < 0) {
    *error = "no .eh_frame_hdr search table we can read";
    return false;
  }
  // Room for the rows at once: grown by doubling, the vector was copied
  // ~20 times for libtorch_cpu (each time a new mapping, page faults and a
  // memmove: most of the decode's time). Reserved pages cost nothing until
  // written; a header count is bounded by its segment (ReadHeader), and the
  // reservation by kRowsReservedAtMost.
  constexpr size_t kRowsPerFde = 7;  // 6.4 in libtorch_cpu, 1.4M rows of 220k FDEs
  constexpr size_t kRowsReservedAtMost = size_t{4} << 20;
  rows->reserve(rows->size() +
                std::min(static_cast<size_t>(h.count) * kRowsPerFde + 16, kRowsReservedAtMost));
  Reader table(src, h.table);
  for (long i = 0; i < h.count; ++i) {
    const uint64_t initial = table.Encoded(h.table_encoding, src.eh_frame_hdr);
    const uint64_t fde_at = table.Encoded(h.table_encoding, src.eh_frame_hdr);
    if (!table.ok()) {
      bad += h.count - i;
      break;
    }
    if (!DecodeFde(src, static_cast<uintptr_t>(fde_at), initial, &cies, rows)) ++bad;
  }
  if (skipped != nullptr) *skipped = bad;
  return true;
}

bool DecodeEhFrameRange(const EhFrameSource& src, uintptr_t pc_lo, uintptr_t pc_hi,
                        CfiRowVector* rows, std::string* error, long* skipped) {
  constexpr uint8_t kDatarelSdata4 = kPeDatarel | 0x0b, kDatarelUdata4 = kPeDatarel | 0x03;
  if (src.eh_frame_hdr == 0) {
    *error = "no .eh_frame_hdr";
    return false;
  }
  const Header h = ReadHeader(src);
  if (h.count < 0) {
    *error = "no .eh_frame_hdr search table we can read";
    return false;
  }
  if (h.table_encoding != kDatarelSdata4 && h.table_encoding != kDatarelUdata4) {
    *error = "a search table of variable-size entries";
    return false;
  }
  if (static_cast<uint64_t>(h.count) > (src.readable_hi - h.table) / 8) {
    *error = "a search table longer than its segment";
    return false;
  }
  // Entry i is at table + 8 i: its initial pc, then its FDE's address.
  auto initial_pc = [&](long i, bool* ok) {
    Reader r(src, h.table + 8 * static_cast<uintptr_t>(i));
    const uint64_t pc = r.Encoded(h.table_encoding, src.eh_frame_hdr);
    *ok = r.ok();
    return pc;
  };
  // The first entry at or above pc_lo.
  long lo = 0, hi = h.count;
  while (lo < hi) {
    const long mid = lo + (hi - lo) / 2;
    bool ok = false;
    const uint64_t pc = initial_pc(mid, &ok);
    if (!ok) {
      *error = "an unreadable search table";
      return false;
    }
    if (pc < pc_lo) lo = mid + 1; else hi = mid;
  }
  // And the first at or above pc_hi: the rows are reserved at once (each
  // growth of an mmap'd vector is a new mapping, populated, and a copy).
  long end = lo, top = h.count;
  while (end < top) {
    const long mid = end + (top - end) / 2;
    bool ok = false;
    const uint64_t pc = initial_pc(mid, &ok);
    if (!ok) break;
    if (pc < pc_hi) end = mid + 1; else top = mid;
  }
  constexpr size_t kRowsPerFde = 7;  // 6.4 in libtorch_cpu
  rows->reserve(rows->size() + static_cast<size_t>(end - lo + 1) * kRowsPerFde + 16);
  long bad = 0;
  std::unordered_map<uintptr_t, Cie> cies;
  Reader table(src, h.table + 8 * static_cast<uintptr_t>(lo > 0 ? lo - 1 : 0));
  for (long i = lo > 0 ? lo - 1 : 0; i < h.count; ++i) {
    const uint64_t initial = table.Encoded(h.table_encoding, src.eh_frame_hdr);
    const uint64_t fde_at = table.Encoded(h.table_encoding, src.eh_frame_hdr);
    if (!table.ok()) {
      ++bad;
      break;
    }
    if (i >= lo && initial >= pc_hi) break;
    if (!DecodeFde(src, static_cast<uintptr_t>(fde_at), initial, &cies, rows)) ++bad;
  }
  if (skipped != nullptr) *skipped = bad;
  return true;
}

bool FindLoadedEhFrame(const dl_phdr_info* info, LoadedEhFrame* out) {
  uintptr_t lo = UINTPTR_MAX, hi = 0, hdr = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
      lo = std::min(lo, start);
      hi = std::max(hi, start + ph.p_memsz);
    } else if (ph.p_type == PT_GNU_EH_FRAME) {
      hdr = start;
    }
  }
  uintptr_t eh_frame = 0, eh_frame_size = 0;
  if (hdr == 0 && hi != 0) {
    // No header: .eh_frame from the file's section headers.
    const char* name = info->dlpi_name != nullptr && info->dlpi_name[0] != '\0' ? info->dlpi_name
                                                                              : "/proc/self/exe";
    uint64_t addr = 0, size = 0;
    if (FindAllocatedSection(name, ".eh_frame", &addr, &size) && size > 0) {
      eh_frame = info->dlpi_addr + addr;
      eh_frame_size = size;
    }
  }
  const uintptr_t anchor = hdr != 0 ? hdr : eh_frame;
  if (hi == 0 || anchor == 0) return false;
  // The readable range: the run of adjacent loaded segments around the
  // header (.eh_frame sits next to it, in the same or the next segment).
  // Only their file-backed part (.eh_frame is never in .bss), and not across
  // a writable segment: the collector copies this range (cfi_tables.cc), and
  // .data and .bss can be gigabytes (tests/programs/cfi_big_bss.cc).
  struct Load {
    uintptr_t lo, hi;
    bool writable;
    bool operator<(const Load& o) const { return lo < o.lo; }
  };
  std::vector<Load> loads;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_R)) continue;
    const uintptr_t start = (info->dlpi_addr + ph.p_vaddr) & ~uintptr_t{4095};
    loads.push_back(Load{start,
                         (info->dlpi_addr + ph.p_vaddr + ph.p_filesz + 4095) & ~uintptr_t{4095},
                         (ph.p_flags & PF_W) != 0});
  }
  std::sort(loads.begin(), loads.end());
  size_t at = loads.size();
  for (size_t i = 0; i < loads.size(); ++i) {
    if (anchor >= loads[i].lo && anchor < loads[i].hi) at = i;
  }
  if (at == loads.size()) return false;
  uintptr_t rlo = loads[at].lo, rhi = loads[at].hi;
  for (size_t i = at; i > 0 && loads[i - 1].hi == rlo && !loads[i - 1].writable; --i) {
    rlo = loads[i - 1].lo;
  }
  for (size_t i = at + 1; i < loads.size() && loads[i].lo == rhi && !loads[i].writable; ++i) {
    rhi = loads[i].hi;
  }
  if (!(anchor >= rlo && anchor < rhi)) return false;
  out->text_lo = lo;
  out->text_hi = hi;
  out->source = EhFrameSource{hdr, rlo, rhi, lo};
  out->source.eh_frame = eh_frame;
  out->source.eh_frame_size = eh_frame_size;
  if (eh_frame != 0 && eh_frame + eh_frame_size > rhi) return false;
  return true;
}

}  // namespace dlprof
