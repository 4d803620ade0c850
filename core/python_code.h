// What a CPython code object says about itself, read off the signal path by
// the collector: in the profiled process with fault-safe loads
// (core/safe_load.h), or from the collector process with process_vm_readv
// (core/memory_view.h). A code object freed since the sample, or a pointer
// that is not a code object, gives false, never a fault or garbage text.
#ifndef DLPROF_CORE_PYTHON_CODE_H_
#define DLPROF_CORE_PYTHON_CODE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/memory_view.h"
#include "core/python_layout.h"

namespace dlprof {

struct PyCodeInfo {
  std::string qualname;  // co_qualname (3.11+), co_name before
  std::string filename;  // co_filename
  int first_line = 0;    // co_firstlineno
  // Instruction ranges and their lines, in code units (2 bytes each),
  // sorted by start: [start, end) runs `line` (-1: no line, e.g. a cache).
  struct Range {
    int32_t start, end, line;
  };
  std::vector<Range> lines;
  // What StillSame() compares: the name objects and the first line.
  uintptr_t qualname_object = 0, filename_object = 0;
};

class PythonCodeReader {
 public:
  // `code_type` and `unicode_type` are the addresses of PyCode_Type and
  // PyUnicode_Type in the process (0: not checked). When given, the object
  // must also look alive: a reference count from 1 to 2^33. A freed object
  // whose memory was not reused keeps its type and fields, but not its count:
  // pymalloc puts its free-list link there (and glibc's tcache overwrites the
  // type), so a freed code object is not read, nor a freed name after it.
  // `memory`: where the objects are read (by default this process's own, by
  // SafeLoads: the caller opens the fault handler for them, as
  // MemoryView::BeginReads does). It must outlive the reader.
  PythonCodeReader(const PythonLayout& layout, uintptr_t code_type, uintptr_t unicode_type = 0,
                   const MemoryView& memory = OwnMemoryView())
      : layout_(layout), code_type_(code_type), unicode_type_(unicode_type), memory_(memory) {}

  // This process's memory, the readers' default.
  static const MemoryView& OwnMemoryView();

  // Reads the code object at `code`: names (UTF-8, at most 1 KiB each),
  // first line and line table (at most 64 KiB). False when `code` is not a
  // readable code object. Not signal-safe (allocates).
  bool Read(uintptr_t code, PyCodeInfo* out) const;

  // Whether `code` is still the object `info` was read from (alive, its
  // type, name objects and first line): a freed code object's address may
  // hold another. Read() ends with it, after the names.
  bool StillSame(uintptr_t code, const PyCodeInfo& info) const;

  // PyCodeIdentity's value (core/python_frames.h) of the code object at
  // `code`, read through this reader's memory; 0 when it cannot be read.
  uint64_t Identity(uintptr_t code) const;

  // Whether `code` is aligned, of the code type and with a live reference
  // count.
  bool LooksLikeLiveCode(uintptr_t code) const {
    return code != 0 && code % alignof(void*) == 0 &&
           (code_type_ == 0 || LooksAlive(code, code_type_));
  }

  // The line of the instruction at code unit `index` (-1: the frame has not
  // started its first instruction); first_line when the table has no line.
  static int LineAt(const PyCodeInfo& info, int64_t index);

 private:
  bool ReadString(uintptr_t unicode, std::string* out) const;
  bool ReadInto(uintptr_t code, PyCodeInfo* out) const;  // Read() without the reset
  // The object at `object` has type `type` and a live reference count.
  bool LooksAlive(uintptr_t object, uintptr_t type) const;
  const PythonLayout& layout_;
  uintptr_t code_type_;
  uintptr_t unicode_type_;
  const MemoryView& memory_;
};

}  // namespace dlprof

#endif  // DLPROF_CORE_PYTHON_CODE_H_
