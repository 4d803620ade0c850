// Short and abrupt lives, for the cfi collector's decoding at start-up:
//   spin MS      spin MS milliseconds in main, then return 0
//   thread-exit  four threads spin; one calls exit(7) after ~20 ms
//   fork         fork at once; the child spins 10 ms and exits 3, the parent waits
//   exec         exec itself as "spin 5" at once
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

volatile double g_sink;

double Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

void Spin(double seconds) {
  const double end = Now() + seconds;
  double x = g_sink;
  while (Now() < end) {
    for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
  }
  g_sink = x;
}

void* Spinner(void* arg) {
  if (arg != nullptr) {
    Spin(0.02);
    std::printf("exiting from a thread\n");
    std::fflush(stdout);
    std::exit(7);
  }
  Spin(10);
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "spin";
  if (std::strcmp(mode, "spin") == 0) {
    Spin((argc > 2 ? std::atof(argv[2]) : 1) / 1000.0);
    std::printf("spun\n");
    return 0;
  }
  if (std::strcmp(mode, "thread-exit") == 0) {
    pthread_t t[4];
    for (int i = 0; i < 4; ++i) pthread_create(&t[i], nullptr, Spinner, i == 3 ? &t : nullptr);
    for (auto& th : t) pthread_join(th, nullptr);
    return 1;  // not reached: thread 3 exits
  }
  if (std::strcmp(mode, "fork") == 0) {
    const pid_t pid = fork();
    if (pid == 0) {
      Spin(0.01);
      std::printf("child\n");
      std::fflush(stdout);
      _exit(3);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    std::printf("parent: child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
  }
  if (std::strcmp(mode, "exec") == 0) {
    execl("/proc/self/exe", argv[0], "spin", "5", static_cast<char*>(nullptr));
    std::perror("exec");
    return 2;
  }
  return 2;
}
