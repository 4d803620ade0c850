/* dlprof: a sampling profiler for data-loading pipelines.
 *
 * The stable C API. Every function here:
 *   - is thread-safe;
 *   - is safe to call when profiling is off (DLPROF_SAMPLE unset or 0), where it
 *     costs one predictable branch and does nothing;
 *   - never blocks, never fails loudly, and never changes the program's behaviour.
 * None of them may be called from a signal handler unless it says so.
 */
#ifndef DLPROF_DLPROF_H_
#define DLPROF_DLPROF_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define DLPROF_EXPORT __attribute__((visibility("default")))
#else
#define DLPROF_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this process is being sampled, else 0. Async-signal-safe. */
DLPROF_EXPORT int dlprof_enabled(void);

/* Stages: named pipeline steps (read, decode, ...). The same name always gives
 * the same id within a process; reports merge stages across processes by name.
 * Returns 0 when profiling is off or the table is full (0 is "no stage").
 * Takes a lock; intern once, then use the id. */
DLPROF_EXPORT uint32_t dlprof_stage_intern(const char* name);

/* Stages nest per thread. Each sample carries the thread's stage stack at the
 * moment it was taken. Enter with id 0 is ignored (but still needs an exit).
 * Nesting deeper than DLPROF_MAX_STAGE_DEPTH keeps counting but records only
 * the outermost levels. Cost when sampling: a few ns (no syscall, no lock). */
DLPROF_EXPORT void dlprof_stage_enter(uint32_t stage_id);
DLPROF_EXPORT void dlprof_stage_exit(void);
#define DLPROF_MAX_STAGE_DEPTH 16

/* Buffers: bounded queues between stages (prefetch buffers). Occupancy is
 * snapshotted every DLPROF_SNAPSHOT_MS (default 10 ms) in the background.
 * create returns NULL when profiling is off; every buffer function accepts
 * NULL. The buffer lives until the process exits (never freed: snapshots may
 * read it at any time). */
typedef struct dlprof_buffer dlprof_buffer;
DLPROF_EXPORT dlprof_buffer* dlprof_buffer_create(const char* name, uint64_t capacity);
/* One relaxed atomic store. */
DLPROF_EXPORT void dlprof_buffer_set_size(dlprof_buffer* b, uint64_t size);

/* Live statistics of a buffer, as torchdata's prefetcher reports them, over
 * the snapshots taken so far. Returns 0 on success, -1 if b is NULL or no
 * snapshot has been taken yet (then *out is zeroed). */
typedef struct dlprof_buffer_stats {
  uint64_t capacity;
  uint64_t snapshots;        /* snapshots taken */
  double mean_occupancy;     /* mean size / capacity, 0..1 */
  double empty_fraction;     /* share of snapshots with size 0 */
  double full_fraction;      /* share of snapshots with size >= capacity */
} dlprof_buffer_stats;
DLPROF_EXPORT int dlprof_buffer_stats_get(const dlprof_buffer* b, dlprof_buffer_stats* out);

/* Training-loop markers: a step, and inside it the time the loop blocks
 * waiting for the next batch. Record a timestamp (vDSO clock) each. */
DLPROF_EXPORT void dlprof_step_begin(void);
DLPROF_EXPORT void dlprof_step_end(void);
DLPROF_EXPORT void dlprof_wait_begin(void);
DLPROF_EXPORT void dlprof_wait_end(void);

/* This process is worker N of the pipeline (role "worker"). */
DLPROF_EXPORT void dlprof_set_worker(int worker_id);

/* Flush everything recorded so far to the profile file and wait until it is
 * written (at most timeout_ms). Returns 0 when flushed. Not needed in normal
 * use: the writer flushes at least once a second and at exit. */
DLPROF_EXPORT int dlprof_flush(int timeout_ms);

/* Backends compiled into this library, as "kind name available note" lines
 * (kind is "unwinder" or "timer"), written into buf (NUL-terminated, cut at
 * len). Returns the length the full text needs, like snprintf. Works whether
 * or not profiling is on. */
DLPROF_EXPORT size_t dlprof_backends_describe(char* buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* DLPROF_DLPROF_H_ */
