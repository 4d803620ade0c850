// The collector process's loop (collector/process_collector.h). It mirrors
// the collector thread's (core/collector_thread.cc) where it can, with what
// only the outside allows: it needs no lock of the program's (the program's
// threads post requests and never wait for it), and it sees the program's
// end through a pidfd whatever caused it, a SIGKILL included, with every
// sample the handler committed still in the arena.
#include "collector/process_collector.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "backends/cfi_host.h"
#include "backends/cfi_region.h"
#include "backends/cfi_tables.h"
#include "backends/cfi_unwinder.h"
#include "core/annotations.h"
#include "core/collector.h"
#include "core/maps_line.h"
#include "core/memory_view.h"
#include "core/proc_maps.h"
#include "core/python_codes_seen.h"
#include "core/python_exec_notes.h"
#include "core/python_frames.h"
#include "core/remote_cfi.h"
#include "core/remote_maps.h"
#include "core/session_state.h"
#include "core/shared_arena.h"
#include "core/stderr_lines.h"
#include "core/thread_registry.h"
#include "core/tick_schedule.h"

namespace dlprof {
namespace {

// The program's executable mappings, read from outside; the generation is
// their fingerprint, so an unchanged set is not written again.
class ProgramMaps : public OutsideMaps {
 public:
  explicit ProgramMaps(pid_t pid) : pid_(pid) {}
  // A process that is gone has no mappings left to read (a zombie's maps
  // are empty): the last ones read stand for them, so that a process that
  // ends before the first flush (a second) still names its samples.
  bool Read(std::vector<MapEntry>* out, uint64_t* generation) override {
    // A flush nobody asked for (the one each second) takes the maps the
    // cfi tables' host read in the last second, if it did: it reads them
    // once a second itself, and at once when a sample lands in no object
    // it knows. A flush asked for (an exit, an exec, a test) reads them
    // now: a library loaded just before an exit must be in the file.
    // Only a text newer than the one last_ came from: an older one would
    // take back a library a requested read had found.
    if (recent_text_will_do_ && host_ != nullptr && host_->maps_text_ns() > last_text_ns_ &&
        MonotonicNs() - host_->maps_text_ns() < 1000000000) {
      Refresh(&host_->maps_text(), host_->maps_text_ns());
    } else {
      Refresh();
    }
    if (last_.empty()) return false;
    *out = last_;
    *generation = last_generation_;
    return true;
  }

  // Reads them now, while the program is alive to read them from: the
  // next flush writes them, even after it is gone.
  // `maps_text`: the maps as another reader read them (nullptr: read).
  // `read_ns`: when that text was read (MonotonicNs).
  void Refresh(const std::string* maps_text = nullptr, int64_t read_ns = 0) {
    std::string own_text, error;
    if (maps_text == nullptr) {
      read_ns = MonotonicNs();
      if (!ReadMapsText(pid_, &own_text, &error)) return;
      maps_text = &own_text;
    }
    last_text_ns_ = std::max(last_text_ns_, read_ns);
    // The same text as last time: the same mappings (and build-ids).
    if (!last_.empty() && *maps_text == last_text_) {
      g_mailbox.NoteMapsRead();
      return;
    }
    std::vector<MapEntry> maps;
    if (reader_.Read(pid_, &maps, &error, maps_text) && !maps.empty()) {
      last_text_ = *maps_text;
      g_mailbox.NoteMapsRead();
      last_ = std::move(maps);
      last_generation_ = MappingsFingerprint(last_);
      ShareBuildIds();
    }
  }

  // Whether the next Read may take the host's text of the last second
  // (a flush nobody asked for).
  void set_recent_text_will_do(bool will_do) { recent_text_will_do_ = will_do; }

  // The build-ids this helper reads go into the cfi region too (a block of
  // `host`'s heap), where a fork child's helper finds them (Prime).
  void ShareBuildIdsIn(CfiRegion* region, RemoteCfiHost* host) {
    region_ = region;
    host_ = host;
  }

