/* The .dlprof file format, version 3. Full description: docs/FORMAT.md.
 *
 * A file is a 16-byte file header followed by chunks. Each chunk is a 16-byte
 * chunk header and a payload; the payload is a sequence of unsigned LEB128
 * varints ("v") and length-prefixed byte strings ("s" = v length, bytes).
 * Chunks are self-checking (CRC-32 of the payload, zlib's polynomial), so a
 * reader keeps every intact chunk of a truncated or damaged file and can
 * resynchronise on the next chunk magic. Ids defined by one chunk (threads,
 * stages, stage paths, stacks, buffers) are used by later chunks only. All
 * integers in headers are little-endian. Times are CLOCK_MONOTONIC ns. */
#ifndef DLPROF_FORMAT_H_
#define DLPROF_FORMAT_H_

#include <stdint.h>

#define DLPROF_FILE_MAGIC "DLPROF\r\n" /* 8 bytes; then u32 version, u32 0 */
/* In a run folder: each collector process (DLPROF_COLLECTOR=process) holds a
 * shared flock on this file until it has written its program's file to the
 * end; a reader waits until an exclusive one can be had. */
#define DLPROF_COLLECTORS_LOCK ".collectors.lock"
/* 2: wall records carry the time the thread was runnable but waiting for a
 * core (DLPROF_CHUNK_WALL_STATES). Readers take 1 and 2; a version-1 reader
 * refuses a version-2 file rather than read it without its wall time.
 * 3: wall records carry the stack a blocked thread blocked in
 * (DLPROF_CHUNK_WALL_STACKS, which writers use instead of WALL_STATES).
 * Readers take 1 to 3; a version-2 reader, which skips chunk types it does
 * not know, refuses a version-3 file rather than read it without its wall
 * time. */
#define DLPROF_FORMAT_VERSION 3u
#define DLPROF_FORMAT_OLDEST_VERSION 1u
#define DLPROF_FILE_HEADER_SIZE 16u
#define DLPROF_CHUNK_MAGIC 0x4b4e4843u /* "CHNK" */
#define DLPROF_CHUNK_HEADER_SIZE 16u   /* u32 magic, u32 type, u32 length, u32 crc32 */
#define DLPROF_MAX_CHUNK_PAYLOAD (64u << 20)

