// Hostile content: a real profiled program (tests/programs/fault_hostile.cc)
// names its stages, buffers and functions with HTML and JavaScript, quotes,
// newlines, control bytes, bytes that are not UTF-8, 10 kB names, and makes
// 100,000 distinct stages; `dlprof report` turns it into every output, and
// each output is read back the way its consumers read it. Nothing may be
// executed, nothing may break a format, memory stays bounded, and whatever
// was cut says so.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "readers/dlprof_reader.h"
#include "readers/pprof_reader.h"
#include "reports/utf8.h"
#include "tests/support/browser.h"
#include "tests/support/files.h"
#include "tests/support/folded.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using testing::ReadFile;

using nlohmann::json;
using testing::MakeTempDir;
using testing::ProcessResult;
using testing::ProgramPath;
using testing::RunProcess;

const std::string kDlprof = std::string(DLPROF_BUILD_DIR) + "/tools/dlprof";

// The stage names fault_hostile uses (its HostileNames(), the 10 kB one aside).
const std::vector<std::string>& HostileStageNames() {
  static const auto* names = new std::vector<std::string>{
      "<script>alert(1)</script>",
      "</script><!--<script>alert(2)//",
      "<img src=x onerror=alert(3)>",
      "\"double\" 'single' `back` \\slash",
      "new\nline\r\ttab",
      "semi;colon space [stage x];0x1 42",
      std::string("bad\xff\xfe utf8 \xc3( \xed\xa0\x80 end"),
      "\x1b[2J\x1b]0;title\x07 esc \xc2\x9b" "31m c1",
      "\xe2\x80\xae" "RTL override \xe2\x80\xa8 line sep \xe2\x80\xa9",
      "{{template}} ${js} %s%n %x",
      "\"},{\"name\":\"injected\",\"ph\":\"X",
      "\xe6\x95\xb0\xe6\x8d\xae \xf0\x9f\x93\xa6 ok",
  };
  return *names;
}

// Byte-level UTF-8 check (RFC 3629: no overlongs, no surrogates, <= U+10FFFF).
// Sets *c1 when a C1 control (U+0080..U+009F) occurs.
bool IsValidUtf8(const std::string& s, bool* c1 = nullptr) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    unsigned c = *p;
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (n < 0 || end - p <= n) return n == 0;
    uint32_t cp = n == 0 ? c : n == 1 ? c & 0x1f : n == 2 ? c & 0x0f : c & 0x07;
    for (int i = 1; i <= n; ++i) {
      if ((p[i] & 0xc0) != 0x80) return false;
      cp = cp << 6 | (p[i] & 0x3f);
    }
    static const uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    if (c1 != nullptr && cp >= 0x80 && cp <= 0x9f) *c1 = true;
    p += n + 1;
  }
  return true;
}

// What a JSON writer that replaces invalid UTF-8 makes of `s` (nlohmann's
// error_handler_t::replace: each bad sequence becomes U+FFFD).
std::string JsonText(const std::string& s) {
  return json::parse(json(s).dump(-1, ' ', false, json::error_handler_t::replace))
      .get<std::string>();
}

// Every output shows a name that is not UTF-8 the same way: the JSON writers
// (nlohmann's replace) and the text writers (reports/utf8.h) agree.
TEST(Hostile, BadBytesAreReplacedAlikeEverywhere) {
  uint64_t x = 12345;
  for (int round = 0; round < 20000; ++round) {
    std::string s;
    int len = static_cast<int>(x % 9);
    for (int i = 0; i < len; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      static const unsigned char kBytes[] = {0x41, 0x80, 0x9f, 0xa0, 0xbf, 0xc0, 0xc2, 0xdf,
                                             0xe0, 0xe1, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff};
      s += static_cast<char>(kBytes[(x >> 33) % sizeof(kBytes)]);
    }
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    ASSERT_EQ(ValidUtf8(s), JsonText(s)) << ::testing::PrintToString(s);
    ASSERT_TRUE(IsValidUtf8(ValidUtf8(s)));
  }
}

class HostileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir("dlprof-hostile"));
    run_ = new ProcessResult(RunProcess(
        {ProgramPath("fault_hostile"), "run", "<svg onload=alert(99)>\"arg\" \xff"},
        {{"DLPROF_SAMPLE", "1"}, {"DLPROF_OUT", *dir_ + "/out"}, {"DLPROF_HZ", "1000"}}));
    report_ = new ProcessResult(
        RunProcess({kDlprof, "report", *dir_ + "/out", "-o", *dir_ + "/report"}, {}, 120));
  }
  void SetUp() override {
    ASSERT_EQ(run_->exit_code, 0) << run_->out << run_->err;
    ASSERT_EQ(report_->exit_code, 0) << report_->out << report_->err;
  }
  static std::string Out(const std::string& file) { return ReadFile(*dir_ + "/report/" + file); }
  static long Printed(const std::string& key) {
    size_t at = run_->out.find(key + "=");
    return at == std::string::npos ? -1 : atol(run_->out.c_str() + at + key.size() + 1);
  }
  static std::string* dir_;
  static ProcessResult* run_;
  static ProcessResult* report_;
};
std::string* HostileTest::dir_;
ProcessResult* HostileTest::run_;
ProcessResult* HostileTest::report_;

// The runtime: a bounded stage table, names cut at 1 KiB, and counters that
// say how much was refused and cut.
TEST_F(HostileTest, RuntimeBoundsTheTablesAndCountsWhatItRefused) {
  EXPECT_GE(Printed("refused"), 100000 - 4096) << run_->out;
#ifndef DLPROF_UNDER_SANITIZER  // ASan keeps freed memory in quarantine
  EXPECT_LT(Printed("rss_growth_kb"), 16 * 1024) << run_->out;  // 100,000 interns, bounded
#endif
  EXPECT_EQ(run_->err, "");  // nothing on stderr: the note goes to the report
  std::string error;
  auto files = ListRunFiles(*dir_ + "/out", &error);
  ASSERT_EQ(files.size(), 1u) << error;
  Profile p;
  ASSERT_TRUE(ReadDlprofFile(files[0], &p, &error)) << error;
  ASSERT_EQ(p.processes.size(), 1u);
  EXPECT_LE(p.stages.size(), 4096u + 1);
  const auto& counters = p.processes[0].counters;
  ASSERT_TRUE(counters.count("stage_names_refused")) << "no counter in STATS";
  EXPECT_GE(counters.at("stage_names_refused"), 100000u - 4096);
  ASSERT_TRUE(counters.count("names_cut"));
  EXPECT_EQ(counters.at("names_cut"), 2u);  // the 10 kB stage name and buffer name
  // The 10 kB name: cut to 1024 bytes (at a character boundary) plus "...".
  const std::string* big = nullptr;
  for (const std::string& s : p.stages) {
    if (s.rfind("HEAD<", 0) == 0) big = &s;
  }
  ASSERT_NE(big, nullptr);
  EXPECT_LE(big->size(), 1024u + 3);
  EXPECT_EQ(big->substr(big->size() - 3), "...");
  // Names arrive byte for byte (the writers decide how to show them).
  std::set<std::string> stages(p.stages.begin(), p.stages.end());
  for (const std::string& n : HostileStageNames()) EXPECT_TRUE(stages.count(n)) << n;
  // Time in a refused stage counts under the enclosing one.
  int64_t outer = 0;
  for (const Sample& s : p.samples) {
    const auto& path = p.stage_paths[s.stage_path];
    if (s.kind == SampleKind::kCpu && !path.empty() && p.stages[path.back()] == "outer_of_refused") {
      outer += s.count;
    }
  }
#ifdef DLPROF_UNDER_SANITIZER
  EXPECT_GT(outer, 0);
#else
  EXPECT_GT(outer, 50);  // 100 ms at 1000 Hz
#endif
}