  // Reads them once now, at the helper's start (the program is alive then,
  // but for a fork child that ended at once). A fork child's helper starts
  // from the build-ids its parent's had read, in the region's copy.
  void Prime() {
    if (region_ != nullptr) {
      if (const uint64_t* block = region_->maps_cache.load(std::memory_order_acquire)) {
        const uint64_t bytes = block[0];
        if (ArenaReadable(block, 8 + bytes)) reader_.ImportFiles(block + 1, bytes);
        shared_count_ = reader_.cached();
        published_ = block;  // the parent's: never freed here
        parents_ = block;
      }
    }
    Refresh();
  }

 private:
  // Publishes the build-id cache when it grew (a new block; the old one is
  // freed once no fork's copy of the arena may be reading it).
  void ShareBuildIds() {
    if (region_ == nullptr || reader_.cached() == shared_count_) return;
    const std::string bytes = reader_.ExportFiles();
    const size_t size = 8 + bytes.size();
    auto* block = static_cast<uint64_t*>(host_->Map(size, /*populate=*/false));
    if (block == nullptr) return;
    block[0] = bytes.size();
    memcpy(block + 1, bytes.data(), bytes.size());
    region_->maps_cache.store(block, std::memory_order_seq_cst);
    shared_count_ = reader_.cached();
    if (published_ != nullptr && published_ != parents_) {
      old_.emplace_back(const_cast<uint64_t*>(published_), 8 + published_[0]);
    }
    published_ = block;
    if (!old_.empty() && host_->Quiet(0)) {
      for (const auto& [at, n] : old_) host_->Unmap(at, n);
      old_.clear();
    }
  }

