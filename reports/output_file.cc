#include "reports/output_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>

namespace dlprof {

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  const size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path_.substr(0, slash + 1);
  const std::string name = path_.substr(dir.size());
  std::random_device random;
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    char suffix[32];
    snprintf(suffix, sizeof(suffix), ".%d.%08x", static_cast<int>(getpid()), random());
    temp_ = dir + "." + name + suffix;
    // 0666 less the umask, as a plain open() would have made it.
    fd_ = open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0) {
    throw std::runtime_error(path_ + ": cannot create a file in its folder: " + strerror(errno));
  }
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) close(fd_);
  if (!committed_) unlink(temp_.c_str());
}

int OutputFile::TakeFd() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void OutputFile::Write(const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd_, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(path_ + ": cannot write: " + strerror(n < 0 ? errno : EIO));
    done += static_cast<size_t>(n);
  }
}

void OutputFile::Commit() {
  if (fd_ >= 0) {
    const int fd = TakeFd();
    if (close(fd) != 0) throw std::runtime_error(path_ + ": cannot write: " + strerror(errno));
  }
  if (rename(temp_.c_str(), path_.c_str()) != 0) {
    throw std::runtime_error(path_ + ": cannot put in place: " + strerror(errno));
  }
  committed_ = true;
}

void WriteGzipToFd(const std::string& data, int fd, const std::string& name) {
  gzFile f = gzdopen(fd, "wb6");
  if (f == nullptr) {
    close(fd);
    throw std::runtime_error(name + ": cannot open for writing: out of memory");
  }
  size_t done = 0;
  while (done < data.size()) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(data.size() - done, 1u << 30));
    if (gzwrite(f, data.data() + done, chunk) != static_cast<int>(chunk)) {
      int err = 0;
      std::string msg = gzerror(f, &err);
      gzclose(f);
      throw std::runtime_error(name + ": write failed: " + msg);
    }
    done += chunk;
  }
  if (gzclose(f) != Z_OK) throw std::runtime_error(name + ": write failed on close");
}

void WriteGzipFile(const std::string& path, const std::string& data) {
  OutputFile out(path);  // not gzopen(path): it would write through a link there
  WriteGzipToFd(data, out.TakeFd(), path);
  out.Commit();
}

}  // namespace dlprof
