// The dlprof command: run a program under the profiler, report a run, convert
// profiles, list backends. Exit status: 0 ok, 1 failure, 2 usage error; `run`
// leaves with the profiled program's own status, or dies of its signal
// (tools/run_wrapper.h).
#include <dirent.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include <dlprof/version.h>

#include "backends/timer_source.h"
#include "backends/unwinder.h"
#include "core/run_id.h"
#include "readers/input_loader.h"
#include "readers/symbolizer.h"
#include "reports/analysis.h"
#include "reports/pprof_writer.h"
#include "reports/report_writer.h"
#include "reports/run_diff.h"
#include "reports/utf8.h"
#include "tools/run_wrapper.h"

namespace po = boost::program_options;

namespace dlprof {
namespace {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const char* kTopUsage =
    "usage: dlprof <command> [options]\n"
    "\n"
    "commands:\n"
    "  run [--hz N] [--mode light|detailed] [-o DIR] [-r REPORT_DIR] -- CMD...\n"
    "                 profile CMD and every process it starts, then write the report\n"
    "  report RUN_DIR... -o OUT_DIR\n"
    "                 merge the processes of one or more runs into report.html,\n"
    "                 profile.pb.gz (CPU), profile.wall.pb.gz (running and blocked),\n"
    "                 summary.txt, summary.json, trace.json(.gz), stacks.folded,\n"
    "                 stacks.offcpu.folded (blocked time, us)\n"
    "  diff BEFORE AFTER [-o OUT_DIR]\n"
    "                 compare two runs: verdict, data wait, step time, stages, buffers,\n"
    "                 workers; a table on stdout, diff.html, diff.json, diff.txt\n"
    "  convert IN -o OUT.pb.gz [--wall]\n"
    "                 a .dlprof, gperftools CPU profile or pprof file to symbolized pprof\n"
    "                 (its CPU samples, or with --wall its wall-clock ticks)\n"
    "  backends       list the unwinders and timer sources and whether they work here\n"
    "\n"
    "Each command takes --help. dlprof --version prints the version.\n"
    "\n"
    "environment (read by libdlprof.so in the profiled program; an invalid value is\n"
    "one warning on stderr, then the default):\n"
    "  DLPROF_SAMPLE=1          profile this process and its children (0 or unset: inert)\n"
    "  DLPROF_OUT=DIR           where runs are written (default ./dlprof-out)\n"
    "  DLPROF_MODE=MODE         light (default) or detailed (stage spans, 1000 Hz)\n"
    "  DLPROF_HZ=N              CPU samples per second, 1-10000 (default 100)\n"
    "  DLPROF_BACKEND=NAME      unwinder: auto, cfi, libunwind, gperftools or fp\n"
    "  DLPROF_TIMER=NAME        timer: auto, perf, posix or itimer\n"
    "  DLPROF_WARMUP_STEPS=N    steps left out of the verdict at the start (default 2)\n"
    "  DLPROF_BASELINE_STEPS=N  steps run unprofiled first, to measure the cost (default 0)\n"
    "  DLPROF_SNAPSHOT_MS=N     collector tick: stage and buffer snapshots, 1-1000 (default 10)\n"
    "  DLPROF_MAX_FRAMES=N      deepest native stack recorded, 1-512 (default 128)\n"
    "  DLPROF_AUTO_ANNOTATE=0   do not mark PyTorch's DataLoader by itself (default 1)\n"
    "  DLPROF_COLLECTOR=NAME    process (default): the collector is a helper process the\n"
    "                           program cannot see; thread: a thread in the program\n"
    "  DLPROF_CHECK_REUSED_WALKS=1  diagnostic: walk a blocked thread's stack anew even when\n"
    "                           its last walk is known to hold, and count any difference\n"
    "  DLPROF_PY_WAKE=0         diagnostic: no early collector wake for Python code not met yet\n"
    "  DLPROF_PY_EXEC_HOOK=0    diagnostic: no audit hook noting the names of exec()'d code\n"
    "  DLPROF_RUN_ID=ID         one run folder for processes started apart (set by dlprof run;\n"
    "                           give each host or rank the same ID to merge them)\n"
    "read by the dlprof command:\n"
    "  DLPROF_LIB=PATH          the libdlprof.so that `run` preloads\n"
    "set by dlprof itself for the processes of a run (not to be set by hand):\n"
    "  DLPROF_RUN_MAIN_PID=PID  the run's first process\n"
    "  _DLPROF_PYTHONPATH_BEFORE=...  PYTHONPATH as it was, restored in Python at start-up\n";

// One line of dlprof's own on a terminal. Lines name files, stages and
// fields of a profile, which are anyone's bytes: escaped (reports/utf8.h).
void Say(FILE* to, const std::string& line) {
  fputs((TerminalSafe(line) + "\n").c_str(), to);
}

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char* text = nullptr;
  const int n = vasprintf(&text, fmt, ap);
  va_end(ap);
  std::string s = n >= 0 ? std::string(text, static_cast<size_t>(n)) : std::string(fmt);
  free(text);
  return s;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Progress on stderr, only once the work has taken more than a second.
class Progress {
 public:
  void Step(const std::string& what) {
    if (Seconds(start_) > 1.0) Say(stderr, "dlprof: " + what + " (" + Fmt() + ")");
  }