TEST_F(HostileTest, SummaryJsonIsValidAndCarriesTheNamesAndTheNotes) {
  const std::string text = Out("summary.json");
  EXPECT_TRUE(IsValidUtf8(text));
  json j = json::parse(text, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  std::set<std::string> stages, buffers;
  for (const json& s : j["stages"]) stages.insert(s["name"].get<std::string>());
  for (const json& b : j["buffers"]) buffers.insert(b["name"].get<std::string>());
  for (const std::string& n : HostileStageNames()) {
    EXPECT_TRUE(stages.count(JsonText(n))) << n;
    EXPECT_TRUE(buffers.count(JsonText(n))) << n;
  }
  EXPECT_EQ(stages.count("injected"), 0u);
  EXPECT_NE(j["processes"][0]["command"].get<std::string>().find("<svg onload=alert(99)>"),
            std::string::npos);
  std::string warnings = j["warnings"].dump();
  EXPECT_NE(warnings.find("stage names"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("4096"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("cut"), std::string::npos) << warnings;
}

// summary.txt goes to terminals: one line per record, valid UTF-8, no control
// characters (C0, DEL, C1) and no bidirectional overrides.
TEST_F(HostileTest, SummaryTextIsPrintableUtf8) {
  const std::string text = Out("summary.txt");
  bool c1 = false;
  EXPECT_TRUE(IsValidUtf8(text, &c1));
  EXPECT_FALSE(c1);
  for (unsigned char c : text) {
    EXPECT_TRUE(c == '\n' || (c >= 0x20 && c != 0x7f)) << "byte " << int(c);
    if (!(c == '\n' || (c >= 0x20 && c != 0x7f))) break;
  }
  for (const char* bidi : {"\xe2\x80\xae", "\xe2\x80\xab", "\xe2\x81\xa6", "\xe2\x80\xa8"}) {
    EXPECT_EQ(text.find(bidi), std::string::npos);
  }
  EXPECT_NE(text.find("<script>alert(1)</script>"), std::string::npos);  // text, as is
  EXPECT_NE(text.find("stage names"), std::string::npos) << text;    // the note
}

// stacks.folded: "frame;frame;... count" per line; no frame may hold the
// separator or a newline, and frames keep their spaces (the count is after
// the last one); valid UTF-8.
TEST_F(HostileTest, FoldedStacksKeepTheirShape) {
  const std::string text = Out("stacks.folded");
  EXPECT_TRUE(IsValidUtf8(text));
  std::istringstream in(text);
  int lines = 0;
  bool html_symbol = false, long_symbol = false, semi_stage = false;
  // Frames hold no ';', spaces they may hold: the count is after the last
  // one, as flamegraph.pl reads it.
  for (std::string line; std::getline(in, line); ++lines) {
    ASSERT_TRUE(testing::IsFoldedLine(line)) << line.substr(0, 300);
    html_symbol |= line.find("spin<img src=x onerror=alert(11)>:'q' </script>") != std::string::npos;
    long_symbol |= line.find("spin_long_LLLL") != std::string::npos;
    semi_stage |= line.rfind("[stage semi:colon space [stage x]:0x1 42];", 0) == 0;
  }
  EXPECT_GT(lines, 10);
  EXPECT_TRUE(html_symbol);
  EXPECT_TRUE(long_symbol);
  EXPECT_TRUE(semi_stage);
}

// trace.json: valid JSON, and the names stay inside their strings.
TEST_F(HostileTest, TraceJsonIsValidAndNamesStayStrings) {
  const std::string text = Out("trace.json");
  EXPECT_TRUE(IsValidUtf8(text));
  json j = json::parse(text, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  std::set<std::string> names;
  for (const json& e : j["traceEvents"]) {
    if (e.contains("name") && e["name"].is_string()) names.insert(e["name"].get<std::string>());
  }
  EXPECT_TRUE(names.count("<script>alert(1)</script>"));
  EXPECT_TRUE(names.count(JsonText("\"},{\"name\":\"injected\",\"ph\":\"X")));
  EXPECT_EQ(names.count("injected"), 0u);
  EXPECT_TRUE(names.count(JsonText(HostileStageNames()[6])));  // not UTF-8: replaced
}

// profile.pb.gz: strings are valid UTF-8 (proto3 parsers reject anything
// else), the profile reads back, and the names are there.
TEST_F(HostileTest, PprofReadsBackWithTheNames) {
  Profile p;
  ReadPprof(*dir_ + "/report/profile.pb.gz", &p);
  EXPECT_TRUE(p.warnings.empty()) << p.warnings[0];
  std::set<std::string> paths, functions;
  for (const Sample& s : p.samples) paths.insert(StagePathName(p, s.stage_path));
  for (const Location& loc : p.locations) {
    for (const Frame& f : loc.frames) {
      EXPECT_TRUE(IsValidUtf8(f.function)) << f.function.substr(0, 200);
      functions.insert(f.function);
    }
  }
  for (const std::string& path : paths) EXPECT_TRUE(IsValidUtf8(path)) << path;
  EXPECT_TRUE(paths.count("<img src=x onerror=alert(3)>"));
  EXPECT_TRUE(paths.count(ValidUtf8(HostileStageNames()[6])));
  EXPECT_TRUE(functions.count(
      "spin<img src=x onerror=alert(11)>;'q' </script><script>alert(12)</script> end"));
  if (access("/usr/bin/go", X_OK) == 0) {
    ProcessResult r = RunProcess(
        {"/usr/bin/go", "tool", "pprof", "-raw", *dir_ + "/report/profile.pb.gz"},
        {{"HOME", *dir_}, {"GOFLAGS", "-mod=mod"}, {"PPROF_TMPDIR", *dir_}}, 120);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("alert(11)"), std::string::npos);
  }
}

// report.html: the names never leave their JSON strings, and a browser runs
// no script but the page's own and draws no element from them.
TEST_F(HostileTest, HtmlRunsNoInjectedCodeInABrowser) {
  std::string page = Out("report.html");
  const std::string open = "<script type=\"application/json\" id=\"dlprof-data\">";
  size_t at = page.find(open);
  ASSERT_NE(at, std::string::npos);
  at += open.size();
  size_t end = page.find("</script>", at);
  ASSERT_NE(end, std::string::npos);
  const std::string data = page.substr(at, end - at);
  EXPECT_EQ(data.find('<'), std::string::npos);
  json j = json::parse(data, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_TRUE(IsValidUtf8(page));
  if (testing::ChromiumPath().empty()) GTEST_SKIP() << "no /usr/bin/chromium";
  // A probe before the page's scripts: records any dialog, counts scripts and images.
  const std::string probe = R"(<script>
(function () {
  var r = document.documentElement;
  ["alert", "confirm", "prompt"].forEach(function (f) {
    window[f] = function () { r.setAttribute("data-probe-dialog", f); };
  });
  document.addEventListener("DOMContentLoaded", function () {
    setTimeout(function () {
      r.setAttribute("data-probe", "scripts=" + document.scripts.length + " imgs=" +
                     document.images.length + " svgs-with-onload=" +
                     document.querySelectorAll("[onload],[onerror]").length);
    }, 0);
  });
})();
</script>)";
  size_t head = page.find("<head>");
  ASSERT_NE(head, std::string::npos);
  page.insert(head + 6, probe);
  const std::string dir = MakeTempDir("dlprof-hostile-html");
  std::ofstream(dir + "/report.html", std::ios::binary) << page;
  testing::BrowserResult b = testing::LoadPage("file://" + dir + "/report.html");
  ASSERT_TRUE(b.ran) << b.log;
  const std::string tag = b.dom.substr(0, b.dom.find('>', b.dom.find("<html")) + 1);
  EXPECT_NE(tag.find("data-dlprof-ready=\"1\""), std::string::npos) << tag;
  EXPECT_EQ(tag.find("data-probe-dialog"), std::string::npos) << tag;
  EXPECT_NE(tag.find("data-probe=\"scripts=3 imgs=0 svgs-with-onload=0\""), std::string::npos)
      << tag;
  // The names are in the page, as text.
  EXPECT_NE(b.dom.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
}

}  // namespace
}  // namespace dlprof
