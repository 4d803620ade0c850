// The cfi unwinder against hostile programs (tests/programs/cfi_*.cc): big
// .bss segments, dlopen/dlclose loops, exceptions, JIT code, signal handlers
// on alternate stacks, coroutines. Each program runs as a real process with
// and without dlprof (DLPROF_BACKEND unset: cfi is the default); where the
// stacks are the point, they are compared with libunwind's.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cfi_tables.h"
#include "readers/dlprof_reader.h"
#include "readers/symbolizer.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using testing::kUnset;
using testing::MakeTempDir;
using testing::ProcessResult;
using testing::ProgramPath;
using testing::RunProcess;

#ifdef DLPROF_UNDER_SANITIZER
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

const std::string kLib = DLPROF_LIB_PATH;

std::map<std::string, std::string> PlainEnv() {
  std::map<std::string, std::string> env = {{"LD_PRELOAD", kUnset}};
  for (const char* v : {"DLPROF_SAMPLE", "DLPROF_OUT", "DLPROF_HZ", "DLPROF_TIMER",
                        "DLPROF_BACKEND", "DLPROF_MODE", "DLPROF_RUN_ID", "DLPROF_RUN_MAIN_PID",
                        "DLPROF_SNAPSHOT_MS", "DLPROF_MAX_FRAMES"}) {
    env[v] = kUnset;
  }
  return env;
}

// Set for the CollectorProcess variants (ProcessCollector): every profiled
// run's collector is a process, which builds the tables from outside.
bool g_collector_process = false;

struct ProcessCollector {
  ProcessCollector() { g_collector_process = true; }
  ~ProcessCollector() { g_collector_process = false; }
};

std::map<std::string, std::string> ProfiledEnv(const std::string& out,
                                               const std::string& backend = "") {
  auto env = PlainEnv();
  env["DLPROF_COLLECTOR"] = g_collector_process ? "process" : kUnset;
  env["DLPROF_SAMPLE"] = "1";
  env["DLPROF_HZ"] = "1000";
  env["LD_PRELOAD"] = kLib;
  env["DLPROF_OUT"] = out;
  if (!backend.empty()) env["DLPROF_BACKEND"] = backend;
  return env;
}

std::string Show(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + " signal " + std::to_string(r.term_signal) +
         "\n--- stdout\n" + r.out + "\n--- stderr\n" + r.err;
}

struct ProfiledRun {
  ProcessResult result;
  std::string out;  // the run folder
  Profile profile;
  std::vector<std::string> files, errors;
};

ProfiledRun Profiled(const std::vector<std::string>& argv, const std::string& backend = "",
             int timeout_s = 60) {
  ProfiledRun r;
  r.out = MakeTempDir("dlprof-cfi-hostile") + "/out";
  r.result = RunProcess(argv, ProfiledEnv(r.out, backend), timeout_s);
  std::string error;
  r.files = ListRunFiles(r.out, &error);
  if (!error.empty()) r.errors.push_back(error);
  ReadDlprofFiles(r.files, &r.profile, &r.errors);
  if (g_collector_process) {
    // Each process's collector was its helper, and the helper built the
    // tables (a process that ends before its first sample has none to say).
    int built_outside = 0;
    for (const Process& pr : r.profile.processes) {
      auto c = pr.fields.find("collector");
      EXPECT_TRUE(c != pr.fields.end() && c->second.rfind("process", 0) == 0)
          << "pid " << pr.pid << " collector: "
          << (c == pr.fields.end() ? "(none)" : c->second);
      auto u = pr.fields.find("unwinder_state");
      if (u != pr.fields.end() && u->second.find("built by the collector process") != std::string::npos) {
        ++built_outside;
      }
    }
    EXPECT_GT(built_outside, 0) << "no process says its tables were built by its collector process";
  }
  return r;
}

