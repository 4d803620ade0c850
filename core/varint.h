// LEB128 varints and zigzag, the encoding of .dlprof chunk payloads
// (include/dlprof/format.h). Shared by the runtime's writer and the reader.
#ifndef DLPROF_CORE_VARINT_H_
#define DLPROF_CORE_VARINT_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace dlprof {

inline void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

inline void PutBytes(std::string* out, const std::string& s) {
  PutVarint(out, s.size());
  out->append(s);
}

// Reads from [p, end). Every getter returns false (and leaves *p unspecified)
// when the input ends early or a varint is longer than 10 bytes.
inline bool GetVarint(const uint8_t** p, const uint8_t* end, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 70 && *p < end; shift += 7) {
    uint8_t b = *(*p)++;
    result |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return false;
}

inline bool GetBytes(const uint8_t** p, const uint8_t* end, std::string* s) {
  uint64_t n;
  if (!GetVarint(p, end, &n) || n > static_cast<uint64_t>(end - *p)) return false;
  s->assign(reinterpret_cast<const char*>(*p), n);
  *p += n;
  return true;
}

}  // namespace dlprof

#endif  // DLPROF_CORE_VARINT_H_
