// core/python_layout.cc against the real thing: this file compiles the
// installed CPython's own headers, internal ones included (python3-dev;
// tests/CMakeLists.txt gives this test their include path and nothing else:
// no libpython), and checks every field of the table for that version with
// offsetof and sizeof, and the string state bits by setting each bit field
// in a real PyASCIIObject. The table is chosen by the headers' own version,
// so the same file checks whichever of 3.10-3.13 is installed (Debian 12:
// 3.11); headers of a version dlprof has no table for fail the build.
#define Py_BUILD_CORE 1
#include <Python.h>
// The internal headers' <stdatomic.h> types do not compile as C++: with
// HAVE_STD_ATOMIC undefined, pycore_atomic.h (3.10-3.12) declares the same
// fields as plain integers and pointers with GCC's __atomic builtins, which on
// x86-64 and aarch64 have the same size and alignment as the _Atomic ones (the
// offsets below match those of a C build of the same headers).
#if defined(__GNUC__) && defined(HAVE_STD_ATOMIC)
#undef HAVE_STD_ATOMIC
#endif
#if PY_MAJOR_VERSION != 3 || PY_MINOR_VERSION < 10 || PY_MINOR_VERSION > 13
#error "these CPython headers are of a version core/python_layout.cc has no table for"
#endif
#if PY_MINOR_VERSION == 10
#include <frameobject.h>  // struct _frame (PyFrameObject)
#endif
#include <internal/pycore_runtime.h>  // _PyRuntimeState
#include <internal/pycore_interp.h>   // PyInterpreterState
#if PY_MINOR_VERSION >= 11
#include <internal/pycore_frame.h>  // _PyInterpreterFrame
#endif

#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "core/python_layout.h"

