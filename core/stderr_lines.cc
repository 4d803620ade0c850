#include "core/stderr_lines.h"

#include <sys/stat.h>
#include <unistd.h>

namespace dlprof {
namespace {

struct StderrIdentity {
  bool open = false;
  dev_t dev = 0;
  ino_t ino = 0;
};
StderrIdentity g_stderr;  // written once, before any thread of dlprof's

}  // namespace

void RememberStderr() {
  struct stat st {};
  g_stderr.open = fstat(STDERR_FILENO, &st) == 0;
  g_stderr.dev = st.st_dev;
  g_stderr.ino = st.st_ino;
}

void WriteStderrLine(const char* line, size_t size) {
  struct stat st {};
  if (!g_stderr.open || fstat(STDERR_FILENO, &st) != 0 || st.st_dev != g_stderr.dev ||
      st.st_ino != g_stderr.ino) {
    return;
  }
  (void)!write(STDERR_FILENO, line, size);
}

}  // namespace dlprof
