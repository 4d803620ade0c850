#include "readers/file_bytes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <new>
#include <stdexcept>

namespace dlprof {
namespace {

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "of an unknown type";
}

std::string OverLimit(const std::string& path, uint64_t size, uint64_t limit) {
  return path + ": " + (size > limit ? ByteSize(size) : "more than " + ByteSize(limit)) +
         ", over the limit of " + ByteSize(limit) + " for one input file (--max-file-size); not read";
}

}  // namespace

std::string ByteSize(uint64_t bytes) {
  char buf[48];
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) {
    snprintf(buf, sizeof(buf), "%llu bytes", static_cast<unsigned long long>(bytes));
    return buf;
  }
  double v = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (v >= 1024 && unit < 5) {
    v /= 1024;
    ++unit;
  }
  snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[unit]);
  return buf;
}

int OpenRegularFile(const std::string& path, const FileLimits& limits, uint64_t* size,
                    std::string* error) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer forever.
  const int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK |
                    (limits.follow_symlinks ? 0 : O_NOFOLLOW);
  const int fd = open(path.c_str(), flags);
  if (fd < 0) {
    if (errno == ELOOP && !limits.follow_symlinks) {
      *error = path + ": a symbolic link, not a file the run wrote; not read";
    } else {
      *error = path + ": cannot open: " + std::strerror(errno);
    }
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *error = path + ": cannot stat: " + std::strerror(errno);
    close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = path + ": not a regular file (" + KindOf(st.st_mode) + "); not read";
    close(fd);
    return -1;
  }
  if (static_cast<uint64_t>(st.st_size) > limits.max_bytes) {
    *error = OverLimit(path, static_cast<uint64_t>(st.st_size), limits.max_bytes);
    close(fd);
    return -1;
  }
  *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

bool ReadWholeFile(const std::string& path, std::string* out, std::string* error,
                   const FileLimits& limits) {
  out->clear();
  uint64_t file_size = 0;
  const int fd = OpenRegularFile(path, limits, &file_size, error);
  if (fd < 0) return false;
  // One byte more than the size: the read that returns 0 needs room too.
  uint64_t capacity = file_size + 1;
  uint64_t size = 0;
  try {
    for (;;) {
      if (size == capacity) {
        if (size > limits.max_bytes) {  // it grew past the limit while we read
          *error = OverLimit(path, 0, limits.max_bytes);
          close(fd);
          out->clear();
          return false;
        }
        capacity = std::min(capacity * 2, limits.max_bytes + 1);
      }
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
      size += static_cast<uint64_t>(n);
    }
  } catch (const std::bad_alloc&) {
    *error = path + ": cannot allocate " + ByteSize(capacity) + " to read it";
    close(fd);
    std::string().swap(*out);
    return false;
  } catch (const std::length_error&) {
    *error = path + ": cannot allocate " + ByteSize(capacity) + " to read it";
    close(fd);
    std::string().swap(*out);
    return false;
  }
  close(fd);
  out->resize(size);
  return true;
}

}  // namespace dlprof
