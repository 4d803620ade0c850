// The collector: the one background thread's work. It drains every thread's
// rings, takes buffer snapshots and wall-clock ticks, deduplicates stacks and
// stage paths, and appends checksummed chunks to this process's .dlprof file.
// Nothing here runs in a signal handler.
#ifndef DLPROF_CORE_COLLECTOR_H_
#define DLPROF_CORE_COLLECTOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <bitset>
#include <vector>

#include <sys/types.h>

#include "backends/cfi_unwinder.h"
#include "backends/private_fd.h"
#include "core/annotations.h"
#include "core/memory_view.h"
#include "core/proc_maps.h"
#include "core/python_frames.h"
#include "core/python_codes.h"
#include "core/session_state.h"
#include "core/signal_handler.h"
#include "core/thread_proc.h"
#include "core/thread_registry.h"

namespace dlprof {

// The CPU time of this process's collector threads so far: the live one and
// those that ended (a pause restarts it). Defined with the thread, in
// core/collector_thread.cc; read by the counters (the profile's own cost).
// Any thread.
uint64_t CollectorCpuNs();
// The collector process (collector/): its one thread is the collector whose
// CPU time CollectorCpuNs counts.
void CountCollectorCpuOfThisThread();

// Where a collector outside the program (DLPROF_COLLECTOR=process) reads
// the program's executable mappings from: its /proc/<pid>/maps and the
// mapped files (collector/).
class OutsideMaps {
 public:
  virtual ~OutsideMaps() = default;
  // The mappings now, and a generation that changes when they do. False when
  // they cannot be read (the process is gone): the last ones stay written.
  virtual bool Read(std::vector<MapEntry>* out, uint64_t* generation) = 0;
};

class Collector {
 public:
  Collector() = default;
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // Creates `name` in the folder `dir_fd` (never overwriting, never following
  // a symlink, mode 0600) and writes the file header. False and *error if not.
  // `dir_path` is the folder's absolute path: each write opens the file by
  // it (and checks it is the same file), so no descriptor stays open.
  bool Open(int dir_fd, const std::string& dir_path, const std::string& name,
            std::string* error);
  bool is_open() const { return opened_; }
  // A fork child's file is created at its collector's first tick, not at
  // the fork (core/run_folder.cc CreateCollectorFile): one that execs
  // before then (a shell's fork and exec) leaves none. Until then
  // everything is kept in memory, as before a flush.
  bool file_pending() const { return file_pending_; }
  void set_file_pending(bool pending) { file_pending_ = pending; }
  // From now on keeps a descriptor of the file open (moved high, checked
  // before each write, backends/private_fd.h): the process is about to
  // change its credentials and may not be allowed to open it again.
  void KeepFileOpen();
  const std::string& file_name() const { return name_; }

  // Process facts for the PROCESS chunk (written at the next Flush).
  void SetProcessField(const std::string& key, const std::string& value);
  const std::map<std::string, std::string>& process_fields() const { return process_fields_; }
  // Why and since when CPU sampling is off for good, as `state` says, once
  // (nothing while it is on, or when the output itself failed).
  void NoteSamplingOff(const SessionState& state);
  // dlprof_set_worker's id: the process is that worker.
  void NoteWorker(int id);
  // Writes the PROCESS chunk now (one small write): a process that dies or
  // execs before its first flush still says who it was.
  bool WriteProcessChunk();

  // One tick: buffer snapshots and each thread's wall/CPU time since its last
  // tick (records carry their own wall time, so ticks need not be evenly
  // spaced). Returns whether anything moved: a buffer exists, a thread was
  // new, changed stage path or state, or was partly on and partly off CPU.
  // When nothing moved for a while the session ticks less often (core/collector_thread.cc).
  bool SnapshotTick(int64_t now_ns);
  // Moves every thread's pending samples and events into the chunk buffers;
  // frees the slots of threads that have exited.
  void Drain();
  // Appends everything pending to the file. On a write error, warns once and
  // stops (returns false from then on); what was written stays readable.
  bool Flush();
  // Appends an END chunk (after a Flush) and keeps the file open: the image
  // is about to be replaced by exec. False on a write error.
  bool WriteEnd(int64_t end_ns);
  // Final flush with an END chunk; closes the file.
  void Finish(int64_t end_ns);
  // In a fork child: forget the parent's file without writing to it.
  void Abandon();
  // In a fork child: the parent's last reading of the maps, written as this
  // file's own if nothing was loaded or unloaded since (the address space is
  // the parent's): a worker then does not read /proc/self/maps and every
  // object's build-id note again (~10 ms in a torch worker on a VM).
  void InheritMaps(const Collector& parent);

