// Python frames into native stacks, the way py-spy's --native mode merges
// them (src/native_stack_trace.rs): each C call of the interpreter's eval
// loop in the native stack becomes the Python frames it was running, and the
// interpreter's call machinery between them goes. Run after symbolization
// (it reads function names); Symbolizer::SymbolizeProfile runs it.
//
// The reader gives a stack its native frames (leaf first), then its Python
// frames (innermost first), as the file has them (include/dlprof/format.h).
// The merge:
//  - splits the Python frames into groups, innermost first: a group ends at,
//    and includes, a frame with python_entry (the outermost Python frame of
//    one C call of the eval loop);
//  - pairs the groups with the eval frames (_PyEval_EvalFrameDefault) of the
//    native stack from the OUTERMOST end: the innermost end is where the
//    signal may land while a call is half-built (the C frame entered, its
//    Python frame not yet linked), and the outer pairs are the ones that are
//    certainly right. Groups left over at the inner end go where the
//    innermost eval frame is; eval frames left over there are dropped;
//  - but pairs them from the INNERMOST end when one side was cut short, as
//    it then holds only its innermost frames: the native stack ends at the
//    eval loop or its call machinery (the unwinder stopped; no thread starts
//    there), or the outermost Python frame is no entry frame (the walk
//    stopped before the thread's first frame, which always is one). Groups
//    left over then go on the root side of every native frame, as all of
//    them do when the native stack has no eval frame at all;
//  - drops the interpreter's call machinery (PyObject_Call, vectorcall
//    trampolines, Py_RunMain...), and the frames of the interpreter's module
//    the symbolizer could not name (its static functions, without debug
//    symbols: "python3.11+0x13ad87"), and keeps every other native frame
//    where it is: libc, libtorch, PIL's _imaging, numpy, and interpreter
//    functions that do real work (list_sort, take_gil).
// A stack without Python frames is left exactly as it is, and so is one
// whose Python frames are not all at its root end (merged already: merging
// twice changes nothing).
#ifndef DLPROF_READERS_PYTHON_MERGE_H_
#define DLPROF_READERS_PYTHON_MERGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "readers/profile.h"

namespace dlprof {

// The pseudo frame on the root side of a Python stack the walk cut short
// (its depth limit, kMaxPythonFrames, or a chain it could not follow): the
// thread's outer Python frames are not in the sample.
constexpr const char* kPythonCutFrame = "[python: outer frames not walked]";

// Merges every stack that holds Python locations and points each sample at
// its merged stack, interned, so that stacks that merge alike are one id.
// A stack whose Python frames were cut short gets kPythonCutFrame past its
// outermost Python frame. Stacks no sample uses any more stay in
// profile->stacks, unused.
void MergePythonStacks(Profile* profile);

// The merged form of one stack (location ids of `profile`, leaf first),
// without the cut marker (the profile is not changed).
std::vector<uint32_t> MergePythonStack(const Profile& profile, const std::vector<uint32_t>& stack);

// Whether a native function (as the symbolizer names it) is the eval loop,
// or the interpreter's call (or start) machinery the merge drops. GCC's clone suffixes
// (".cold", ".part.0", ".constprop.0") do not matter.
bool IsPythonEvalFunction(const std::string& function);
bool IsPythonCallMachinery(const std::string& function);

}  // namespace dlprof

#endif  // DLPROF_READERS_PYTHON_MERGE_H_
