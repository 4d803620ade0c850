// The functions to blame inside the bottleneck stage (verdict.bottleneck_functions):
// "the stage is slow" names where to look; these name what to change.
#ifndef DLPROF_REPORTS_ANALYSIS_FUNCTIONS_H_
#define DLPROF_REPORTS_ANALYSIS_FUNCTIONS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "readers/profile.h"

namespace dlprof {

struct CulpritFunction {
  std::string name;  // Python-qualified for Python code, demangled for native
  std::string file;
  int line = 0;       // the function's first line when known, else its hottest line
  double share = 0;   // of the stage's time with this function on the stack
};

// The functions with the most inclusive time in `stage`'s own samples (the
// stage innermost; every sample when `stage` is empty: no stage is marked)
// in the processes whose role (by index, as Analysis::processes) is `role`: CPU time for kind "cpu", blocked wall
// time for kind "io" (only where wall records carry stacks). Left out:
//  - the pipeline's machinery: Python frames of torch/utils/data,
//    multiprocessing, threading and queue, the interpreter's own C frames
//    (libpython, the python executable), dlprof's own (libdlprof, the
//    annotations' wrappers) and thread/process start frames;
//  - the trunk: of the functions on 90% of the stacks or more, only the
//    innermost is kept (the others only lead to it);
//  - unsymbolized frames, and functions under 5%.
// At most `most`, largest first.
std::vector<CulpritFunction> BottleneckFunctions(const Profile& profile,
                                                 const std::vector<std::string>& role_of_process,
                                                 const std::string& stage, const std::string& role,
                                                 const std::string& kind, size_t most);

}  // namespace dlprof

#endif  // DLPROF_REPORTS_ANALYSIS_FUNCTIONS_H_