  // From now on reads the program, process `pid`, from outside (the
  // collector process): its threads' /proc files and CPU times through
  // /proc/<pid>, its mappings through `maps` (kept by the caller). Blocked
  // threads get their leaf pc until ReadStacksFromOutside, and their
  // Python frames once ReadPythonFromOutside was called.
  void ReadFromOutside(pid_t pid, OutsideMaps* maps);
  // From outside, the program being CPython `python` (kept by the caller):
  // the Python frames' code objects are read through `memory` (the
  // program's, core/memory_view.h). Without it a sample's Python frames are
  // left out.
  void ReadPythonFromOutside(const PythonRuntime* python, const MemoryView* memory);
  // From outside, with the program's cfi tables built in this process
  // (core/remote_cfi.h): blocked threads' native stacks are walked over a
  // copy of their stacks read by process_vm_readv, as the thread walks its
  // own process's.
  void ReadStacksFromOutside();
  // From outside, once the program is gone (its threads can no longer be
  // read): each live thread's open run of wall ticks goes on to `end_ns`
  // (when the program began to end) in the state its last tick saw;
  // running, the time is on CPU. Without it the wall time from the last
  // tick to the end was lost: up to a slow tick, and more when the
  // collector process itself waited for a core. A thread whose stage path
  // is no longer its run's left that run after the last tick: the run ends
  // there, and the time after it goes to the path the thread is in now, in
  // the state that tick saw (blocked: call unknown). Extending the old run claimed a stage the
  // thread had left: a 300 ms `nap` left just before exit came out as a
  // span of a few µs, its record stamped after the thread's next sample.
  void ExtendRunsTo(int64_t end_ns);
  // An exited thread's open run, to the time it unregistered (its slot's
  // exit_ns), with the CPU it used since the last tick.
  void ExtendRunToExit(ThreadSlot* s);

  uint64_t bytes_written() const { return bytes_written_; }
  // Walks of blocked threads' stacks so far, and those dropped (the thread
  // moved during the walk). For tests and benchmarks.
  uint64_t blocked_walks() const { return blocked_walks_; }
  uint64_t blocked_walks_dropped() const { return blocked_walks_dropped_; }
  // Of the blocked walks, those whose native frames were the last walk's of
  // the thread, checked in place (NativeWalk).
  uint64_t blocked_walks_reused() const { return blocked_walks_reused_; }
  // Forgets the threads' last walks: their next walks copy and walk their
  // stacks. For tests and benchmarks.
  void ForgetWalks() {
    native_walks_.clear();
    last_python_walks_.clear();
  }
  // Each walk taken again is walked anew too, and a difference counted
  // (DLPROF_CHECK_REUSED_WALKS, core/config.h).
  void set_check_reused_walks(bool check) { check_reused_walks_ = check; }
  bool check_reused_walks() const { return check_reused_walks_; }
  uint64_t blocked_walks_reuse_mismatched() const { return blocked_walks_reuse_mismatched_; }
  // From outside, blocked threads' Python walks, those taken again
  // (PythonWalk), and of those, checked, the ones that differed.
  uint64_t python_walks() const { return python_walks_; }
  uint64_t python_walks_reused() const { return python_walks_reused_; }
  uint64_t python_walks_reuse_mismatched() const { return python_walks_reuse_mismatched_; }
  // The words of stack `id` (as InternStack got them), false if unknown.
  // A scan of the table: for tests and benchmarks.
  bool StackWords(uint32_t id, std::vector<uint64_t>* words) const;
  uint64_t samples_written() const { return samples_total_; }

