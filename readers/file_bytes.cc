#include "readers/file_bytes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dlprof {

bool ReadWholeFile(const std::string& path, std::string* out, std::string* error) {
  out->clear();
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  struct stat st;
  // One byte more than the size: the read that returns 0 needs room too.
  size_t capacity = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? static_cast<size_t>(st.st_size) + 1
                                                               : 64 * 1024;
  size_t size = 0;
  for (;;) {
    if (size == capacity) capacity *= 2;  // grew while we read, or not a regular file
    // resize() zero-fills; the bytes are overwritten at once, and it keeps
    // the code to std::string (no second buffer and copy).
    out->resize(capacity);
    ssize_t n = read(fd, out->data() + size, capacity - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = path + ": read error: " + std::strerror(errno);
      close(fd);
      out->clear();
      return false;
    }
    if (n == 0) break;
    size += static_cast<size_t>(n);
  }
  close(fd);
  out->resize(size);
  return true;
}

}  // namespace dlprof