// The program behaves as without dlprof: exit status, signal and stdout.
::testing::AssertionResult SameBehaviour(const ProcessResult& plain, const ProcessResult& profiled) {
  if (plain.exit_code != profiled.exit_code || plain.term_signal != profiled.term_signal ||
      plain.out != profiled.out) {
    return ::testing::AssertionFailure() << "the program behaved differently under dlprof.\n without: "
                                         << Show(plain) << "\n with: " << Show(profiled);
  }
  return ::testing::AssertionSuccess();
}


// The function names of a CPU sample's stack, leaf first (inlined frames
// included), after symbolization.
std::vector<std::string> Functions(const Profile& p, const Sample& s) {
  std::vector<std::string> out;
  for (uint32_t loc : p.stacks[s.stack]) {
    for (const Frame& f : p.locations[loc].frames) out.push_back(f.function);
  }
  return out;
}

bool Has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

struct Share {
  int64_t of = 0, good = 0;
  double fraction() const { return of == 0 ? 0 : static_cast<double>(good) / of; }
  std::string str() const {
    return std::to_string(good) + " of " + std::to_string(of) + " samples";
  }
};

// Among the CPU samples whose leaf location satisfies `select`, how many have
// `reaches` somewhere in their stack.
Share StacksReaching(ProfiledRun* run, const std::function<bool(const Location&)>& select,
                     const std::string& reaches) {
  Symbolizer symbolizer;
  symbolizer.SymbolizeProfile(&run->profile);
  const Profile& p = run->profile;
  Share share;
  for (const Sample& s : p.samples) {
    if (s.kind != SampleKind::kCpu || p.stacks[s.stack].empty()) continue;
    if (!select(p.locations[p.stacks[s.stack].front()])) continue;
    share.of += s.count;
    if (Has(Functions(p, s), reaches)) share.good += s.count;
  }
  return share;
}

std::function<bool(const Location&)> LeafFunctionIs(const std::string& name) {
  return [name](const Location& l) { return !l.frames.empty() && l.frames.front().function == name; };
}

std::function<bool(const Location&)> LeafModuleHas(const std::string& part) {
  return [part](const Location& l) { return l.module.find(part) != std::string::npos; };
}

// The number before `what` in the cfi unwinder's state (a process fact).
long StateNumber(const Profile& p, const std::string& what) {
  for (const Process& pr : p.processes) {
    auto it = pr.fields.find("unwinder_state");
    if (it == pr.fields.end()) continue;
    const size_t at = it->second.find(what);
    if (at == std::string::npos || at == 0) continue;
    size_t from = it->second.rfind(' ', at - 2);
    from = from == std::string::npos ? 0 : from + 1;
    return std::atol(it->second.c_str() + from);
  }
  return -1;
}

// ---- the decoder's copy of an object's unwind information ----

// The decoder copied [.eh_frame_hdr, end of the adjacent segments), .data and
// .bss included: for a 1 GiB .bss, a 1 GiB copy, and under RLIMIT_AS the
// collector's std::bad_alloc aborted the program.
TEST(CfiHostile, HugeBssUnderAnAddressSpaceLimitRunsAsWithoutDlprof) {
  if (kSanitized) GTEST_SKIP() << "sanitizers reserve terabytes of address space";
  const std::vector<std::string> argv = {ProgramPath("cfi_big_bss")};
  const ProcessResult plain = RunProcess(argv, PlainEnv());
  ASSERT_EQ(plain.exit_code, 0) << Show(plain);
  const ProfiledRun run = Profiled(argv);
  EXPECT_TRUE(SameBehaviour(plain, run.result));
  EXPECT_EQ(run.files.size(), 1u);
}


// ---- objects loaded and unloaded while handlers read their rows ----

