#include "reports/pprof_wire.h"

namespace dlprof {
namespace {

constexpr uint32_t kWireVarint = 0;
constexpr uint32_t kWireLengthDelimited = 2;

}  // namespace

void ProtoEncoder::AppendVarint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void ProtoEncoder::Varint(uint32_t field, uint64_t value) {
  Tag(field, kWireVarint);
  AppendVarint(&out_, value);
}

void ProtoEncoder::Bytes(uint32_t field, std::string_view bytes) {
  Tag(field, kWireLengthDelimited);
  AppendVarint(&out_, bytes.size());
  out_.append(bytes.data(), bytes.size());
}

void ProtoEncoder::PackedVarints(uint32_t field, const std::vector<uint64_t>& values) {
  if (values.empty()) return;
  size_t token = BeginMessage(field);
  for (uint64_t v : values) AppendVarint(&out_, v);
  EndMessage(token);
}

void ProtoEncoder::PackedInt64s(uint32_t field, const std::vector<int64_t>& values) {
  if (values.empty()) return;
  size_t token = BeginMessage(field);
  for (int64_t v : values) AppendVarint(&out_, static_cast<uint64_t>(v));
  EndMessage(token);
}

size_t ProtoEncoder::BeginMessage(uint32_t field) {
  Tag(field, kWireLengthDelimited);
  return out_.size();
}

void ProtoEncoder::EndMessage(size_t token) {
  // The length goes before a body already written; bodies of pprof messages
  // are small, so moving them once costs less than encoding them twice.
  std::string length;
  AppendVarint(&length, out_.size() - token);
  out_.insert(token, length);
}

}  // namespace dlprof
