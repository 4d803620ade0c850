// A report file written into place safely. The output folder may hold what
// someone else put there (a link named summary.json pointing at ~/.bashrc):
// writing through a path would follow it. So the bytes go to a new file of
// our own in the same folder, created O_EXCL|O_NOFOLLOW (nothing that exists
// is ever opened), and rename() puts it at the path, replacing whatever is
// there, a symbolic link itself rather than its target. A reader of the
// path sees the old file or the whole new one, never half of it.
#ifndef DLPROF_REPORTS_OUTPUT_FILE_H_
#define DLPROF_REPORTS_OUTPUT_FILE_H_

#include <string>

namespace dlprof {

class OutputFile {
 public:
  // Creates the temporary file beside `path`; throws std::runtime_error
  // naming `path` when it cannot.
  explicit OutputFile(std::string path);
  // Removes the temporary file unless Commit() succeeded.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // The temporary file's descriptor. TakeFd() hands it over (to gzdopen,
  // which closes it); Commit() then closes nothing.
  int fd() const { return fd_; }
  int TakeFd();
  // Writes all of `data`; throws std::runtime_error naming the path.
  void Write(const std::string& data);
  // Closes the file (if still ours) and renames it to the path; throws
  // std::runtime_error naming the path.
  void Commit();

 private:
  std::string path_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `data` gzipped (zlib level 6: its default, and what pprof writes)
// to `path` through an OutputFile; throws std::runtime_error naming `path`.
void WriteGzipFile(const std::string& path, const std::string& data);
// The same onto an open descriptor, which it closes; `name` is what errors
// call it.
void WriteGzipToFd(const std::string& data, int fd, const std::string& name);

}  // namespace dlprof

#endif  // DLPROF_REPORTS_OUTPUT_FILE_H_
