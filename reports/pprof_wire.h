// A minimal protobuf wire-format encoder, enough for pprof's profile.proto.
//
// Hand-written rather than libprotobuf: no protoc step in the build, no
// generated code to keep in sync, and the matching decoder in
// readers/pprof_reader.cc can name the byte offset of corrupt input, which
// libprotobuf's parser cannot.
#ifndef DLPROF_REPORTS_PPROF_WIRE_H_
#define DLPROF_REPORTS_PPROF_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlprof {

// Appends fields to a byte string. Scalars are written even when zero (the
// caller decides what to omit); nested messages are written in place between
// BeginMessage and EndMessage. Not thread-safe.
class ProtoEncoder {
 public:
  // Wire type 0. int64 fields use the two's complement (not zigzag) encoding
  // that proto `int64` specifies, so negative values take ten bytes.
  void Varint(uint32_t field, uint64_t value);
  void Int64(uint32_t field, int64_t value) { Varint(field, static_cast<uint64_t>(value)); }
  void Bool(uint32_t field, bool value) { Varint(field, value ? 1 : 0); }

  // Wire type 2: strings, bytes.
  void Bytes(uint32_t field, std::string_view bytes);

  // A packed repeated varint field (proto3's default for repeated scalars);
  // nothing is written for an empty list.
  void PackedVarints(uint32_t field, const std::vector<uint64_t>& values);
  void PackedInt64s(uint32_t field, const std::vector<int64_t>& values);

  // A nested message: BeginMessage returns a token for the matching
  // EndMessage, which writes the length once the body is known. Nesting works.
  size_t BeginMessage(uint32_t field);
  void EndMessage(size_t token);

  const std::string& data() const { return out_; }
  std::string Release() { return std::move(out_); }

  static void AppendVarint(std::string* out, uint64_t value);

 private:
  void Tag(uint32_t field, uint32_t wire_type) {
    AppendVarint(&out_, (static_cast<uint64_t>(field) << 3) | wire_type);
  }

  std::string out_;
};

}  // namespace dlprof

#endif  // DLPROF_REPORTS_PPROF_WIRE_H_
