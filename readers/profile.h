// The Profile model: every process of one or more runs, merged. Readers fill
// it, the symbolizer resolves its locations, the analysis and writers read it.
#ifndef DLPROF_READERS_PROFILE_H_
#define DLPROF_READERS_PROFILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace dlprof {

// A file mapped executable into one process.
struct Mapping {
  uint64_t start = 0;
  uint64_t limit = 0;   // one past the end
  uint64_t offset = 0;  // file offset of `start`
  std::string path;
  std::string build_id;  // lowercase hex, empty if unknown
};

struct Process {
  int pid = 0;
  int ppid = 0;
  std::string role = "main";  // "main" or "worker"
  int worker = -1;
  std::string host;           // set when several runs are merged
  std::string file;           // where it was read from
  std::string command;        // argv[0] / comm
  int64_t start_ns = 0;       // CLOCK_MONOTONIC of the host
  int64_t end_ns = 0;
  int64_t start_unix_ns = 0;  // wall clock at start_ns
  int hz = 0;
  std::string mode, unwinder, timer;
  std::vector<Mapping> mappings;
  uint64_t samples = 0;            // CPU samples read, in periods (a record's weight)
  uint64_t records = 0;            // sample records read (.dlprof): one per signal taken
  uint64_t dropped = 0;            // samples the process could not store
  bool complete = false;           // the file ended cleanly (process exited normally)
  std::vector<std::string> warnings;  // corruption, truncation: "file: offset N: what"
  std::map<std::string, std::string> fields;  // everything the file said about the process
  std::map<std::string, uint64_t> counters;   // the runtime's own counters (drops, handler_ns)
  int64_t sampling_start_ns = 0;  // after an unprofiled baseline, when sampling began
  std::string end_reason;         // "exit", "signal", or "" when the process vanished
};

// One source-level frame of a location (several when inlined), or one
// Python frame (python: function is the code's co_qualname, file its
// co_filename, line the line being run, start_line its co_firstlineno).
struct Frame {
  std::string function;  // demangled; "module+0xoffset" when unknown
  std::string file;
  int line = 0;
  int start_line = 0;    // the function's first line (0: unknown)
  bool python = false;
  // Nothing named this code: `function` is only what the reports call it
  // (UnsymbolizedName). pprof gets no function for it, so that pprof can
  // still symbolize it from a binary with symbols (PPROF_BINARY_PATH).
  bool unnamed = false;
};

// A code address, identified by module and file offset so that the same code
// in forked workers is one location. Or a Python frame (python): no module,
// no address, one Frame, named when read (the symbolizer leaves it alone)
// and identified by what that frame says, so that it too is one location in
// every process.
struct Location {
  std::string module;    // path of the mapped file, or "" if unmapped
  std::string build_id;
  uint64_t module_offset = 0;  // file offset (address - start + mapping offset)
  uint64_t address = 0;        // one runtime address it was seen at
  std::vector<Frame> frames;   // innermost (inlined) first; empty until symbolized
  bool pseudo = false;         // a frame dlprof made up ("[off-cpu: read]")
  bool python = false;         // a Python frame (DLPROF_PY_FRAME_BIT)
  bool python_entry = false;   // the outermost Python frame of one C call of the eval
                               // loop (DLPROF_PY_ENTRY_BIT); see readers/python_merge.h
};

enum class SampleKind : uint8_t {
  kCpu = 0,   // from the CPU timer signal: has a native stack
  kWall = 1,  // from the wall-clock tick: stage; running, waiting for a core, blocked; no native stack
};

struct Sample {
  uint32_t process = 0;     // index into Profile::processes
  uint32_t tid = 0;
  uint32_t stack = 0;       // index into Profile::stacks
  uint32_t stage_path = 0;  // index into Profile::stage_paths (0 = no stage)
  SampleKind kind = SampleKind::kCpu;
  bool on_cpu = true;
  int64_t time_ns = 0;      // CLOCK_MONOTONIC of the sample
  int64_t count = 1;        // samples this record stands for; a wall record's is 0, or
                            // the ticks it stands for when read from a pprof wall profile
  int64_t cpu_ns = 0;       // CPU time it stands for; for a wall sample, the CPU the
                            // thread used in that tick, which CPU samples already count
  int64_t wall_ns = 0;      // wall time it stands for (wall samples)
  int64_t wait_ns = 0;      // of wall_ns, runnable but waiting for a core (wall samples;
                            // 0 in files before format version 2); wall_ns - cpu_ns -
                            // wait_ns the thread was blocked
};

struct BufferSnapshot {
  int64_t time_ns = 0;
  uint64_t size = 0;
};

struct BufferSeries {
  uint32_t process = 0;
  std::string name;
  uint64_t capacity = 0;
  std::vector<BufferSnapshot> snapshots;
};

enum class IntervalKind : uint8_t { kStep = 0, kWait = 1, kStage = 2 };

struct Interval {
  uint32_t process = 0;
  uint32_t tid = 0;
  IntervalKind kind = IntervalKind::kStep;
  uint32_t stage = 0;  // kStage: index into Profile::stages
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
};