  pid_t pid_;
  RemoteMaps reader_;
  CfiRegion* region_ = nullptr;
  RemoteCfiHost* host_ = nullptr;
  size_t shared_count_ = 0;
  const uint64_t* published_ = nullptr;
  const uint64_t* parents_ = nullptr;
  std::vector<std::pair<void*, size_t>> old_;
  std::vector<MapEntry> last_;
  std::string last_text_;  // what last_ was read from
  int64_t last_text_ns_ = 0;  // when the newest text taken was read
  uint64_t last_generation_ = 0;
  bool recent_text_will_do_ = false;
};

// The watcher thread's findings (WatchTheProgram).
std::atomic<bool> g_watching{false};
std::atomic<bool> g_program_gone{false};
std::atomic<int> g_exit_status{-1};  // the zombie's wait status, -1 unknown

// The wait status of zombie `pid` (field 52 of its stat, Linux 3.5; 0 where
// the reader may not see it), -1 if it cannot be read (reaped already).
int ZombieExitStatus(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* p = strrchr(buf, ')');
  if (p == nullptr || p[1] != ' ' || p[2] != 'Z') return -1;
  // The space before each field from the state (3rd) on; the exit code is
  // the 52nd.
  for (int field = 3; field <= 52 && p != nullptr; ++field) p = strchr(p + 1, ' ');
  return p != nullptr ? atoi(p + 1) : -1;
}

// A thread of the helper's own: blocks on the program's pidfd, and at its
// end reads how it ended from its zombie at once (the program's parent
// reaps it soon: the loop's next tick came too late) and wakes the loop,
// which otherwise sleeps until its next tick (up to 75 ms: the helpers of a
// burst of short processes lived on, counted against RLIMIT_NPROC).
void* WatchTheProgram(void* arg) {
  const pid_t pid = static_cast<pid_t>(reinterpret_cast<intptr_t>(arg));
  pollfd p{kHelperPidFd, POLLIN, 0};
  while (poll(&p, 1, -1) < 0 && errno == EINTR) {
  }
  g_exit_status.store(ZombieExitStatus(pid));
  g_program_gone.store(true);
  g_mailbox.Post(0);  // (the program is gone: the words are the helper's alone)
  return nullptr;
}

void StartWatching(pid_t pid) {
  pollfd p{kHelperPidFd, POLLIN, 0};
  if (poll(&p, 1, 0) < 0 || (p.revents & POLLNVAL)) return;  // no pidfd (Linux < 5.3)
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 << 10);
  if (pthread_create(&thread, &attr, WatchTheProgram,
                     reinterpret_cast<void*>(static_cast<intptr_t>(pid))) == 0) {
    g_watching.store(true);
  }
  pthread_attr_destroy(&attr);
}

// Whether the program has ended: the watcher saw its pidfd readable (a
// zombie, or reaped); without one (Linux < 5.3), its pid is gone or a
// zombie.
bool ProgramGone(pid_t pid) {
  if (g_watching.load()) return g_program_gone.load();
  pollfd p{kHelperPidFd, POLLIN, 0};
  const int n = poll(&p, 1, 0);
  if (n >= 0 && !(p.revents & POLLNVAL)) return n > 0;
  return (kill(pid, 0) != 0 && errno == ESRCH) || ThreadState(pid, pid) == 'Z';
}

// After an exec: whether the image that held the arena is gone. It maps
// the memfd while it lives (its descriptor number may have changed: a
// program that closed it gets it again through ours); the new image maps a
// memfd of its own, another inode.
bool ImageGone(const CollectorProcessArgs& a) {
  struct stat ours {};
  if (fstat(kHelperArenaFd, &ours) != 0) return true;
  FILE* maps = fopen(("/proc/" + std::to_string(a.pid) + "/maps").c_str(), "re");
  if (maps == nullptr) return true;
  bool mapped = false;
  char line[4096];
  while (!mapped && fgets(line, sizeof(line), maps) != nullptr) {
    // "start-end perms offset dev inode path"
    unsigned long long inode = 0;
    if (strstr(line, "dlprof-arena") != nullptr &&
        sscanf(line, "%*s %*s %*s %*s %llu", &inode) == 1) {
      mapped = inode == static_cast<unsigned long long>(ours.st_ino);
    }
  }
  fclose(maps);
  return !mapped;
}

// How a process that is gone ended, for the END chunk; "" when unknown (a
// SIGKILL, say): then no END, as a reader expects of a process that died.
std::string EndText(const SessionState& state) {
  const int cause = state.end_cause();
  if (cause == kEndExit) return "exit";
  if (cause == kEndQuickExit) return "_exit " + std::to_string(state.end_status());
  if (cause == kEndSeccomp) return "seccomp";
  if (cause > 0) return "signal " + std::to_string(cause);
  // No interposer saw the end: a fatal signal at its default action (no
  // handler is installed for SIGTERM and SIGINT here), as the zombie said.
  const int status = g_exit_status.load();
  if (status > 0 && WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "";
}

// The program's CPython from --python ("3.11:0x...:0x...:0x..."): its
// structure table, _PyRuntime's address and its types'. False for a
// malformed or unknown version.
bool ParsePython(const std::string& text, PythonRuntime* out) {
  unsigned major = 0, minor = 0;
  unsigned long runtime = 0, code_type = 0, unicode_type = 0;
  if (sscanf(text.c_str(), "%u.%u:%lx:%lx:%lx", &major, &minor, &runtime, &code_type,
             &unicode_type) != 5) {
    return false;
  }
  out->layout = FindPythonLayout(static_cast<int>(major), static_cast<int>(minor));
  out->runtime = runtime;
  out->code_type = code_type;
  out->unicode_type = unicode_type;
  return out->layout != nullptr;
}

// A fork child's file is made at the first tick this long after the
// helper's start, or at its end, whichever comes first (the helper outlives
// the process: nothing is lost by waiting).
constexpr int64_t kFileAfterNs = 50000000;

class Loop {
 public:
  explicit Loop(const CollectorProcessArgs& a) : a_(a), maps_(a.pid), memory_(a.pid) {}

  int Run() {
    UseCfiRegion();
    maps_.Prime();
    collector_.ReadFromOutside(a_.pid, &maps_);
    collector_.set_check_reused_walks(a_.check_reused_walks);
    if (cfi_host_ != nullptr) collector_.ReadStacksFromOutside();
    for (const auto& [key, value] : a_.fields) collector_.SetProcessField(key, value);
    ReadPythonFromOutside();
    collector_.set_file_pending(true);
    if (a_.file_at_once && !EnsureFile()) return 1;
    const int64_t start = MonotonicNs();
    TickSchedule schedule(a_.snapshot_ms * 1000000LL, a_.light, start,
                          static_cast<uint64_t>(start) ^ (static_cast<uint64_t>(a_.pid) << 32));
    int64_t last_flush = start;
    for (;;) {
      const uint32_t wake_seen = g_mailbox.WakeCount();
      int64_t now = MonotonicNs();
      const int64_t deadline =
          std::min(schedule.Next(now), std::max<int64_t>(now, last_flush + 1000000000LL));
      if (RequestWaiting() || g_mailbox.Sleep(deadline, wake_seen)) schedule.Woken(MonotonicNs());
      // Gone is asked first: everything committed before is in the arena.
      const bool gone = ProgramGone(a_.pid);
      std::string error;
      if (!ArenaAttachNewExtents(&error)) {
        collector_.SetProcessField("collector", "process, stopped: " + error);
        return End(MonotonicNs(), /*final=*/false);
      }
      UseTablesOnceSet();
      UseExecNotesOnceSet();
      // The unwind tables the program's handler asked for, before the
      // tick's walks of blocked threads use them.
      // The walks the handler left here get the rows they need; Drain
      // finishes them.
      if (cfi_host_ != nullptr && !gone) {
        CfiMaintain();
        CfiPrepareDeferredWalks();
        // The objects changed (a handler met a pc in a library loaded
        // since): the maps that name those samples are read now, as the
        // program may be gone, its maps with it, before the next flush.
        if (cfi_host_->generation() != cfi_generation_seen_) {
          cfi_generation_seen_ = cfi_host_->generation();
          // the text that read found them in
          maps_.Refresh(&cfi_host_->maps_text(), cfi_host_->maps_text_ns());
        }
      }
      const uint64_t requested = g_mailbox.flush_requested();
      // A flush asked before the file is made (a process that ends within
      // kFileAfterNs asks one at its exit, core/session.cc): its maps are
      // read while it waits, for the file its end makes.
      if (!gone && collector_.file_pending() && requested != g_mailbox.flush_done()) {
        maps_.Refresh();
      }
      const uint32_t requests = g_mailbox.Take();
      now = MonotonicNs();
      int worker;
      if ((requests & kRequestWorker) && g_mailbox.TakeWorker(&worker)) collector_.NoteWorker(worker);
      collector_.NoteSamplingOff(g_state);
      if (!gone) schedule.Ticked(collector_.SnapshotTick(now));
      collector_.Drain();
      NotePythonReadsRefused();
      // The exec's request before the end: a fork child that exec'd (and
      // whose image may be gone already, a /bin/true) leaves no file of its
      // own, as with the thread.
      bool exec_end = (requests & kRequestExecEnd) != 0;
      if (requests & kRequestRearm) {
        ended_for_exec_ = false;  // an exec failed
        // Taken with an exec's start (the program does not wait for this
        // loop between them): the failed one, then maybe another under way.
        // Served as an exec that ended, a fork child whose exec failed at
        // once lost its file and everything it did after.
        if (exec_end) exec_end = g_mailbox.ExecUnderway();
      }
      if (exec_end) {
        NoteCfiState();
        collector_.SetProcessField("end", "exec");
      }
      if (exec_end && collector_.file_pending()) {
        // Exec'd before its file was made (a shell's fork and exec): none,
        // as with the thread; the new image makes its own.
        ended_for_exec_ = true;
      } else if (!ended_for_exec_ && collector_.file_pending() && now - start < kFileAfterNs) {
        // Not yet: a fork child that execs within kFileAfterNs leaves no
        // file. (The thread makes it at its first tick, 5-15 ms in; a helper
        // competing for a core with the child it serves often ticked before
        // the child's exec: 73 of 100 fork-and-exec children left a file
        // of their own besides their image's.)
      } else if (!ended_for_exec_ && !EnsureFile()) {
        g_mailbox.PublishFlushDone(requested);
        return 1;
      } else if (!ended_for_exec_ &&
                 (now - last_flush >= 1000000000LL || requested != g_mailbox.flush_done() ||
                  exec_end)) {
        maps_.set_recent_text_will_do(requested == g_mailbox.flush_done() && !exec_end);
        const bool flushed = collector_.Flush();
        maps_.set_recent_text_will_do(false);
        if (!flushed || (exec_end && !collector_.WriteEnd(now))) {
          g_state.Apply(PhaseEvent::kOutputFailed);
          g_mailbox.PublishFlushDone(requested);
          return 1;
        }
        last_flush = now;
        ended_for_exec_ = exec_end;
      }
      const Phase phase = g_state.phase();
      if (gone || (phase == Phase::kEnding && g_state.end_cause() == kEndSeccomp)) {
        const int status = End(now, /*final=*/true);
        g_mailbox.PublishFlushDone(requested);
        return status;
      }
      g_mailbox.PublishFlushDone(requested);
      if (ended_for_exec_ && ImageGone(a_)) return 0;
    }
  }

 private:
  // The program's cfi tables: built here, into the arena's region, when the
  // program made one (backends/cfi_region.h).
  void UseCfiRegion() {
    auto* region = static_cast<CfiRegion*>(const_cast<void*>(ArenaRootOf(ArenaRoot::kCfi)));
    if (region == nullptr || !CfiUseRegion(region)) return;
    cfi_host_ = std::make_unique<RemoteCfiHost>(a_.pid, region);
    CfiSetHost(cfi_host_.get());
    maps_.ShareBuildIdsIn(region, cfi_host_.get());
    if (region->deferred_pool != nullptr && ArenaReadable(region->deferred_pool, 1)) {
      CfiUseDeferredPool(region->deferred_pool);
    }
  }

  // What the tables came to, as the thread's unwinder says it.
  void NoteCfiState() {
    if (cfi_host_ == nullptr) return;
    const CfiDeferredStats d = CfiDeferredWalkStats();
    // (Objects unreadable from here: every frame was walked by frame
    // pointer, and the profile says why.)
    const std::string unreadable = cfi_host_->Unreadable();
    const std::string note =
        unreadable.empty() ? "" : "; the collector process cannot read the program's objects (" +
                                      unreadable + "): frames walked by frame pointer";
    collector_.SetProcessField(
        "unwinder_state", DescribeCfiStats(CfiTableStats()) + "; " + std::to_string(d.deferred) +
                              " walks left to the collector, " + std::to_string(d.finished) +
                              " finished, " + std::to_string(d.no_slot) +
                              " without a free slot; built by the collector process (" +
                              std::to_string(cfi_host_->heap_in_use() >> 10) + " KiB of the arena, " +
                              std::to_string(cfi_host_->scans()) + " reads of the objects, " +
                              std::to_string(cfi_host_->size_checks()) +
                              " spared by their unchanged size)" +
                              note);
  }

  // A CPython program: its code objects are read through process_vm_readv,
  // its audit hook's notes and the map of codes met are the arena's.
  void ReadPythonFromOutside() {
    if (a_.python.empty()) return;
    if (!ParsePython(a_.python, &python_)) {
      collector_.SetProcessField("python_frames", "off: the helper knows no CPython " + a_.python);
      return;
    }
    UseCodesSeenAt(const_cast<void*>(ArenaRootOf(ArenaRoot::kCodesSeen)));
    collector_.ReadPythonFromOutside(&python_, &memory_);
    python_on_ = true;
    UseExecNotesOnceSet();
  }

  // The audit hook's ring is made when dlprof's Python module installs the
  // hook, after the helper's start (at its first import): its root is
  // looked for at every tick until it is set. (Looked for once, at the
  // start, it was never found: module bodies freed before the first read
  // came out unknown, and the full ring woke the helper at every exec.)
  void UseExecNotesOnceSet() {
    if (!python_on_ || exec_notes_used_) return;
    // (Made since the tick's look at the arena: its extent is mapped first.)
    const void* ring = ArenaRootOf(ArenaRoot::kExecNotes);
    if (ring == nullptr || !ArenaReadable(ring, 1)) return;
    exec_notes_used_ = UseExecNotesAt(const_cast<void*>(ring));
  }

  // Once, when reads of the program's memory were refused (it became
  // undumpable, or a security module said no): its Python frames are
  // "[unknown python code]" since.
  void NotePythonReadsRefused() {
    if (python_noted_ || memory_.refused() == 0) return;
    python_noted_ = true;
    collector_.SetProcessField("python_frames",
                               std::string("on, names unreadable from the collector process: "
                                           "process_vm_readv: ") +
                                   strerror(memory_.last_error()));
  }

  bool RequestWaiting() const {
    return g_mailbox.Pending() != 0 || g_mailbox.flush_requested() != g_mailbox.flush_done();
  }

  void UseTablesOnceSet() {
    if (tables_used_) return;
    if (const void* tables = ArenaRootOf(ArenaRoot::kAnnotations); tables != nullptr &&
                                                                   ArenaReadable(tables, 1)) {
      UseAnnotationTablesAt(const_cast<void*>(tables));
      tables_used_ = true;
    }
  }

  bool EnsureFile() {
    if (!collector_.file_pending()) return true;
    std::string error;
    if (CreateProfileFile(&collector_, a_.file, &error)) return true;
    // As the thread says it (core/run_folder.cc), on the program's stderr.
    const std::string line = "dlprof: " + error + "; profiling off for this process\n";
    WriteStderrLine(line.data(), line.size());
    g_state.Apply(PhaseEvent::kOutputFailed);
    return false;
  }

  // The last drain is done: the file gets the rest, and the END when the
  // end's cause is known. `final`: the program is gone (or steps aside).
  int End(int64_t now, bool final) {
    if (ended_for_exec_) return 0;  // its END is written, or it has no file
    if (!EnsureFile()) return 1;
    const std::string end = final ? EndText(g_state) : "";
    if (end.empty()) {
      collector_.Flush();
      return 0;
    }
    // The threads' wall time runs to when the end began, not to the last
    // tick before it (and the END carries that time).
    const int64_t end_ns = g_state.end_ns();
    if (end_ns > 0 && end_ns <= now) {
      collector_.ExtendRunsTo(end_ns);
      now = end_ns;
    }
    NoteCfiState();
    collector_.SetProcessField("end", end);
    collector_.Finish(now);
    g_state.Apply(PhaseEvent::kEndWritten);
    return 0;
  }

  const CollectorProcessArgs& a_;
  std::unique_ptr<RemoteCfiHost> cfi_host_;
  uint64_t cfi_generation_seen_ = 0;  // cfi_host_->generation() when the maps were read
  ProgramMaps maps_;
  ProcessMemory memory_;
  PythonRuntime python_;
  bool python_noted_ = false;
  bool python_on_ = false;        // ReadPythonFromOutside succeeded
  bool exec_notes_used_ = false;  // the hook's ring is found (UseExecNotesOnceSet)
  Collector collector_;
  bool tables_used_ = false;
  bool ended_for_exec_ = false;
};

}  // namespace

int RunProcessCollector(const CollectorProcessArgs& args) {
  std::string error;
  if (!ArenaAttach(kHelperArenaFd, &error)) {
    return error.find("taken") != std::string::npos || error.find("exists") != std::string::npos
               ? kExitAddressTaken
               : 1;
  }
  void* session = const_cast<void*>(ArenaRootOf(ArenaRoot::kSession));
  void* mailbox = const_cast<void*>(ArenaRootOf(ArenaRoot::kMailbox));
  void* slots = const_cast<void*>(ArenaRootOf(ArenaRoot::kSlots));
  if (session == nullptr || mailbox == nullptr || slots == nullptr) return 1;
  g_state.UseAt(session);
  g_mailbox.UseAt(mailbox);
  UseSlotTableAt(slots);
  CountCollectorCpuOfThisThread();
  unsigned long long dev = 0, ino = 0;
  if (sscanf(args.program_stderr.c_str(), "%llu:%llu", &dev, &ino) == 2) {
    WriteStderrLinesToProgram(args.pid, dev, ino);
  }
  StartWatching(args.pid);
  try {
    Loop loop(args);
    return loop.Run();
  } catch (const std::bad_alloc&) {
    return 1;
  }
}

}  // namespace dlprof
