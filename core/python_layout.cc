#include "core/python_layout.h"

namespace dlprof {
namespace {

// Every table is for the default build of its release on 64-bit Linux
// (x86-64; aarch64 lays these structs out the same): Py_DEBUG,
// Py_TRACE_REFS and (3.13) Py_GIL_DISABLED off, so PyObject is
// {ob_refcnt, ob_type}, 16 bytes, and PyVarObject adds ob_size. pthread
// sizes are glibc's (pthread_mutex_t 40, pthread_cond_t 48,
// pthread_condattr_t 4), Py_NSIG is glibc's NSIG, 65. Each offset was counted
// from the struct definitions of the release's headers, then compared with
// offsetof on those headers (every patch release of the branch we could get;
// the 3.11 table is also checked by tests/python_layout_test.cc against the
// installed headers). The string state bits are the same in 3.10-3.13: GCC
// packs `unsigned int` bit fields from bit 0, interned:2 takes bits 0-1, so
// kind:3 is bits 2-4, compact bit 5, ascii bit 6.

// CPython 3.10 (v3.10.x; the same offsets in 3.10.0 through 3.10.15).
//  Include/internal/pycore_runtime.h, _PyRuntimeState: four ints (0-15),
//    _finalizing 16, interpreters {mutex 24, head 32, main, next_id},
//    xidregistry 56, main_thread 72, exitfuncs[32] 80, nexitfuncs 336, then
//    ceval at 344 (signals_pending, and the 208-byte _gil_runtime_state of
//    pycore_gil.h at 352: interval, last_holder, locked, switch_number, cond,
//    mutex, and FORCE_SWITCHING's switch_cond, switch_mutex), gilstate at 560
//    {check_enabled, tstate_current 568, autoInterpreterState 576,
//    autoTSSkey 584}.
//  Include/internal/pycore_interp.h, struct _is: next 0, tstate_head 8.
//  Include/cpython/pystate.h, struct _ts: prev, next 8, interp 16, frame 24,
//    four ints, cframe 48, ... exc_state (_PyErr_StackItem, 4 pointers) 112,
//    exc_info 144, dict 152, gilstate_counter 160, async_exc 168,
//    thread_id 176. No native_thread_id before 3.11.
//  Include/cpython/frameobject.h, struct _frame (PyObject_VAR_HEAD, 24):
//    f_back 24, f_code 32, f_builtins, f_globals, f_locals, f_valuestack,
//    f_trace, f_stackdepth 80, f_trace_lines/opcodes 84-85, f_gen 88,
//    f_lasti 96 (an index in code units: the byte offset / 2).
//  Include/cpython/code.h, PyCodeObject (PyObject_HEAD, 16): seven ints from
//    16 (co_flags 36, co_firstlineno 40), co_code 48 (a bytes object: no
//    inline code, so code_code is unused), co_consts 56, five more pointers, co_filename 104, co_name 112,
//    co_linetable 120 (3.10's PEP 626 table of (bytes, line) delta pairs).
//  Include/cpython/unicodeobject.h, PyASCIIObject: length 16, hash 24,
//    state 32, wstr 40, size 48; PyCompactUnicodeObject adds utf8_length,
//    utf8, wstr_length: 72. Include/cpython/bytesobject.h, PyBytesObject:
//    PyObject_VAR_HEAD, ob_shash 24, ob_sval 32.
constexpr PythonLayout kPython310 = {
    /*version=*/0x030a,
    PyFrameModel::kFrameObjects,
    PyEntryModel::kEveryFrame,
    PyLineTable::kLnotab310,
    /*runtime_interpreters_head=*/32,
    /*runtime_tss_key=*/584,
    /*interp_next=*/0,
    /*interp_threads_head=*/8,
    /*tstate_next=*/8,
    /*tstate_interp=*/16,
    /*tstate_thread_id=*/176,
    /*tstate_native_thread_id=*/kNoOffset,
    /*tstate_frame=*/24,
    /*cframe_current_frame=*/kNoOffset,
    /*frame_code=*/32,
    /*frame_previous=*/24,
    /*frame_instr=*/96,
    /*frame_is_entry=*/kNoOffset,
    /*frame_owner=*/kNoOffset,
    /*shim_owner=*/0,
    /*code_filename=*/104,
    /*code_name=*/112,
    /*code_qualname=*/kNoOffset,
    /*code_linetable=*/120,
    /*code_firstlineno=*/40,
    /*code_code=*/kNoOffset,
    /*code_consts=*/56,
    /*code_flags=*/36,
    /*object_type=*/8,
    /*varobject_size=*/16,
    /*bytes_data=*/32,
    /*tuple_items=*/24,
    /*unicode_length=*/16,
    /*unicode_state=*/32,
    /*unicode_ascii_data=*/48,
    /*unicode_compact_data=*/72,
    /*state_kind_shift=*/2,
    /*state_compact_bit=*/5,
    /*state_ascii_bit=*/6,
};

// CPython 3.11 on 64-bit Linux (Include/internal/pycore_frame.h,
// pycore_interp.h, pycore_runtime.h, cpython/pystate.h, cpython/code.h,
// cpython/unicodeobject.h of v3.11.x). PyCodeObject: co_consts 24, co_flags 48.
// PyTupleObject (every release): PyObject_VAR_HEAD, ob_item 24.
constexpr PythonLayout kPython311 = {
    /*version=*/0x030b,
    PyFrameModel::kCFrameInterpreter,
    PyEntryModel::kIsEntryFlag,
    PyLineTable::kLocations311,
    /*runtime_interpreters_head=*/40,
    /*runtime_tss_key=*/592,
    /*interp_next=*/0,
    /*interp_threads_head=*/16,
    /*tstate_next=*/8,
    /*tstate_interp=*/16,
    /*tstate_thread_id=*/152,
    /*tstate_native_thread_id=*/160,
    /*tstate_frame=*/56,
    /*cframe_current_frame=*/8,
    /*frame_code=*/32,
    /*frame_previous=*/48,
    /*frame_instr=*/56,
    /*frame_is_entry=*/68,
    /*frame_owner=*/69,
    /*shim_owner=*/0,
    /*code_filename=*/112,
    /*code_name=*/120,
    /*code_qualname=*/128,
    /*code_linetable=*/136,
    /*code_firstlineno=*/72,
    /*code_code=*/184,
    /*code_consts=*/24,
    /*code_flags=*/48,
    /*object_type=*/8,
    /*varobject_size=*/16,
    /*bytes_data=*/32,
    /*tuple_items=*/24,
    /*unicode_length=*/16,
    /*unicode_state=*/32,
    /*unicode_ascii_data=*/48,
    /*unicode_compact_data=*/72,
    /*state_kind_shift=*/2,
    /*state_compact_bit=*/5,
    /*state_ascii_bit=*/6,
};

// CPython 3.12 (v3.12.x; the same offsets in 3.12.0 through 3.12.6).
//  Include/internal/pycore_runtime.h, _PyRuntimeState: five ints (0-19),
//    _finalizing 24, interpreters {mutex 32, head 40, main, next_id},
//    main_thread 64, xidregistry 72 (mutex, head: 16), then
//    allocators 88 (pycore_pymem.h: mutex 8, three PyMemAllocatorEx of 40,
//      three debug_alloc_api_t of 48, PyObjectArenaAllocator 24: 296),
//    obmalloc 384 (_obmalloc_global_state: int, Py_ssize_t: 16),
//    pyhash_state 400 (urandom_cache {fd, st_dev, st_ino}: 24),
//    time 424 (HAVE_TIMES: int, long: 16),
//    threads 440 (pycore_pythread.h: initialized, then _condattr_monotonic
//      {ptr, and CONDATTR_MONOTONIC's 4-byte val}: 24),
//    signals 464 (pycore_signal.h: handlers[65] of {tripped, func} 16 each,
//      wakeup {fd, warn_on_full_buffer} 8, is_tripped, default_handler,
//      ignore_handler, unhandled_keyboard_interrupt: 1080),
//    autoTSSkey 1544, now directly in _PyRuntimeState.
//  Include/internal/pycore_interp.h, struct _is: next 0, id, id_refcount,
//    requires_idref, id_mutex 32, _initialized, finalizing,
//    monitoring_version 48, last_restart_version 56,
//    threads {next_unique_id 64, head 72, count, stacksize}.
//  Include/cpython/pystate.h, struct _ts: prev, next 8, interp 16, _status
//    (a 4-byte bit field struct) 24, six ints 28-51, cframe 56, four trace
//    pointers, current_exception 96, exc_info, dict, gilstate_counter 120,
//    async_exc 128, thread_id 136, native_thread_id 144. _PyCFrame is
//    {current_frame 0, previous}: 3.12 dropped 3.11's use_tracing byte.
//  Include/internal/pycore_frame.h, _PyInterpreterFrame: f_code 0,
//    previous 8, f_funcobj, f_globals, f_builtins, f_locals, frame_obj,
//    prev_instr 56, stacktop 64, return_offset (uint16_t) 68, owner 70;
//    enum _frameowner: FRAME_OWNED_BY_CSTACK = 3. prev_instr is what
//    _PyInterpreterFrame_LASTI measures from, so it is the current one.
//  Include/cpython/code.h, _PyCode_DEF (PyObject_VAR_HEAD, 24): co_consts,
//    co_names, co_exceptiontable 24-47, twelve 4-byte fields 48-95
//    (co_flags 48, co_firstlineno 68), co_localsplusnames 96, co_localspluskinds 104,
//    co_filename 112, co_name 120, co_qualname 128, co_linetable 136,
//    co_weakreflist 144, _co_cached 152, _co_instrumentation_version 160,
//    _co_monitoring 168, _co_firsttraceable 176, co_extra 184,
//    co_code_adaptive 192. (No co_executors in any 3.12 release: that
//    pointer is 3.13's.)
//  Include/cpython/unicodeobject.h: 3.12 removed wstr (and wstr_length, and
//    the `ready` bit, replaced by statically_allocated), so PyASCIIObject is
//    length 16, hash 24, state 32, size 40, and PyCompactUnicodeObject adds
//    utf8_length, utf8: 56. Include/cpython/bytesobject.h: ob_sval 32.
constexpr PythonLayout kPython312 = {
    /*version=*/0x030c,
    PyFrameModel::kCFrameInterpreter,
    PyEntryModel::kShimFrame,
    PyLineTable::kLocations311,
    /*runtime_interpreters_head=*/40,
    /*runtime_tss_key=*/1544,
    /*interp_next=*/0,
    /*interp_threads_head=*/72,
    /*tstate_next=*/8,
    /*tstate_interp=*/16,
    /*tstate_thread_id=*/136,
    /*tstate_native_thread_id=*/144,
    /*tstate_frame=*/56,
    /*cframe_current_frame=*/0,
    /*frame_code=*/0,
    /*frame_previous=*/8,
    /*frame_instr=*/56,
    /*frame_is_entry=*/kNoOffset,
    /*frame_owner=*/70,
    /*shim_owner=*/3,
    /*code_filename=*/112,
    /*code_name=*/120,
    /*code_qualname=*/128,
    /*code_linetable=*/136,
    /*code_firstlineno=*/68,
    /*code_code=*/192,
    /*code_consts=*/24,
    /*code_flags=*/48,
    /*object_type=*/8,
    /*varobject_size=*/16,
    /*bytes_data=*/32,
    /*tuple_items=*/24,
    /*unicode_length=*/16,
    /*unicode_state=*/32,
    /*unicode_ascii_data=*/40,
    /*unicode_compact_data=*/56,
    /*state_kind_shift=*/2,
    /*state_compact_bit=*/5,
    /*state_ascii_bit=*/6,
};

// CPython 3.13 (v3.13.x: the same offsets in 3.13.0rc2, 3.13.0 and 3.13.5),
// default build only: a free-threaded build (Py_GIL_DISABLED, "3.13t") has
// another PyObject header and other structs, and this table does not fit it.
// 3.13 put a _Py_DebugOffsets block at offset 0 of _PyRuntime precisely so
// that out-of-process tools can read most of these offsets from the process
// itself (cookie "xdebugpy", version, free_threaded, then the offsets of
// interpreters.head, threads_head, current_frame, f_executable, instr_ptr,
// owner, co_qualname, co_code_adaptive, ...); the numbers below are the ones
// a 3.13 default build writes there, except autoTSSkey,
// sizeof(PyCompactUnicodeObject) and FRAME_OWNED_BY_CSTACK, which it does not
// list.
//  Include/internal/pycore_runtime.h, _PyRuntimeState: debug_offsets 0
//    (char cookie[8], then 72 uint64_t: 584 bytes), five ints 584-603,
//    _finalizing 608, _finalizing_id 616, interpreters {PyMutex (one byte)
//    624, head 632, main, next_id}, main_thread 656, main_tstate 664, then
//    xi 672 (pycore_crossinterp.h _xidregistry {global, initialized, PyMutex,
//      head}: 24),
//    allocators 696 (3.12's 296 plus is_debug_enabled, with a one-byte
//      PyMutex: 304),
//    obmalloc 1000 (16), pyhash_state 1016 (24),
//    threads 1040 (3.12's 24 plus the handles llist_node: 40),
//    signals 1080 (as 3.12: 1080; 3.13 has no time state here),
//    autoTSSkey 2160.
//  Include/internal/pycore_interp.h, struct _is now starts with ceval
//    (pycore_ceval_state.h _ceval_state: instrumentation_version,
//    recursion_limit, gil, own_gil, then _pending_calls at 32 {handling_thread,
//    PyMutex, npending, max, maxloop, calls[300] of {func, arg, flags} 24
//    each, first, next}: 7232), so next 7264, id, id_refcount,
//    requires_idref, id_mutex 7296, _whence, _initialized, _ready,
//    finalizing, last_restart_version 7328, threads {next_unique_id 7336,
//    head 7344, main, count, stacksize}.
//  Include/cpython/pystate.h, struct _ts: prev, next 8, interp 16,
//    eval_breaker 24, _status 32, eight ints 36-67, current_frame 72 (no
//    _PyCFrame any more), four trace pointers, current_exception 112,
//    exc_info, dict, gilstate_counter 136, async_exc 144, thread_id 152,
//    native_thread_id 160.
//  Include/internal/pycore_frame.h, _PyInterpreterFrame: f_executable 0 (a
//    code object, or None for some frames: the collector checks its type),
//    previous 8, ..., instr_ptr 56, stacktop 64, return_offset 68, owner 70;
//    FRAME_OWNED_BY_CSTACK = 3. instr_ptr is the instruction being executed
//    (every instruction sets it to itself first; _PyInterpreterFrame_LASTI
//    and PyUnstable_InterpreterFrame_GetLine use it as is), so it is not a
//    next-instruction pointer.
//  Include/cpython/code.h: as 3.12 up to co_weakreflist 144, then
//    co_executors 152, _co_cached 160, _co_instrumentation_version 168,
//    _co_monitoring 176, _co_firsttraceable 184, co_extra 192,
//    co_code_adaptive 200.
//  Include/cpython/unicodeobject.h, bytesobject.h: as 3.12.
constexpr PythonLayout kPython313 = {
    /*version=*/0x030d,
    PyFrameModel::kDirectInterpreter,
    PyEntryModel::kShimFrame,
    PyLineTable::kLocations311,
    /*runtime_interpreters_head=*/632,
    /*runtime_tss_key=*/2160,
    /*interp_next=*/7264,
    /*interp_threads_head=*/7344,
    /*tstate_next=*/8,
    /*tstate_interp=*/16,
    /*tstate_thread_id=*/152,
    /*tstate_native_thread_id=*/160,
    /*tstate_frame=*/72,
    /*cframe_current_frame=*/kNoOffset,
    /*frame_code=*/0,
    /*frame_previous=*/8,
    /*frame_instr=*/56,
    /*frame_is_entry=*/kNoOffset,
    /*frame_owner=*/70,
    /*shim_owner=*/3,
    /*code_filename=*/112,
    /*code_name=*/120,
    /*code_qualname=*/128,
    /*code_linetable=*/136,
    /*code_firstlineno=*/68,
    /*code_code=*/200,
    /*code_consts=*/24,
    /*code_flags=*/48,
    /*object_type=*/8,
    /*varobject_size=*/16,
    /*bytes_data=*/32,
    /*tuple_items=*/24,
    /*unicode_length=*/16,
    /*unicode_state=*/32,
    /*unicode_ascii_data=*/40,
    /*unicode_compact_data=*/56,
    /*state_kind_shift=*/2,
    /*state_compact_bit=*/5,
    /*state_ascii_bit=*/6,
};

}  // namespace

const PythonLayout* FindPythonLayout(int major, int minor) {
  if (major != 3) return nullptr;
  switch (minor) {
    case 10: return &kPython310;
    case 11: return &kPython311;
    case 12: return &kPython312;
    case 13: return &kPython313;
    default: return nullptr;
  }
}

}  // namespace dlprof