// libbz2 is dlopen'd and dlclose'd in a loop on the main thread while two
// threads compress inside it (each with its own reference for ~1 ms at a
// time): ~1800 unloads in 3 s. The collector decodes and retires tables
// meanwhile; the program must not notice.
void ExpectDlopenDlcloseLoopRunsAsWithoutDlprof() {
  const std::vector<std::string> argv = {ProgramPath("cfi_dlopen_loop"), "2"};
  const ProcessResult plain = RunProcess(argv, PlainEnv());
  ASSERT_EQ(plain.exit_code, 0) << Show(plain);
  ProfiledRun run = Profiled(argv);
  EXPECT_TRUE(SameBehaviour(plain, run.result));
  ASSERT_EQ(run.files.size(), 1u);
  // (Under the collector process the samples in libbz2 are named only when
  // one of its reads of the program's maps, once a second and at most every
  // 100 ms for the tables, found the library loaded where they ran: in 1 of
  // 4 runs none did. The thread sees every load and unload through the
  // loader's counters. Not checked there.)
  if (kSanitized || g_collector_process) return;
  const Share share = StacksReaching(&run, LeafModuleHas("libbz2"), "cfi_dlopen_loop_compress");
  EXPECT_GT(share.of, 100) << "too few samples in libbz2";
}

TEST(CfiHostile, DlopenDlcloseLoopRunsAsWithoutDlprof) { ExpectDlopenDlcloseLoopRunsAsWithoutDlprof(); }

TEST(CfiHostile, CollectorProcessDlopenDlcloseLoopRunsAsWithoutDlprof) {
  ProcessCollector process;
  ExpectDlopenDlcloseLoopRunsAsWithoutDlprof();
}

// A library loaded, run in and unloaded before dlprof's first read of
// /proc/self/maps (a flush, once a second) is in no read of them: its
// samples are named from the mappings the unwind tables saw (before, none
// of them was in libbz2).
TEST(CfiHostile, ALibraryGoneBeforeAnyReadOfTheMapsStillNamesItsSamples) {
  ProfiledRun run = Profiled({ProgramPath("cfi_dlopen_loop"), "once"});
  ASSERT_EQ(run.result.exit_code, 0) << Show(run.result);
  ASSERT_EQ(run.files.size(), 1u);
  if (kSanitized) return;
  const Share share = StacksReaching(&run, LeafModuleHas("libbz2"), "cfi_dlopen_loop_compress");
  EXPECT_GT(share.of, 100) << "samples in libbz2 (200 ms of CPU at 1000 Hz)";
}

// Disabled: fails. Each time libbz2 is loaded again, the samples in it until
// the collector's next tick has scanned and decoded it (5-15 ms at the
// default DLPROF_SNAPSHOT_MS=10) find no object in the snapshot. Their walks
// are left to the collector, which finishes them once it has the rows; but
// a walk whose library was unloaded again before that tick has no rows to
// be had, and is walked by frame pointer: libbz2 has none, so the stack ends
// at the leaf. Measured: 85-97% of the samples in libbz2 reach their caller
// with cfi (85-95% before walks were left to the collector), 99.8% with
// DLPROF_BACKEND=libunwind.
TEST(CfiHostile, DISABLED_DlopenDlcloseLoopStacksInTheLibraryReachTheirCaller) {
  if (kSanitized) GTEST_SKIP() << "sample counts are not checked under sanitizers";
  ProfiledRun run = Profiled({ProgramPath("cfi_dlopen_loop"), "3"});
  ASSERT_EQ(run.result.exit_code, 0) << Show(run.result);
  const Share share = StacksReaching(&run, LeafModuleHas("libbz2"), "cfi_dlopen_loop_compress");
  ASSERT_GT(share.of, 100);
  EXPECT_GE(share.fraction(), 0.97) << share.str() << " in libbz2 reach their caller";
}

// Disabled: fails. unwinder_state's "frames before their object's rows"
// counts only frames in objects the snapshot lists without rows (the big,
// lazily decoded ones); a frame in an object loaded since the last scan
// finds no object at all and is not counted, so the dlopen loop above,
// which loses 13% of its library's stacks, reports 0.
TEST(CfiHostile, DISABLED_FramesWalkedBeforeAnObjectsRowsAreCounted) {
  if (kSanitized) GTEST_SKIP() << "sample counts are not checked under sanitizers";
  ProfiledRun run = Profiled({ProgramPath("cfi_dlopen_loop"), "3"});
  ASSERT_EQ(run.result.exit_code, 0) << Show(run.result);
  const Share share = StacksReaching(&run, LeafModuleHas("libbz2"), "cfi_dlopen_loop_compress");
  const long misses = StateNumber(run.profile, "frames before their object's rows");
  ASSERT_GE(misses, 0) << "no unwinder_state in the profile";
  if (share.of - share.good > 20) {
    EXPECT_GT(misses, 0) << share.of - share.good << " samples in libbz2 lost their caller";
  }
}

