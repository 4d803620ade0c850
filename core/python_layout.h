// Where CPython keeps what a sample needs, one table per minor version: the
// thread states, the interpreter frames and the code objects. dlprof never
// links against libpython: it finds `_PyRuntime` and `Py_Version` in the
// process (dlsym) and reads these structures by offset. The tables are
// checked against the real headers where they are installed
// (tests/python_layout_test.cc, with python3-dev).
#ifndef DLPROF_CORE_PYTHON_LAYOUT_H_
#define DLPROF_CORE_PYTHON_LAYOUT_H_

#include <cstdint>

namespace dlprof {

// How a thread's innermost frame is found, and what a frame is.
enum class PyFrameModel : uint8_t {
  kFrameObjects,      // 3.10: tstate->frame, a PyFrameObject chain (f_back)
  kCFrameInterpreter, // 3.11, 3.12: tstate->cframe->current_frame, _PyInterpreterFrame chain
  kDirectInterpreter, // 3.13: tstate->current_frame, _PyInterpreterFrame chain
};

// How a frame marks the first Python frame of one C call of the eval loop
// (`_PyEval_EvalFrameDefault`), so that the reader can put each run of
// Python frames where its C frame was.
enum class PyEntryModel : uint8_t {
  kEveryFrame,  // 3.10: one C call per Python frame
  kIsEntryFlag, // 3.11: a bool in the frame
  kShimFrame,   // 3.12+: a frame owned by the C stack (owner == shim_owner) below it
};

// The line table's encoding (co_linetable / co_lnotab).
enum class PyLineTable : uint8_t {
  kLnotab310,   // 3.10: (start delta, line delta) byte pairs in co_linetable
  kLocations311 // 3.11+: PEP 657 location entries in co_linetable
};

constexpr uint32_t kNoOffset = 0xffffffffu;

struct PythonLayout {
  uint32_t version;  // 0x030b for 3.11 (Py_Version >> 16)
  PyFrameModel frame_model;
  PyEntryModel entry_model;
  PyLineTable line_table;

  // _PyRuntimeState (the `_PyRuntime` symbol).
  uint32_t runtime_interpreters_head;  // PyInterpreterState*
  uint32_t runtime_tss_key;            // Py_tss_t: each thread's own PyThreadState*
  // PyInterpreterState.
  uint32_t interp_next;
  uint32_t interp_threads_head;  // PyThreadState*
  // PyThreadState.
  uint32_t tstate_next;
  uint32_t tstate_interp;
  uint32_t tstate_thread_id;         // pthread_self() of its thread
  uint32_t tstate_native_thread_id;  // gettid(), kNoOffset before 3.11
  uint32_t tstate_frame;   // kFrameObjects: PyFrameObject*; kCFrameInterpreter: _PyCFrame*;
                           // kDirectInterpreter: _PyInterpreterFrame*
  uint32_t cframe_current_frame;  // kCFrameInterpreter only

  // The frame (PyFrameObject for 3.10, _PyInterpreterFrame after).
  uint32_t frame_code;      // PyCodeObject* (3.13: f_executable, checked to be code)
  uint32_t frame_previous;  // the caller's frame (3.10: f_back)
  uint32_t frame_instr;     // 3.10: int f_lasti (code units); 3.11/3.12: prev_instr; 3.13:
                            // instr_ptr, which is the current instruction too (every
                            // instruction sets it to itself first; CPython's LASTI
                            // is measured from it)
  uint32_t frame_is_entry;  // kIsEntryFlag: bool
  uint32_t frame_owner;     // char; kNoOffset for 3.10
  uint8_t shim_owner;       // kShimFrame: FRAME_OWNED_BY_CSTACK

  // PyCodeObject.
  uint32_t code_filename;    // PyUnicodeObject*
  uint32_t code_name;        // PyUnicodeObject*
  uint32_t code_qualname;    // PyUnicodeObject*, kNoOffset for 3.10 (co_name is used)
  uint32_t code_linetable;   // PyBytesObject*
  uint32_t code_firstlineno; // int
  uint32_t code_code;        // 3.11+: co_code_adaptive (the instructions, inline)
  uint32_t code_consts;      // PyTupleObject* (a module's class bodies are among them)
  uint32_t code_flags;       // int (CO_NEWLOCALS: a function's, not a module's or class's)

  // Objects.
  uint32_t object_type;     // ob_type
  uint32_t varobject_size;  // ob_size
  uint32_t bytes_data;      // PyBytesObject.ob_sval
  uint32_t tuple_items;     // PyTupleObject.ob_item
  uint32_t unicode_length;  // PyASCIIObject.length
  uint32_t unicode_state;   // PyASCIIObject.state (bit fields: kind, compact, ascii)
  uint32_t unicode_ascii_data;    // sizeof(PyASCIIObject): data of a compact ASCII string
  uint32_t unicode_compact_data;  // sizeof(PyCompactUnicodeObject): data of other compact strings
  // Bit positions in `state` (after the interned bits).
  uint8_t state_kind_shift;  // 3 bits: 1, 2 or 4 bytes per character
  uint8_t state_compact_bit;
  uint8_t state_ascii_bit;
};

// The table for CPython `major.minor`, or nullptr when dlprof has none.
const PythonLayout* FindPythonLayout(int major, int minor);

}  // namespace dlprof

#endif  // DLPROF_CORE_PYTHON_LAYOUT_H_
