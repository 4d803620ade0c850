// dlprof-collector's work: the collector of one profiled process, run in a
// process of its own (docs/ARCHITECTURE.md, "What is next", phase 2). It
// maps the program's shared arena at the program's addresses, runs the
// collector's ticks over it (core/collector.h, reading the program from
// outside), writes the program's file, and ends it once the program is gone.
#ifndef DLPROF_COLLECTOR_PROCESS_COLLECTOR_H_
#define DLPROF_COLLECTOR_PROCESS_COLLECTOR_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "core/profile_file.h"

namespace dlprof {

// What the program tells its helper on the command line
// (core/collector_process.cc builds it).
struct CollectorProcessArgs {
  pid_t pid = 0;        // the program
  ProfileFileSpec file;
  int snapshot_ms = 10;
  bool light = true;
  bool file_at_once = false;  // make the file before the first tick (a process's start)
  bool check_reused_walks = false;  // DLPROF_CHECK_REUSED_WALKS (core/config.h)
  std::vector<std::pair<std::string, std::string>> fields;  // the PROCESS chunk's
  // A CPython program's ("3.11:0x...:0x...:0x...": its minor version, and
  // the addresses of _PyRuntime, PyCode_Type and PyUnicode_Type there); ""
  // for another.
  std::string python;
  // The program's stderr when its library started ("DEV:INO"), where the
  // helper's lines go while it is still that file; "" if it was closed.
  std::string program_stderr;
};

// The helper's descriptors, as core/collector_spawn.h passes them.
constexpr int kHelperArenaFd = 3;
constexpr int kHelperPidFd = 4;
// Fd 5 is the run's collectors lock (DLPROF_COLLECTORS_LOCK), share-locked
// by the program for the helper: held, never used, until the helper exits.

// Exit status when the program's arena could not be mapped at its
// addresses here (one of this process's own mappings is there): a new exec
// gets a new layout.
constexpr int kExitAddressTaken = 75;

// Runs until the program has ended (or exec'd, or the file cannot be
// written). Returns the exit status.
int RunProcessCollector(const CollectorProcessArgs& args);

}  // namespace dlprof

#endif  // DLPROF_COLLECTOR_PROCESS_COLLECTOR_H_
