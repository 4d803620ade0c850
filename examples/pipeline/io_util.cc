#include "examples/pipeline/io_util.h"

#include <fcntl.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace dlprof_example {

int WriteAll(int fd, const void* data, size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return 0;
}

long ReadAll(int fd, void* data, size_t len) {
  char* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < len) {
    ssize_t n = read(fd, p + done, len - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return static_cast<long>(done);
}

void WriteFile(const std::string& path, const void* data, size_t len) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + path + ": " + std::strerror(errno));
  int err = WriteAll(fd, data, len);
  if (close(fd) != 0 && err == 0) err = errno;
  if (err != 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(err));
}

void MakeThisABackgroundThread() {
  sched_param param{};
  param.sched_priority = 0;
  // Linux: pid 0 is the calling thread. Best effort: it only affects timing.
  sched_setscheduler(0, SCHED_BATCH, &param);
}

double WallSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

}  // namespace dlprof_example
