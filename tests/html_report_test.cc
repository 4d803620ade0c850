// End-to-end tests of report.html in real headless Chromium: a report of a
// real profiled process loads without a console message or a network request,
// draws the verdict and the flame graph, applies search and filters from the
// URL fragment, and shows hostile names as text. Screenshots are kept in
// <build>/test-artifacts/ for people to look at.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "readers/input_loader.h"
#include "readers/symbolizer.h"
#include "reports/analysis.h"
#include "reports/report_writer.h"
#include "tests/support/browser.h"
#include "tests/support/files.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using testing::ReadFile;

using testing::BrowserResult;
using testing::ChromiumPath;
using testing::LoadPage;
using testing::MakeTempDir;
using testing::ProcessResult;
using testing::ProgramPath;
using testing::RunProcess;

#define REQUIRE_CHROMIUM()                                                 \
  if (ChromiumPath().empty()) {                                            \
    GTEST_SKIP() << "no /usr/bin/chromium (scripts/setup.sh installs it)"; \
  }

std::string ArtifactDir() {
  std::string dir = std::string(DLPROF_BUILD_DIR) + "/test-artifacts";
  mkdir(dir.c_str(), 0755);
  return dir;
}

struct Report {
  std::string html;  // path of report.html
  Analysis analysis;
};

// Profiles rt_workload `args` (the library is linked into it), then reads the
// run back and writes report.html as `dlprof report` would.
Report ProfileAndReport(const std::vector<std::string>& args, const std::string& mode,
                        int hz = 1000, const std::string& command = "") {
  std::string dir = MakeTempDir("dlprof-html");
  std::vector<std::string> argv = {ProgramPath("rt_workload")};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = RunProcess(argv, {{"DLPROF_SAMPLE", "1"},
                                      {"DLPROF_OUT", dir + "/out"},
                                      {"DLPROF_MODE", mode},
                                      {"DLPROF_HZ", std::to_string(hz)}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  Profile profile;
  LoadInputs({dir + "/out"}, &profile);
  Symbolizer symbolizer;
  symbolizer.SymbolizeProfile(&profile);
  if (!command.empty()) {
    for (Process& p : profile.processes) p.command = command;
  }
  Report report{dir + "/report.html", Analyze(profile)};
  MakeHtmlWriter()->Write(profile, report.analysis, dir);
  return report;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// The names of the flame graph's frames of one kind in a dumped DOM, in order.
std::vector<std::string> FlameNodes(const std::string& dom, const std::string& kind,
                                    const std::string& cls_part = "") {
  std::vector<std::string> names;
  std::regex node(R"re(<g class="fg-node([^"]*)" data-name="([^"]*)" data-kind="([a-z]+)")re");
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), node); it != std::sregex_iterator();
       ++it) {
    if ((*it)[3] != kind) continue;
    if (!cls_part.empty() && (*it)[1].str().find(cls_part) == std::string::npos) continue;
    names.push_back((*it)[2]);
  }
  return names;
}