 private:
  std::string Fmt() const {
    char buf[32];
    snprintf(buf, sizeof(buf), "%.1f s", Seconds(start_));
    return buf;
  }
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

po::variables_map Parse(const std::vector<std::string>& args, const po::options_description& opts,
                        const po::positional_options_description& pos) {
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  return vm;
}

// `opts` with the hidden positional "input" added: parsed, not shown in --help.
po::options_description WithInputs(const po::options_description& opts, const char* what) {
  po::options_description all;
  all.add(opts).add_options()("input", po::value<std::vector<std::string>>(), what);
  return all;
}

// Creates `dir` and its missing parents; the last level gets `leaf_mode`.
void MakeDir(const std::string& dir, mode_t leaf_mode = 0755) {
  std::string partial;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      partial = dir.substr(0, i);
      mode_t mode = i == dir.size() ? leaf_mode : 0755;
      if (!partial.empty() && mkdir(partial.c_str(), mode) != 0 && errno != EEXIST) {
        throw std::runtime_error(partial + ": cannot create folder: " + strerror(errno));
      }
    }
  }
}

// "4G", "512M", "64k", "1048576": bytes, with binary K, M, G, T suffixes (an
// optional "iB" or "B" after them).
uint64_t ParseByteSize(const std::string& option, const std::string& text) {
  size_t end = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = text.substr(end);
  for (const char* tail : {"iB", "B"}) {
    if (unit.size() > 1 && unit.size() >= strlen(tail) &&
        unit.compare(unit.size() - strlen(tail), std::string::npos, tail) == 0) {
      unit.resize(unit.size() - strlen(tail));
      break;
    }
  }
  int shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  if (unit == "K" || unit == "k") shift = 10;
  if (unit == "M" || unit == "m") shift = 20;
  if (unit == "G" || unit == "g") shift = 30;
  if (unit == "T" || unit == "t") shift = 40;
  if (end == 0 || text[0] == '-' || shift < 0 || n == 0 || (n << shift) >> shift != n) {
    throw UsageError(option + " '" + text + "': expected a size such as 4G, 512M or 1048576");
  }
  return static_cast<uint64_t>(n) << shift;
}

// Loads, symbolizes, analyses and writes every output; returns the analysis.
Analysis WriteReport(const std::vector<std::string>& inputs, const std::string& out_dir,
                     const FileLimits& limits = FileLimits()) {
  Progress progress;
  Profile profile;
  LoadInputs(inputs, &profile, limits);
  progress.Step("read " + std::to_string(profile.processes.size()) + " processes, " +
                std::to_string(profile.samples.size()) + " samples");
  Symbolizer symbolizer;
  symbolizer.SymbolizeProfile(&profile);
  progress.Step("symbolized " + std::to_string(profile.locations.size()) + " locations");
  Analysis analysis = Analyze(profile);
  MakeDir(out_dir);
  for (const auto& writer : AllReportWriters()) {
    writer->Write(profile, analysis, out_dir);
    progress.Step("wrote " + writer->file_name());
    for (const std::string& w : writer->warnings()) Say(stderr, "dlprof: warning: " + w);
  }
  for (const std::string& w : analysis.warnings) Say(stderr, "dlprof: warning: " + w);
  return analysis;
}

// `report` prints the verdict on stdout; `run` on stderr, where stdout is the
// program's alone (`dlprof run -- prog | jq`).
void PrintVerdict(const Analysis& a, const std::string& out_dir, FILE* to) {
  const Verdict& v = a.verdict;
  if (v.input_bound) {
    std::string line = Format("dlprof: input-bound (%s): training waits for data %.0f%% of step time",
                              v.severity.c_str(), 100 * v.data_wait_fraction);
    if (!v.bottleneck_stage.empty()) {
      line += "; bottleneck: '" + v.bottleneck_stage + "' (" + v.bottleneck_kind + ", " +
              v.bottleneck_role + ")";
    } else if (v.loop_receive_fraction >= kLoopReceiveShare) {
      line += "; bottleneck: the training loop's own receive work (cpu, main)";
    } else if (v.bottleneck_role == "worker") {
      line += "; bottleneck: the workers' unmarked work (" + v.bottleneck_kind + ", worker)";
    }
    Say(to, line);
  } else if (v.basis != "none") {
    Say(to, Format("dlprof: not input-bound: training waits for data %.0f%% of step time",
                   100 * v.data_wait_fraction));
  }
  Say(to, "dlprof: report written to " + out_dir + "/ (report.html, summary.txt, profile.pb.gz, profile.wall.pb.gz, ...)");
}

int Report(const std::vector<std::string>& args) {
  po::options_description opts("dlprof report RUN_DIR... -o OUT_DIR");
  opts.add_options()("help,h", "show this help")(
      "output,o", po::value<std::string>()->default_value("dlprof-report"), "output folder")(
      "max-file-size", po::value<std::string>()->default_value("4G"),
      "larger input files are skipped, with a warning (K, M, G suffixes)");
  po::options_description all = WithInputs(opts, "run folders or profile files");
  po::positional_options_description pos;
  pos.add("input", -1);
  po::variables_map vm = Parse(args, all, pos);
  if (vm.count("help")) {
    std::cout << opts << "\nRUN_DIR may be DLPROF_OUT itself, meaning its newest run. Several "
                         "runs (one per host or rank) merge into one report. Only regular files "
                         "are read (a FIFO or a device is skipped with a warning), and in a run "
                         "folder no symbolic link is followed.\n";
    return 0;
  }
  if (!vm.count("input")) throw UsageError("report: give at least one run folder");
  std::string out = vm["output"].as<std::string>();
  FileLimits limits;
  limits.max_bytes = ParseByteSize("--max-file-size", vm["max-file-size"].as<std::string>());
  PrintVerdict(WriteReport(vm["input"].as<std::vector<std::string>>(), out, limits), out, stdout);
  return 0;
}

int Diff(const std::vector<std::string>& args) {
  po::options_description opts("dlprof diff BEFORE AFTER [-o OUT_DIR]");
  opts.add_options()("help,h", "show this help")(
      "output,o", po::value<std::string>()->default_value("dlprof-diff"),
      "output folder (diff.html, diff.json, diff.txt)")(
      "max-file-size", po::value<std::string>()->default_value("4G"),
      "larger input files are skipped, with a warning (K, M, G suffixes)");
  po::options_description all;  // the positional arguments stay out of --help
  all.add(opts).add_options()("input", po::value<std::vector<std::string>>());
  po::positional_options_description pos;
  pos.add("input", -1);
  po::variables_map vm = Parse(args, all, pos);
  if (vm.count("help")) {
    std::cout << opts << "\nBEFORE and AFTER are each a run folder (DLPROF_OUT itself meaning its "
                         "newest run) or a profile file. Each is loaded and analysed on its own, "
                         "as `dlprof report` does, then the two are compared side by side with "
                         "the change, absolute and relative: the verdict, the data-wait share "
                         "and step time; each stage, matched by name (self time, on-CPU, "
                         "off-CPU, waiting for a core); each buffer, matched by name; the "
                         "workers. The table goes to stdout and diff.txt.\n";
    return 0;
  }
  const std::vector<std::string> in =
      vm.count("input") ? vm["input"].as<std::vector<std::string>>() : std::vector<std::string>();
  if (in.size() != 2) throw UsageError("diff: give two runs, BEFORE and AFTER");
  FileLimits limits;
  limits.max_bytes = ParseByteSize("--max-file-size", vm["max-file-size"].as<std::string>());
  const RunDiff d = DiffInputs(in[0], in[1], limits);
  const std::string out = vm["output"].as<std::string>();
  MakeDir(out);
  WriteDiff(d, out);
  fputs(DiffText(d).c_str(), stdout);  // names in it are cleaned for a terminal
  for (const std::string& w : d.warnings) Say(stderr, "dlprof: warning: " + w);
  Say(stderr, "dlprof: diff written to " + out + "/ (diff.html, diff.json, diff.txt)");
  return 0;
}

int Convert(const std::vector<std::string>& args) {
  po::options_description opts("dlprof convert IN -o OUT.pb.gz [--wall]");
  opts.add_options()("help,h", "show this help")("output,o", po::value<std::string>(),
                                                  "the pprof file to write; - for stdout")(
      "wall", "write the wall-clock ticks of every thread, running (label cpu=on) or blocked "
              "(cpu=off), instead of the CPU samples");
  po::options_description all = WithInputs(opts, "input profile");
  po::positional_options_description pos;
  pos.add("input", -1);
  po::variables_map vm = Parse(args, all, pos);
  if (vm.count("help")) {
    std::cout << opts;
    return 0;
  }
  if (!vm.count("input") || vm["input"].as<std::vector<std::string>>().size() != 1) {
    throw UsageError("convert: give exactly one input file");
  }
  if (!vm.count("output")) throw UsageError("convert: -o OUT.pb.gz is required");
  Profile profile;
  LoadInputs(vm["input"].as<std::vector<std::string>>(), &profile);
  Symbolizer symbolizer;
  symbolizer.SymbolizeProfile(&profile);
  const std::string out = vm["output"].as<std::string>();
  const PprofView view = vm.count("wall") ? PprofView::kWall : PprofView::kCpu;
  const int64_t count = PprofSampleCount(profile, view);
  const std::string written =
      std::to_string(count) + (view == PprofView::kWall ? " wall-clock ticks" : " samples");
  if (count == 0) {
    profile.warnings.push_back(vm["input"].as<std::vector<std::string>>()[0] + " has no " +
                               (view == PprofView::kWall
                                    ? "wall-clock ticks (only dlprof runs record them)"
                                    : "CPU samples") +
                               "; the profile written is empty");
  }
  for (const std::string& w : profile.warnings) Say(stderr, "dlprof: warning: " + w);
  if (out == "-") {
    // The profile is the whole of stdout (`dlprof convert IN -o - | pprof`).
    if (isatty(STDOUT_FILENO)) throw UsageError("convert: -o - will not write gzip to a terminal");
    WritePprofToFd(profile, STDOUT_FILENO, view);
    Say(stderr, "dlprof: wrote " + written + " to stdout");
    return 0;
  }
  WritePprof(profile, out, view);
  Say(stdout, "dlprof: wrote " + out + " (" + written + ")");
  return 0;
}

int Backends(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << "dlprof backends: the unwinders (DLPROF_BACKEND) and timer sources "
                 "(DLPROF_TIMER) built in, and whether each works on this machine.\n";
    return 0;
  }
  if (!args.empty()) throw UsageError("backends: takes no arguments");
  printf("%-9s %-11s %-10s %s\n", "kind", "name", "available", "note");
  for (const auto* list : {new std::vector<BackendInfo>(ListUnwinders()),
                           new std::vector<BackendInfo>(ListTimerSources())}) {
    for (const BackendInfo& b : *list) {
      printf("%-9s %-11s %-10s %s\n", b.kind.c_str(), b.name.c_str(), b.available ? "yes" : "no",
             b.note.c_str());
    }
    delete list;
  }
  return 0;
}

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, n);
  return path.substr(0, path.rfind('/'));
}

