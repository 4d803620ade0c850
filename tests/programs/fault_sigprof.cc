// A program that uses SIGPROF itself, profiled by the fault tests: dlprof must
// step aside, and every SIGPROF the program sends must reach its handler.
// Usage: fault_sigprof MODE; see main() for the modes.
//
// The handler sorts what it receives by origin: raise()/pthread_kill()
// (SI_TKILL), the program's own ITIMER_PROF (SI_KERNEL), and anything else,
// which can only be dlprof's timer leaking through ("foreign").
#include <dlprof/dlprof.hpp>

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

std::atomic<int> g_got_raise{0}, g_got_timer{0}, g_foreign{0};
std::atomic<int> g_last_foreign_code{0};

void OnSigprof(int, siginfo_t* info, void*) {
  if (info->si_code == SI_TKILL) {
    g_got_raise.fetch_add(1);
  } else if (info->si_code == SI_KERNEL) {
    g_got_timer.fetch_add(1);
  } else {
    g_foreign.fetch_add(1);
    g_last_foreign_code.store(info->si_code);
  }
}

// For signal() and sigset(), which take a one-argument handler: origin unknown,
// counted as raises (the program only raises while this one is installed).
void OnSigprofPlain(int) { g_got_raise.fetch_add(1); }

// Installs the handler before any library constructor runs (so before
// libdlprof's), when FAULT_EARLY_SIGPROF=1: a program whose SIGPROF handler
// predates dlprof.
void InstallEarly(int, char**, char** envp) {
  bool early = false;  // from envp: getenv may not work this early
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) early |= strcmp(*e, "FAULT_EARLY_SIGPROF=1") == 0;
  if (!early) return;
  struct sigaction sa {};
  sa.sa_sigaction = OnSigprof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, nullptr);
}
__attribute__((section(".preinit_array"), used)) void (*g_preinit)(int, char**, char**) =
    InstallEarly;

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline)) void Burn(int64_t ns) {
  volatile uint64_t x = 88172645463325252ULL;
  int64_t end = ThreadCpuNs() + ns;
  while (ThreadCpuNs() < end) {
    for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  }
}

// What a query of SIGPROF's disposition shows the program.
std::string View() {
  struct sigaction q {};
  if (sigaction(SIGPROF, nullptr, &q) != 0) return "error";
  if (q.sa_handler == SIG_DFL) return "dfl";
  if (q.sa_handler == SIG_IGN) return "ign";
  if (q.sa_sigaction == OnSigprof || q.sa_handler == OnSigprofPlain) return "mine";
  return "other";
}

std::string Name(void (*h)(int)) {
  if (h == SIG_DFL) return "dfl";
  if (h == SIG_IGN) return "ign";
  if (h == OnSigprofPlain || reinterpret_cast<void*>(h) == reinterpret_cast<void*>(OnSigprof)) {
    return "mine";
  }
  if (h == SIG_ERR) return "err";
  return "other";
}

int CountTimers() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char path[300], target[256];
      snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
      ssize_t len = readlink(path, target, sizeof(target) - 1);
      if (len > 0) {
        target[len] = '\0';
        n += strstr(target, "perf_event") != nullptr;
      }
    }
    closedir(d);
  }
  // A perf event dlprof armed is held by a mapping of its user page, not an fd.
  if (FILE* f = fopen("/proc/self/maps", "r")) {
    char line[512];
    while (fgets(line, sizeof(line), f)) n += strstr(line, "perf_event") != nullptr;
    fclose(f);
  }
  if (FILE* f = fopen("/proc/self/timers", "r")) {
    char line[256];
    while (fgets(line, sizeof(line), f)) n += strncmp(line, "ID:", 3) == 0;
    fclose(f);
  }
  return n;
}

