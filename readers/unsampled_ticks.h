// CPU time the sampler could see but not place: a thread in a system call
// raises no signal (the perf timer counts user mode only: a signal queued in
// the kernel made sleeping calls fail with EINTR), so its next sample, in
// user mode, stands for those periods too (its count). When the thread
// changed stage in between, that sample's stage did not get them all.
//
// Threads whose samples carry such periods record their stage changes with
// timestamps (core/thread_registry.h, ThreadSlot::stage_events). Here the
// periods of a sample whose gap holds stage changes are shared among the
// stage paths of that gap by wall time, and the shares that belong to
// another path become samples of it with a pseudo stack, "[in the kernel:
// stack not sampled]". A gap whose CPU time is under 80% of its wall time
// and in which the collector's wall ticks saw the thread blocked is left
// alone: wall time a thread spent blocked is not CPU time, and its blocked
// stage must not gain samples (a wait for a core, on a loaded machine, is
// no such reason).
#ifndef DLPROF_READERS_UNSAMPLED_TICKS_H_
#define DLPROF_READERS_UNSAMPLED_TICKS_H_

#include <cstdint>

#include "readers/profile.h"

namespace dlprof {

// For the samples of `process` (already in `profile->samples`, with its
// stage intervals in `profile->intervals`). Returns how many periods moved
// to another stage path.
int64_t ShareUnsampledTicks(Profile* profile, uint32_t process, int64_t period_ns);

}  // namespace dlprof

#endif  // DLPROF_READERS_UNSAMPLED_TICKS_H_
