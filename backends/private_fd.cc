#include "backends/private_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dlprof {

int AboveStdio(int fd) {
  if (fd < 0 || fd > STDERR_FILENO) return fd;
  const int above = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  const int err = errno;
  close(fd);
  errno = err;
  return above;
}

int OpenOwn(int dir_fd, const char* path, int flags, mode_t mode) {
  return AboveStdio(openat(dir_fd, path, flags | O_CLOEXEC, mode));
}

FILE* FopenOwn(const char* path) {
  const int fd = OpenOwn(AT_FDCWD, path, O_RDONLY);
  if (fd < 0) return nullptr;
  FILE* f = fdopen(fd, "re");
  if (f == nullptr) close(fd);
  return f;
}

DIR* OpendirOwn(const char* path) {
  const int fd = OpenOwn(AT_FDCWD, path, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return nullptr;
  DIR* d = fdopendir(fd);
  if (d == nullptr) close(fd);
  return d;
}

int PrivateFdFloor() {
  rlimit limit{};
  rlim_t top = 1024;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    top = limit.rlim_cur;
  }
  if (top > 4096) top = 4096;
  return top > 128 ? static_cast<int>(top) - 64 : static_cast<int>(top / 2);
}

PrivateFd KeepPrivate(int fd) {
  PrivateFd p;
  if (fd < 0) return p;
  const int floor = PrivateFdFloor();
  if (fd < floor) {
    const int high = fcntl(fd, F_DUPFD_CLOEXEC, floor);
    if (high >= 0) {
      close(fd);
      fd = high;
    }
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    close(fd);
    return p;
  }
  p.fd = fd;
  p.dev = st.st_dev;
  p.ino = st.st_ino;
  return p;
}

bool StillPrivate(const PrivateFd& p) {
  if (p.fd < 0) return false;
  struct stat st {};
  return fstat(p.fd, &st) == 0 && st.st_dev == p.dev && st.st_ino == p.ino;
}

void ReleasePrivate(PrivateFd* p) {
  if (StillPrivate(*p)) close(p->fd);
  *p = PrivateFd{};
}

}  // namespace dlprof
