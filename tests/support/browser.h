// Drives Debian's headless Chromium for end-to-end tests of report.html.
#ifndef DLPROF_TESTS_SUPPORT_BROWSER_H_
#define DLPROF_TESTS_SUPPORT_BROWSER_H_

#include <string>
#include <vector>

namespace dlprof::testing {

// /usr/bin/chromium (scripts/setup.sh installs it), or "" when missing.
std::string ChromiumPath();

struct BrowserResult {
  bool ran = false;  // Chromium started and exited by itself
  int exit_code = -1;
  std::string dom;                   // --dump-dom: the DOM after the page's scripts ran
  std::string log;                   // stderr, with console messages (--enable-logging=stderr)
  std::vector<std::string> console;  // the page's console messages, CSP violations included
};

// Loads `url` in a fresh headless Chromium profile with the network cut off
// (any host name fails to resolve), lets its scripts run for at most
// `budget_ms` of virtual time, and returns the serialized DOM. When
// `screenshot_png` is not empty it also saves a screenshot of the viewport there.
BrowserResult LoadPage(const std::string& url, int width = 1280, int height = 800,
                       const std::string& screenshot_png = "", int budget_ms = 5000);

// Width and height from a PNG file's header, {0, 0} when it is not a PNG.
std::pair<int, int> PngSize(const std::string& path);

}  // namespace dlprof::testing

#endif  // DLPROF_TESTS_SUPPORT_BROWSER_H_
