#include "readers/input_loader.h"

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include <dlprof/format.h>

#include "readers/dlprof_reader.h"
#include "readers/gperftools_reader.h"
#include "readers/pprof_reader.h"

namespace dlprof {

InputKind DetectInput(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return InputKind::kUnknown;
  if (S_ISDIR(st.st_mode)) return InputKind::kRunFolder;
  std::ifstream in(path, std::ios::binary);
  std::string head(64, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
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

void LoadInputs(const std::vector<std::string>& paths, Profile* profile) {
  int runs = 0;
  for (const std::string& path : paths) runs += DetectInput(path) == InputKind::kRunFolder;
  std::map<std::string, int> host_uses;
  for (const std::string& path : paths) {
    const size_t first_process = profile->processes.size();
    std::string error;
    switch (DetectInput(path)) {
      case InputKind::kRunFolder: {
        std::vector<std::string> files = ListRunFiles(path, &error);
        if (files.empty()) throw std::runtime_error(error);
        ReadDlprofFiles(files, profile, &profile->warnings);
        break;
      }
      case InputKind::kDlprof:
        if (!ReadDlprofFile(path, profile, &error)) throw std::runtime_error(error);
        break;
      case InputKind::kGperftools: ReadGperftools(path, profile); break;
      case InputKind::kPprof: ReadPprof(path, profile); break;
      case InputKind::kUnknown: {
        struct stat st;
        if (stat(path.c_str(), &st) != 0) throw std::runtime_error(path + ": no such file or folder");
        throw std::runtime_error(path + ": offset 0: not a dlprof run, .dlprof file, gperftools "
                                 "CPU profile or pprof profile");
      }
    }
    if (runs > 1) {
      // One run per host (or rank): label its processes so reports can split them.
      std::string host;
      for (size_t i = first_process; i < profile->processes.size(); ++i) {
        auto it = profile->processes[i].fields.find("host");
        if (it != profile->processes[i].fields.end()) host = it->second;
      }
      if (host.empty()) host = path;
      if (host_uses[host]++ > 0) host += "#" + std::to_string(host_uses[host]);
      for (size_t i = first_process; i < profile->processes.size(); ++i) {
        profile->processes[i].host = host;
      }
    }
  }
}

}  // namespace dlprof
