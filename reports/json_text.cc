#include "reports/json_text.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

namespace dlprof {

void AppendJsonString(std::string* out, std::string_view s) {
  // Printable ASCII other than '"' and '\' is written as it is; anything else
  // (escapes, UTF-8 to validate) goes through nlohmann itself.
  for (char c : s) {
    if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') {
      *out += nlohmann::json(std::string(s)).dump(-1, ' ', false,
                                                  nlohmann::json::error_handler_t::replace);
      return;
    }
  }
  *out += '"';
  out->append(s);
  *out += '"';
}

void AppendJsonInt(std::string* out, int64_t v) {
  char buf[24];
  *out += std::string_view(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr - buf);
}

void AppendJsonUint(std::string* out, uint64_t v) {
  char buf[24];
  *out += std::string_view(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr - buf);
}

void AppendJsonDouble(std::string* out, double v) {
  if (!std::isfinite(v)) {
    *out += "null";
    return;
  }
  // What nlohmann's serializer calls for a double (Grisu2, then its own %g-like layout).
  char buf[64];
  *out += std::string_view(buf, nlohmann::detail::to_chars(buf, buf + sizeof(buf), v) - buf);
}

}  // namespace dlprof