namespace dlprof {
namespace {

#define DLPROF_FIELD_SIZE(type, member) sizeof(static_cast<type*>(nullptr)->member)

// The bit set in `state` of a zeroed PyASCIIObject after `set` ran on it.
template <typename Set>
int StateBit(Set set) {
  PyASCIIObject object;
  std::memset(&object, 0, sizeof object);
  set(&object);
  uint32_t bits;
  static_assert(sizeof object.state == sizeof bits, "state is one 32-bit unit");
  std::memcpy(&bits, &object.state, sizeof bits);
  for (int i = 0; i < 32; ++i) {
    if (bits == (uint32_t{1} << i)) return i;
  }
  return -1;  // no bit, or more than one
}

const PythonLayout& Installed() {
  const PythonLayout* layout = FindPythonLayout(PY_MAJOR_VERSION, PY_MINOR_VERSION);
  if (layout == nullptr) {
    ADD_FAILURE() << "no table for the installed headers' CPython " PY_VERSION;
    static const PythonLayout kNone{};
    return kNone;
  }
  return *layout;
}

TEST(PythonLayoutTest, InstalledHeadersAreTheOnesChecked) {
  // Named in the test's output, so a log says which headers were checked.
  RecordProperty("cpython_headers", PY_VERSION);
  ASSERT_NE(FindPythonLayout(PY_MAJOR_VERSION, PY_MINOR_VERSION), nullptr) << PY_VERSION;
  EXPECT_EQ(Installed().version, static_cast<uint32_t>(PY_VERSION_HEX) >> 16);
}

TEST(PythonLayoutTest, RuntimeMatchesHeaders) {
  const PythonLayout& L = Installed();
  EXPECT_EQ(L.runtime_interpreters_head, offsetof(_PyRuntimeState, interpreters.head));
#if PY_MINOR_VERSION <= 11
  EXPECT_EQ(L.runtime_tss_key, offsetof(_PyRuntimeState, gilstate.autoTSSkey));
#else
  EXPECT_EQ(L.runtime_tss_key, offsetof(_PyRuntimeState, autoTSSkey));
#endif
  // CurrentThreadState reads the key as two 32-bit words: {_is_initialized,
  // the pthread key}.
  EXPECT_EQ(offsetof(Py_tss_t, _is_initialized), 0u);
  EXPECT_EQ(sizeof(static_cast<Py_tss_t*>(nullptr)->_is_initialized), 4u);
  EXPECT_EQ(offsetof(Py_tss_t, _key), 4u);
  EXPECT_EQ(sizeof(pthread_key_t), 4u);
  EXPECT_EQ(DLPROF_FIELD_SIZE(_PyRuntimeState, interpreters.head), sizeof(void*));
}

TEST(PythonLayoutTest, InterpreterMatchesHeaders) {
  const PythonLayout& L = Installed();
  EXPECT_EQ(L.interp_next, offsetof(PyInterpreterState, next));
#if PY_MINOR_VERSION == 10
  EXPECT_EQ(L.interp_threads_head, offsetof(PyInterpreterState, tstate_head));
#else
  EXPECT_EQ(L.interp_threads_head, offsetof(PyInterpreterState, threads.head));
#endif
}

TEST(PythonLayoutTest, ThreadStateMatchesHeaders) {
  const PythonLayout& L = Installed();
  EXPECT_EQ(L.tstate_next, offsetof(PyThreadState, next));
  EXPECT_EQ(L.tstate_interp, offsetof(PyThreadState, interp));
  EXPECT_EQ(L.tstate_thread_id, offsetof(PyThreadState, thread_id));
  EXPECT_EQ(DLPROF_FIELD_SIZE(PyThreadState, thread_id), 8u);  // read as 64 bits
#if PY_MINOR_VERSION == 10
  EXPECT_EQ(L.tstate_native_thread_id, kNoOffset);
  EXPECT_EQ(L.tstate_frame, offsetof(PyThreadState, frame));
  EXPECT_EQ(L.cframe_current_frame, kNoOffset);
#else
  EXPECT_EQ(L.tstate_native_thread_id, offsetof(PyThreadState, native_thread_id));
#if PY_MINOR_VERSION <= 12
  EXPECT_EQ(L.tstate_frame, offsetof(PyThreadState, cframe));
  EXPECT_EQ(L.cframe_current_frame, offsetof(_PyCFrame, current_frame));
#else
  EXPECT_EQ(L.tstate_frame, offsetof(PyThreadState, current_frame));
  EXPECT_EQ(L.cframe_current_frame, kNoOffset);
#endif
#endif
}

TEST(PythonLayoutTest, FrameMatchesHeaders) {
  const PythonLayout& L = Installed();
#if PY_MINOR_VERSION == 10
  EXPECT_EQ(L.frame_model, PyFrameModel::kFrameObjects);
  EXPECT_EQ(L.entry_model, PyEntryModel::kEveryFrame);
  EXPECT_EQ(L.frame_code, offsetof(PyFrameObject, f_code));
  EXPECT_EQ(L.frame_previous, offsetof(PyFrameObject, f_back));
  EXPECT_EQ(L.frame_instr, offsetof(PyFrameObject, f_lasti));
  EXPECT_EQ(DLPROF_FIELD_SIZE(PyFrameObject, f_lasti), 4u);  // read as 32 bits
  EXPECT_EQ(L.frame_is_entry, kNoOffset);
  EXPECT_EQ(L.frame_owner, kNoOffset);
#else
#if PY_MINOR_VERSION <= 12
  EXPECT_EQ(L.frame_model, PyFrameModel::kCFrameInterpreter);
  EXPECT_EQ(L.frame_code, offsetof(_PyInterpreterFrame, f_code));
  EXPECT_EQ(L.frame_instr, offsetof(_PyInterpreterFrame, prev_instr));
#else
  EXPECT_EQ(L.frame_model, PyFrameModel::kDirectInterpreter);
  EXPECT_EQ(L.frame_code, offsetof(_PyInterpreterFrame, f_executable));
  EXPECT_EQ(L.frame_instr, offsetof(_PyInterpreterFrame, instr_ptr));
#endif
  EXPECT_EQ(L.frame_previous, offsetof(_PyInterpreterFrame, previous));
  EXPECT_EQ(L.frame_owner, offsetof(_PyInterpreterFrame, owner));
  EXPECT_EQ(DLPROF_FIELD_SIZE(_PyInterpreterFrame, owner), 1u);  // read as 8 bits
#if PY_MINOR_VERSION == 11
  EXPECT_EQ(L.entry_model, PyEntryModel::kIsEntryFlag);
  EXPECT_EQ(L.frame_is_entry, offsetof(_PyInterpreterFrame, is_entry));
  EXPECT_EQ(DLPROF_FIELD_SIZE(_PyInterpreterFrame, is_entry), 1u);
#else
  EXPECT_EQ(L.entry_model, PyEntryModel::kShimFrame);
  EXPECT_EQ(L.frame_is_entry, kNoOffset);
  EXPECT_EQ(L.shim_owner, FRAME_OWNED_BY_CSTACK);
#endif
#endif
}

TEST(PythonLayoutTest, CodeMatchesHeaders) {
  const PythonLayout& L = Installed();
  EXPECT_EQ(L.code_filename, offsetof(PyCodeObject, co_filename));
  EXPECT_EQ(L.code_name, offsetof(PyCodeObject, co_name));
  EXPECT_EQ(L.code_linetable, offsetof(PyCodeObject, co_linetable));
  EXPECT_EQ(L.code_firstlineno, offsetof(PyCodeObject, co_firstlineno));
  EXPECT_EQ(DLPROF_FIELD_SIZE(PyCodeObject, co_firstlineno), 4u);
  EXPECT_EQ(L.code_consts, offsetof(PyCodeObject, co_consts));
  EXPECT_EQ(L.code_flags, offsetof(PyCodeObject, co_flags));
  EXPECT_EQ(DLPROF_FIELD_SIZE(PyCodeObject, co_flags), 4u);
#if PY_MINOR_VERSION == 10
  EXPECT_EQ(L.line_table, PyLineTable::kLnotab310);
  EXPECT_EQ(L.code_qualname, kNoOffset);
  EXPECT_EQ(L.code_code, kNoOffset);
#else
  EXPECT_EQ(L.line_table, PyLineTable::kLocations311);
  EXPECT_EQ(L.code_qualname, offsetof(PyCodeObject, co_qualname));
  EXPECT_EQ(L.code_code, offsetof(PyCodeObject, co_code_adaptive));
#endif
}

TEST(PythonLayoutTest, ObjectsMatchHeaders) {
  const PythonLayout& L = Installed();
  EXPECT_EQ(L.object_type, offsetof(PyObject, ob_type));
  EXPECT_EQ(L.varobject_size, offsetof(PyVarObject, ob_size));
  EXPECT_EQ(L.bytes_data, offsetof(PyBytesObject, ob_sval));
  EXPECT_EQ(L.tuple_items, offsetof(PyTupleObject, ob_item));
  EXPECT_EQ(L.unicode_length, offsetof(PyASCIIObject, length));
  EXPECT_EQ(L.unicode_state, offsetof(PyASCIIObject, state));
  EXPECT_EQ(L.unicode_ascii_data, sizeof(PyASCIIObject));
  EXPECT_EQ(L.unicode_compact_data, sizeof(PyCompactUnicodeObject));
}

TEST(PythonLayoutTest, StateBitsMatchHeaders) {
  const PythonLayout& L = Installed();
  // kind is 3 bits: its value 1 sets the lowest of them.
  EXPECT_EQ(StateBit([](PyASCIIObject* o) { o->state.kind = 1; }), L.state_kind_shift);
  EXPECT_EQ(StateBit([](PyASCIIObject* o) { o->state.kind = 4; }), L.state_kind_shift + 2);
  EXPECT_EQ(StateBit([](PyASCIIObject* o) { o->state.compact = 1; }), L.state_compact_bit);
  EXPECT_EQ(StateBit([](PyASCIIObject* o) { o->state.ascii = 1; }), L.state_ascii_bit);
}

TEST(PythonLayoutTest, NoTableForOtherVersions) {
  EXPECT_EQ(FindPythonLayout(2, 7), nullptr);
  EXPECT_EQ(FindPythonLayout(3, 9), nullptr);
  EXPECT_EQ(FindPythonLayout(3, 14), nullptr);
  EXPECT_EQ(FindPythonLayout(4, 11), nullptr);
}

// What can be checked of the tables of versions not installed: each is for
// its own version, and has an offset for every field its models read.
TEST(PythonLayoutTest, EveryTableIsForItsVersion) {
  for (int minor = 10; minor <= 13; ++minor) {
    SCOPED_TRACE("3." + std::to_string(minor));
    const PythonLayout* L = FindPythonLayout(3, minor);
    ASSERT_NE(L, nullptr);
    EXPECT_EQ(L->version, static_cast<uint32_t>(0x0300 | minor));
    EXPECT_EQ(L->frame_model, minor == 10   ? PyFrameModel::kFrameObjects
                              : minor <= 12 ? PyFrameModel::kCFrameInterpreter
                                            : PyFrameModel::kDirectInterpreter);
    EXPECT_EQ(L->entry_model, minor == 10   ? PyEntryModel::kEveryFrame
                              : minor == 11 ? PyEntryModel::kIsEntryFlag
                                            : PyEntryModel::kShimFrame);
    EXPECT_EQ(L->line_table, minor == 10 ? PyLineTable::kLnotab310 : PyLineTable::kLocations311);
    EXPECT_EQ(L->cframe_current_frame != kNoOffset,
              L->frame_model == PyFrameModel::kCFrameInterpreter);
    EXPECT_EQ(L->frame_is_entry != kNoOffset, L->entry_model == PyEntryModel::kIsEntryFlag);
    EXPECT_EQ(L->frame_owner != kNoOffset, minor >= 11);
    EXPECT_EQ(L->code_qualname != kNoOffset, minor >= 11);
    EXPECT_EQ(L->code_code != kNoOffset, minor >= 11);
    EXPECT_EQ(L->tstate_native_thread_id != kNoOffset, minor >= 11);
    if (L->entry_model == PyEntryModel::kShimFrame) {
      EXPECT_EQ(L->shim_owner, 3);  // FRAME_OWNED_BY_CSTACK in 3.12 and 3.13
    }
  }
}

}  // namespace
}  // namespace dlprof