// The program's own use of SIGPROF: synchronous raises, signals to another
// thread (each acknowledged before the next), and its own ITIMER_PROF while it
// computes in stage "after", with steps marked throughout.
void UseSigprof(bool with_timer) {
  const int raises = 200, kills = 50;
  for (int i = 0; i < raises; ++i) raise(SIGPROF);
  std::atomic<bool> stop{false};
  std::thread other([&] {
    DLPROF_STAGE("other");
    while (!stop.load()) Burn(200000);
  });
  for (int i = 0; i < kills; ++i) {
    int before = g_got_raise.load();
    pthread_kill(other.native_handle(), SIGPROF);
    for (int spin = 0; spin < 20000 && g_got_raise.load() == before; ++spin) usleep(50);
  }
  if (with_timer) {
    itimerval it{{0, 2000}, {0, 2000}};
    setitimer(ITIMER_PROF, &it, nullptr);
  }
  for (int step = 0; step < 10; ++step) {
    dlprof::StepScope s;
    DLPROF_STAGE("after");
    Burn(40000000);
  }
  if (with_timer) {
    itimerval zero{};
    setitimer(ITIMER_PROF, &zero, nullptr);
  }
  {
    DLPROF_STAGE("after_sleep");  // off-CPU: wall ticks must still come
    usleep(200000);
  }
  stop.store(true);
  other.join();
  printf("raised=%d got_raise=%d timer_signals=%d foreign=%d foreign_code=%d\n", raises + kills,
         g_got_raise.load(), g_got_timer.load(), g_foreign.load(), g_last_foreign_code.load());
}

int Late(const std::string& how) {
  printf("view_start=%s\n", View().c_str());
  {
    DLPROF_STAGE("before");
    Burn(400000000);
  }
  std::string old;
  if (how == "sigaction") {
    struct sigaction sa {}, prev{};
    sa.sa_sigaction = OnSigprof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGPROF, &sa, &prev) != 0) return 3;
    old = Name(prev.sa_handler);
  } else if (how == "signal") {
    old = Name(signal(SIGPROF, OnSigprofPlain));
  } else {  // sigset: glibc calls its internal sigaction, around any interposer
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    old = Name(sigset(SIGPROF, OnSigprofPlain));
#pragma GCC diagnostic pop
  }
  printf("old=%s view_after=%s\n", old.c_str(), View().c_str());
  UseSigprof(how == "sigaction");
  printf("timers=%d enabled=%d\n", CountTimers(), dlprof_enabled());
  return 0;
}

int Early() {
  printf("view_start=%s\n", View().c_str());
  {
    DLPROF_STAGE("before");
    Burn(300000000);
  }
  UseSigprof(true);
  printf("timers=%d enabled=%d\n", CountTimers(), dlprof_enabled());
  return 0;
}

// No handler: the default action of SIGPROF ends the process, with or without dlprof.
int Default() {
  {
    DLPROF_STAGE("spin");
    Burn(300000000);
  }
  printf("raising\n");
  fflush(stdout);
  raise(SIGPROF);
  printf("survived\n");
  return 0;
}

// SIGPROF ignored: the program's raises vanish, and dlprof keeps sampling.
int Ignore() {
  void (*prev)(int) = signal(SIGPROF, SIG_IGN);
  printf("old=%s view=%s\n", Name(prev).c_str(), View().c_str());
  for (int i = 0; i < 10; ++i) raise(SIGPROF);
  {
    DLPROF_STAGE("after_ignore");
    Burn(400000000);
  }
  // Back to the default: a query says so, and sampling goes on.
  struct sigaction dfl {}, old{};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPROF, &dfl, &old);
  printf("old=%s view=%s survived timers=%d\n", Name(old.sa_handler).c_str(), View().c_str(),
         CountTimers());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (mode == "late") return Late("sigaction");
  if (mode == "signal") return Late("signal");
  if (mode == "sigset") return Late("sigset");
  if (mode == "early") return Early();
  if (mode == "default") return Default();
  if (mode == "ignore") return Ignore();
  fprintf(stderr, "usage: %s late|signal|sigset|early|default|ignore\n", argv[0]);
  return 2;
}
