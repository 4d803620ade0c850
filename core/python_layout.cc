#include "core/python_layout.h"

namespace dlprof {
namespace {

// CPython 3.11 on 64-bit Linux (Include/internal/pycore_frame.h,
// pycore_interp.h, pycore_runtime.h, cpython/pystate.h, cpython/code.h,
// cpython/unicodeobject.h of v3.11.x).
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
    /*instr_is_next=*/false,
    /*frame_is_entry=*/68,
    /*frame_owner=*/69,
    /*shim_owner=*/0,
    /*code_filename=*/112,
    /*code_name=*/120,
    /*code_qualname=*/128,
    /*code_linetable=*/136,
    /*code_firstlineno=*/72,
    /*code_code=*/184,
    /*object_type=*/8,
    /*varobject_size=*/16,
    /*bytes_data=*/32,
    /*unicode_length=*/16,
    /*unicode_state=*/32,
    /*unicode_ascii_data=*/48,
    /*unicode_compact_data=*/72,
    /*state_kind_shift=*/2,
    /*state_compact_bit=*/5,
    /*state_ascii_bit=*/6,
};

}  // namespace

const PythonLayout* FindPythonLayout(int major, int minor) {
  if (major != 3) return nullptr;
  switch (minor) {
    case 11: return &kPython311;
    default: return nullptr;
  }
}

}  // namespace dlprof