// libdlprof.so next to this command: installed (../lib) or in the build tree.
std::string FindLibrary() {
  if (const char* env = getenv("DLPROF_LIB"); env && *env) return env;
  std::string dir = SelfDir();
  for (const std::string& candidate :
       {dir + "/../lib/libdlprof.so.0", dir + "/../lib/x86_64-linux-gnu/libdlprof.so.0",
        dir + "/../core/libdlprof.so.0", std::string(DLPROF_INSTALLED_LIB)}) {
    if (access(candidate.c_str(), R_OK) == 0) {
      char real[PATH_MAX];
      return realpath(candidate.c_str(), real) ? real : candidate;
    }
  }
  throw std::runtime_error("cannot find libdlprof.so (looked next to " + dir +
                           "); set DLPROF_LIB to its path");
}

// The processes of a run that are still alive, from the pids in its file
// names (ROLE-PID.dlprof).
std::vector<pid_t> LiveRunProcesses(const std::string& run_dir) {
  std::vector<pid_t> live;
  DIR* dir = opendir(run_dir.c_str());
  if (dir == nullptr) return live;
  while (dirent* e = readdir(dir)) {
    const char* dash = strrchr(e->d_name, '-');
    const char* dot = strrchr(e->d_name, '.');
    if (dash == nullptr || dot == nullptr || dot < dash || strcmp(dot, ".dlprof") != 0) continue;
    const long pid = strtol(dash + 1, nullptr, 10);
    if (pid > 1 && pid != getpid() && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)) {
      live.push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(dir);
  return live;
}

// The arguments of process `pid` (its /proc cmdline, at most 64 KiB).
std::vector<std::string> CommandLineOf(const std::string& pid) {
  std::vector<std::string> args;
  FILE* f = fopen(("/proc/" + pid + "/cmdline").c_str(), "re");
  if (f == nullptr) return args;
  std::string text(64 << 10, '\0');
  text.resize(fread(text.data(), 1, text.size(), f));
  fclose(f);
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\0', at), text.size());
    args.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return args;
}

// The collector processes serving `pid` (dlprof-collector ... --pid=PID).
std::vector<pid_t> HelpersOf(pid_t pid) {
  std::vector<pid_t> helpers;
  const std::string want = "--pid=" + std::to_string(pid);
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return helpers;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long n = strtol(e->d_name, &end, 10);
    if (n <= 0 || *end != '\0') continue;
    const std::vector<std::string> args = CommandLineOf(e->d_name);
    if (args.empty()) continue;
    const size_t slash = args[0].rfind('/');
    if (args[0].compare(slash == std::string::npos ? 0 : slash + 1, std::string::npos,
                        "dlprof-collector") != 0) {
      continue;
    }
    if (std::find(args.begin() + 1, args.end(), want) != args.end()) {
      helpers.push_back(static_cast<pid_t>(n));
    }
  }
  closedir(proc);
  return helpers;
}