// The <html> start tag of a dumped DOM: where the page and the probe leave
// their marks (the scripts' own text mentions the same attribute names).
std::string HtmlTag(const std::string& dom) {
  size_t at = dom.find("<html");
  return at == std::string::npos ? "" : dom.substr(at, dom.find('>', at) - at + 1);
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(HtmlReport, RealRunLoadsWithoutErrorsOrNetwork) {
  REQUIRE_CHROMIUM();
  const Report report = ProfileAndReport({"steps", "12"}, "light");
  const std::string& html = report.html;
  const std::string page = ReadFile(html);
  // Self-contained: nothing to fetch, and a policy that would block and log
  // any fetch.
  EXPECT_FALSE(std::regex_search(
      page, std::regex(R"((src|href)\s*=\s*["']?\s*(https?:)?//)", std::regex::icase)));
  EXPECT_NE(page.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);

  BrowserResult b = LoadPage("file://" + html);
  ASSERT_TRUE(b.ran) << b.log;
  EXPECT_EQ(b.exit_code, 0) << b.log;
  EXPECT_TRUE(b.console.empty()) << Joined(b.console);
  EXPECT_NE(HtmlTag(b.dom).find("data-dlprof-ready=\"1\""), std::string::npos)
      << b.dom.substr(0, 2000);
  EXPECT_EQ(HtmlTag(b.dom).find("data-dlprof-error"), std::string::npos);
  // The verdict, in words, with the analysis' own number: each step waits
  // 20 ms for data, then computes 30 ms of CPU, so the loop is input-bound.
  const Verdict& v = report.analysis.verdict;
  ASSERT_TRUE(v.input_bound) << v.data_wait_fraction;
  char want[128];
  snprintf(
      want, sizeof(want),
      "id=\"verdict-headline\">Training is input-bound: it waits for data %.0f%% of its step time",
      100 * (std::round(v.data_wait_fraction * 1e6) / 1e6));  // as the page gets it
  EXPECT_NE(b.dom.find(want), std::string::npos) << want << "\n" << b.dom.substr(0, 4000);
  EXPECT_NE(b.dom.find("id=\"verdict-severity\">" + v.severity + "<"), std::string::npos);
  // The step chart: one bar per step after the warm-up.
  const std::regex bar("class=\"step-bar\"");
  EXPECT_EQ(
      std::distance(std::sregex_iterator(b.dom.begin(), b.dom.end(), bar), std::sregex_iterator()),
      10);
  // The flame graph: the stage as a root frame, the burner below it.
  EXPECT_TRUE(Contains(FlameNodes(b.dom, "stage"), "compute")) << b.dom.substr(0, 3000);
  EXPECT_TRUE(Contains(FlameNodes(b.dom, "function"), "Burn"));
  // The stage table names the stage.
  EXPECT_NE(b.dom.find(">compute</button>"), std::string::npos);
}

TEST(HtmlReport, ScreenshotAtDesktopWidth) {
  REQUIRE_CHROMIUM();
  const std::string html = ProfileAndReport({"steps", "12"}, "light").html;
  const std::string png = ArtifactDir() + "/report.png";
  unlink(png.c_str());
  BrowserResult b = LoadPage("file://" + html, 1280, 800, png);
  ASSERT_TRUE(b.ran) << b.log;
  EXPECT_TRUE(b.console.empty()) << Joined(b.console);
  EXPECT_EQ(testing::PngSize(png), std::make_pair(1280, 800)) << b.log;
  // A page drawn in colour is far larger than a blank one.
  struct stat st;
  ASSERT_EQ(stat(png.c_str(), &st), 0);
  EXPECT_GT(st.st_size, 20000);
}

// Headless Chromium keeps its window at least 500 px wide, so a phone is a
// 390 px frame; the report inside it tells the frame how wide it laid out.
void ExpectFitsPhoneWidth(const std::string& html, const std::string& png_name) {
  const std::string dir = html.substr(0, html.rfind('/'));
  std::string page = ReadFile(html);
  const std::string probe =
      "<script>document.addEventListener('DOMContentLoaded', function () {"
      " parent.postMessage('scroll=' + document.documentElement.scrollWidth +"
      " ' inner=' + innerWidth, '*'); });</script>";
  page.insert(page.find("<head>") + 6, probe);
  WriteFileOrThrow(dir + "/probed.html", page);
  auto frame = [&](const std::string& src) {
    return "<!DOCTYPE html><html><head><meta name=viewport content='width=device-width'>"
           "<script>addEventListener('message', function (e) {"
           " document.documentElement.setAttribute('data-probe', e.data); });</script>"
           "</head><body style='margin:0'><iframe src='" +
           src + "' style='border:0;width:390px;height:844px'></iframe></body></html>";
  };
  WriteFileOrThrow(dir + "/phone.html", frame("report.html"));
  WriteFileOrThrow(dir + "/phone-probed.html", frame("probed.html"));

  BrowserResult d = LoadPage("file://" + dir + "/phone-probed.html");
  ASSERT_TRUE(d.ran) << d.log;
  EXPECT_TRUE(d.console.empty()) << Joined(d.console);
  // Nothing wider than the phone: wide tables scroll inside their box.
  EXPECT_NE(HtmlTag(d.dom).find("data-probe=\"scroll=390 inner=390\""), std::string::npos)
      << HtmlTag(d.dom);

  const std::string png = ArtifactDir() + "/" + png_name;
  unlink(png.c_str());
  BrowserResult b = LoadPage("file://" + dir + "/phone.html", 390, 844, png);
  ASSERT_TRUE(b.ran) << b.log;
  EXPECT_TRUE(b.console.empty()) << Joined(b.console);
  EXPECT_EQ(testing::PngSize(png), std::make_pair(390, 844)) << b.log;
}

TEST(HtmlReport, FitsPhoneWidth) {
  REQUIRE_CHROMIUM();
  ExpectFitsPhoneWidth(ProfileAndReport({"steps", "12"}, "light").html, "report-phone.png");
}

// The subtitle starts with the command line, which can be one long word.
TEST(HtmlReport, LongCommandLineFitsPhoneWidth) {
  REQUIRE_CHROMIUM();
  const std::string command =
      "/opt/conda/envs/training-environment-2024/bin/python3.11 "
      "/home/researcher/projects/large-scale-image-classification/experiments/train_distributed.py "
      "--data-dir=/mnt/shared/datasets/imagenet-1k/preprocessed/train_shards_uncompressed "
      "--config=configs/resnet152_mixed_precision_with_heavy_augmentation_pipeline.yaml";
  ExpectFitsPhoneWidth(ProfileAndReport({"steps", "12"}, "light", 1000, command).html,
                       "report-phone-long-command.png");
}

TEST(HtmlReport, SearchAndStageFilterFromFragment) {
  REQUIRE_CHROMIUM();
  const std::string html = ProfileAndReport({"mix", "300"}, "light").html;
  BrowserResult all = LoadPage("file://" + html);
  ASSERT_TRUE(all.ran) << all.log;
  EXPECT_TRUE(all.console.empty()) << Joined(all.console);
  std::vector<std::string> stages = FlameNodes(all.dom, "stage");
  for (const char* s : {"a", "b", "c"}) EXPECT_TRUE(Contains(stages, s)) << s;
  EXPECT_TRUE(FlameNodes(all.dom, "function", " match").empty());

  BrowserResult f = LoadPage("file://" + html + "#search=Burn&stage=c");
  ASSERT_TRUE(f.ran) << f.log;
  EXPECT_TRUE(f.console.empty()) << Joined(f.console);
  EXPECT_NE(HtmlTag(f.dom).find("data-dlprof-ready=\"1\""), std::string::npos);
  // Only stage c's samples remain, and the search highlights the burners.
  std::vector<std::string> kept = FlameNodes(f.dom, "stage");
  EXPECT_TRUE(Contains(kept, "c"));
  EXPECT_FALSE(Contains(kept, "a"));
  EXPECT_FALSE(Contains(kept, "b"));
  EXPECT_FALSE(Contains(FlameNodes(f.dom, "function"), "BurnInStageA"));
  std::vector<std::string> matches = FlameNodes(f.dom, "function", " match");
  ASSERT_FALSE(matches.empty()) << f.dom.substr(0, 3000);
  for (const std::string& name : matches) EXPECT_NE(name.find("Burn"), std::string::npos) << name;
  EXPECT_TRUE(Contains(matches, "Burn"));
  EXPECT_FALSE(FlameNodes(f.dom, "function", " dim").empty());  // the rest fades
  // The controls show the state the fragment asked for.
  EXPECT_TRUE(
      std::regex_search(f.dom, std::regex(R"re(id="fg-status"[^>]*>[^<]*'Burn' matches)re")))
      << f.dom.substr(0, 3000);
}

// A profile made here, with names no program should have.
Profile HostileProfile(const std::string& stage_name, const std::string& function_name) {
  Profile p;
  Process proc;
  proc.pid = 4242;
  proc.role = "main";
  proc.command = "train \"<b>bold</b>\"";
  proc.start_ns = 1000000000;
  proc.end_ns = 2000000000;
  proc.hz = 100;
  proc.samples = 50;
  proc.complete = true;
  proc.end_reason = "exit";
  p.processes.push_back(proc);
  Location loc;
  loc.module = "/bin/<evil>";
  loc.module_offset = 0x10;
  loc.frames.push_back({function_name, "<file>.cc", 3});
  uint32_t stack = p.InternStack({p.InternLocation(loc)});
  uint32_t path = p.InternStagePath({p.InternStage(stage_name)});
  for (int i = 0; i < 50; ++i) {
    Sample s;
    s.stack = stack;
    s.stage_path = path;
    s.tid = 4242;
    s.time_ns = proc.start_ns + (i + 1) * 10000000LL;
    s.cpu_ns = 10000000;
    p.samples.push_back(s);
  }
  BufferSeries b;
  b.name = "<img src=x onerror=alert(3)>";
  b.capacity = 4;
  b.snapshots = {{proc.start_ns, 0}, {proc.start_ns + 500000000, 4}};
  p.buffers.push_back(b);
  p.warnings.push_back("</script><script>alert(4)</script>");
  return p;
}

TEST(HtmlReport, HostileNamesShowAsText) {
  REQUIRE_CHROMIUM();
  const std::string stage = "</script><script>alert(1)</script> \"double\" 'single'\nnext line";
  const std::string function = "<img src=x onerror=alert(2)>\xff\xfe";  // and invalid UTF-8
  Profile profile = HostileProfile(stage, function);
  std::string page = MakeHtmlWriter()->Render(profile, Analyze(profile));
  ASSERT_EQ(page.find("<script>alert"), std::string::npos);
  ASSERT_EQ(page.find("<img"), std::string::npos);

  // A probe that runs before the report: records any dialog, then checks
  // what the report drew against the names it was given.
  nlohmann::json expect = {{"stage", stage},
                           {"function", "<img src=x onerror=alert(2)>\xef\xbf\xbd\xef\xbf\xbd"}};
  std::string expect_js = expect.dump();
  for (size_t at = 0; (at = expect_js.find('<', at)) != std::string::npos;) {
    expect_js.replace(at, 1, "\\u003c");
  }
  const std::string probe = R"(<script>
(function () {
  var r = document.documentElement, want = )" +
                            expect_js + R"(;
  ["alert", "confirm", "prompt"].forEach(function (f) {
    window[f] = function () { r.setAttribute("data-probe-dialog", f); };
  });
  document.addEventListener("DOMContentLoaded", function () {
    var cells = Array.prototype.map.call(document.querySelectorAll("#stages-table td"),
                                         function (c) { return c.textContent; });
    var frames = Array.prototype.map.call(document.querySelectorAll(".fg-node"),
                                          function (g) { return g.getAttribute("data-name"); });
    var legend = Array.prototype.map.call(document.querySelectorAll("#tl-legend li"),
                                          function (li) { return li.textContent; });
    r.setAttribute("data-probe", [
      "scripts=" + document.scripts.length,
      "imgs=" + document.images.length,
      "stage-cell=" + (cells.indexOf(want.stage) >= 0),
      "stage-frame=" + (frames.indexOf(want.stage) >= 0),
      "function-frame=" + (frames.indexOf(want.function) >= 0),
      "timeline-legend=" + (legend.indexOf(want.stage) >= 0)].join(" "));
  });
})();
</script>)";
  const std::string dir = MakeTempDir("dlprof-html-hostile");
  size_t head = page.find("<head>");
  ASSERT_NE(head, std::string::npos);
  page.insert(head + 6, probe);
  WriteFileOrThrow(dir + "/report.html", page);

  BrowserResult b = LoadPage("file://" + dir + "/report.html");
  ASSERT_TRUE(b.ran) << b.log;
  EXPECT_TRUE(b.console.empty()) << Joined(b.console);
  EXPECT_NE(HtmlTag(b.dom).find("data-dlprof-ready=\"1\""), std::string::npos)
      << b.dom.substr(0, 3000);
  EXPECT_EQ(HtmlTag(b.dom).find("data-probe-dialog"), std::string::npos);
  // Three scripts: the probe, the data, the report's own; no image element.
  EXPECT_NE(HtmlTag(b.dom).find("data-probe=\"scripts=3 imgs=0 stage-cell=true stage-frame=true "
                                "function-frame=true timeline-legend=true\""),
            std::string::npos)
      << b.dom.substr(0, 3000);
  // Serialized text nodes escape '<': the names are in the page as text.
  EXPECT_NE(
      b.dom.find(
          "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt; \"double\" 'single'\nnext line"),
      std::string::npos);
  EXPECT_NE(b.dom.find("&lt;/script&gt;&lt;script&gt;alert(4)&lt;/script&gt;"), std::string::npos);
}

// Clicking a frame zooms to it: its siblings leave, it spans the width, its
// callers stay above it; "Reset zoom" brings the whole graph back.
TEST(HtmlReport, ClickZoomsIntoAFrame) {
  REQUIRE_CHROMIUM();
  Profile p;
  Process proc;
  proc.pid = 11;
  proc.start_ns = 1;
  proc.end_ns = 1000000000;
  p.processes.push_back(proc);
  auto loc = [&](const std::string& name, uint64_t offset) {
    Location l;
    l.module = "/bin/zoom";
    l.module_offset = offset;
    l.frames.push_back({name, "", 0});
    return p.InternLocation(l);
  };
  const uint32_t main_fn = loc("main", 1), left = loc("left", 2), right = loc("right", 3);
  const uint32_t left_leaf = loc("left_leaf", 4), right_leaf = loc("right_leaf", 5);
  const uint32_t path = p.InternStagePath({p.InternStage("load")});
  for (int i = 0; i < 40; ++i) {
    Sample s;
    s.stage_path = path;
    s.stack = i < 30 ? p.InternStack({left_leaf, left, main_fn})
                     : p.InternStack({right_leaf, right, main_fn});
    s.time_ns = 1 + i;
    p.samples.push_back(s);
  }
  std::string page = MakeHtmlWriter()->Render(p, Analyze(p));
  const std::string probe = R"(<script>
document.addEventListener("DOMContentLoaded", function () {
  function names() {
    return Array.prototype.map.call(document.querySelectorAll(".fg-node"),
                                    function (g) { return g.getAttribute("data-name"); }).join(",");
  }
  function width(name) {
    var g = document.querySelector('.fg-node[data-name="' + name + '"] rect');
    return g ? Math.round(Number(g.getAttribute("width"))) : -1;
  }
  var out = ["before=" + names()];
  document.querySelector('.fg-node[data-name="left"] rect')
      .dispatchEvent(new MouseEvent("click", { bubbles: true }));
  out.push("zoomed=" + names(), "left=" + width("left"), "all=" + width("all"));
  document.getElementById("fg-reset").click();
  out.push("reset=" + names());
  document.documentElement.setAttribute("data-probe", out.join(" "));
});
</script>)";
  page.insert(page.find("<head>") + 6, probe);
  const std::string dir = MakeTempDir("dlprof-html-zoom");
  WriteFileOrThrow(dir + "/report.html", page);
  BrowserResult b = LoadPage("file://" + dir + "/report.html");
  ASSERT_TRUE(b.ran) << b.log;
  EXPECT_TRUE(b.console.empty()) << Joined(b.console);
  const std::string tag = HtmlTag(b.dom);
  EXPECT_NE(tag.find("before=all,load,main,left,left_leaf,right,right_leaf "), std::string::npos)
      << tag;
  // The zoomed frame is as wide as the root above it.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(tag, m, std::regex(R"(zoomed=(\S+) left=(\d+) all=(\d+))"))) << tag;
  EXPECT_EQ(m[1], "all,load,main,left,left_leaf");
  EXPECT_EQ(m[2], m[3]);
  EXPECT_GT(std::stoi(m[2]), 500);
  EXPECT_NE(tag.find("reset=all,load,main,left,left_leaf,right,right_leaf\""), std::string::npos)
      << tag;
}

// Clicking a stage that was blocked most of its time shows its blocked
// stacks (the wall view), not the CPU view's "No samples match".
TEST(HtmlReport, ClickingABlockedStageShowsWhereItBlocked) {
  REQUIRE_CHROMIUM();
  Profile p;
  Process proc;
  proc.pid = 11;
  proc.start_ns = 1;
  proc.end_ns = 1000000000;
  p.processes.push_back(proc);
  auto loc = [&](const std::string& name, uint64_t offset, bool pseudo = false) {
    Location l;
    l.module = pseudo ? "" : "/bin/blocked";
    l.module_offset = offset;
    l.pseudo = pseudo;
    l.frames.push_back({name, "", 0});
    return p.InternLocation(l);
  };
  const uint32_t main_fn = loc("main", 1), burn = loc("Burn", 2), wait = loc("WaitForDisk", 3);
  const uint32_t blocked = loc("[off-cpu: read]", 0, true);
  const uint32_t compute = p.InternStagePath({p.InternStage("compute")});
  const uint32_t fetch = p.InternStagePath({p.InternStage("fetch")});
  for (int i = 0; i < 20; ++i) {
    Sample s;
    s.stage_path = compute;
    s.stack = p.InternStack({burn, main_fn});
    s.time_ns = 1 + i;
    s.cpu_ns = 10000000;
    p.samples.push_back(s);
  }
  Sample w;
  w.kind = SampleKind::kWall;
  w.count = 0;
  w.stage_path = compute;
  w.stack = p.InternStack({loc("[running]", 0, true)});
  w.wall_ns = w.cpu_ns = 200000000;
  w.time_ns = 300000000;
  p.samples.push_back(w);
  w.stage_path = fetch;
  w.on_cpu = false;
  w.stack = p.InternStack({blocked, wait, main_fn});
  w.wall_ns = 300000000;
  w.cpu_ns = 5000000;
  w.time_ns = 600000000;
  p.samples.push_back(w);
  std::string page = MakeHtmlWriter()->Render(p, Analyze(p));
  const std::string probe = R"(<script>
document.addEventListener("DOMContentLoaded", function () {
  function names() {
    return Array.prototype.map.call(document.querySelectorAll(".fg-node"),
                                    function (g) { return g.getAttribute("data-name"); }).join(",");
  }
  var out = ["before=" + document.getElementById("fg-view").value];
  Array.prototype.forEach.call(document.querySelectorAll(".stage-link"), function (b) {
    if (b.textContent === "fetch") b.click();
  });
  out.push("after=" + document.getElementById("fg-view").value, "names=" + names());
  document.documentElement.setAttribute("data-probe", out.join(" "));
});
</script>)";
  page.insert(page.find("<head>") + 6, probe);
  const std::string dir = MakeTempDir("dlprof-html-blocked");
  WriteFileOrThrow(dir + "/report.html", page);
  BrowserResult b = LoadPage("file://" + dir + "/report.html");
  ASSERT_TRUE(b.ran) << b.log;
  EXPECT_TRUE(b.console.empty()) << Joined(b.console);
  const std::string tag = HtmlTag(b.dom);
  EXPECT_NE(tag.find("before=cpu after=wall "), std::string::npos) << tag;
  EXPECT_NE(tag.find("names=all,fetch,main,WaitForDisk,[off-cpu: read]\""), std::string::npos)
      << tag;
}

