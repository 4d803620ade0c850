// JSON scalars appended to a string, byte for byte as nlohmann::json's dump()
// writes them (compact; non-ASCII kept; invalid UTF-8 replaced by U+FFFD as
// with error_handler_t::replace). For writers that stream many small objects:
// a json value per event costs an allocation per member, and its dump() three
// more.
#ifndef DLPROF_REPORTS_JSON_TEXT_H_
#define DLPROF_REPORTS_JSON_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace dlprof {

void AppendJsonString(std::string* out, std::string_view s);  // with its quotes
void AppendJsonInt(std::string* out, int64_t v);
void AppendJsonUint(std::string* out, uint64_t v);
void AppendJsonDouble(std::string* out, double v);  // "null" when not finite

}  // namespace dlprof

#endif  // DLPROF_REPORTS_JSON_TEXT_H_
