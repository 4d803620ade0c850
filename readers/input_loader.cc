#include "readers/input_loader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <set>
#include <stdexcept>

#include <dlprof/format.h>

#include "readers/dlprof_reader.h"
#include "readers/gperftools_reader.h"
#include "readers/pprof_reader.h"

namespace dlprof {

InputKind DetectInput(const std::string& path, const FileLimits& limits, std::string* why) {
  std::string error;
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return InputKind::kRunFolder;
  uint64_t size = 0;
  const int fd = OpenRegularFile(path, limits, &size, &error);
  if (fd < 0) {
    if (why != nullptr) *why = error;
    return InputKind::kUnreadable;
  }
  std::string head(64, '\0');
  ssize_t n;
  while ((n = read(fd, head.data(), head.size())) < 0 && errno == EINTR) {
  }
  close(fd);
  head.resize(n > 0 ? static_cast<size_t>(n) : 0);
  if (head.compare(0, 8, std::string(DLPROF_FILE_MAGIC, 8)) == 0) return InputKind::kDlprof;
  if (LooksLikeGperftoolsProfile(head)) return InputKind::kGperftools;
  // gzip magic, or a protobuf whose first field is sample_type (1) or sample (2).
  if (head.size() >= 2 && static_cast<uint8_t>(head[0]) == 0x1f &&
      static_cast<uint8_t>(head[1]) == 0x8b) {
    return InputKind::kPprof;
  }
  if (!head.empty() && (head[0] == 0x0a || head[0] == 0x12)) return InputKind::kPprof;
  return InputKind::kUnknown;
}

namespace {

// Reads one input into `profile`; throws std::runtime_error (one line) when
// nothing of it can be read.
void LoadInput(const std::string& path, InputKind kind, const std::string& why,
               const FileLimits& limits, Profile* profile) {
  std::string error;
  switch (kind) {
    case InputKind::kRunFolder: {
      std::vector<std::string> files = ListRunFiles(path, &error);
      if (files.empty()) throw std::runtime_error(error);
      FileLimits in_folder = limits;
      in_folder.follow_symlinks = false;  // the runtime writes no links there
      ReadDlprofFiles(files, profile, &profile->warnings, in_folder);
      break;
    }
    case InputKind::kDlprof:
      if (!ReadDlprofFile(path, profile, &error, limits)) throw std::runtime_error(error);
      break;
    case InputKind::kGperftools: ReadGperftools(path, profile, limits); break;
    case InputKind::kPprof: ReadPprof(path, profile, limits); break;
    case InputKind::kUnreadable: {
      struct stat st;
      if (lstat(path.c_str(), &st) != 0) throw std::runtime_error(path + ": no such file or folder");
      throw std::runtime_error(why);
    }
    case InputKind::kUnknown:
      throw std::runtime_error(path + ": offset 0: not a dlprof run, .dlprof file, gperftools "
                               "CPU profile or pprof profile");
  }
}

}  // namespace

void LoadInputs(const std::vector<std::string>& paths, Profile* profile, const FileLimits& limits) {
  std::vector<InputKind> kinds;
  std::vector<std::string> whys(paths.size());
  // An input reached twice (DLPROF_OUT/* holds each run folder and the
  // `latest` link to one of them) is read once: read twice, its processes
  // came out twice, and the report split one run into two hosts.
  std::vector<bool> repeated(paths.size(), false);
  std::map<std::pair<dev_t, ino_t>, size_t> seen;
  int runs = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    kinds.push_back(DetectInput(paths[i], limits, &whys[i]));
    struct stat st;
    if (kinds.back() != InputKind::kUnreadable && stat(paths[i].c_str(), &st) == 0) {
      auto [it, fresh] = seen.emplace(std::make_pair(st.st_dev, st.st_ino), i);
      if (!fresh) {
        repeated[i] = true;
        profile->warnings.push_back(paths[i] + ": the same " +
                                    (kinds.back() == InputKind::kRunFolder ? "run" : "file") +
                                    " as " + paths[it->second] + "; read once");
        continue;
      }
    }
    runs += kinds.back() == InputKind::kRunFolder;
  }
  std::map<std::string, int> host_uses;
  std::vector<std::string> unread;
  for (size_t i = 0; i < paths.size(); ++i) {
    if (repeated[i]) continue;
    const std::string& path = paths[i];
    const size_t first_process = profile->processes.size();
    try {
      LoadInput(path, kinds[i], whys[i], limits, profile);
    } catch (const std::runtime_error& e) {
      unread.push_back(e.what());  // the other inputs are still reported
      continue;
    }
    if (runs > 1) {
      // One run per host (or rank): label its processes so reports can split them.
      std::string host;
      for (size_t p = first_process; p < profile->processes.size(); ++p) {
        auto it = profile->processes[p].fields.find("host");
        if (it != profile->processes[p].fields.end()) host = it->second;
      }
      if (host.empty()) host = path;
      if (host_uses[host]++ > 0) host += "#" + std::to_string(host_uses[host]);
      for (size_t p = first_process; p < profile->processes.size(); ++p) {
        profile->processes[p].host = host;
      }
    }
  }
  if (!unread.empty() && unread.size() == paths.size()) {
    std::string line = unread.front();
    if (unread.size() > 1) line += " (and " + std::to_string(unread.size() - 1) + " more inputs unreadable)";
    throw std::runtime_error(line);
  }
  for (const std::string& u : unread) profile->warnings.push_back(u);
}

}  // namespace dlprof