// The page's data: the JSON inside <script id="dlprof-data">.
nlohmann::json PageData(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"dlprof-data\">";
  size_t at = page.find(open);
  if (at == std::string::npos) return nullptr;
  at += open.size();
  return nlohmann::json::parse(page.substr(at, page.find("</script>", at) - at));
}

// 40,000 distinct call paths: the flame graph keeps the 20,000 heaviest
// frames, folds the rest into their callers (no sample lost), and says so.
TEST(HtmlReport, BigFlameGraphIsCappedAndSaysSo) {
  Profile p;
  Process proc;
  proc.pid = 7;
  proc.start_ns = 1;
  proc.end_ns = 1000000000;
  p.processes.push_back(proc);
  auto fn = [&](const std::string& name, uint64_t offset) {
    Location loc;
    loc.module = "/bin/big";
    loc.module_offset = offset;
    loc.frames.push_back({name, "", 0});
    return p.InternLocation(loc);
  };
  int64_t total = 0;
  for (int caller = 0; caller < 200; ++caller) {
    uint32_t c = fn("caller" + std::to_string(caller), caller);
    for (int leaf = 0; leaf < 200; ++leaf) {
      uint32_t l = fn("leaf" + std::to_string(caller) + "_" + std::to_string(leaf),
                      1000000 + caller * 1000 + leaf);
      Sample s;
      s.stack = p.InternStack({l, c});  // leaf first
      s.count = 1 + (leaf % 7);
      s.time_ns = 2 + leaf;
      total += s.count;
      p.samples.push_back(s);
    }
  }
  const std::string page = MakeHtmlWriter()->Render(p, Analyze(p));
  EXPECT_LT(page.size(), 4u << 20) << "report.html is too large for 40k call paths";
  nlohmann::json data = PageData(page);
  ASSERT_TRUE(data.is_object());
  const nlohmann::json& cpu = data["flame"][0];
  EXPECT_EQ(cpu["id"], "cpu");
  EXPECT_EQ(cpu["parent"].size(), 20000u);
  EXPECT_EQ(cpu["truncated"], true);
  EXPECT_EQ(cpu["nodes_before_cut"], 1u + 200 + 200 * 200);
  int64_t kept = 0;
  for (const auto& self : cpu["self"]) {
    for (size_t i = 1; i < self.size(); i += 2) kept += self[i].get<int64_t>();
  }
  EXPECT_EQ(kept, total);
  EXPECT_EQ(cpu["total"], total);
  // Parents come before their children.
  for (size_t i = 1; i < cpu["parent"].size(); ++i) {
    ASSERT_LT(cpu["parent"][i].get<int64_t>(), static_cast<int64_t>(i));
  }

  REQUIRE_CHROMIUM();
  const std::string dir = MakeTempDir("dlprof-html-big");
  WriteFileOrThrow(dir + "/report.html", page);
  BrowserResult b = LoadPage("file://" + dir + "/report.html");
  ASSERT_TRUE(b.ran) << b.log;
  EXPECT_TRUE(b.console.empty()) << Joined(b.console);
  EXPECT_NE(HtmlTag(b.dom).find("data-dlprof-ready=\"1\""), std::string::npos);
  EXPECT_NE(b.dom.find("keeps the heaviest 20,000 of 40,201 frames"), std::string::npos);
}

