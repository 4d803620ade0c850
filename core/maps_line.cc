#include "core/maps_line.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace dlprof {
namespace {

// A hexadecimal field of at most 16 digits at *at; advances past it.
bool Hex(std::string_view s, size_t* at, uint64_t* out) {
  uint64_t v = 0;
  size_t i = *at;
  for (; i < s.size() && i - *at < 17; ++i) {
    const char c = s[i];
    unsigned d;
    if (c >= '0' && c <= '9') {
      d = static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = static_cast<unsigned>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      d = static_cast<unsigned>(c - 'A' + 10);
    } else {
      break;
    }
    v = (v << 4) | d;
  }
  if (i == *at || i - *at > 16) return false;
  *at = i;
  *out = v;
  return true;
}

// A decimal field of at most 20 digits at *at (an inode); advances past it.
bool Decimal(std::string_view s, size_t* at, uint64_t* out) {
  uint64_t v = 0;
  size_t i = *at;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    const uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (i == *at) return false;
  *at = i;
  *out = v;
  return true;
}

bool Char(std::string_view s, size_t* at, char c) {
  if (*at >= s.size() || s[*at] != c) return false;
  ++*at;
  return true;
}

// One or more spaces.
bool Spaces(std::string_view s, size_t* at) {
  const size_t from = *at;
  while (*at < s.size() && s[*at] == ' ') ++*at;
  return *at > from;
}

}  // namespace

bool ParseMapsLine(std::string_view line, MapsLine* out) {
  size_t at = 0;
  uint64_t lo, hi, offset, major, minor, inode;
  if (!Hex(line, &at, &lo) || !Char(line, &at, '-') || !Hex(line, &at, &hi) || !Spaces(line, &at)) {
    return false;
  }
  if (line.size() - at < 4) return false;
  memcpy(out->perms, line.data() + at, 4);
  at += 4;
  if (!Spaces(line, &at) || !Hex(line, &at, &offset) || !Spaces(line, &at) || !Hex(line, &at, &major) ||
      major > UINT32_MAX || !Char(line, &at, ':') || !Hex(line, &at, &minor) || minor > UINT32_MAX ||
      !Spaces(line, &at) || !Decimal(line, &at, &inode)) {
    return false;
  }
  // The path, if any, after the padding; the line ends at the inode else.
  if (at < line.size() && line[at] != ' ' && line[at] != '\n') return false;
  while (at < line.size() && line[at] == ' ') ++at;
  size_t end = line.size();
  while (end > at && (line[end - 1] == '\n' || line[end - 1] == ' ')) --end;
  out->lo = lo;
  out->hi = hi;
  out->offset = offset;
  out->dev_major = static_cast<uint32_t>(major);
  out->dev_minor = static_cast<uint32_t>(minor);
  out->inode = inode;
  out->path = line.substr(at, end - at);
  return true;
}

bool ReadMapsText(pid_t pid, std::string* text, std::string* error) {
  char path[64];
  if (pid == 0) {
    snprintf(path, sizeof(path), "/proc/self/maps");
  } else {
    snprintf(path, sizeof(path), "/proc/%d/maps", static_cast<int>(pid));
  }
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = std::string(path) + ": " + strerror(errno);
    return false;
  }
  text->clear();
  char chunk[65536];
  bool ok = true;
  for (;;) {
    const ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = std::string(path) + ": " + strerror(errno);
      ok = false;
      break;
    }
    if (text->size() + static_cast<size_t>(n) > kMaxMapsBytes) {
      *error = std::string(path) + ": larger than " + std::to_string(kMaxMapsBytes >> 20) + " MiB";
      ok = false;
      break;
    }
    text->append(chunk, static_cast<size_t>(n));
  }
  close(fd);
  return ok;
}

}  // namespace dlprof
