// The CPU time of a wall record that belongs to other stages.
//
// The collector reads each thread's CPU clock at every wall tick (10 ms) and
// gives what it used since the last tick to the stage path the thread is in
// at the tick. A stage that runs in bursts shorter than a tick between
// long waits in another stage (decode for 2 ms after each 50 ms read) is
// then almost never the one a tick finds: its CPU time went to the waiting
// stage. The example's io-bound run said decode 0.008 s and read 0.367 s of
// CPU, where the program's own clocks said 0.243 s and 0.047 s.
//
// The thread's CPU samples say where that CPU time went: each stands for
// its periods of user time in its own stage path. A sample's periods are CPU
// time, not wall time: a thread busy 7% of the time takes one at 100 Hz every
// 140 ms, across 14 ticks, so they are matched with the ticks over stretches
// of a thread's records whose samples stand for 160 ms of CPU, not tick by tick
// (which gave decode 0.065 s). In a stretch each path gets the CPU its
// samples stand for (the clocks' CPU shared by them when they stand for
// more), and the CPU they did not see (kernel time: mostly in the stage the
// thread waits in) is shared as the ticks shared it. What a path gains is a
// new on-CPU wall record at its last sample; what it loses leaves its
// records with as much on-CPU wall time. A thread's CPU, wall and wait totals
// do not change: only which stage holds them.
#ifndef DLPROF_READERS_TICK_CPU_SPLIT_H_
#define DLPROF_READERS_TICK_CPU_SPLIT_H_

#include <cstdint>

#include "readers/profile.h"

namespace dlprof {

// For the samples of `process` (CPU samples and wall records already in
// `profile->samples`). New records are appended with `running_stack` (the
// "[running]" pseudo stack); existing samples keep their indices. Returns
// the CPU nanoseconds moved to another stage path.
int64_t SplitTickCpuBySamples(Profile* profile, uint32_t process, uint32_t running_stack);

}  // namespace dlprof

#endif  // DLPROF_READERS_TICK_CPU_SPLIT_H_