// A launcher, its trainer and 2 workers forked afresh for each of 3 epochs:
// the header counts the workers at a time, the processes table says what
// decided each role.
TEST(HtmlReport, HeaderCountsWorkersAtATimeAndTheTableSaysWhyEachRole) {
  REQUIRE_CHROMIUM();
  constexpr int64_t kMs = 1000000;
  Profile p;
  auto add = [&](int pid, int ppid, const char* role, int worker, const char* command,
                 int64_t start_ms, int64_t end_ms) {
    Process proc;
    proc.pid = pid;
    proc.ppid = ppid;
    proc.role = role;
    proc.worker = worker;
    proc.command = command;
    proc.start_ns = start_ms * kMs;
    proc.end_ns = end_ms * kMs;
    proc.complete = true;
    proc.end_reason = "exit";
    proc.fields = {{"warmup_steps", "0"}};
    p.processes.push_back(proc);
    return static_cast<uint32_t>(p.processes.size() - 1);
  };
  auto wall = [&](uint32_t proc, const std::string& stage, int64_t at_ms) {
    Sample s;
    s.process = proc;
    s.tid = static_cast<uint32_t>(p.processes[proc].pid);
    s.kind = SampleKind::kWall;
    s.stage_path = stage.empty() ? 0 : p.InternStagePath({p.InternStage(stage)});
    s.time_ns = at_ms * kMs;
    s.wall_ns = s.cpu_ns = 10 * kMs;
    p.samples.push_back(s);
  };
  const uint32_t launcher = add(100, 1, "main", -1, "launch ./train", 0, 3300);
  const uint32_t trainer = add(101, 100, "worker", -1, "./train", 10, 3200);
  wall(launcher, "", 50);
  for (int i = 0; i < 30; ++i) {
    const int64_t t = (100 + 100 * i) * kMs;
    p.intervals.push_back({trainer, 101, IntervalKind::kStep, 0, t, t + 100 * kMs});
    p.intervals.push_back({trainer, 101, IntervalKind::kWait, 0, t, t + 40 * kMs});
  }
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (int k = 0; k < 2; ++k) {
      const int64_t start = 100 + 1000 * epoch;
      const uint32_t w = add(200 + 2 * epoch + k, 101, "worker", k, "./train", start, start + 1000);
      for (int64_t t = start; t < start + 1000; t += 10) wall(w, "decode", t + 5);
    }
  }
  const Analysis a = Analyze(p);
  const std::string dir = MakeTempDir("dlprof-html-roles");
  MakeHtmlWriter()->Write(p, a, dir);
  BrowserResult b = LoadPage("file://" + dir + "/report.html");
  ASSERT_TRUE(b.ran) << b.log;
  EXPECT_TRUE(b.console.empty()) << Joined(b.console);
  const std::regex subtitle(
      R"re(id="subtitle"[^>]*>[^<]*8 processes \(2 workers, 6 worker processes over the run\))re");
  EXPECT_TRUE(std::regex_search(b.dom, subtitle)) << b.dom.substr(0, 3000);
  EXPECT_NE(b.dom.find("<td>started the training process (a launcher)</td>"), std::string::npos);
  EXPECT_NE(b.dom.find("<td>records the training loop's steps</td>"), std::string::npos);
  EXPECT_NE(b.dom.find("Bottleneck: stage <strong>decode</strong>"), std::string::npos);
}

}  // namespace
}  // namespace dlprof
