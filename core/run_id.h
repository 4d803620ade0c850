// A run's id, DLPROF_OUT/<run-id>: when it started, by whom, and 32 random
// bits, so that two runs started in the same second with the same pid (two
// containers whose programs are each PID 1, sharing a mounted DLPROF_OUT)
// never share a folder. Used by the runtime and by `dlprof run`.
#ifndef DLPROF_CORE_RUN_ID_H_
#define DLPROF_CORE_RUN_ID_H_

#include <sys/random.h>
#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace dlprof {

inline std::string NewRunId(pid_t pid) {
  char id[80];
  const time_t now = time(nullptr);
  struct tm tm;
  localtime_r(&now, &tm);
  const size_t n = strftime(id, sizeof(id), "%Y%m%d-%H%M%S", &tm);
  uint32_t salt = 0;
  if (getrandom(&salt, sizeof(salt), GRND_NONBLOCK) != static_cast<ssize_t>(sizeof(salt))) {
    // (A seccomp filter or an old kernel: the clock's nanoseconds instead.)
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    salt = static_cast<uint32_t>(ts.tv_nsec) ^ static_cast<uint32_t>(ts.tv_sec * 2654435761u);
  }
  snprintf(id + n, sizeof(id) - n, "-%d-%08x", static_cast<int>(pid), salt);
  return id;
}

}  // namespace dlprof

#endif  // DLPROF_CORE_RUN_ID_H_
