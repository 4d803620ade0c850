// Which Python code objects the collector has met, as a process-wide bitmap
// the signal handler can read: a sample with a Python frame whose code is
// new wakes the collector at once, so that it reads that code object while it
// still exists. A module's code runs once, at import, and the interpreter
// frees it when the import is done, mostly within a few milliseconds, while
// the collector drains the rings every 10-50 ms: import time came out as
// "[unknown python code]" (a fifth of `import torch`'s samples at 1000 Hz).
// A bit per hash of the code's address and identity (PyCodeIdentity: a
// module's code is often made where the last module's was, freed just
// before): a collision only means no wake (the drain comes at the next tick
// as before), never a wrong name.
#ifndef DLPROF_CORE_PYTHON_CODES_SEEN_H_
#define DLPROF_CORE_PYTHON_CODES_SEEN_H_

#include <cstdint>

namespace dlprof {

// Whether the collector has met the code object at `code` with `identity`
// (or another that hashes alike). This function is safe to call from
// asynchronous signals (one relaxed load).
bool PyCodeSeen(uintptr_t code, uint64_t identity);

// Whether any of `n` Python frames, as WalkPythonFrames wrote them
// (kPyFrameWords words each: core/python_frames.h), holds code the collector
// has not met; stops at the first. This function is safe to call from
// asynchronous signals (one relaxed load a frame).
bool HasUnseenPyCode(const uint64_t* frames, int n);

// The collector met that code object (read it, or found it gone). Any
// thread; relaxed.
void MarkPyCodeSeen(uintptr_t code, uint64_t identity);

// DLPROF_PY_WAKE=0 (a diagnostic): every code counts as met, so that no
// sample wakes the collector. Before sampling starts.
void DisablePyCodeWakes();

// Whether a wake for new code may be posted now (`now_ns`: CLOCK_MONOTONIC):
// at most one a millisecond per process, however many threads sample new
// code at once (each wake is a whole collector tick: BENCHMARKS.md, "Session
// 20", for what they cost while imports run). This function is safe to call
// from asynchronous signals (a compare-and-swap).
bool TakePyCodeWake(int64_t now_ns);

// At session start, before sampling: the map moves into the shared arena
// (core/shared_arena.h), where a collector process can reach it. Left where
// it is if the arena has no room.
void MoveCodesSeenToArena();

// In the collector process: the program's map, at `arena_words` (its arena
// root, as MoveCodesSeenToArena set it), becomes the one MarkPyCodeSeen
// writes. False (nothing changes) for nullptr.
bool UseCodesSeenAt(void* arena_words);

}  // namespace dlprof

#endif  // DLPROF_CORE_PYTHON_CODES_SEEN_H_