// Whether helper `h` has ended: reaped here (dlprof its parent), gone, or
// a zombie of another parent (one that reaps late: a container's PID 1
// that is not an init, a subreaper; a zombie still answers kill(h, 0)).
bool HelperEnded(pid_t h) {
  int status = 0;
  if (waitpid(h, &status, WNOHANG) == h) return true;
  FILE* f = fopen(("/proc/" + std::to_string(h) + "/stat").c_str(), "re");
  if (f == nullptr) return true;
  char text[512];
  const size_t n = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  text[n] = '\0';
  const char* paren = strrchr(text, ')');
  return paren == nullptr || paren[1] != ' ' || paren[2] == 'Z' || paren[2] == 'X';
}

// The program has ended and is not reaped yet: its collector process reads
// from the zombie how it ended (the signal that killed it) and writes that
// in its END; reaped first, the file said "died (no end record)". Waits for
// that helper to finish, at most 2 s (reaping it where dlprof is its
// parent: as PID 1, or a subreaper).
void WaitForTheProgramsHelper(pid_t program) {
  const std::vector<pid_t> helpers = HelpersOf(program);
  timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (pid_t h : helpers) {
    for (;;) {
      if (HelperEnded(h)) break;
      timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec - start.tv_sec >= 2) return;
      usleep(2000);
    }
  }
}

