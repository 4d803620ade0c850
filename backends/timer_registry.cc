// The timer-source registry: names to backends, and "auto", which keeps the
// first source whose Start() succeeds.
//
// Order: perf, then posix, then itimer. Measured here (tests/backends_test.cc,
// TimerFidelity*): a perf task-clock event gives one signal per period at
// 1000 Hz (0.97-0.99 of CPU time x hz), while POSIX CPU timers and setitimer
// are checked on the 250 Hz scheduler tick and deliver at most that many
// signals (POSIX timers report the rest as overruns, setitimer loses them);
// tick-checked timers also miss threads that run in bursts shorter than a
// tick. perf can be refused (perf_event_paranoid=3, seccomp, containers), so
// each fallback stays.
#include <utility>

#include "backends/backend_factories.h"

namespace dlprof {
namespace {

struct TimerEntry {
  const char* name;
  std::unique_ptr<TimerSource> (*make)();
};

constexpr TimerEntry kTimers[] = {
    {"perf", NewPerfTimerSource},
    {"posix", NewPosixTimerSource},
    {"itimer", NewItimerTimerSource},
};

// Delegates to the first source that starts; name() then reports that one.
class AutoTimerSource : public TimerSource {
 public:
  const char* name() const override { return chosen_ ? chosen_->name() : "auto"; }
  bool PerThread() const override { return chosen_ ? chosen_->PerThread() : true; }
  std::string note() const override { return note_; }
  bool CpuTimeWeighted() const override { return chosen_ && chosen_->CpuTimeWeighted(); }

  bool Start(int signo, int hz, std::string* error) override {
    chosen_.reset();
    std::string refusals;
    for (const TimerEntry& e : kTimers) {
      std::unique_ptr<TimerSource> source = e.make();
      std::string why;
      if (source->Start(signo, hz, &why)) {
        note_ = source->note();
        if (!refusals.empty()) note_ += "; chosen because " + refusals;
        chosen_ = std::move(source);
        return true;
      }
      refusals += (refusals.empty() ? "" : "; ") + why;
    }
    *error = "no timer source works here: " + refusals;
    note_ = *error;
    return false;
  }

  bool ArmThread(pid_t tid, ThreadTimer* t, std::string* error) override {
    if (!chosen_) {
      *error = "auto: not started";
      return false;
    }
    return chosen_->ArmThread(tid, t, error);
  }
  void DisarmThread(ThreadTimer* t) override {
    if (chosen_) chosen_->DisarmThread(t);
  }
  void Stop() override {
    if (chosen_) chosen_->Stop();
  }
  void ForgetInherited(ThreadTimer* t) override {
    if (chosen_) chosen_->ForgetInherited(t);
  }
  // This function is safe to call from asynchronous signals.
  int Overrun(const siginfo_t* info) const override { return chosen_ ? chosen_->Overrun(info) : 0; }
  // The chosen source's own test: its signals carry its identity (a POSIX
  // timer's sival_ptr is the inner source, not this wrapper).
  // This function is safe to call from asynchronous signals.
  bool IsOwnSignal(const siginfo_t* info) const override {
    return chosen_ != nullptr && chosen_->IsOwnSignal(info);
  }
  bool SurvivesExec() const override { return chosen_ && chosen_->SurvivesExec(); }

 private:
  std::unique_ptr<TimerSource> chosen_;
  std::string note_;
};

}  // namespace

std::vector<BackendInfo> ListTimerSources() {
  std::vector<BackendInfo> out;
  for (const TimerEntry& e : kTimers) {
    BackendInfo info;
    info.kind = "timer";
    info.name = e.name;
    // Start() only probes (opens and closes, or validates); nothing is armed.
    std::unique_ptr<TimerSource> source = e.make();
    std::string why;
    info.available = source->Start(SIGPROF, 100, &why);
    info.note = info.available ? source->note() : why;
    source->Stop();
    out.push_back(std::move(info));
  }
  return out;
}

std::unique_ptr<TimerSource> MakeTimerSource(const std::string& name, std::string* error) {
  if (name.empty() || name == "auto") return std::make_unique<AutoTimerSource>();
  for (const TimerEntry& e : kTimers) {
    if (name == e.name) return e.make();
  }
  std::string known;
  for (const TimerEntry& e : kTimers) known += std::string(", ") + e.name;
  if (error != nullptr) *error = "unknown timer source '" + name + "' (known: auto" + known + ")";
  return nullptr;
}

}  // namespace dlprof
