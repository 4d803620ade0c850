#include "core/stderr_lines.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dlprof {
namespace {

struct StderrIdentity {
  bool open = false;
  dev_t dev = 0;
  ino_t ino = 0;
};
StderrIdentity g_stderr;  // written once, before any thread of dlprof's
pid_t g_program = 0;      // the collector process's program (WriteStderrLinesToProgram)

// The flags of the program's fd 2 (its fdinfo's octal "flags:"), -1 if unread.
long ProgramStderrFlags() {
  char path[64], text[256];
  snprintf(path, sizeof(path), "/proc/%d/fdinfo/2", static_cast<int>(g_program));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (n <= 0) return -1;
  text[n] = '\0';
  const char* flags = strstr(text, "flags:");
  return flags != nullptr ? strtol(flags + 6, nullptr, 8) : -1;
}

void WriteToProgram(const char* line, size_t size) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/2", static_cast<int>(g_program));
  const int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return;  // closed, a socket, or not ours to open: the profile says it
  struct stat st {};
  const bool same = fstat(fd, &st) == 0 && st.st_dev == g_stderr.dev && st.st_ino == g_stderr.ino;
  if (same && (!S_ISREG(st.st_mode) || (ProgramStderrFlags() & O_APPEND) != 0)) {
    (void)!write(fd, line, size);
  }
  close(fd);
}

}  // namespace

void RememberStderr() {
  struct stat st {};
  g_stderr.open = fstat(STDERR_FILENO, &st) == 0;
  g_stderr.dev = st.st_dev;
  g_stderr.ino = st.st_ino;
}

bool RememberedStderr(unsigned long long* dev, unsigned long long* ino) {
  *dev = static_cast<unsigned long long>(g_stderr.dev);
  *ino = static_cast<unsigned long long>(g_stderr.ino);
  return g_stderr.open;
}

void WriteStderrLinesToProgram(pid_t pid, unsigned long long dev, unsigned long long ino) {
  g_program = pid;
  g_stderr.open = true;
  g_stderr.dev = static_cast<dev_t>(dev);
  g_stderr.ino = static_cast<ino_t>(ino);
}

void WriteStderrLine(const char* line, size_t size) {
  if (g_program != 0) {
    WriteToProgram(line, size);
    return;
  }
  struct stat st {};
  if (!g_stderr.open || fstat(STDERR_FILENO, &st) != 0 || st.st_dev != g_stderr.dev ||
      st.st_ino != g_stderr.ino) {
    return;
  }
  (void)!write(STDERR_FILENO, line, size);
}

}  // namespace dlprof