int Run(const std::vector<std::string>& args) {
  po::options_description opts("dlprof run [options] -- CMD...");
  opts.add_options()("help,h", "show this help")("hz", po::value<int>(),
                                                  "samples per CPU second (default 100, 1000 in detailed mode)")(
      "mode", po::value<std::string>(), "light (default) or detailed")(
      "output,o", po::value<std::string>()->default_value("dlprof-out"), "DLPROF_OUT folder")(
      "report,r", po::value<std::string>()->default_value("dlprof-report"), "report folder")(
      "no-report", "only record, do not write the report");
  std::vector<std::string> own, cmd;
  auto dash = std::find(args.begin(), args.end(), "--");
  own.assign(args.begin(), dash);
  if (dash != args.end()) cmd.assign(dash + 1, args.end());
  po::positional_options_description none;
  po::variables_map vm = Parse(own, opts, none);
  if (vm.count("help")) {
    std::cout << opts;
    return 0;
  }
  if (cmd.empty()) throw UsageError("run: give the command after --, e.g. dlprof run -- ./train");
  if (vm.count("hz") && (vm["hz"].as<int>() < 1 || vm["hz"].as<int>() > 10000)) {
    throw UsageError("run: --hz must be between 1 and 10000");
  }
  if (vm.count("mode") && vm["mode"].as<std::string>() != "light" &&
      vm["mode"].as<std::string>() != "detailed") {
    throw UsageError("run: --mode must be light or detailed");
  }
  const std::string out = vm["output"].as<std::string>();
  const std::string lib = FindLibrary();
  MakeDir(out, 0700);  // the runtime itself creates only the last level
  const std::string run_id = NewRunId(getpid());

  const ProgramEnd end = RunProgram(cmd, [&] {
    setenv("DLPROF_SAMPLE", "1", 1);
    setenv("DLPROF_OUT", out.c_str(), 1);
    setenv("DLPROF_RUN_ID", run_id.c_str(), 1);
    setenv("DLPROF_RUN_MAIN_PID", std::to_string(getpid()).c_str(), 1);
    if (vm.count("hz")) setenv("DLPROF_HZ", std::to_string(vm["hz"].as<int>()).c_str(), 1);
    if (vm.count("mode")) setenv("DLPROF_MODE", vm["mode"].as<std::string>().c_str(), 1);
    const char* preload = getenv("LD_PRELOAD");
    std::string value = lib + (preload && *preload ? std::string(":") + preload : "");
    setenv("LD_PRELOAD", value.c_str(), 1);
  }, WaitForTheProgramsHelper);
  unsetenv("DEBUGINFOD_URLS");
  if (end.exec_errno != 0) return LeaveLike(end);  // nothing ran: no report
  std::string run_dir = out + "/" + run_id;
  if (vm.count("no-report")) {
    Say(stderr, "dlprof: profiles in " + run_dir + "/");
    return LeaveLike(end);
  }
  // However the program ended, its status is what dlprof leaves with (a
  // container's entry point, a CI step): no profile, or a report that
  // fails, is one line on stderr, never a failed job.
  struct stat st;
  if (stat(run_dir.c_str(), &st) != 0) {
    fprintf(stderr, "dlprof: the program wrote no profile (is it statically linked?)\n");
    return LeaveLike(end);
  }
  // Helpers the program left behind (multiprocessing's resource tracker and
  // forkserver end just after it) finish their profiles in a moment: wait
  // for them a little, never for a daemon. As PID 1 they are ours to reap.
  for (int i = 0; i < 200 && (ReapOrphans(), !LiveRunProcesses(run_dir).empty()); ++i) {
    usleep(10000);
  }
  std::string report = vm["report"].as<std::string>();
  try {
    PrintVerdict(WriteReport({run_dir}, report), report, stderr);
  } catch (const std::exception& e) {
    Say(stderr, std::string("dlprof: ") + e.what());
  }
  return LeaveLike(end);
}

}  // namespace
}  // namespace dlprof

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << dlprof::kTopUsage;
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version" || args[0] == "version") {
    std::cout << "dlprof " DLPROF_VERSION_STRING "\n";
    return 0;
  }
  std::string cmd = args[0];
  args.erase(args.begin());
  // A report allocates and frees hundreds of MB (each writer's tables and
  // output). Fresh pages cost ~10 us each to fault in on a VM, so freed memory
  // stays with malloc for the next writer: blocks up to 32 MiB (the most
  // glibc allows) come from the heap, and the heap is not trimmed.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Reports are made offline: never let libdw fetch debug info from the
  // network (Debian sets DEBUGINFOD_URLS in login shells). `run` keeps it for
  // the program it runs and drops it after.
  if (cmd != "run") unsetenv("DEBUGINFOD_URLS");
  try {
    if (cmd == "run") return dlprof::Run(args);
    if (cmd == "report") return dlprof::Report(args);
    if (cmd == "diff") return dlprof::Diff(args);
    if (cmd == "convert") return dlprof::Convert(args);
    if (cmd == "backends") return dlprof::Backends(args);
    throw dlprof::UsageError("unknown command '" + cmd + "' (run, report, diff, convert, backends)");
  } catch (const dlprof::UsageError& e) {
    dlprof::Say(stderr, std::string("dlprof: ") + e.what());
    return 2;
  } catch (const std::exception& e) {
    dlprof::Say(stderr, std::string("dlprof: ") + e.what());
    return 1;
  }
}
