#include "core/python_code.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "core/python_frames.h"

namespace dlprof {
namespace {

constexpr size_t kMaxStringBytes = 1024;      // UTF-8 bytes per name
constexpr size_t kMaxLineTable = 64 * 1024;   // bytes of co_linetable read
constexpr int64_t kMaxInt32 = 0x7fffffff;

// Appends `cp` as UTF-8 unless that would pass kMaxStringBytes (false then).
// Surrogates and values past U+10FFFF, which UTF-8 cannot carry, become
// U+FFFD so that the profile's text is always valid UTF-8.
bool AppendUtf8(uint32_t cp, std::string* out) {
  if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) cp = 0xfffd;
  char b[4];
  size_t n;
  if (cp < 0x80) {
    b[0] = static_cast<char>(cp);
    n = 1;
  } else if (cp < 0x800) {
    b[0] = static_cast<char>(0xc0 | (cp >> 6));
    b[1] = static_cast<char>(0x80 | (cp & 0x3f));
    n = 2;
  } else if (cp < 0x10000) {
    b[0] = static_cast<char>(0xe0 | (cp >> 12));
    b[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    b[2] = static_cast<char>(0x80 | (cp & 0x3f));
    n = 3;
  } else {
    b[0] = static_cast<char>(0xf0 | (cp >> 18));
    b[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    b[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    b[3] = static_cast<char>(0x80 | (cp & 0x3f));
    n = 4;
  }
  if (out->size() + n > kMaxStringBytes) return false;
  out->append(b, n);
  return true;
}

// Adds [start, end) → line, merging it into the previous range when that one
// ends where this starts with the same line (the tables repeat lines often).
void AddRange(int64_t start, int64_t end, int64_t line, std::vector<PyCodeInfo::Range>* out) {
  if (start >= end) return;
  if (!out->empty() && out->back().end == start && out->back().line == line) {
    out->back().end = static_cast<int32_t>(end);
    return;
  }
  out->push_back({static_cast<int32_t>(start), static_cast<int32_t>(end),
                  static_cast<int32_t>(line)});
}

// CPython's read_varint (Objects/codeobject.c, 3.11+): 6-bit chunks, least
// significant first, bit 6 set on every chunk but the last. Reads within
// [*p, end); false when the varint runs past it or past 32 bits.
bool ReadVarint(const uint8_t** p, const uint8_t* end, uint32_t* out) {
  uint32_t value = 0;
  for (unsigned shift = 0; shift < 32; shift += 6) {
    if (*p >= end) return false;
    const uint8_t b = *(*p)++;
    value |= static_cast<uint32_t>(b & 63) << shift;
    if ((b & 64) == 0) {
      *out = value;
      return true;
    }
  }
  return false;
}

// The PEP 657 location table of 3.11+ (Objects/locations.md). Each entry is
// a first byte with bit 7 set (code in bits 3-6, length-1 in code units in
// bits 0-2) and bytes without bit 7 after it. Only the start line matters
// here: codes 0-9 keep it, 10-12 add code-10, 13 (no columns) and 14 (long
// form) add the svarint that follows the first byte, 15 has no line (and
// keeps the running line, as CPython's get_line_delta gives 0 for it). The
// other fields (end line, columns) are skipped with the entry.
void ParseLocations311(const uint8_t* p, size_t n, int first_line,
                       std::vector<PyCodeInfo::Range>* out) {
  const uint8_t* const end = p + n;
  int64_t line = first_line, unit = 0;
  while (p < end) {
    const uint8_t first = *p++;
    if ((first & 0x80) == 0) return;  // not an entry start: a corrupt table
    const uint8_t* entry_end = p;
    while (entry_end < end && (*entry_end & 0x80) == 0) ++entry_end;
    const int code = (first >> 3) & 15;
    const int length = (first & 7) + 1;
    if (code == 13 || code == 14) {
      uint32_t v;
      if (!ReadVarint(&p, entry_end, &v)) return;  // cut short (e.g. at the 64 KiB bound)
      // CPython's scan_signed_varint: the sign in the low bit.
      line += (v & 1) ? -static_cast<int64_t>(v >> 1) : static_cast<int64_t>(v >> 1);
    } else if (code >= 10 && code <= 12) {
      line += code - 10;
    }
    if (line > kMaxInt32 || line < -kMaxInt32 || unit + length > kMaxInt32) return;
    AddRange(unit, unit + length, code == 15 ? -1 : line, out);
    unit += length;
    p = entry_end;
  }
}

// CPython 3.10's co_linetable (advance() in 3.10's Objects/codeobject.c):
// pairs (byte delta, signed line delta), a line delta of -128 meaning "no
// line" (the running line stays). Pairs with a zero byte delta only move the
// line. Offsets are in bytes there; code unit k is at byte 2k, so a byte
// range [s, e) holds the units [ceil(s/2), ceil(e/2)).
void ParseLnotab310(const uint8_t* p, size_t n, int first_line,
                    std::vector<PyCodeInfo::Range>* out) {
  int64_t line = first_line, byte = 0;
  for (size_t i = 0; i + 1 < n; i += 2) {
    const int sdelta = p[i];
    const int ldelta = static_cast<int8_t>(p[i + 1]);
    int64_t range_line = -1;
    if (ldelta != -128) {
      line += ldelta;
      range_line = line;
    }
    if (line > kMaxInt32 || line < -kMaxInt32) return;
    AddRange((byte + 1) / 2, (byte + sdelta + 1) / 2, range_line, out);
    byte += sdelta;
  }
}

}  // namespace

const MemoryView& PythonCodeReader::OwnMemoryView() {
  // Never destroyed: the collector thread may read during the exit handlers.
  alignas(OwnMemory) static unsigned char storage[sizeof(OwnMemory)];
  static const OwnMemory* own = new (storage) OwnMemory();
  return *own;
}

uint64_t PythonCodeReader::Identity(uintptr_t code) const {
  return PyCodeIdentityIn(memory_, code, layout_);
}

bool PythonCodeReader::LooksAlive(uintptr_t object, uintptr_t type) const {
  uint64_t refcnt;
  uintptr_t actual;
  // 2^33: far above any real count, and the immortal counts of 3.12 (2^30-1)
  // and 3.13 (2^32-1); far below a heap address in a free-list link.
  return memory_.U64(object, &refcnt) && refcnt >= 1 && refcnt <= (1ull << 33) &&
         memory_.Ptr(object + layout_.object_type, &actual) && actual == type;
}

bool PythonCodeReader::ReadString(uintptr_t unicode, std::string* out) const {
  out->clear();
  if (unicode == 0 || unicode % alignof(void*) != 0) return false;
  if (unicode_type_ != 0 && !LooksAlive(unicode, unicode_type_)) return false;
  uint64_t length;
  uint32_t state;
  if (!memory_.U64(unicode + layout_.unicode_length, &length) ||
      !memory_.U32(unicode + layout_.unicode_state, &state)) {
    return false;
  }
  if (static_cast<int64_t>(length) < 0) return false;
  // A legacy (non-compact) 3.10/3.11 string keeps its characters behind
  // another pointer, in a form that may not even be ready; names of code
  // objects are compact, so such a string is not trusted.
  if (((state >> layout_.state_compact_bit) & 1) == 0) return false;
  const unsigned kind = (state >> layout_.state_kind_shift) & 7;
  const bool ascii = ((state >> layout_.state_ascii_bit) & 1) != 0;
  if ((kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1)) return false;
  const uintptr_t data =
      unicode + (ascii ? layout_.unicode_ascii_data : layout_.unicode_compact_data);
  // Every character takes at least one UTF-8 byte: no more than
  // kMaxStringBytes of them can be kept.
  const size_t count = std::min<uint64_t>(length, kMaxStringBytes);
  uint8_t chars[kMaxStringBytes * 4];
  if (!memory_.Copy(data, chars, count * kind)) return false;
  for (size_t i = 0; i < count; ++i) {
    uint32_t cp;
    if (kind == 1) {
      cp = chars[i];
      if (ascii && cp >= 0x80) cp = 0xfffd;  // not ASCII after all: not text we trust
    } else if (kind == 2) {
      uint16_t c;
      std::memcpy(&c, chars + 2 * i, 2);
      cp = c;
    } else {
      std::memcpy(&cp, chars + 4 * i, 4);
    }
    if (!AppendUtf8(cp, out)) break;  // truncated at a character boundary
  }
  return true;
}

bool PythonCodeReader::Read(uintptr_t code, PyCodeInfo* out) const {
  PyCodeInfo info;
  const bool ok = ReadInto(code, &info);
  *out = ok ? std::move(info) : PyCodeInfo();
  return ok;
}

namespace {

// A code object's qualified name is identifiers (any non-ASCII letters
// included), dots and the compiler's <lambda>, <locals>, <module>,
// <listcomp>... Anything else was read from an object that took a freed
// name's place (seen under ASan: "\\u{0:04x}", a string constant of the
// module imported next, as the name of a module's freed code).
bool PlausibleQualname(const std::string& name) {
  if (name.empty()) return false;
  for (unsigned char c : name) {
    const bool ok = c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '<' || c == '>';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

bool PythonCodeReader::ReadInto(uintptr_t code, PyCodeInfo* out) const {
  if (code == 0 || code % alignof(void*) != 0) return false;
  if (code_type_ != 0 && !LooksAlive(code, code_type_)) return false;
  const uint32_t name_offset =
      layout_.code_qualname != kNoOffset ? layout_.code_qualname : layout_.code_name;
  uintptr_t table;
  uint32_t first_line;
  if (!memory_.Ptr(code + name_offset, &out->qualname_object) ||
      !memory_.Ptr(code + layout_.code_filename, &out->filename_object) ||
      !memory_.Ptr(code + layout_.code_linetable, &table) ||
      !memory_.U32(code + layout_.code_firstlineno, &first_line)) {
    return false;
  }
  out->first_line = static_cast<int32_t>(first_line);
  if (!ReadString(out->qualname_object, &out->qualname) || !PlausibleQualname(out->qualname) ||
      !ReadString(out->filename_object, &out->filename)) {
    return false;
  }

  uint64_t size;
  if (table == 0 || table % alignof(void*) != 0 ||
      !memory_.U64(table + layout_.varobject_size, &size) || static_cast<int64_t>(size) < 0) {
    return false;
  }
  // A longer table is cut: its later instructions then get first_line.
  std::vector<uint8_t> bytes(std::min<uint64_t>(size, kMaxLineTable));
  if (!memory_.Copy(table + layout_.bytes_data, bytes.data(), bytes.size())) return false;
  switch (layout_.line_table) {
    case PyLineTable::kLocations311:
      ParseLocations311(bytes.data(), bytes.size(), out->first_line, &out->lines);
      break;
    case PyLineTable::kLnotab310:
      ParseLnotab310(bytes.data(), bytes.size(), out->first_line, &out->lines);
      break;
  }
  // Without the GIL the object may have been freed and reused while it was
  // read: a second look at what identifies it narrows that window.
  return StillSame(code, *out);
}

bool PythonCodeReader::StillSame(uintptr_t code, const PyCodeInfo& info) const {
  if (code == 0 || code % alignof(void*) != 0) return false;
  // Alive still, not only typed: a code object whose count dropped to 0 while
  // it was read (its dealloc frees its names first, and another string may
  // take a name's place) keeps its type until its block is freed.
  if (code_type_ != 0 && !LooksAlive(code, code_type_)) return false;
  const uint32_t name_offset =
      layout_.code_qualname != kNoOffset ? layout_.code_qualname : layout_.code_name;
  uintptr_t name, filename;
  uint32_t first_line;
  return memory_.Ptr(code + name_offset, &name) && name == info.qualname_object &&
         memory_.Ptr(code + layout_.code_filename, &filename) &&
         filename == info.filename_object &&
         memory_.U32(code + layout_.code_firstlineno, &first_line) &&
         static_cast<int32_t>(first_line) == info.first_line;
}

int PythonCodeReader::LineAt(const PyCodeInfo& info, int64_t index) {
  if (index < 0) return info.first_line;  // -1: the frame has not started
  // The last range starting at or before `index`.
  auto it = std::upper_bound(info.lines.begin(), info.lines.end(), index,
                             [](int64_t i, const PyCodeInfo::Range& r) { return i < r.start; });
  if (it == info.lines.begin()) return info.first_line;
  --it;
  if (index >= it->end || it->line == -1) return info.first_line;
  return it->line;
}

}  // namespace dlprof