struct Profile {
  std::vector<Process> processes;
  std::vector<std::string> stages{""};               // 0 = no stage
  std::vector<std::vector<uint32_t>> stage_paths{{}};  // outermost first; 0 = empty
  std::vector<Location> locations;
  std::vector<std::vector<uint32_t>> stacks{{}};       // location ids, leaf first; 0 = empty
  std::vector<Sample> samples;
  std::vector<BufferSeries> buffers;
  std::vector<Interval> intervals;
  std::vector<std::string> warnings;  // for the whole merge
  // Bytes of every input file read (as stored: a gzip file's compressed
  // size). The writers whose output an input can multiply keep within a
  // multiple of it (kOutputBytesPerInputByte).
  uint64_t input_bytes = 0;

  // Room for `more` samples, growing geometrically as push_back does (reading
  // file after file must not copy every sample once per file). A large array
  // is asked for in transparent huge pages: filling millions of samples costs
  // mostly first touches of fresh memory, one page fault per 4 KiB (~10 µs
  // each on the project's VMs), and 2 MiB pages make 30k faults ~60.
  void ReserveSamples(size_t more);

  // Interning helpers: the same content always gives the same index.
  uint32_t InternStage(const std::string& name);
  uint32_t InternStagePath(const std::vector<uint32_t>& path);
  uint32_t InternStack(const std::vector<uint32_t>& locations);
  // Keyed by module/build-id/offset; a Python location by qualname, file,
  // first line, line and entry flag.
  uint32_t InternLocation(const Location& loc);

 private:
  std::unordered_map<std::string, uint32_t> stage_index_;
  std::unordered_map<std::string, uint32_t> stage_path_index_;
  std::unordered_map<std::string, uint32_t> stack_index_;
  std::unordered_map<std::string, uint32_t> location_index_;
};

// Bounds on numbers read from files. A damaged or hostile file can hold any
// 64-bit value; within these, the analysis and the writers can add, subtract
// and double times and durations in int64_t without overflow. Real profiles
// are far inside them.
constexpr int64_t kMaxTimeNs = int64_t{1} << 60;    // CLOCK_MONOTONIC: 36 years of uptime
constexpr int64_t kMaxRecordValue = int64_t{1} << 40;  // one record's count or ns: 18 minutes

// What an output may take at most: this many bytes per input byte, plus
// kOutputSlackBytes (docs/ARCHITECTURE.md, "Bounds on what an input
// multiplies"). Real reports are far inside it; stacks.folded, the output
// whose lines repeat stage names and frames per (stage path, stack) pair,
// leaves its least-sampled lines out past it and says so.
constexpr uint64_t kOutputBytesPerInputByte = 50;
constexpr uint64_t kOutputSlackBytes = uint64_t{64} << 20;
inline uint64_t OutputBudget(uint64_t input_bytes) {
  return input_bytes * kOutputBytesPerInputByte + kOutputSlackBytes;
}

// `t` clamped to [0, kMaxTimeNs] (monotonic times), `v` to
// [-kMaxRecordValue, kMaxRecordValue] (counts and durations of one record).
inline int64_t ClampTime(int64_t t) { return t < 0 ? 0 : t > kMaxTimeNs ? kMaxTimeNs : t; }
inline int64_t ClampValue(int64_t v) {
  return v < -kMaxRecordValue ? -kMaxRecordValue : v > kMaxRecordValue ? kMaxRecordValue : v;
}
inline int64_t ClampUnsigned(uint64_t v) {
  return v > static_cast<uint64_t>(kMaxRecordValue) ? kMaxRecordValue : static_cast<int64_t>(v);
}
// A process's sample total plus one record's count: a negative count (a diff
// profile, or damage) adds nothing, and the total saturates at INT64_MAX (the
// analysis shows it signed).
inline uint64_t AddCount(uint64_t total, int64_t count) {
  constexpr uint64_t kMax = static_cast<uint64_t>(INT64_MAX);
  if (count <= 0) return total;
  return total > kMax - static_cast<uint64_t>(count) ? kMax : total + static_cast<uint64_t>(count);
}
// a × b, clamped as ClampValue (saturating instead of overflowing).
inline int64_t ClampedProduct(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return (a < 0) != (b < 0) ? -kMaxRecordValue : kMaxRecordValue;
  return ClampValue(r);
}

// "decode" or "read/decode": the names of a stage path joined by '/'.
std::string StagePathName(const Profile& p, uint32_t stage_path);
// "libfoo.so+0x1a2b": a module's basename and a file offset, the name of
// code nothing else names (the same in every process that maps the module).
std::string ModuleOffsetName(const std::string& module, uint64_t offset);
// What every writer calls a location the symbolizer did not name (it was not
// run, or failed): ModuleOffsetName, as the symbolizer names addresses it
// cannot resolve, or "0x7f12..." outside any module.
std::string UnsymbolizedName(const Location& loc);
// What the reports call a frame: its function, or for a Python frame
// "qualname (basename-of-file:first_line)" (as py-spy and austin show them:
// one name per function, wherever in it the samples fell).
std::string FrameDisplayName(const Frame& f);
// The "file.py:first_line" part of it ("" without a file).
std::string PythonFrameSource(const Frame& f);

}  // namespace dlprof

#endif  // DLPROF_READERS_PROFILE_H_