 private:
  uint32_t ThreadIndex(ThreadSlot* s);
  uint32_t InternPath(const uint32_t* stages, uint32_t depth);
  // The path of the stages `s`'s thread is in now (read racily, as a wall
  // tick does), interned.
  uint32_t StagePathNow(const ThreadSlot* s);
  uint32_t InternStack(const uint64_t* pcs, uint32_t n);
  // `now`: walks the handler left are finished at once (the thread is gone,
  // or this is the last drain), not left in the ring for the next tick.
  void DrainSamples(ThreadSlot* s, bool now);
  void DrainEvents(ThreadSlot* s);
  // Writes the thread's open run of wall ticks into the WALL_STACKS stream.
  void EndWallRun(ThreadSlot* s);
  // Parts of WalkBlocked: the thread's Python frames (in place or from
  // outside), whether its CPU clock stayed at `cpu_ns`, and the stack
  // without a native walk (its leaf pc, 0: none, and its Python frames).
  // *differs: a walk taken again was checked (DLPROF_CHECK_REUSED_WALKS)
  // and the walk anew differed.
  int BlockedPythonFrames(ThreadSlot* s, pid_t tid, uint64_t* py, bool* differs);
  bool CpuUnchanged(pid_t tid, int64_t cpu_ns);
  uint32_t WalkBlockedLeaf(ThreadSlot* s, pid_t tid, uintptr_t pc, int64_t cpu_ns, int64_t start,
                           bool* rewalk);
  // The stack of thread `tid`, blocked in a call at `sp` and `pc` (its
  // /proc/<tid>/syscall, read after `cpu_ns` of its CPU clock): native frames
  // walked over a copy of its stack with the cfi tables (from outside: read
  // by process_vm_readv, once ReadStacksFromOutside), then its Python
  // frames. 0 when the thread ran or left the call during the walk (then
  // *rewalk), or nothing could be read. *rewalk also when the walk met
  // code whose unwind rows were not decoded yet (the next tick walks again).
  // Never signals the thread nor waits for it.
  uint32_t WalkBlocked(ThreadSlot* s, pid_t tid, uintptr_t sp, uintptr_t pc, int64_t cpu_ns,
                       bool* rewalk);
  // The thread's run_delay (schedstat), -1 if unreadable.
  int64_t ReadRunDelay(pid_t tid);
  // The threads' schedstat and syscall files: this process's, opened for
  // each read, or from outside the program's, kept open and read again
  // with pread at every tick (opened and closed at each, schedstat alone
  // cost 3,000 opens a second for 200 threads at 100 Hz, 5x the collector
  // thread's CPU).
  ThreadProcFiles proc_;
  // From outside: each thread's count of slices run at the tick's read
  // (CpuUnchanged).
  std::unordered_map<pid_t, uint64_t> slices_at_tick_;
  int64_t ThreadCpuTime(pid_t tid, int64_t* run_delay);
  pid_t outside_pid_ = 0;  // ReadFromOutside
  OutsideMaps* outside_maps_ = nullptr;
  const PythonRuntime* outside_python_ = nullptr;  // ReadPythonFromOutside
  const MemoryView* outside_memory_ = nullptr;
  bool outside_stacks_ = false;  // ReadStacksFromOutside
  // From outside: whether a thread's ring can be read here, its extent
  // mapped (a thread that started since the tick's ArenaAttachNewExtents
  // has its ring in an extent the helper maps now). Rings checked once.
  bool RingReadable(const WordRing& ring);
  std::unordered_set<const uint64_t*> rings_mapped_;
  // The CPython whose frames samples carry: the program's from outside,
  // else this process's while its walks are on (ActivePython).
  const PythonRuntime* Python() const;
  // Records in the PROCESS chunk whether run_delay can be read ("run_delay").
  void SayRunDelay();
  void AppendChunk(std::string* out, uint32_t type, const std::string& payload);
  void AppendProcessChunk(std::string* out);
  void AddRetiredCounters(ThreadSlot* s);

  // Appends `fresh` (after anything deferred) to the file through a
  // descriptor opened for the call, and counts it in bytes_written_.
  bool WriteToFile(const std::string& fresh);
  int OpenForAppend();
  std::string deferred_;  // not written yet: no descriptor was free
  PrivateFd kept_;        // KeepFileOpen()
  bool opened_ = false;
  bool file_pending_ = false;
  dev_t file_dev_ = 0;
  ino_t file_ino_ = 0;
  std::string name_, path_;
  bool failed_ = false;
  bool sampling_off_noted_ = false;
  uint64_t bytes_written_ = 0;
  uint64_t samples_total_ = 0;

  std::map<std::string, std::string> process_fields_;
  bool process_dirty_ = false;

  uint32_t next_thread_index_ = 0;
  std::string threads_;  // pending THREADS entries
  uint32_t threads_count_ = 0;
  uint32_t stages_written_ = 0;

