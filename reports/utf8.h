// Names from the profiled program (stages, buffers, functions, its command
// line) are arbitrary bytes. The text outputs carry them as valid UTF-8.
#ifndef DLPROF_REPORTS_UTF8_H_
#define DLPROF_REPORTS_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dlprof {

// Length of the well-formed UTF-8 sequence at s[i] (Unicode table 3-7: no
// overlongs, no surrogates, nothing above U+10FFFF) and its code point in
// *cp; or 0 and, in *bad, the length of the maximal ill-formed subpart there
// (what one U+FFFD replaces).
inline size_t Utf8At(std::string_view s, size_t i, uint32_t* cp, size_t* bad) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned c = b(0);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t n;
  unsigned lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    *bad = 1;
    return 0;
  }
  uint32_t v = c & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);
  for (size_t k = 1; k < n; ++k) {
    const bool ok = i + k < s.size() && b(k) >= (k == 1 ? lo : 0x80) && b(k) <= (k == 1 ? hi : 0xbf);
    if (!ok) {
      *bad = k;
      return 0;
    }
    v = v << 6 | (b(k) & 0x3f);
  }
  *cp = v;
  return n;
}

// `s` with each maximal ill-formed subpart replaced by U+FFFD, the way
// nlohmann::json's error_handler_t::replace and browsers' decoders do it,
// so every output shows a bad name the same way.
inline std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    size_t bad = 0;
    size_t n = Utf8At(s, i, &cp, &bad);
    if (n > 0) {
      out.append(s.data() + i, n);
      i += n;
    } else {
      out += "\xef\xbf\xbd";
      i += bad;
    }
  }
  return out;
}

// Characters that move a terminal's cursor, recolour it, or reorder what
// follows (C0 and C1 controls, DEL, bidirectional overrides and isolates,
// line and paragraph separators).
inline bool IsTerminalControl(uint32_t cp) {
  return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c ||
         (cp >= 0x200e && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

// `s` as a one-line message may show it on a terminal (dlprof's warnings and
// errors name files, stages and fields of a profile): every byte of a
// terminal control (above: ESC, BEL, CR, C1 such as U+009B CSI, RLO...) or of
// an ill-formed sequence becomes \xNN, so the line shows what the name holds
// but cannot move the cursor, recolour, retitle or reorder the terminal.
// Other UTF-8 stays as it is. At most max_bytes of `s` are shown, then
// "...". core/config.cc echoes bad environment values through it too (64
// bytes): there is one escaper.
inline std::string TerminalSafe(std::string_view s, size_t max_bytes = std::string_view::npos) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  auto escape = [&](size_t from, size_t n) {
    for (size_t k = from; k < from + n; ++k) {
      const unsigned char c = static_cast<unsigned char>(s[k]);
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  };
  for (size_t i = 0; i < s.size();) {
    if (i >= max_bytes) {
      out += "...";
      break;
    }
    uint32_t cp;
    size_t bad = 0;
    const size_t n = Utf8At(s, i, &cp, &bad);
    if (n == 0) {
      escape(i, bad);
      i += bad;
    } else {
      if (IsTerminalControl(cp)) escape(i, n);
      else out.append(s.data() + i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace dlprof

#endif  // DLPROF_REPORTS_UTF8_H_
