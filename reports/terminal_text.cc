#include "reports/terminal_text.h"

#include <cstdarg>
#include <cstdio>

#include <cstdint>
#include <vector>

#include "reports/utf8.h"

namespace dlprof {
namespace {

// Terminal columns a code point takes: 0 for combining marks and zero-width
// characters, 2 for East Asian wide and fullwidth forms and emoji, else 1.
// (wcwidth() would need the reader's locale; these ranges are the common
// part of every terminal's table.)
int Columns(uint32_t cp) {
  if ((cp >= 0x0300 && cp <= 0x036f) || (cp >= 0x200b && cp <= 0x200f) || cp == 0xfeff ||
      (cp >= 0xfe00 && cp <= 0xfe0f)) {
    return 0;
  }
  if ((cp >= 0x1100 && cp <= 0x115f) || (cp >= 0x2e80 && cp <= 0xa4cf && cp != 0x303f) ||
      (cp >= 0xac00 && cp <= 0xd7a3) || (cp >= 0xf900 && cp <= 0xfaff) ||
      (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff00 && cp <= 0xff60) ||
      (cp >= 0xffe0 && cp <= 0xffe6) || (cp >= 0x1f300 && cp <= 0x1f64f) ||
      (cp >= 0x1f900 && cp <= 0x1f9ff) || (cp >= 0x20000 && cp <= 0x3fffd)) {
    return 2;
  }
  return 1;
}

}  // namespace

std::string Clean(const std::string& s, size_t max, size_t* columns) {
  struct Piece {
    size_t end;  // bytes of `out` up to and including this character
    size_t cols;  // columns up to and including it
  };
  std::string out;
  std::vector<Piece> pieces;
  size_t cols = 0;
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    size_t bad = 0;
    const size_t n = Utf8At(s, i, &cp, &bad);
    if (n == 0) {
      out += "\xef\xbf\xbd";
      cols += 1;
      i += bad;
    } else if (IsTerminalControl(cp)) {
      out += '?';
      cols += 1;
      i += n;
    } else {
      out.append(s, i, n);
      cols += static_cast<size_t>(Columns(cp));
      i += n;
    }
    pieces.push_back({out.size(), cols});
  }
  if (cols > max) {  // keep what fits in max - 3 columns, then "..."
    size_t keep = 0, kept_cols = 0;
    for (const Piece& p : pieces) {
      if (p.cols + 3 > max) break;
      keep = p.end;
      kept_cols = p.cols;
    }
    out.resize(keep);
    out += "...";
    cols = kept_cols + 3;
  }
  if (columns != nullptr) *columns = cols;
  return out;
}

std::string Cell(const std::string& s, size_t width) {
  size_t cols = 0;
  std::string out = Clean(s, width, &cols);
  if (cols < width) out.append(width - cols, ' ');
  return out;
}

std::string Line(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return std::string(buf) + "\n";
}

}  // namespace dlprof