  std::unordered_map<std::string, uint32_t> path_ids_;
  std::string paths_;
  uint32_t paths_first_ = 1, paths_count_ = 0;

  std::unordered_map<std::string, uint32_t> stack_ids_;
  std::string stacks_;
  uint32_t stacks_first_ = 1, stacks_count_ = 0;

  uint64_t maps_generation_ = UINT64_MAX;  // of the maps written to this file
  // The last maps read (or inherited), encoded, and their generation.
  uint64_t maps_cache_generation_ = UINT64_MAX;
  std::string maps_cache_;
  bool finishing_ = false;  // in Finish(): the last flush
  std::bitset<kMaxBuffers> buffers_defined_;  // by id: its BUFFERS entry is written

  struct Stream {  // a time-ordered record chunk: SAMPLES, WALL_STATES, SNAPSHOTS, EVENTS
    std::string body;
    uint32_t count = 0;
    int64_t base = 0;
    int64_t last = 0;
    void PutTime(int64_t t);
  };
  Stream samples_, wall_runs_, snapshots_, events_;

  // Counters of threads that have exited.
  uint64_t retired_samples_ = 0, retired_dropped_ring_ = 0, retired_dropped_busy_ = 0,
           retired_handler_ns_ = 0, retired_events_dropped_ = 0;
  uint64_t wall_ticks_ = 0;
  uint64_t blocked_walks_ = 0, blocked_walks_dropped_ = 0, blocked_walk_ns_ = 0,
           blocked_walks_reused_ = 0, blocked_walks_reuse_mismatched_ = 0;
  bool check_reused_walks_ = false;
  // A thread's last blocked walk, native frames only, with what it read
  // (CfiWalkTrace). A thread blocked again at the same pc and sp, whose
  // stack still holds every word that walk read (SafeLoads, in place), and
  // no object unloaded since, has the same native frames: its stack is not
  // copied and walked again. A torch process's feeder threads block at the
  // same place for each item: 84% of its walks found the stack they had.
  // Read in place with SafeLoads where the fault handler is installed (a
  // Python process), else in one process_vm_readv.
  struct NativeWalk {
    uintptr_t sp = 0, pc = 0;
    int frames = 0;
    uintptr_t pcs[kMaxFrames];
    CfiWalkTrace trace;
  };
  bool SameNativeWalk(const NativeWalk& w, uintptr_t sp, uintptr_t pc) const;
  std::unordered_map<const ThreadSlot*, std::unique_ptr<NativeWalk>> native_walks_;
  // From outside, a thread's last walk of its Python frames with every read
  // it made (ReadTrace): when those reads still get the same values (one
  // process_vm_readv of their spans) and the thread's state hint is the
  // same, the walk would be the same, and is not made again. A walk made
  // ~15 reads of the program, each a process_vm_readv of ~9 us on this VM;
  // 85% of a DataLoader worker's helper's Python walks are taken again (its
  // queue feeder thread wakes for every item and blocks again where it
  // was). An incomplete trace (none yet, a failed read, or a walk read
  // while the thread ran) is never taken again.
  struct PythonWalk {
    PythonWalk() { trace.complete = false; }
    uintptr_t hint = 0;
    int frames = 0;
    uint64_t py[kPyFrameWords * kMaxPythonFrames];
    ReadTrace trace;
  };
  std::unordered_map<const ThreadSlot*, std::unique_ptr<PythonWalk>> last_python_walks_;
  uint64_t python_walks_ = 0, python_walks_reused_ = 0, python_walks_reuse_mismatched_ = 0;
  // The thread's last Python walk is not to be taken again (it was read
  // while the thread ran).
  void DropPythonWalk(const ThreadSlot* s);
  // A blocked thread's stack, for its walk: mapped on first use and never
  // cleared, so only the pages copies reach are ever faulted in (a
  // short-lived process walks one small stack; zeroing all 256 KiB, as a
  // vector did, cost it more than the walk).
  struct StackCopy {
    uint8_t* data = nullptr;
    StackCopy() = default;
    StackCopy(const StackCopy&) = delete;
    StackCopy& operator=(const StackCopy&) = delete;
    ~StackCopy();
  };
  StackCopy stack_copy_;

  PythonCodeTable py_codes_;  // Python frames' code objects (core/python_codes.h)
};

}  // namespace dlprof

#endif  // DLPROF_CORE_COLLECTOR_H_
