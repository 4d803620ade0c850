// When the collector ticks: shared by the collector thread
// (core/collector_thread.cc) and the collector process (collector/).
#ifndef DLPROF_CORE_TICK_SCHEDULE_H_
#define DLPROF_CORE_TICK_SCHEDULE_H_

#include <cstdint>

namespace dlprof {

// Each wake-up costs ~60-90 us of CPU on a VM (a bare 100 Hz sleep loop is
// 1.2% of a core there: BENCHMARKS.md), so in light mode the collector ticks
// kSlowTickFactor times less often once every thread has been steady
// (running the whole tick, or blocked all of it, in the same stage) for
// kSteadyTicksBeforeSlow ticks and no buffer exists, and goes back to the
// fast period at the first tick that sees a change. Wall records carry their
// own wall time, so only the resolution of the stage attribution of a steady
// thread's wall time is coarser meanwhile; its CPU samples keep their rate.
// Detailed mode always ticks fast.
//
// Each interval is drawn uniformly from 0.5 to 1.5 periods. On a fixed grid
// the ticks alias with a program that repeats itself every period:
// rt_workload's 1/3/6 ms cycle of stages a/b/c came out 100% c (or 100% a)
// in wall time. With independent intervals the phase at a tick is
// independent of the interval it closes, so neither the state it samples
// nor the wall time it weighs that state with is biased; the mean rate is
// unchanged.
class TickSchedule {
 public:
  static constexpr int kSlowTickFactor = 5;
  static constexpr int kSteadyTicksBeforeSlow = 10;

  TickSchedule(int64_t fast_period_ns, bool light, int64_t now_ns, uint64_t seed)
      : fast_(fast_period_ns),
        slow_(light ? fast_period_ns * kSlowTickFactor : fast_period_ns),
        next_(now_ns),
        rng_(seed | 1) {}

  // The next tick's time, drawn after the last one's; never before `now`
  // (a collector that fell behind, suspended, does not burst).
  int64_t Next(int64_t now_ns) {
    rng_ ^= rng_ << 13, rng_ ^= rng_ >> 7, rng_ ^= rng_ << 17;  // xorshift64
    const int64_t period = steady_ >= kSteadyTicksBeforeSlow ? slow_ : fast_;
    next_ += period / 2 + static_cast<int64_t>(rng_ % static_cast<uint64_t>(period + 1));
    if (next_ < now_ns) next_ = now_ns;
    return next_;
  }
  // Woken for a request: the next tick is a period from now, a fast one.
  void Woken(int64_t now_ns) {
    next_ = now_ns;
    steady_ = 0;
  }
  // What the tick saw: whether anything moved (Collector::SnapshotTick).
  void Ticked(bool moved) { steady_ = moved ? 0 : steady_ + 1; }

 private:
  int64_t fast_, slow_, next_;
  uint64_t rng_;
  int steady_ = 0;
};

}  // namespace dlprof

#endif  // DLPROF_CORE_TICK_SCHEDULE_H_
