#include "core/collector.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>

#include <dlprof/format.h>

#include "backends/cfi_tables.h"
#include "backends/cfi_unwinder.h"
#include "backends/private_fd.h"
#include "core/annotations.h"
#include "core/proc_maps.h"
#include "core/python_exec_notes.h"
#include "core/python_frames.h"
#include "core/session_state.h"
#include "core/shared_arena.h"
#include "core/signal_handler.h"
#include "core/stderr_lines.h"
#include "core/varint.h"

namespace dlprof {
namespace {

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

// Writes all of p[0, n) at file offset `offset` (the file is written
// sequentially from 0). Never past the file size limit: a write beyond
// RLIMIT_FSIZE raises SIGXFSZ, whose default action would kill the program;
// that becomes a plain EFBIG failure instead.
bool WriteAll(int fd, uint64_t offset, const char* p, size_t n) {
  rlimit limit;
  if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      offset + n > limit.rlim_cur) {
    errno = EFBIG;
    return false;
  }
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// The most wait for a core a thread's next ticks may be given when it came
// in later than the tick it happened in (SnapshotTick). A real wait is
// bounded by the scheduler's latency; a second is far past it.
constexpr int64_t kMaxWaitCarryNs = 1000000000;

// A MAPS chunk's payload.
void PutMaps(std::string* p, const std::vector<MapEntry>& maps) {
  PutVarint(p, maps.size());
  for (const MapEntry& m : maps) {
    PutVarint(p, m.start);
    PutVarint(p, m.end);
    PutVarint(p, m.offset);
    PutBytes(p, m.path);
    PutBytes(p, m.build_id);
  }
}

}  // namespace

int64_t Collector::ReadRunDelay(pid_t tid) { return proc_.Schedstat(tid); }

void Collector::ExtendRunsTo(int64_t end_ns) {
  for (int i = 0, limit = SlotLimit(); i < limit; ++i) {
    ThreadSlot* s = SlotAt(i);
    if (s->state.load(std::memory_order_acquire) != kSlotLive || s->last_cpu_ns < 0) continue;
    const int64_t delta = end_ns - s->last_wall_ns;
    if (delta <= 0) continue;
    const uint32_t path = StagePathNow(s);
    if (s->run_ticks > 0 && path != s->run_path) {
      EndWallRun(s);
      s->run_path = path;
      // In the state the last tick saw, as before: running, the tail is on
      // CPU; blocked, it blocked again after leaving (call unknown, no CPU
      // claimed for time no clock measured).
      if (s->run_state != 0) s->run_state = 1 + static_cast<uint64_t>(DLPROF_SYSCALL_UNKNOWN);
      s->run_stack = 0;
    }
    // (A flush since the last tick wrote the run out: a new one, in the
    // state and stage path that tick saw.)
    if (s->run_ticks == 0) s->run_ticks = 1;
    s->run_wall_ns += delta;
    if (s->run_state == 0) s->run_cpu_ns += delta;
    s->last_wall_ns = s->run_end_ns = end_ns;
  }
}

void Collector::ExtendRunToExit(ThreadSlot* s) {
  // Only a thread some tick has seen has a run (and the state and stage path
  // that tick saw, which the time after it goes to, as in ExtendRunsTo).
  const int64_t end = s->exit_ns.load(std::memory_order_relaxed);
  const int64_t end_cpu = s->exit_cpu_ns.load(std::memory_order_relaxed);
  if (s->last_cpu_ns < 0 || end_cpu < 0 || end <= s->last_wall_ns) return;
  const int64_t wall = end - s->last_wall_ns;
  const int64_t cpu = std::clamp<int64_t>(end_cpu - s->last_cpu_ns, 0, wall);
  if (s->run_ticks == 0) s->run_ticks = 1;  // a flush since the last tick wrote the run out
  s->run_wall_ns += wall;
  s->run_cpu_ns += cpu;
  s->last_wall_ns = s->run_end_ns = end;
  s->last_cpu_ns = end_cpu;
}

void Collector::ReadFromOutside(pid_t pid, OutsideMaps* maps) {
  outside_pid_ = pid;
  proc_.set_pid(pid);
  outside_maps_ = maps;
}

void Collector::ReadStacksFromOutside() { outside_stacks_ = outside_pid_ != 0; }

void Collector::ReadPythonFromOutside(const PythonRuntime* python, const MemoryView* memory) {
  outside_python_ = python;
  outside_memory_ = memory;
  py_codes_.SetMemory(memory);
}

const PythonRuntime* Collector::Python() const {
  return outside_pid_ != 0 ? outside_python_ : ActivePython();
}

// The thread's CPU time: its clock inside the process, its schedstat from
// outside, which gives its run delay in the same read (*run_delay; left
// alone inside). -1 when the thread is gone.
int64_t Collector::ThreadCpuTime(pid_t tid, int64_t* run_delay) {
  if (outside_pid_ != 0) {
    int64_t cpu = -1;
    uint64_t slices = 0;
    *run_delay = proc_.Schedstat(tid, &cpu, &slices);
    if (*run_delay < 0) {
      slices_at_tick_.erase(tid);
      return -1;
    }
    slices_at_tick_[tid] = slices;
    return cpu;
  }
  timespec ts;
  if (clock_gettime(ThreadCpuClock(tid), &ts) != 0) return -1;
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void Collector::SayRunDelay() {
  // Whether the wall records' wait_ns is measured, asked of the opening
  // thread: here, not at the collector's first tick, whose allocations would
  // land among the program's (Runtime.AnnotationsDoNotAllocateFromTheProgramsHeap).
  const pid_t tid = outside_pid_ != 0 ? outside_pid_ : static_cast<pid_t>(syscall(SYS_gettid));
  if (proc_.Schedstat(tid) >= 0) {
    SetProcessField("run_delay", "schedstat");
  } else {
    SetProcessField("run_delay", std::string("off: cannot read /proc/self/task/<tid>/schedstat: ") +
                                     strerror(errno));
  }
}

void Collector::Stream::PutTime(int64_t t) {
  if (count == 0) base = last = t;
  PutVarint(&body, ZigZag(t - last));
  last = t;
  ++count;
}

bool Collector::Open(int dir_fd, const std::string& dir_path, const std::string& name,
                     std::string* error) {
  const int fd =
      OpenOwn(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
  if (fd < 0) {
    *error = "cannot create " + name + ": " + strerror(errno);
    return false;
  }
  name_ = name;
  path_ = dir_path + "/" + name;
  std::string header(DLPROF_FILE_MAGIC, 8);
  PutU32(&header, DLPROF_FORMAT_VERSION);
  PutU32(&header, 0);
  struct stat st {};
  const bool ok = fstat(fd, &st) == 0 && WriteAll(fd, 0, header.data(), header.size());
  const int err = errno;
  close(fd);
  if (!ok) {
    *error = "cannot write " + name + ": " + strerror(err);
    return false;
  }
  file_dev_ = st.st_dev;
  file_ino_ = st.st_ino;
  bytes_written_ = header.size();
  opened_ = true;
  SayRunDelay();
  return true;
}

bool Collector::WriteToFile(const std::string& fresh) {
  // Out of descriptors (the program uses every one its RLIMIT_NOFILE gives):
  // what could not be written waits for the next flush, up to a bound.
  constexpr size_t kMaxDeferred = 64u << 20;
  deferred_ += fresh;
  const bool kept = StillPrivate(kept_);
  const int fd = kept ? kept_.fd : OpenForAppend();
  if (fd < 0) {
    const int err = errno;
    if ((err == EMFILE || err == ENFILE) && deferred_.size() <= kMaxDeferred) return true;
    deferred_.clear();
    errno = err;
    return false;
  }
  const bool ok = WriteAll(fd, bytes_written_, deferred_.data(), deferred_.size());
  const int err = errno;
  if (!kept) close(fd);
  if (ok) {
    bytes_written_ += deferred_.size();
    deferred_.clear();
  }
  errno = err;
  return ok;
}

void Collector::KeepFileOpen() {
  if (!opened_ || StillPrivate(kept_)) return;
  kept_ = KeepPrivate(OpenForAppend());
}

int Collector::OpenForAppend() {
  // Opened for each write (about once a second) and closed at once: no
  // descriptor of dlprof's lives in the program's table for it to close,
  // dup2 over or count against RLIMIT_NOFILE. Only the same file, at the
  // length dlprof left it, is written to.
  const int fd = OpenOwn(AT_FDCWD, path_.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW);
  if (fd < 0) return -1;
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_dev != file_dev_ || st.st_ino != file_ino_ ||
      static_cast<uint64_t>(st.st_size) != bytes_written_) {
    close(fd);
    errno = ESTALE;
    return -1;
  }
  return fd;
}

void Collector::NoteSamplingOff(const SessionState& state) {
  const int reason = state.off_reason();
  if (reason == kSamplingOn || reason == kOutputFailed || sampling_off_noted_) return;
  sampling_off_noted_ = true;
  SetProcessField("cpu_sampling", OffReasonText(reason));
  SetProcessField("cpu_sampling_off_ns", std::to_string(state.off_ns()));
}

void Collector::NoteWorker(int id) {
  SetProcessField("worker", std::to_string(id));
  SetProcessField("role", "worker");
}

void Collector::SetProcessField(const std::string& key, const std::string& value) {
  auto& slot = process_fields_[key];
  if (slot != value) {
    slot = value;
    process_dirty_ = true;
  }
}

uint32_t Collector::ThreadIndex(ThreadSlot* s) {
  if (s->file_index < 0) {
    s->file_index = static_cast<int>(next_thread_index_++);
    pid_t tid = s->tid.load(std::memory_order_relaxed);
    PutVarint(&threads_, static_cast<uint64_t>(s->file_index));
    PutVarint(&threads_, static_cast<uint64_t>(tid));
    PutBytes(&threads_, proc_.Name(tid));
    ++threads_count_;
  }
  return static_cast<uint32_t>(s->file_index);
}

uint32_t Collector::StagePathNow(const ThreadSlot* s) {
  uint32_t stages[kMaxStageDepth];
  const uint32_t depth = std::min<uint32_t>(s->depth.load(std::memory_order_relaxed), kMaxStageDepth);
  for (uint32_t d = 0; d < depth; ++d) stages[d] = s->stages[d].load(std::memory_order_relaxed);
  return InternPath(stages, depth);
}

uint32_t Collector::InternPath(const uint32_t* stages, uint32_t depth) {
  // Stage 0 is "no stage" (dlprof_stage_enter(0), a full stage table): the
  // time counts under the enclosing stage, as dlprof.h promises.
  uint32_t kept[kMaxStageDepth];
  uint32_t n = 0;
  for (uint32_t i = 0; i < depth && i < static_cast<uint32_t>(kMaxStageDepth); ++i) {
    if (stages[i] != 0) kept[n++] = stages[i];
  }
  if (n == 0) return 0;
  std::string key(reinterpret_cast<const char*>(kept), n * sizeof(uint32_t));
  auto [it, added] = path_ids_.emplace(std::move(key), paths_first_ + paths_count_);
  if (added) {
    PutVarint(&paths_, n);
    for (uint32_t i = 0; i < n; ++i) PutVarint(&paths_, kept[i]);
    ++paths_count_;
  }
  return it->second;
}

uint32_t Collector::InternStack(const uint64_t* pcs, uint32_t n) {
  std::string key(reinterpret_cast<const char*>(pcs), n * sizeof(uint64_t));
  auto [it, added] = stack_ids_.emplace(std::move(key), stacks_first_ + stacks_count_);
  if (added) {
    PutVarint(&stacks_, n);
    uint64_t prev = 0;
    for (uint32_t i = 0; i < n; ++i) {
      PutVarint(&stacks_, ZigZag(static_cast<int64_t>(pcs[i] - prev)));
      prev = pcs[i];
    }
    ++stacks_count_;
  }
  return it->second;
}

bool Collector::StackWords(uint32_t id, std::vector<uint64_t>* words) const {
  for (const auto& [key, value] : stack_ids_) {
    if (value != id) continue;
    words->resize(key.size() / sizeof(uint64_t));
    std::memcpy(words->data(), key.data(), words->size() * sizeof(uint64_t));
    return true;
  }
  return false;
}

bool Collector::RingReadable(const WordRing& ring) {
  if (!ring.ready()) return false;
  if (outside_pid_ == 0 || rings_mapped_.count(ring.data()) != 0) return true;
  if (!ArenaReadable(ring.data(), ring.bytes())) return false;
  rings_mapped_.insert(ring.data());
  return true;
}

void Collector::DrainSamples(ThreadSlot* s, bool now) {
  WordRing& ring = s->samples;
  if (!RingReadable(ring)) return;
  uint64_t pos = ring.ReadPos();
  const uint64_t end = ring.ReadableEnd();
  uint64_t pcs[kMaxFrames + kMaxPythonFrames];
  uint32_t stages[kMaxStageDepth];
  const PythonRuntime* py = Python();
  while (pos + 2 <= end) {
    uint64_t head = ring.Get(pos);
    if (head >> 56 != kSampleTag) break;  // cannot happen with a correct producer
    const bool deferred = (head & kSampleDeferredBit) != 0;
    uint32_t frames = head & 0x7fff;
    uint32_t depth = (head >> 16) & 0xff;
    uint32_t extra = (head >> 32) & 0xffff;
    uint32_t py_frames = (head >> 48) & 0xff;
    if (frames > kMaxFrames) frames = kMaxFrames;
    if (py_frames > kMaxPythonFrames) py_frames = kMaxPythonFrames;
    if (depth > kMaxStageDepth) depth = kMaxStageDepth;
    int64_t time = static_cast<int64_t>(ring.Get(pos + 1));
    uint64_t w = pos + 2;
    for (uint32_t i = 0; i < depth; ++i) {
      uint64_t word = ring.Get(w + i / 2);
      stages[i] = static_cast<uint32_t>(i % 2 == 0 ? word : word >> 32);
    }
    w += (depth + 1) / 2;
    for (uint32_t i = 0; i < frames; ++i) pcs[i] = ring.Get(w + i);
    w += frames;
    if (deferred) {
      // The walk's rest: the handler stopped at a frame without rows. Until
      // the collector has decoded them (outside this lock), the record and
      // those after it wait in the ring; the last drain takes it as it is.
      const int max = g_sampler.max_frames - static_cast<int>(frames);
      const int rest = CfiFinishWalk(static_cast<int>(ring.Get(w)), pcs + frames,
                                     max > 0 ? max : 0, now);
      if (rest < 0) break;
      frames += static_cast<uint32_t>(rest);
      w += 1;
    }
    // Python frames follow the pcs in the stack (include/dlprof/format.h).
    uint32_t n = frames;
    for (uint32_t i = 0; i < py_frames && py != nullptr; ++i) {
      const uint64_t f = w + kPyFrameWords * i;
      pcs[n++] = py_codes_.FrameWord(*py, ring.Get(f), ring.Get(f + 1), ring.Get(f + 2),
                                      time);
    }
    w += kPyFrameWords * py_frames;

    samples_.PutTime(time);
    PutVarint(&samples_.body, ThreadIndex(s));
    PutVarint(&samples_.body, InternStack(pcs, n));
    PutVarint(&samples_.body, InternPath(stages, depth));
    PutVarint(&samples_.body, extra);
    ++samples_total_;
    pos = w;
  }
  ring.Release(pos);
}

void Collector::DrainEvents(ThreadSlot* s) {
  WordRing& ring = s->events;
  if (!RingReadable(ring)) return;
  uint64_t pos = ring.ReadPos();
  const uint64_t end = ring.ReadableEnd();
  while (pos + 2 <= end) {
    uint64_t head = ring.Get(pos);
    events_.PutTime(static_cast<int64_t>(ring.Get(pos + 1)));
    PutVarint(&events_.body, ThreadIndex(s));
    PutVarint(&events_.body, head >> 56);
    PutVarint(&events_.body, head & 0xffffffffu);
    pos += 2;
  }
  ring.Release(pos);
}

void Collector::AddRetiredCounters(ThreadSlot* s) {
  retired_samples_ += s->samples_taken.load(std::memory_order_relaxed);
  retired_dropped_ring_ += s->dropped_ring.load(std::memory_order_relaxed);
  retired_dropped_busy_ += s->dropped_busy.load(std::memory_order_relaxed);
  retired_handler_ns_ += s->handler_ns.load(std::memory_order_relaxed);
  retired_events_dropped_ += s->events_dropped.load(std::memory_order_relaxed);
}

void Collector::Drain() {
  // The audit hook's notes first: the samples drained below may need them.
  if (const PythonRuntime* py = Python()) py_codes_.TakeExecNotes(*py, MonotonicNs());
  for (int i = 0, limit = SlotLimit(); i < limit; ++i) {
    ThreadSlot* s = SlotAt(i);
    int state = s->state.load(std::memory_order_acquire);
    if (state != kSlotLive && state != kSlotExited) continue;
    DrainSamples(s, finishing_ || state == kSlotExited);
    DrainEvents(s);
    if (state == kSlotExited) {
      native_walks_.erase(s);
      last_python_walks_.erase(s);
      const pid_t tid = s->tid.load(std::memory_order_relaxed);
      proc_.Forget(tid);
      slices_at_tick_.erase(tid);
      ExtendRunToExit(s);
      EndWallRun(s);
      AddRetiredCounters(s);

      s->state.store(kSlotFree, std::memory_order_release);
    }
  }
}

bool Collector::SnapshotTick(int64_t now) {
  // Buffers are snapshotted every tick, at the configured period: their
  // statistics count snapshots, so ticks must stay evenly spaced for them.
  bool moved = false;
  for (int i = 0; i < BufferCount(); ++i) {
    dlprof_buffer* b = BufferAt(i);
    if (!BufferLive(b)) continue;  // a fork child's inherited, unused one
    moved = true;
    uint64_t size = b->size.load(std::memory_order_relaxed);
    snapshots_.PutTime(now);
    PutVarint(&snapshots_.body, static_cast<uint64_t>(i));
    PutVarint(&snapshots_.body, size);
    b->snapshots.fetch_add(1, std::memory_order_relaxed);
    if (b->capacity > 0) {
      uint64_t ppm = size >= b->capacity ? 1000000 : size * 1000000 / b->capacity;
      b->occupancy_ppm_sum.fetch_add(ppm, std::memory_order_relaxed);
    }
    if (size == 0) b->empty_snapshots.fetch_add(1, std::memory_order_relaxed);
    if (b->capacity > 0 && size >= b->capacity) {
      b->full_snapshots.fetch_add(1, std::memory_order_relaxed);
    }
  }

  ++wall_ticks_;
  for (int i = 0, limit = SlotLimit(); i < limit; ++i) {
    ThreadSlot* s = SlotAt(i);
    if (s->state.load(std::memory_order_acquire) != kSlotLive) continue;
    const pid_t tid = s->tid.load(std::memory_order_relaxed);
    int64_t outside_delay = -1;
    const int64_t cpu = ThreadCpuTime(tid, &outside_delay);
    if (cpu < 0) continue;
    // The run delay now: from outside, read with the CPU time already.
    auto run_delay = [&] { return outside_pid_ != 0 ? outside_delay : ReadRunDelay(tid); };
    if (s->last_cpu_ns < 0) {
      // First sight. A thread that registered itself said when, and its CPU
      // clock then: this tick measures from there, as from a tick (its run
      // delay is a first read: its wait so far is not known, and is counted
      // off-CPU). Any other gets a baseline only.
      const int64_t born = s->born_ns.load(std::memory_order_relaxed);
      const int64_t born_cpu = s->born_cpu_ns.load(std::memory_order_relaxed);
      if (born > now && born_cpu >= 0) continue;  // published after this tick began: the next one
      if (born >= 0 && born_cpu >= 0 && born_cpu <= cpu) {
        s->last_cpu_ns = born_cpu;
        s->last_wall_ns = born;
        s->last_stage_exits = 0;
      } else {
        s->last_cpu_ns = cpu;
        s->last_wall_ns = now;
        s->last_run_delay_ns = run_delay();
        s->last_stage_exits = s->stage_exits.load(std::memory_order_relaxed);
        moved = true;
        continue;
      }
    }
    int64_t wall_delta = now - s->last_wall_ns;
    // A tick at or before this thread's last one: the final tick of a
    // collector process, at the time the program began to end, when a
    // regular tick came after that (a torch worker took over 100 ms from
    // its _exit to its death, and its thread was read meanwhile). Nothing to
    // add: a negative run of wall time was written once.
    if (wall_delta <= 0) continue;
    int64_t cpu_delta = cpu - s->last_cpu_ns;
    if (cpu_delta < 0) cpu_delta = 0;
    if (cpu_delta > wall_delta) cpu_delta = wall_delta;
    s->last_cpu_ns = cpu;
    s->last_wall_ns = now;
    const uint32_t path = StagePathNow(s);
    // The state at this instant (a wall-clock sample of it), and how much of
    // the tick the thread was runnable but waiting for a core. A thread that
    // ran 99% of the tick or more is running and is asked nothing (its next
    // read of the delay is a new baseline). One that used no
    // CPU at all since the last tick has not left the syscall it was blocked
    // in, so /proc is not read again (a wait it had meanwhile is counted at
    // its next read). Any other is asked its run delay, and, below 90%,
    // which call it is blocked in.
    uint64_t state = 0;
    uint32_t stack = 0;
    int64_t wait_delta = 0;
    if (cpu_delta * 100 < wall_delta * 99) {
      if (cpu_delta == 0 && s->blocked_state != 0 && !s->blocked_rewalk) {
        state = s->blocked_state;  // and the stack it was walked in
        stack = s->blocked_stack;
      } else {
        const int64_t delay = run_delay();
        const int64_t last = s->last_run_delay_ns;
        if (delay >= 0 && s->run_delay_stale) {
          // Not read since ticks it ran almost whole: what the delay grew by
          // is this tick's wait and theirs (at most a hundredth of each).
          // This tick takes what it has room for, and nothing carries: a
          // carry of such ticks' waits (a tenth of each when they were not
          // read from 90%) took the blocked side of a change from running to
          // blocked (Runtime.SteadyThreadsAreTickedLessOften: 'nap' at 220 of
          // 300 ms after 1.5 s of spinning). A new baseline only lost this
          // tick's own wait (0.47 against 0.61 at load 15).
          if (last >= 0 && delay >= last) wait_delta = std::min(delay - last, wall_delta - cpu_delta);
          s->last_run_delay_ns = delay;
        } else if (delay >= 0 && last >= 0 && delay >= last) {
          // The kernel adds a wait to run_delay only when it ends (the thread
          // gets a core), so a wait over several ticks lands at once; the
          // delay is also read a little after the tick's clocks (later still
          // when the collector itself waits for a core). So this tick takes
          // what it has room for and the rest carries to the next tick read,
          // up to kMaxWaitCarryNs: the sum over a run holds.
          wait_delta = std::min(delay - last, wall_delta - cpu_delta);
          s->last_run_delay_ns = std::max(last + wait_delta, delay - kMaxWaitCarryNs);
        } else if (delay >= 0) {
          s->last_run_delay_ns = delay;  // a first read, or a new task (a fork child's)
        }
        if (delay >= 0) s->run_delay_stale = false;
        // Blocked or not is asked as before, whatever the wait: a thread woken
        // from a sleep and waiting for a core is still in the call. (Calling
        // a tick that running and waiting filled "running" without asking hid
        // the sleeps of the io-bound scenario's readers at load 9: 'read' came
        // out compute-bound.)
        s->blocked_rewalk = false;
        if (cpu_delta * 10 < wall_delta * 9) {
          const SyscallRead blocked = proc_.Syscall(tid);
          state = blocked.state;
          // Its stack, walked from the sp and pc the kernel reports: the
          // thread is never signalled (that would end its sleep with EINTR).
          if (state != 0 && (blocked.regs || outside_pid_ != 0)) {
            stack = WalkBlocked(s, tid, blocked.regs ? blocked.sp : 0,
                                blocked.regs ? blocked.pc : 0, cpu, &s->blocked_rewalk);
          }
        }
      }
    } else {
      s->run_delay_stale = true;
    }
    s->blocked_state = state;
    s->blocked_stack = stack;
    const bool changed = s->run_path != path || s->run_state != state || s->run_stack != stack;
    // Steady: ran the whole tick, or none of it, in the same stage path as at
    // the last tick, and left no stage in between.
    const uint32_t exits = s->stage_exits.load(std::memory_order_relaxed);
    if (changed || (cpu_delta > 0 && state != 0) || exits != s->last_stage_exits) moved = true;
    s->last_stage_exits = exits;
    if (s->run_ticks > 0 && changed) {
      // The change fell somewhere in this tick. Where the thread went from
      // running to blocked, or back, its CPU time in the tick says where: the
      // run before the change gets the part that matches its state. (Giving
      // the new run the whole tick was up to a slow tick, 75 ms, wrong at
      // every change.)
      // A wait for a core goes with the running side.
      int64_t old_wall = 0, old_cpu = 0, old_wait = 0;
      if (s->run_state == 0 && state != 0) {
        old_cpu = cpu_delta;
        old_wait = wait_delta;
        old_wall = old_cpu + old_wait;
      } else if (s->run_state != 0 && state == 0) {
        old_wall = wall_delta - cpu_delta - wait_delta;
      }
      s->run_wall_ns += old_wall;
      s->run_cpu_ns += old_cpu;
      s->run_wait_ns += old_wait;
      wall_delta -= old_wall;
      cpu_delta -= old_cpu;
      wait_delta -= old_wait;
      EndWallRun(s);
    }
    s->run_path = path;
    s->run_state = state;
    s->run_stack = stack;
    ++s->run_ticks;
    s->run_end_ns = now;
    s->run_wall_ns += wall_delta;
    s->run_cpu_ns += cpu_delta;
    s->run_wait_ns += wait_delta;
  }
  return moved;
}

void Collector::EndWallRun(ThreadSlot* s) {
  if (s->run_ticks == 0) return;
  wall_runs_.PutTime(s->run_end_ns);
  PutVarint(&wall_runs_.body, ThreadIndex(s));
  PutVarint(&wall_runs_.body, s->run_path);
  PutVarint(&wall_runs_.body, s->run_ticks);
  PutVarint(&wall_runs_.body, static_cast<uint64_t>(s->run_wall_ns));
  PutVarint(&wall_runs_.body, static_cast<uint64_t>(s->run_cpu_ns));
  PutVarint(&wall_runs_.body, static_cast<uint64_t>(s->run_wait_ns));
  PutVarint(&wall_runs_.body, s->run_state);
  PutVarint(&wall_runs_.body, s->run_stack);
  s->run_ticks = 0;
  s->run_wall_ns = s->run_cpu_ns = s->run_wait_ns = 0;
}

void Collector::AppendChunk(std::string* out, uint32_t type, const std::string& payload) {
  PutU32(out, DLPROF_CHUNK_MAGIC);
  PutU32(out, type);
  PutU32(out, static_cast<uint32_t>(payload.size()));
  PutU32(out, static_cast<uint32_t>(
                  crc32(0, reinterpret_cast<const Bytef*>(payload.data()), payload.size())));
  out->append(payload);
}

void Collector::AppendProcessChunk(std::string* out) {
  if (!process_dirty_) return;
  std::string p;
  PutVarint(&p, process_fields_.size());
  for (const auto& [k, v] : process_fields_) {
    PutBytes(&p, k);
    PutBytes(&p, v);
  }
  AppendChunk(out, DLPROF_CHUNK_PROCESS, p);
  process_dirty_ = false;
}

bool Collector::WriteProcessChunk() {
  if (!opened_ || failed_) return false;
  std::string out;
  AppendProcessChunk(&out);
  if (out.empty()) return true;
  if (!WriteToFile(out)) {
    process_dirty_ = true;  // the next Flush tries again, and reports
    return false;
  }
  return true;
}

bool Collector::Flush() {
  if (!opened_ || failed_) return false;
  // Open wall runs end at a flush, so a killed process loses at most a
  // second. First: a run may define its thread, whose chunk comes next.
  for (int i = 0, limit = SlotLimit(); i < limit; ++i) {
    ThreadSlot* s = SlotAt(i);
    const int state = s->state.load(std::memory_order_acquire);
    if (state == kSlotLive || state == kSlotExited) EndWallRun(s);
  }
  std::string out, p;
  AppendProcessChunk(&out);
  if (threads_count_ > 0) {
    p.clear();
    PutVarint(&p, threads_count_);
    p += threads_;
    AppendChunk(&out, DLPROF_CHUNK_THREADS, p);
    threads_.clear();
    threads_count_ = 0;
  }
  // (From outside, a name interned since the tick's look at the arena may
  // be in a block not mapped here yet: ArenaReadable maps it, or the name
  // waits for the next write.)
  uint32_t n = stages_written_;
  while (n < StageCount() && (StageName(n + 1) == nullptr || ArenaReadable(StageName(n + 1), 1))) {
    ++n;
  }
  if (n > stages_written_) {
    p.clear();
    PutVarint(&p, n - stages_written_);
    for (uint32_t id = stages_written_ + 1; id <= n; ++id) {
      PutVarint(&p, id);
      const char* name = StageName(id);
      PutBytes(&p, name ? name : "");
    }
    AppendChunk(&out, DLPROF_CHUNK_STAGES, p);
    stages_written_ = n;
  }
  if (paths_count_ > 0) {
    p.clear();
    PutVarint(&p, paths_first_);
    PutVarint(&p, paths_count_);
    p += paths_;
    AppendChunk(&out, DLPROF_CHUNK_STAGE_PATHS, p);
    paths_first_ += paths_count_;
    paths_count_ = 0;
    paths_.clear();
  }
  // Before the stacks that name them.
  if (py_codes_.TakeChunk(&p)) AppendChunk(&out, DLPROF_CHUNK_PY_CODES, p);
  if (stacks_count_ > 0) {
    p.clear();
    PutVarint(&p, stacks_first_);
    PutVarint(&p, stacks_count_);
    p += stacks_;
    AppendChunk(&out, DLPROF_CHUNK_STACKS, p);
    stacks_first_ += stacks_count_;
    stacks_count_ = 0;
    stacks_.clear();
  }
  // The loader busy on another thread: at the next flush; at the last one,
  // without build-ids rather than none.
  uint64_t gen = 0;
  std::vector<MapEntry> maps;
  const bool last = finishing_ && maps_generation_ == UINT64_MAX;
  if (outside_maps_ != nullptr) {
    // From outside: the reader's generation says whether they changed (there
    // is no loader to ask).
    if (outside_maps_->Read(&maps, &gen) && gen != maps_generation_) {
      maps_generation_ = gen;
      p.clear();
      PutMaps(&p, maps);
      AppendChunk(&out, DLPROF_CHUNK_MAPS, p);
    }
  }
  const bool known = outside_maps_ == nullptr && LoadedObjectsGeneration(&gen);
  if (outside_maps_ != nullptr) {
    // (read above)
  } else if (known && gen != maps_generation_ && gen == maps_cache_generation_) {
    maps_generation_ = gen;
    AppendChunk(&out, DLPROF_CHUNK_MAPS, maps_cache_);
  } else if ((known || last) && gen != maps_generation_ && ReadExecutableMappings(&maps, last)) {
    maps_generation_ = gen;
    p.clear();
    PutMaps(&p, maps);
    AppendChunk(&out, DLPROF_CHUNK_MAPS, p);
    if (known) {
      maps_cache_generation_ = gen;
      maps_cache_ = p;
    }
  }
  // Objects loaded and unloaded again since the last flush (a plugin
  // dlopen'ed for a moment) are in no read of /proc/self/maps: the unwind
  // tables saw them, and their mappings are added (the reader keeps every
  // mapping a file names), so their samples keep their names.
  if (std::vector<CfiUnloadedObject> gone = CfiTakeUnloadedObjects(); !gone.empty()) {
    p.clear();
    PutVarint(&p, gone.size());
    for (const CfiUnloadedObject& g : gone) {
      PutVarint(&p, g.lo);
      PutVarint(&p, g.hi);
      PutVarint(&p, g.offset);
      PutBytes(&p, g.path);
      PutBytes(&p, "");  // no build-id: the object is gone
    }
    AppendChunk(&out, DLPROF_CHUNK_MAPS, p);
  }
  // Each buffer once, when it is live here: a fork child defines an
  // inherited one only once it uses it (ids are explicit in the chunk).
  p.clear();
  uint64_t count = 0;
  std::string defs;
  for (int i = 0, n = BufferCount(); i < n; ++i) {
    if (buffers_defined_[i] || !BufferLive(BufferAt(i)) || !ArenaReadable(BufferAt(i)->name, 1)) {
      continue;
    }
    PutVarint(&defs, static_cast<uint64_t>(i));
    PutBytes(&defs, BufferAt(i)->name);
    PutVarint(&defs, BufferAt(i)->capacity);
    buffers_defined_[i] = true;
    ++count;
  }
  if (count > 0) {
    PutVarint(&p, count);
    p += defs;
    AppendChunk(&out, DLPROF_CHUNK_BUFFERS, p);
  }
  const std::pair<Stream*, uint32_t> streams[] = {{&samples_, DLPROF_CHUNK_SAMPLES},
                                                  {&wall_runs_, DLPROF_CHUNK_WALL_STACKS},
                                                  {&snapshots_, DLPROF_CHUNK_SNAPSHOTS},
                                                  {&events_, DLPROF_CHUNK_EVENTS}};
  for (const auto& [stream, type] : streams) {
    if (stream->count == 0) continue;
    p.clear();
    PutVarint(&p, static_cast<uint64_t>(stream->base));
    PutVarint(&p, stream->count);
    p += stream->body;
    AppendChunk(&out, type, p);
    *stream = Stream{};
  }

  // Counters: those of exited threads plus the live ones.
  uint64_t samples = retired_samples_, ring = retired_dropped_ring_, busy = retired_dropped_busy_,
           handler = retired_handler_ns_, events = retired_events_dropped_;
  for (int i = 0, limit = SlotLimit(); i < limit; ++i) {
    ThreadSlot* s = SlotAt(i);
    if (s->state.load(std::memory_order_acquire) != kSlotLive) continue;
    samples += s->samples_taken.load(std::memory_order_relaxed);
    ring += s->dropped_ring.load(std::memory_order_relaxed);
    busy += s->dropped_busy.load(std::memory_order_relaxed);
    handler += s->handler_ns.load(std::memory_order_relaxed);
    events += s->events_dropped.load(std::memory_order_relaxed);
  }
  const std::pair<const char*, uint64_t> stats[] = {
      {"samples", samples},
      {"dropped_ring", ring},
      {"dropped_busy", busy},
      {"dropped_nothread", g_state.counter(kDroppedNoThread)},
      {"events_dropped", events},
      {"handler_ns", handler},
      // dlprof's own thread: with handler_ns, what profiling cost the process.
      {"collector_cpu_ns", CollectorCpuNs()},
      {"wall_ticks", wall_ticks_},
      {"py_frames_unreadable", py_codes_.unreadable()},
      // Frames of code freed before it was read, named after the audit
      // hook's notes, and the notes the hook could not hand over.
      {"py_frames_named_by_exec_notes", py_codes_.named_by_exec_notes()},
      {"py_exec_notes", ExecNotesWritten()},
      {"py_exec_notes_dropped", ExecNotesDropped()},
      // Stacks of blocked threads walked by the collector, those dropped
      // because the thread ran or left its call during the walk, and the
      // collector time they took.
      {"blocked_walks", blocked_walks_},
      {"blocked_walks_dropped", blocked_walks_dropped_},
      {"blocked_walks_reused", blocked_walks_reused_},
      {"blocked_walks_reuse_mismatched", blocked_walks_reuse_mismatched_},
      {"python_walks", python_walks_},
      {"python_walks_reused", python_walks_reused_},
      {"python_walks_reuse_mismatched", python_walks_reuse_mismatched_},
      {"blocked_walk_ns", blocked_walk_ns_},
      // What the bounded tables refused or cut: the report notes it.
      {"stage_names_refused", StageNamesRefused()},
      {"names_cut", NamesCut()},
      {"buffers_refused", BuffersRefused()},
      // Unwinder lookups given up because another thread held the loader lock.
      {"unwind_loader_busy", LoaderBusyLookups()},
      // Samples unwound by frame pointers because a fork() was under way,
      // and how long forks kept libunwind out.
      {"fork_samples", g_state.counter(kForkSamples)},
      {"fork_fence_ns", g_state.counter(kForkFenceNs)}};
  // Every counter is in the arena (the session's words, the annotation
  // tables, the slots), so a collector process writes them all.
  p.clear();
  PutVarint(&p, std::size(stats));
  for (const auto& [name, value] : stats) {
    PutBytes(&p, name);
    PutVarint(&p, value);
  }
  AppendChunk(&out, DLPROF_CHUNK_STATS, p);

  if (!WriteToFile(out)) {
    failed_ = true;
    const int err = errno;
    char msg[512];
    int len = snprintf(msg, sizeof(msg),
                       "dlprof: cannot write %s (%s%s); profiling of this process stops, "
                       "what was written stays readable\n",
                       name_.c_str(), strerror(err),
                       err == EFBIG   ? ": the file size limit, ulimit -f, is reached"
                       : err == ESTALE ? ": it was replaced or changed by someone else"
                                       : "");
    if (len > 0) WriteStderrLine(msg, static_cast<size_t>(len));
    return false;
  }
  return true;
}

bool Collector::WriteEnd(int64_t end_ns) {
  if (!opened_ || failed_) return false;
  std::string out, p;
  PutVarint(&p, static_cast<uint64_t>(end_ns));
  AppendChunk(&out, DLPROF_CHUNK_END, p);
  if (!WriteToFile(out)) return false;
  return true;
}

void Collector::Finish(int64_t end_ns) {
  if (!opened_) return;
  // A last tick, so each thread's wall time runs to the end, not to the
  // last regular tick (up to 1.5 slow periods earlier).
  SnapshotTick(end_ns);
  finishing_ = true;  // deferred walks are finished with the rows there are
  Drain();
  if (Flush()) WriteEnd(end_ns);
  ReleasePrivate(&kept_);
  opened_ = false;
}

// A fork child's copy of a kept descriptor shares the parent's open file:
// closing it drops only the child's reference.
void Collector::Abandon() {
  ReleasePrivate(&kept_);
  opened_ = false;
}

void Collector::InheritMaps(const Collector& parent) {
  maps_cache_generation_ = parent.maps_cache_generation_;
  maps_cache_ = parent.maps_cache_;
}

}  // namespace dlprof