// In this process, as the collector would: CfiMaintain after each dlopen and
// each dlclose of liblz4 (which nothing here links: dlclose unloads it).
// Record ids were never reused and at most kCfiMaxObjects are kept, so after
// ~1000 load/unload cycles seen by the collector no object loaded later got
// rows ever again (kNoObject from the 1012th load here): its frames were
// walked by frame pointer for the rest of the process's life. A plugin host
// or a test runner that loads and unloads libraries got there in minutes.
TEST(CfiHostile, ObjectsLoadedAfterAThousandUnloadsStillGetRows) {
  CfiDecodeAllLoaded();  // this test is the collector, and wants rows before any walk
  auto lookup = [](void* fn) {
    const CfiReadSection section;
    CfiRow row{};
    return CfiLookup(section.snapshot(), reinterpret_cast<uintptr_t>(fn), &row);
  };
  for (int i = 0; i < kCfiMaxObjects + 50; ++i) {
    void* h = dlopen("liblz4.so.1", RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    CfiMaintain();
    void* fn = dlsym(h, "LZ4_compress_default");
    ASSERT_NE(fn, nullptr);
    const CfiFound found = lookup(fn);
    dlclose(h);
    CfiMaintain();
    ASSERT_EQ(found, CfiFound::kRow) << "no rows for liblz4 at its load number " << i + 1;
  }
}

// unwinder_state's "N of M objects decoded" and its rows and KiB: counts of
// what is loaded now. They were totals since the start, unloaded objects
// included: "35 of 12 objects decoded" after a dlopen loop.
TEST(CfiHostile, TableStatsCountOnlyTheObjectsLoadedNow) {
  CfiDecodeAllLoaded();
  for (int i = 0; i < 5; ++i) {
    void* h = dlopen("liblz4.so.1", RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    CfiMaintain();
    dlclose(h);
    CfiMaintain();
  }
  const CfiStats s = CfiTableStats();
  EXPECT_LE(s.decoded, s.objects) << DescribeCfiStats(s);
  EXPECT_GT(s.decoded, 0) << DescribeCfiStats(s);
}

// ---- the program's own unwinder at work ----

void ExpectExceptionsOnFourThreadsAreCaughtAsWithoutDlprof() {
  const std::vector<std::string> argv = {ProgramPath("cfi_exceptions")};
  const ProcessResult plain = RunProcess(argv, PlainEnv());
  ASSERT_EQ(plain.exit_code, 0) << Show(plain);
  ProfiledRun run = Profiled(argv);
  EXPECT_TRUE(SameBehaviour(plain, run.result));
  ASSERT_EQ(run.files.size(), 1u);
  if (kSanitized) return;
  // Samples taken while an exception is thrown (in cfi_thrower, in
  // libstdc++'s and libgcc's unwinder below it) on the four threads: their
  // stacks end in start_thread, never under main.
  Symbolizer symbolizer;
  symbolizer.SymbolizeProfile(&run.profile);
  Share threads;
  int64_t under_main = 0;
  for (const Sample& s : run.profile.samples) {
    if (s.kind != SampleKind::kCpu) continue;
    const std::vector<std::string> names = Functions(run.profile, s);
    if (!Has(names, "cfi_thrower")) continue;
    threads.of += s.count;
    if (Has(names, "start_thread")) threads.good += s.count;
    if (Has(names, "main")) under_main += s.count;
  }
  EXPECT_GT(threads.of, 100);
  EXPECT_GE(threads.fraction(), 0.9) << threads.str() << " under cfi_thrower reach start_thread";
  EXPECT_EQ(under_main, 0) << "cfi_thrower never runs under main";
}

TEST(CfiHostile, ExceptionsOnFourThreadsAreCaughtAsWithoutDlprof) { ExpectExceptionsOnFourThreadsAreCaughtAsWithoutDlprof(); }

TEST(CfiHostile, CollectorProcessExceptionsOnFourThreadsAreCaughtAsWithoutDlprof) {
  ProcessCollector process;
  ExpectExceptionsOnFourThreadsAreCaughtAsWithoutDlprof();
}

// ---- code without unwind information ----

TEST(CfiHostile, JitCodeWithAndWithoutFramePointersRunsAsWithoutDlprof) {
  for (const char* kind : {"nofp", "fp", "bad"}) {
    SCOPED_TRACE(kind);
    const std::vector<std::string> argv = {ProgramPath("cfi_jit"), kind};
    const ProcessResult plain = RunProcess(argv, PlainEnv());
    ASSERT_EQ(plain.exit_code, 0) << Show(plain);
    ProfiledRun run = Profiled(argv);
    EXPECT_TRUE(SameBehaviour(plain, run.result));
    EXPECT_EQ(run.files.size(), 1u);
    if (kSanitized || std::string(kind) != "fp") continue;
    // With a frame-pointer record the walk leaves the JIT page by it.
    const Share share = StacksReaching(&run, [](const Location& l) { return l.module.empty(); },
                                       "main");
    EXPECT_GT(share.of, 100);
    EXPECT_GE(share.fraction(), 0.9) << share.str() << " in the JIT page reach main";
  }
}

// ---- stacks that are not the thread's own ----

// The walk crosses the kernel's signal frame (__restore_rt, 'S').
void ExpectStacksInsideAProgramsSignalHandlerReachMain() {
  const std::vector<std::string> argv = {ProgramPath("cfi_signal_spin")};
  const ProcessResult plain = RunProcess(argv, PlainEnv());
  ASSERT_EQ(plain.exit_code, 0) << Show(plain);
  ProfiledRun run = Profiled(argv);
  EXPECT_TRUE(SameBehaviour(plain, run.result));
  if (kSanitized) return;
  const Share share = StacksReaching(&run, LeafFunctionIs("cfi_in_handler_spin"), "cfi_raiser");
  EXPECT_GT(share.of, 100);
  EXPECT_GE(share.fraction(), 0.9) << share.str() << " in the handler reach cfi_raiser";
}

TEST(CfiHostile, StacksInsideAProgramsSignalHandlerReachMain) { ExpectStacksInsideAProgramsSignalHandlerReachMain(); }

TEST(CfiHostile, CollectorProcessStacksInsideAProgramsSignalHandlerReachMain) {
  ProcessCollector process;
  ExpectStacksInsideAProgramsSignalHandlerReachMain();
}

// On a sigaltstack the interrupted %rsp is outside the thread's StackBounds
// (pthread's stack). The handler then asks sigaltstack() for the signal
// stack and the walk reads it too, crossing to the thread's stack through
// the signal frame. Before, the walk read nothing and the sample was the
// leaf alone: 3% of the samples reached cfi_raiser (libunwind 100%).
void ExpectStacksInsideASignalHandlerOnASigaltstackReachMain() {
  const std::vector<std::string> argv = {ProgramPath("cfi_signal_spin"), "alt"};
  const ProcessResult plain = RunProcess(argv, PlainEnv());
  ASSERT_EQ(plain.exit_code, 0) << Show(plain);
  ProfiledRun run = Profiled(argv);
  EXPECT_TRUE(SameBehaviour(plain, run.result));
  if (kSanitized) return;
  const Share share = StacksReaching(&run, LeafFunctionIs("cfi_in_handler_spin"), "cfi_raiser");
  EXPECT_GT(share.of, 100);
  EXPECT_GE(share.fraction(), 0.9) << share.str() << " in the handler reach cfi_raiser";
}

TEST(CfiHostile, StacksInsideASignalHandlerOnASigaltstackReachMain) { ExpectStacksInsideASignalHandlerOnASigaltstackReachMain(); }

TEST(CfiHostile, CollectorProcessStacksInsideASignalHandlerOnASigaltstackReachMain) {
  ProcessCollector process;
  ExpectStacksInsideASignalHandlerOnASigaltstackReachMain();
}

// The program itself runs as without dlprof on a sigaltstack (enabled: the
// behaviour part of the test above).
TEST(CfiHostile, SignalHandlerOnASigaltstackRunsAsWithoutDlprof) {
  const std::vector<std::string> argv = {ProgramPath("cfi_signal_spin"), "alt"};
  const ProcessResult plain = RunProcess(argv, PlainEnv());
  ASSERT_EQ(plain.exit_code, 0) << Show(plain);
  ProfiledRun run = Profiled(argv);
  EXPECT_TRUE(SameBehaviour(plain, run.result));
  EXPECT_EQ(run.files.size(), 1u);
}

TEST(CfiHostile, CoroutineOnItsOwnStackRunsAsWithoutDlprof) {
  // ASan warns that it does not support makecontext/swapcontext, into the
  // report log scripts/test.sh fails on; the program is ASan's problem there.
  if (kSanitized) GTEST_SKIP() << "ASan does not support makecontext/swapcontext";
  const std::vector<std::string> argv = {ProgramPath("cfi_coroutine")};
  const ProcessResult plain = RunProcess(argv, PlainEnv());
  ASSERT_EQ(plain.exit_code, 0) << Show(plain);
  ProfiledRun run = Profiled(argv);
  EXPECT_TRUE(SameBehaviour(plain, run.result));
  EXPECT_EQ(run.files.size(), 1u);
}

// Disabled: fails, for the same reason as the sigaltstack one: a
// makecontext stack is not the thread's StackBounds, so every sample in the
// coroutine is its leaf alone (0%); libunwind walks it to __start_context.
TEST(CfiHostile, DISABLED_CoroutineStacksReachTheCoroutinesBody) {
  if (kSanitized) GTEST_SKIP() << "sample counts are not checked under sanitizers";
  if (kSanitized) GTEST_SKIP() << "ASan does not support makecontext/swapcontext";
  ProfiledRun run = Profiled({ProgramPath("cfi_coroutine")});
  ASSERT_EQ(run.result.exit_code, 0) << Show(run.result);
  const Share share = StacksReaching(&run, LeafFunctionIs("cfi_coroutine_spin"), "cfi_coroutine_body");
  EXPECT_GT(share.of, 100);
  EXPECT_GE(share.fraction(), 0.9) << share.str() << " in the coroutine reach its body";
}

// ---- objects the tables cannot describe ----

TEST(CfiHostile, ExecutableWithoutEhFrameHdrRunsAsWithoutDlprof) {
  const std::vector<std::string> argv = {ProgramPath("cfi_no_eh_frame_hdr")};
  const ProcessResult plain = RunProcess(argv, PlainEnv());
  ASSERT_EQ(plain.exit_code, 0) << Show(plain);
  ProfiledRun run = Profiled(argv);
  EXPECT_TRUE(SameBehaviour(plain, run.result));
  EXPECT_EQ(run.files.size(), 1u);
}

// An object linked with --no-eh-frame-hdr has no PT_GNU_EH_FRAME. Its
// .eh_frame is found through the file's section headers and walked entry by
// entry. Before, it got no tables at all, its frames were walked by frame
// pointer, and without frame pointers the callers were lost (0% reached
// cfi_nohdr_middle; libunwind 100%).
void ExpectExecutableWithoutEhFrameHdrStacksReachTheirCallers() {
  if (kSanitized) GTEST_SKIP() << "sample counts are not checked under sanitizers";
  ProfiledRun run = Profiled({ProgramPath("cfi_no_eh_frame_hdr")});
  ASSERT_EQ(run.result.exit_code, 0) << Show(run.result);
  const Share share = StacksReaching(&run, LeafFunctionIs("cfi_nohdr_leaf"), "cfi_nohdr_middle");
  EXPECT_GT(share.of, 100);
  EXPECT_GE(share.fraction(), 0.9) << share.str() << " in cfi_nohdr_leaf reach cfi_nohdr_middle";
}

TEST(CfiHostile, ExecutableWithoutEhFrameHdrStacksReachTheirCallers) { ExpectExecutableWithoutEhFrameHdrStacksReachTheirCallers(); }

TEST(CfiHostile, CollectorProcessExecutableWithoutEhFrameHdrStacksReachTheirCallers) {
  ProcessCollector process;
  ExpectExecutableWithoutEhFrameHdrStacksReachTheirCallers();
}

// gold puts .eh_frame before .eh_frame_hdr; the decoder copied from the
// header on (to skip the text before it), so every FDE of such an object
// was out of reach: "14 FDEs skipped", no rows, and its frames walked by
// frame pointer (0% of the leaf's samples reached their caller; libunwind
// 100%).
void ExpectGoldLinkedExecutableWithEhFrameBeforeItsHeaderGetsRows() {
  if (kSanitized) GTEST_SKIP() << "sample counts are not checked under sanitizers";
  const std::string program = ProgramPath("cfi_gold_linked");
  const ProcessResult sections = RunProcess({"/usr/bin/readelf", "-SW", program}, PlainEnv());
  const size_t frame = sections.out.find(" .eh_frame "), hdr = sections.out.find(" .eh_frame_hdr ");
  if (frame == std::string::npos || hdr == std::string::npos || frame > hdr) {
    GTEST_SKIP() << "not linked by gold (.eh_frame after .eh_frame_hdr)";
  }
  const ProcessResult plain = RunProcess({program}, PlainEnv());
  ASSERT_EQ(plain.exit_code, 0) << Show(plain);
  ProfiledRun run = Profiled({program});
  EXPECT_TRUE(SameBehaviour(plain, run.result));
  EXPECT_EQ(StateNumber(run.profile, "FDEs skipped"), 0);
  const Share share = StacksReaching(&run, LeafFunctionIs("cfi_gold_leaf"), "cfi_gold_middle");
  EXPECT_GT(share.of, 100);
  EXPECT_GE(share.fraction(), 0.9) << share.str() << " in cfi_gold_leaf reach cfi_gold_middle";
}

TEST(CfiHostile, GoldLinkedExecutableWithEhFrameBeforeItsHeaderGetsRows) { ExpectGoldLinkedExecutableWithEhFrameBeforeItsHeaderGetsRows(); }

TEST(CfiHostile, CollectorProcessGoldLinkedExecutableWithEhFrameBeforeItsHeaderGetsRows) {
  ProcessCollector process;
  ExpectGoldLinkedExecutableWithEhFrameBeforeItsHeaderGetsRows();
}

// ---- short and abrupt lives ----

// Exit while the collector may be decoding (1-20 ms lives, exit() from a
// thread), fork and exec at once: the same stdout and status as without
// dlprof, and one profile per process image (an earlier cfi pinned objects
// with dlopen(RTLD_NOLOAD), which re-ran libdlprof's constructor during exit).
TEST(CfiHostile, ShortAndAbruptLivesRunAsWithoutDlprof) {
  const struct {
    std::vector<std::string> args;
    size_t files;
  } cases[] = {{{"spin", "1"}, 1},  {{"spin", "5"}, 1}, {{"spin", "12"}, 1}, {{"spin", "20"}, 1},
               {{"thread-exit"}, 1}, {{"fork"}, 2},      {{"exec"}, 2}};
  for (const auto& c : cases) {
    std::vector<std::string> argv = {ProgramPath("cfi_short")};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    SCOPED_TRACE(argv.back());
    const ProcessResult plain = RunProcess(argv, PlainEnv());
    ProfiledRun run = Profiled(argv);
    EXPECT_TRUE(SameBehaviour(plain, run.result));
    EXPECT_EQ(plain.err, run.result.err);
    EXPECT_EQ(run.files.size(), c.files);
  }
}

}  // namespace
}  // namespace dlprof
