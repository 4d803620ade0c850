// Where a process's profile file is made: its run folder, checked by
// identity, and the file's name, ROLE-PID.dlprof (then .1, .2, ... for each
// image a pid execs). Used by the session (core/run_folder.cc) and by the
// collector process (collector/), which makes the file of the program it
// serves.
#ifndef DLPROF_CORE_PROFILE_FILE_H_
#define DLPROF_CORE_PROFILE_FILE_H_

#include <sys/types.h>

#include <string>

#include "core/collector.h"

namespace dlprof {

struct ProfileFileSpec {
  std::string run_path;  // absolute: DLPROF_OUT/<run-id>
  dev_t run_dev = 0;     // the run folder's identity at the session's start
  ino_t run_ino = 0;
  std::string base;      // ROLE-PID
};

// Creates the first free name of the sequence in the run folder, if it is
// still the folder made at start, opens `c` on it and writes its PROCESS
// chunk. False with *error (a sentence, no "dlprof: ") if not.
bool CreateProfileFile(Collector* c, const ProfileFileSpec& spec, std::string* error);

}  // namespace dlprof

#endif  // DLPROF_CORE_PROFILE_FILE_H_
