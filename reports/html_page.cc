#include "reports/html_page.h"

#include <stdexcept>

namespace dlprof {

std::string ScriptSafe(const std::string& json_text) {
  std::string out;
  out.reserve(json_text.size() + json_text.size() / 64);
  for (char c : json_text) {
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else {
      out += c;
    }
  }
  return out;
}

void ReplaceOnce(std::string* page, std::string_view marker, const std::string& with,
                 const char* page_name) {
  const size_t at = page->find(marker);
  if (at == std::string::npos) {
    throw std::runtime_error(std::string(page_name) + " template has no " + std::string(marker));
  }
  page->replace(at, marker.size(), with);
}

}  // namespace dlprof
