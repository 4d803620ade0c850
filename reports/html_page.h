// Filling the self-contained pages (report.html, diff.html) from their
// embedded templates: one JSON document in a <script> element, and the
// template's markers replaced.
#ifndef DLPROF_REPORTS_HTML_PAGE_H_
#define DLPROF_REPORTS_HTML_PAGE_H_

#include <string>
#include <string_view>

namespace dlprof {

// JSON inside <script type="application/json">: a '<' there could close the
// element ("</script>") or open a comment state ("<!--") that moves where it
// closes. '<' only occurs inside JSON strings, where \u003c means the same;
// '>' and '&' are escaped alike.
std::string ScriptSafe(const std::string& json_text);

// Replaces the first `marker` in *page with `with`; throws std::runtime_error
// naming `page_name` when the template lacks it.
void ReplaceOnce(std::string* page, std::string_view marker, const std::string& with,
                 const char* page_name);

}  // namespace dlprof

#endif  // DLPROF_REPORTS_HTML_PAGE_H_
