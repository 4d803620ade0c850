// The program `dlprof run` wraps in tests/run_wrapper_test.cc: what it prints,
// how it ends and which signals reach it are known.
// Usage:
//   signal_child print            fixed bytes on stdout (binary, no final newline), exit 0
//   signal_child exit N           a line on stdout, exit N
//   signal_child raise SIG        a line on stdout, then dies of signal SIG
//   signal_child wait LOG         handles HUP INT QUIT USR1 USR2 WINCH CONT ALRM TERM, and
//                                 ABRT SEGV BUS FPE ILL TRAP SYS XCPU XFSZ PIPE PROF:
//                                 appends "ready" to LOG, then "sig N" for each signal
//                                 received; exits 0 after TERM
//   signal_child spin LOG         handles nothing; appends "ready" and burns CPU until killed
//   signal_child selfstop LOG     appends "ready", stops itself (SIGSTOP), appends
//                                 "continued" once resumed, exits 0
//   signal_child ignoretstp LOG   ignores SIGTSTP, appends "ready", burns 600 ms,
//                                 appends "done", exits 0
//   signal_child orphan           leaves a grandchild to be reparented (double fork) and
//                                 prints "orphan reaped" once it is gone, or
//                                 "orphan zombie" if it is still a zombie after 2 s
// Each mode burns ~50 ms of CPU first, so that the profile has samples.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>

namespace {

int g_pipe[2];

void Burn(long ms) {
  timespec start, now;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start);
  volatile unsigned long x = 1;
  do {
    for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005UL + 1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < ms);
}

void Append(const char* path, const std::string& line) {
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) _exit(3);
  const std::string text = line + "\n";
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) _exit(3);
  close(fd);
}

void OnSignal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  (void)!write(g_pipe[1], &b, 1);
}

int Wait(const char* log) {
  if (pipe(g_pipe) != 0) return 3;
  for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT, SIGALRM, SIGTERM,
                  SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGXCPU, SIGXFSZ,
                  SIGPIPE, SIGPROF}) {
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
  Append(log, "ready");
  for (;;) {
    // Not a read() that blocks until a handler writes: TSan runs a handler
    // only when an intercepted call returns, which that read never would.
    pollfd p = {g_pipe[0], POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    unsigned char b;
    const ssize_t n = read(g_pipe[0], &b, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n != 1) return 3;
    Append(log, "sig " + std::to_string(b));
    if (b == SIGTERM) return 0;
  }
}

int Orphan() {
  int fds[2];
  if (pipe(fds) != 0) return 3;
  const pid_t middle = fork();
  if (middle == 0) {
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      const timespec nap = {0, 100 * 1000 * 1000};
      nanosleep(&nap, nullptr);
      _exit(0);
    }
    (void)!write(fds[1], &grandchild, sizeof(grandchild));
    _exit(0);
  }
  pid_t grandchild = 0;
  if (read(fds[0], &grandchild, sizeof(grandchild)) != sizeof(grandchild)) return 3;
  waitpid(middle, nullptr, 0);
  const std::string stat_path = "/proc/" + std::to_string(grandchild) + "/stat";
  for (int i = 0; i < 200; ++i) {
    FILE* f = fopen(stat_path.c_str(), "r");
    if (f == nullptr) {
      printf("orphan reaped\n");
      return 0;
    }
    fclose(f);
    const timespec nap = {0, 10 * 1000 * 1000};
    nanosleep(&nap, nullptr);
  }
  printf("orphan zombie\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  Burn(50);
  if (mode == "print") {
    static const char kBytes[] = "first line\n\x00\x01\xff binary\r\ndlprof: not ours";
    fwrite(kBytes, 1, sizeof(kBytes) - 1, stdout);
    return 0;
  }
  if (mode == "exit" && argc == 3) {
    printf("exiting with %s\n", argv[2]);
    return atoi(argv[2]);
  }
  if (mode == "raise" && argc == 3) {
    const int sig = atoi(argv[2]);
    printf("raising %d\n", sig);
    fflush(stdout);
    signal(sig, SIG_DFL);
    raise(sig);
    return 4;
  }
  if (mode == "wait" && argc == 3) return Wait(argv[2]);
  if (mode == "spin" && argc == 3) {
    Append(argv[2], "ready");
    for (;;) Burn(10);
  }
  if (mode == "orphan") return Orphan();
  if (mode == "selfstop" && argc == 3) {
    Append(argv[2], "ready");
    raise(SIGSTOP);
    Append(argv[2], "continued");
    return 0;
  }
  if (mode == "ignoretstp" && argc == 3) {
    signal(SIGTSTP, SIG_IGN);
    Append(argv[2], "ready");
    Burn(600);
    Append(argv[2], "done");
    return 0;
  }
  return 2;
}
