// Python frames in samples: finds CPython in this process (no libpython link:
// `_PyRuntime`, `Py_Version` and `PyCode_Type` by dlsym) and, from the signal
// handler, walks the interrupted thread's own interpreter frames. Names are
// not read here: a frame is its code object's address and the instruction
// it is at, which the collector turns into names and lines
// (core/python_codes.h) while the code object still exists.
#ifndef DLPROF_CORE_PYTHON_FRAMES_H_
#define DLPROF_CORE_PYTHON_FRAMES_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "core/python_layout.h"

namespace dlprof {

class MemoryView;
struct ThreadSlot;

struct PythonRuntime {
  const PythonLayout* layout = nullptr;
  uintptr_t runtime = 0;    // &_PyRuntime
  uintptr_t code_type = 0;     // &PyCode_Type
  uintptr_t unicode_type = 0;  // &PyUnicode_Type
};

// Off the signal path, at session start (and in a fork child, which inherits
// it): looks for CPython. Not Python: returns false and changes nothing.
// Python: fills *version ("3.11.2") and *state ("on", or "off: <why>"), and,
// when on, installs the fault handler (core/fault_handler.h) that makes the
// walk's reads safe. Not signal-safe.
bool StartPythonFrames(std::string* version, std::string* state);

// The CPython found by StartPythonFrames while walks are on, else nullptr.
// This function is safe to call from asynchronous signals.
const PythonRuntime* ActivePython();

// Stops the walks for good (the fault handler was lost). Async-signal-safe.
void StopPythonFrames();

// Each Python frame as kPyFrameWords words (innermost first): the code
// object's address, with bit 63 set on the outermost frame of one C call of
// the eval loop (kPyEntryBit); the instruction index in code units (-1: not
// started; as a two's complement uint64); and the code object's identity at
// the time of the sample (PyCodeIdentity), which tells the collector whether
// the object it finds at that address later is still the one sampled. When
// the walk stops at `max_frames` with frames left, the outermost frame has
// no kPyEntryBit (a reader can tell the stack was cut). Returns how many. 0 when the thread runs no Python (or walks are off). Every read of
// interpreter memory is a SafeLoad, and the walk stops at the first one that
// faults or looks wrong, keeping what it has: a bad pointer costs frames,
// never the process. This function is safe to call from asynchronous signals,
// on the thread the signal interrupted (it reads that thread's state).
int WalkPythonFrames(ThreadSlot* slot, uint64_t* out, int max_frames);

// The same walk for another thread, one blocked in a system call, from the
// collector: its state is the one the handler last saw (ThreadSlot::
// py_tstate) while CPython says it is thread `tid`'s (native_thread_id,
// 3.11+), else the one the interpreters list for `tid`; for 3.10, the
// handler's while the interpreter still lists it. Every read is a SafeLoad;
// the caller must check that the thread did not run meanwhile (its frames
// change as it runs). Not for the signal path; collector thread only.
int WalkBlockedPythonFrames(ThreadSlot* slot, pid_t tid, uint64_t* out, int max_frames);
// The same walk from another process (the collector process), through
// `memory` (the program's, core/memory_view.h), for CPython `py` there (its
// `runtime` address set): `hint` is the state the handler last saw for the
// thread (ThreadSlot::py_tstate), checked as above. The caller checks that
// the thread did not run meanwhile. Not signal-safe (a MemoryView).
int WalkBlockedPythonFramesOf(const MemoryView& memory, const PythonRuntime& py, uintptr_t hint,
                              pid_t tid, uint64_t* out, int max_frames);
constexpr uint64_t kPyEntryBit = 1ull << 63;
constexpr int kMaxPythonFrames = 128;
constexpr int kPyFrameWords = 3;

// What identifies a code object cheaply: the addresses of its qualname
// (co_name before 3.11) and file name objects, mixed, with its first line in
// the top 16 bits. Three reads. (Addresses: a code object made where another
// was, with the same name object, first line and a file name string made
// where the other's was, still looks the same; the collector reads code
// objects soon after their samples, while the sampled one mostly lives.)
// This function is safe to call from asynchronous signals (SafeLoads); 0 when
// they fault.
uint64_t PyCodeIdentity(uintptr_t code, const PythonLayout& layout);

// The same read through `memory` (this process's or another's). Not
// signal-safe.
uint64_t PyCodeIdentityIn(const MemoryView& memory, uintptr_t code, const PythonLayout& layout);

// PyCodeIdentity's value from the three fields, read by the caller (the
// audit hook reads them with plain loads: it holds the GIL and the code).
uint64_t MixPyCodeIdentity(uintptr_t qualname, uintptr_t filename, uint32_t first_line);

}  // namespace dlprof

#endif  // DLPROF_CORE_PYTHON_FRAMES_H_
