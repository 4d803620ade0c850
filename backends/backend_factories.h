// Constructors and probes of the individual backends, used by the two
// registries (unwinder_registry.cc, timer_registry.cc). Internal to backends/:
// everything else picks a backend by name through MakeUnwinder /
// MakeTimerSource.
#ifndef DLPROF_BACKENDS_BACKEND_FACTORIES_H_
#define DLPROF_BACKENDS_BACKEND_FACTORIES_H_

#include <sys/types.h>
#include <ucontext.h>

#include <cstdint>
#include <memory>
#include <string>

#include "backends/timer_source.h"
#include "backends/unwinder.h"

namespace dlprof {

// Unwinders. Each New* returns nullptr and sets *error when it cannot work here.
std::unique_ptr<Unwinder> NewFpUnwinder(std::string* error);
std::unique_ptr<Unwinder> NewLibunwindUnwinder(std::string* error);
std::unique_ptr<Unwinder> NewGperftoolsUnwinder(std::string* error);
std::unique_ptr<Unwinder> NewCfiUnwinder(std::string* error);

// Whether the unwinder can work here, and a one-line description or reason.
bool ProbeFpUnwinder(std::string* note);
bool ProbeLibunwindUnwinder(std::string* note);
bool ProbeGperftoolsUnwinder(std::string* note);
bool ProbeCfiUnwinder(std::string* note);

// Timer sources. Construction never fails; Start() reports whether they work.
std::unique_ptr<TimerSource> NewPerfTimerSource();
std::unique_ptr<TimerSource> NewPosixTimerSource();
std::unique_ptr<TimerSource> NewItimerTimerSource();

// The interrupted program counter of a signal context (0 if unknown).
// This function is safe to call from asynchronous signals.
uintptr_t ContextPc(const ucontext_t* uc);

// The interrupted stack pointer of a signal context (0 if unknown).
// This function is safe to call from asynchronous signals.
uintptr_t ContextSp(const ucontext_t* uc);

// The calling thread's kernel thread id.
// This function is safe to call from asynchronous signals.
pid_t CurrentTid();

}  // namespace dlprof

#endif  // DLPROF_BACKENDS_BACKEND_FACTORIES_H_