enum dlprof_chunk_type {
  /* v count, then count x (s key, s value). Later chunks override earlier
   * keys. Keys: pid ppid role worker run_id command hz mode unwinder timer
   * clock start_ns start_unix_ns host. */
  DLPROF_CHUNK_PROCESS = 1,
  /* v count, then count x (v index, v tid, s name). */
  DLPROF_CHUNK_THREADS = 2,
  /* v count, then count x (v id, s name). Stage ids are this process's. */
  DLPROF_CHUNK_STAGES = 3,
  /* v first_id, v count, then count x (v depth, depth x v stage_id),
   * outermost stage first. Path ids are consecutive from first_id. */
  DLPROF_CHUNK_STAGE_PATHS = 4,
  /* v first_id, v count, then count x (v depth, depth x zigzag delta of pc
   * against the previous pc of the same stack, leaf first). A value with
   * DLPROF_PY_FRAME_BIT set is not a pc but a Python frame (see below);
   * Python frames come after the native pcs, innermost first. */
  DLPROF_CHUNK_STACKS = 5,
  /* v count, then count x (v start, v end, v file_offset, s path, s build_id
   * raw bytes). Mappings accumulate; a later one wins where they overlap. */
  DLPROF_CHUNK_MAPS = 6,
  /* CPU samples. v base_time, v count, then count x (v time delta from the
   * previous sample (or base), v thread index, v stack id, v stage path id,
   * v weight - 1 (timer overruns)). */
  DLPROF_CHUNK_SAMPLES = 7,
  /* Wall-clock ticks. v base_time, v count, then count x (v time delta, v
   * thread index, v stage path id, v wall_ns, v cpu_ns, v state) where state
   * is 0 = running, else 1 + the syscall number the thread was blocked in
   * (1 + DLPROF_SYSCALL_UNKNOWN: blocked, in a call that could not be read,
   * as in a process that is not dumpable).
   * Read for old files; writers now use DLPROF_CHUNK_WALL_RUNS. */
  DLPROF_CHUNK_WALL = 8,
  /* v count, then count x (v id, s name, v capacity). */
  DLPROF_CHUNK_BUFFERS = 9,
  /* v base_time, v count, then count x (v time delta, v buffer id, v size). */
  DLPROF_CHUNK_SNAPSHOTS = 10,
  /* Annotation events. v base_time, v count, then count x (v time delta, v
   * thread index, v kind, v stage id). Kinds: dlprof_event_kind. */
  DLPROF_CHUNK_EVENTS = 11,
  /* Cumulative counters: v count, then count x (s name, v value). Names:
   * samples dropped_ring dropped_busy dropped_nothread events_dropped
   * handler_ns wall_ticks. Later chunks supersede earlier ones. */
  DLPROF_CHUNK_STATS = 12,
  /* The process ended cleanly: v end_time. */
  DLPROF_CHUNK_END = 13,
  /* Wall-clock ticks, run-length encoded: consecutive ticks of one thread
   * with the same stage path and state are one record. v base_time, v count,
   * then count x (v delta of the run's end time (its last tick), v thread
   * index, v stage path id, v ticks, v wall_ns, v cpu_ns, v state), wall_ns
   * and cpu_ns summed over the run's ticks, state as in DLPROF_CHUNK_WALL.
   * Read for version-1 files; writers now use DLPROF_CHUNK_WALL_STATES. */
  DLPROF_CHUNK_WALL_RUNS = 14,
  /* The Python code objects that stacks name. v count, then count x (v id,
   * s qualname, s filename, v first_line). Ids are this process's, from 1,
   * each defined before the first stack that uses it. */
  DLPROF_CHUNK_PY_CODES = 15,
  /* Wall runs in three states (version 2). As DLPROF_CHUNK_WALL_RUNS with
   * one more field after cpu_ns: v base_time, v count, then count x (v delta
   * of the run's end time, v thread index, v stage path id, v ticks, v
   * wall_ns, v cpu_ns, v wait_ns, v state). Of wall_ns, cpu_ns the thread
   * ran, wait_ns it was runnable but waiting for a core (the kernel's
   * run_delay, /proc/<tid>/schedstat), the rest it was blocked, in the call
   * `state` names (state 0: running the whole run, save for its wait).
   * Read for version-2 files; writers now use DLPROF_CHUNK_WALL_STACKS. */
  DLPROF_CHUNK_WALL_STATES = 16,
  /* Wall runs with the blocked thread's stack (version 3). As
   * DLPROF_CHUNK_WALL_STATES with one more field after state: v stack id,
   * a DLPROF_CHUNK_STACKS id defined before (0: no stack; always 0 when
   * state is 0). The stack is the one the thread was blocked in at the
   * run's ticks (native pcs leaf first, the first one the instruction after
   * the system call, then Python frames as in DLPROF_CHUNK_STACKS), read by
   * the collector from the blocked thread's stack pointer and pc without
   * signalling it; a run ends when its stack changes. */
  DLPROF_CHUNK_WALL_STACKS = 17
};

/* A Python frame in a DLPROF_CHUNK_STACKS stack: bit 63 set (no user-space
 * pc has it), bit 62 set on the outermost Python frame of one C call of the
 * interpreter's eval loop (so a reader can put each run of Python frames
 * where that C frame, _PyEval_EvalFrameDefault, is in the native stack),
 * bits 32-55 the line being run (0: unknown), bits 0-31 the code id
 * (DLPROF_CHUNK_PY_CODES). */
#define DLPROF_PY_FRAME_BIT (1ull << 63)
#define DLPROF_PY_ENTRY_BIT (1ull << 62)
#define DLPROF_PY_LINE_SHIFT 32
#define DLPROF_PY_LINE_MASK 0xffffffull
#define DLPROF_PY_CODE_MASK 0xffffffffull

enum dlprof_event_kind {
  DLPROF_EVENT_STEP_BEGIN = 1,
  DLPROF_EVENT_STEP_END = 2,
  DLPROF_EVENT_WAIT_BEGIN = 3,
  DLPROF_EVENT_WAIT_END = 4,
  DLPROF_EVENT_STAGE_ENTER = 5, /* detailed mode only */
  DLPROF_EVENT_STAGE_EXIT = 6   /* detailed mode only */
};

/* A wall state's "syscall" when the thread was blocked but its call could
 * not be read (/proc/<tid>/syscall is closed to a non-dumpable process; its
 * /proc/<tid>/stat state says blocked). */
#define DLPROF_SYSCALL_UNKNOWN 0xffffu

#endif /* DLPROF_FORMAT_H_ */
