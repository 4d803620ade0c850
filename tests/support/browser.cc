#include "tests/support/browser.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "tests/support/subprocess.h"

namespace dlprof::testing {

std::string ChromiumPath() {
  const char* path = "/usr/bin/chromium";
  return access(path, X_OK) == 0 ? path : "";
}

BrowserResult LoadPage(const std::string& url, int width, int height,
                       const std::string& screenshot_png, int budget_ms) {
  BrowserResult r;
  const std::string chromium = ChromiumPath();
  if (chromium.empty()) return r;
  const std::string profile_dir = MakeTempDir("dlprof-chromium");
  std::vector<std::string> argv = {
      chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
      "--disable-extensions", "--hide-scrollbars", "--mute-audio", "--user-data-dir=" + profile_dir,
      // Nothing may leave the machine even if the page asked: every host fails.
      "--host-resolver-rules=MAP * ~NOTFOUND",
      // Console messages (and CSP violations) go to stderr as INFO:CONSOLE lines.
      "--enable-logging=stderr", "--v=0", "--virtual-time-budget=" + std::to_string(budget_ms),
      "--window-size=" + std::to_string(width) + "," + std::to_string(height)};
  if (!screenshot_png.empty())
    argv.push_back("--screenshot=" + screenshot_png);
  else
    argv.push_back("--dump-dom");
  argv.push_back(url);
  // Chromium reads no D-Bus session here; keep it from looking.
  ProcessResult p = RunProcess(argv, {{"DBUS_SESSION_BUS_ADDRESS", "disabled:"}}, 60);
  if (!profile_dir.empty()) RunProcess({"/bin/rm", "-rf", profile_dir}, {}, 30);
  r.ran = p.exit_code >= 0;
  r.exit_code = p.exit_code;
  r.dom = std::move(p.out);
  r.log = std::move(p.err);
  std::istringstream lines(r.log);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find(":CONSOLE") != std::string::npos) r.console.push_back(line);
  }
  return r;
}

std::pair<int, int> PngSize(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char h[24] = {};
  if (!in.read(reinterpret_cast<char*>(h), sizeof(h))) return {0, 0};
  static const unsigned char kMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  for (int i = 0; i < 8; ++i) {
    if (h[i] != kMagic[i]) return {0, 0};
  }
  auto be32 = [&](int at) {
    return static_cast<int>((h[at] << 24) | (h[at + 1] << 16) | (h[at + 2] << 8) | h[at + 3]);
  };
  return {be32(16), be32(20)};
}

}  // namespace dlprof::testing
