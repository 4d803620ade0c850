// The audit hook that notes the code objects exec() runs (core/python_exec_notes.h).
// dlprof's Python module (python/dlprof/_native.c) installs it with
// PySys_AddAuditHook: libdlprof does not link libpython, and the hook must
// be added by code that holds the GIL, after the interpreter started.
//
// The program must not notice it: it returns 0 for every event (never an
// error, never a changed outcome), does nothing but a string check for
// events other than "exec", and reads the code objects with plain loads by
// dlprof's layout tables (no Python API call: no allocation, no reference
// taken), which is safe because it runs on the thread that holds the GIL
// and the object being executed.
#include <atomic>
#include <cstdint>
#include <cstring>

#include "core/python_codes_seen.h"
#include "core/python_exec_notes.h"
#include "core/python_frames.h"
#include "core/session_state.h"
#include "core/signal_handler.h"

namespace dlprof {
namespace {

constexpr uint32_t kCoNewLocals = 0x0002;  // CO_NEWLOCALS, the same in 3.10-3.13
constexpr int kMaxCodesPerExec = 256;      // a module's own code and its class bodies
constexpr int64_t kMaxConsts = 1 << 16;
constexpr size_t kMaxNameBytes = 256;

template <typename T>
T Field(uintptr_t object, uint32_t offset) {
  T value;
  std::memcpy(&value, reinterpret_cast<const void*>(object + offset), sizeof(T));
  return value;
}

bool IsA(uintptr_t object, uintptr_t type, const PythonLayout& L) {
  return object != 0 && type != 0 && Field<uintptr_t>(object, L.object_type) == type;
}

// The string at `unicode` as UTF-8 into `out` (at most `cap` bytes); -1
// when it is not a compact string of the unicode type or does not fit.
int CopyName(uintptr_t unicode, const PythonRuntime& py, char* out, size_t cap) {
  const PythonLayout& L = *py.layout;
  if (!IsA(unicode, py.unicode_type, L)) return -1;
  const int64_t length = Field<int64_t>(unicode, L.unicode_length);
  const uint32_t state = Field<uint32_t>(unicode, L.unicode_state);
  if (length < 0 || ((state >> L.state_compact_bit) & 1) == 0) return -1;
  const unsigned kind = (state >> L.state_kind_shift) & 7;
  const bool ascii = ((state >> L.state_ascii_bit) & 1) != 0;
  const uint8_t* data = reinterpret_cast<const uint8_t*>(
      unicode + (ascii ? L.unicode_ascii_data : L.unicode_compact_data));
  if (ascii) {
    if (static_cast<size_t>(length) > cap) return -1;
    std::memcpy(out, data, static_cast<size_t>(length));
    return static_cast<int>(length);
  }
  if (kind != 1 && kind != 2 && kind != 4) return -1;
  size_t n = 0;
  for (int64_t i = 0; i < length; ++i) {
    uint32_t cp = 0;
    std::memcpy(&cp, data + i * kind, kind);  // little-endian: the low bytes
    if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) cp = 0xfffd;  // as the collector does
    const size_t bytes = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (n + bytes > cap) return -1;
    if (bytes == 1) {
      out[n] = static_cast<char>(cp);
    } else {
      const int shift = 6 * static_cast<int>(bytes - 1);
      out[n] = static_cast<char>((0xf00 >> bytes) | (cp >> shift));
      for (size_t b = 1; b < bytes; ++b) {
        out[n + b] = static_cast<char>(0x80 | ((cp >> (shift - 6 * b)) & 0x3f));
      }
    }
    n += bytes;
  }
  return static_cast<int>(n);
}

void NoteCode(uintptr_t code, const PythonRuntime& py, int64_t now) {
  const PythonLayout& L = *py.layout;
  const uint32_t name_offset = L.code_qualname != kNoOffset ? L.code_qualname : L.code_name;
  const uintptr_t qualname = Field<uintptr_t>(code, name_offset);
  const uintptr_t filename = Field<uintptr_t>(code, L.code_filename);
  const uint32_t first_line = Field<uint32_t>(code, L.code_firstlineno);
  char q[kMaxNameBytes], f[kExecNoteTextBytes];
  const int qn = CopyName(qualname, py, q, sizeof(q));
  const int fn = qn < 0 ? -1 : CopyName(filename, py, f, kExecNoteTextBytes - qn);
  if (fn < 0) return;
  PutExecNote(code, MixPyCodeIdentity(qualname, filename, first_line), now,
              static_cast<int>(first_line), q, static_cast<size_t>(qn), f, static_cast<size_t>(fn));
}

// The code object exec() runs, and the code among its constants that runs
// in a namespace of its own, not in a function's locals (CO_NEWLOCALS unset:
// class bodies), depth first. Functions are left out: they live as long as
// their function objects, and the collector reads them.
void NoteExecutedCode(uintptr_t code, const PythonRuntime& py) {
  const PythonLayout& L = *py.layout;
  if (!IsA(code, py.code_type, L)) return;
  const int64_t now = MonotonicNs();
  uintptr_t stack[kMaxCodesPerExec];
  int depth = 0, noted = 0;
  stack[depth++] = code;
  while (depth > 0 && noted < kMaxCodesPerExec) {
    const uintptr_t c = stack[--depth];
    NoteCode(c, py, now);
    ++noted;
    const uintptr_t consts = Field<uintptr_t>(c, L.code_consts);
    if (consts == 0) continue;
    int64_t n = Field<int64_t>(consts, L.varobject_size);
    if (n > kMaxConsts) n = kMaxConsts;
    for (int64_t i = 0; i < n && depth < kMaxCodesPerExec; ++i) {
      const uintptr_t item = Field<uintptr_t>(consts, L.tuple_items + 8 * static_cast<uint32_t>(i));
      if (IsA(item, py.code_type, L) && (Field<uint32_t>(item, L.code_flags) & kCoNewLocals) == 0) {
        stack[depth++] = item;
      }
    }
  }
  // Many modules imported between two collector ticks: take the notes now
  // rather than drop them (at most one wake a millisecond, as the handler's).
  if (ExecNotesFilling() && TakePyCodeWake(now)) g_mailbox.Post(0);
}

// sys.audit's C hook: `args` is the event's tuple; "exec" carries the code
// object (builtins.exec and eval of a code object; importlib runs each
// module's code with exec).
int ExecAuditHook(const char* event, void* args, void*) {
  if (event[0] != 'e' || std::strcmp(event, "exec") != 0) return 0;
  const PythonRuntime* py = ActivePython();
  if (py == nullptr || args == nullptr) return 0;
  const PythonLayout& L = *py->layout;
  const uintptr_t tuple = reinterpret_cast<uintptr_t>(args);
  if (Field<int64_t>(tuple, L.varobject_size) < 1) return 0;
  NoteExecutedCode(Field<uintptr_t>(tuple, L.tuple_items), *py);
  return 0;
}

std::atomic<bool> g_hook_given{false};

}  // namespace

void DisableExecHook() { g_hook_given.store(true); }

}  // namespace dlprof

// For python/dlprof/_native.c (not in the public header): the hook to pass
// to PySys_AddAuditHook, once per process, or NULL (Python frames are off,
// the ring cannot be mapped, or it was given already: a second copy of the
// module must not add a second hook).
extern "C" __attribute__((visibility("default"))) void* dlprof_python_exec_hook(void) {
  using namespace dlprof;
  if (ActivePython() == nullptr || !StartExecNotes()) return nullptr;
  if (g_hook_given.exchange(true)) return nullptr;
  return reinterpret_cast<void*>(&ExecAuditHook);
}
