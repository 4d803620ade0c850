// Where dlprof touches the program: every libc function that libdlprof
// exports in place of glibc's is defined in core/hooks.cc, in one thin
// forwarder each. What each one does is declared next to its work, here.
#ifndef DLPROF_CORE_HOOKS_H_
#define DLPROF_CORE_HOOKS_H_

#include <pthread.h>
#include <signal.h>

namespace dlprof {

// libdlprof's own pthread_create and sigaction, by addresses no other
// definition can interpose (hidden aliases, bound at link time): dlprof
// compares them with what the global lookup finds to learn whether another
// definition (a sanitizer's interceptor) comes first.
using PthreadCreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);
PthreadCreateFn OwnPthreadCreateAddress();
SigactionFn OwnSigactionAddress();

// pthread_create (core/session.cc): registers the new thread before its
// start routine runs, except dlprof's own threads.
int ProgramPthreadCreate(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*),
                         void* arg);

// sigaction and signal (core/signals.cc; see core/signals.h for the view the
// program gets of the signals dlprof owns).
int ProgramSigactionCall(int signo, const struct sigaction* act, struct sigaction* old);
void (*ProgramSignalCall(int signo, void (*handler)(int)))(int);

}  // namespace dlprof

#endif  // DLPROF_CORE_HOOKS_H_
