// Starting the collector process (core/collector_process.h).
#include "core/collector_process.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

#include "core/collector_spawn.h"
#include "core/shared_arena.h"

namespace dlprof {
namespace {

std::string* g_program = nullptr;  // dlprof-collector's path (FindCollectorProgram)
std::atomic<bool> g_is_process{false};

}  // namespace

std::string CollectorProcessRefusal(const Config& config, bool python) {
  if (!config.collector_process) return "DLPROF_COLLECTOR is thread";
  if (!ArenaShared()) return "no shared memory here (memfd or MADV_WIPEONFORK refused)";
  if (python) return "it reads no Python frames yet";
  if (config.baseline_steps > 0) return "it cannot arm timers at a baseline's end yet";
  if (config.unwinder == "cfi") return "it builds no unwind tables for DLPROF_BACKEND=cfi yet";
  return "";
}

bool FindCollectorProgram(std::string* why) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&FindCollectorProgram), &info) == 0 ||
      info.dli_fname == nullptr) {
    *why = "libdlprof's own path is unknown";
    return false;
  }
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  path = (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) + "/dlprof-collector";
  if (access(path.c_str(), X_OK) != 0) {
    *why = "no " + path;
    return false;
  }
  if (g_program == nullptr) g_program = new std::string();
  *g_program = path;
  return true;
}

bool StartCollectorProcess(const Collector& c, const ProfileFileSpec& spec, int snapshot_ms,
                           bool light, bool file_at_once, std::string* why) {
  if (g_program == nullptr) {
    *why = "dlprof-collector was not found";
    return false;
  }
  const int arena_fd = ArenaSharedFd();
  if (arena_fd < 0) {
    *why = "the arena is no longer shared";
    return false;
  }
  std::vector<std::string> args = {
      *g_program,
      "--pid=" + std::to_string(getpid()),
      "--arena-fd=" + std::to_string(arena_fd),
      "--run-path=" + spec.run_path,
      "--run-dev=" + std::to_string(spec.run_dev),
      "--run-ino=" + std::to_string(spec.run_ino),
      "--base=" + spec.base,
      "--snapshot-ms=" + std::to_string(snapshot_ms),
      std::string("--mode=") + (light ? "light" : "detailed"),
      std::string("--file-at-once=") + (file_at_once ? "1" : "0")};
  for (const auto& [key, value] : c.process_fields()) args.push_back("--field=" + key + "=" + value);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  std::string error;
  if (SpawnInvisibleChild(g_program->c_str(), argv.data(), nullptr, arena_fd, &error) < 0) {
    *why = "dlprof-collector could not be started: " + error;
    return false;
  }
  g_is_process.store(true);
  return true;
}

bool CollectorIsProcess() { return g_is_process.load(std::memory_order_relaxed); }

void ForgetCollectorProcess() { g_is_process.store(false); }

}  // namespace dlprof
