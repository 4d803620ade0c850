// Python frames: the reader (PY_CODES, Python values in STACKS, damage), the
// merge into native stacks (readers/python_merge.h) on hand-made stacks, and
// one .dlprof file carrying real addresses of Debian's python3.11 read,
// symbolized, merged and written as stacks.folded.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <dlprof/format.h>

#include "core/varint.h"
#include "readers/dlprof_reader.h"
#include "readers/profile.h"
#include "readers/python_merge.h"
#include "readers/symbolizer.h"
#include "reports/analysis.h"
#include "reports/report_writer.h"
#include "tests/support/browser.h"
#include "tests/support/files.h"

namespace dlprof {
namespace {

using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;
using testing::WriteFile;

// ---------------------------------------------------------------------------
// Hand-made profiles for the merge.

// A symbolized native location of `module` named `function` (inlined
// functions before it, innermost first, when given).
uint32_t Native(Profile* p, const std::string& function, std::vector<std::string> inlined = {},
                const std::string& module = "/usr/bin/python3.11") {
  Location l;
  l.module = module;
  l.module_offset = 0x1000 + 0x10 * p->locations.size();
  l.address = 0x400000 + l.module_offset;
  for (const std::string& f : inlined) l.frames.push_back(Frame{f, "", 0});
  l.frames.push_back(Frame{function, "", 0});
  return p->InternLocation(l);
}

uint32_t Py(Profile* p, const std::string& qualname, int line, bool entry = false,
            const std::string& file = "/app/data.py", int first_line = 0) {
  Location l;
  l.python = true;
  l.python_entry = entry;
  Frame f;
  f.function = qualname;
  f.file = file;
  f.line = line;
  f.start_line = first_line > 0 ? first_line : line - 1;
  f.python = true;
  l.frames.push_back(f);
  return p->InternLocation(l);
}

// A stack's frames as "leaf;...;root": each location's real (outermost)
// function, a Python one by its qualname alone.
std::string Names(const Profile& p, const std::vector<uint32_t>& stack) {
  std::string out;
  for (uint32_t id : stack) {
    const Location& l = p.locations.at(id);
    if (!out.empty()) out += ';';
    out += l.frames.empty() ? UnsymbolizedName(l) : l.frames.back().function;
  }
  return out;
}

std::string Merged(const Profile& p, const std::vector<uint32_t>& stack) {
  return Names(p, MergePythonStack(p, stack));
}

TEST(PythonMerge, EachGroupTakesTheEvalFramesPlace) {
  Profile p;
  // DataLoader worker: __getitem__ -> Image.open -> PIL's decoder in C.
  std::vector<uint32_t> stack = {
      Native(&p, "ImagingJpegDecode", {}, "/usr/lib/python3/dist-packages/PIL/_imaging.so"),
      Native(&p, "_decode", {}, "/usr/lib/python3/dist-packages/PIL/_imaging.so"),
      Native(&p, "method_vectorcall_VARARGS"),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Native(&p, "_PyFunction_Vectorcall"),
      Native(&p, "_PyObject_VectorcallTstate"),
      Native(&p, "slot_tp_call"),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Native(&p, "PyEval_EvalCode"),
      Native(&p, "run_mod"),
      Native(&p, "_PyRun_SimpleFileObject"),
      Native(&p, "Py_RunMain"),
      Native(&p, "Py_BytesMain"),
      Native(&p, "__libc_start_call_main", {}, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
      // Python, innermost first: two C calls of the eval loop.
      Py(&p, "ImageFile.load", 260),
      Py(&p, "Dataset.__getitem__", 42, /*entry=*/true),
      Py(&p, "Loader.next", 12),
      Py(&p, "<module>", 3, /*entry=*/true),
  };
  EXPECT_EQ(Merged(p, stack),
            "ImagingJpegDecode;_decode;ImageFile.load;Dataset.__getitem__;Loader.next;<module>;"
            "__libc_start_call_main");
}

TEST(PythonMerge, GroupsAlignWithEvalFramesFromTheOutermostEnd) {
  Profile p;
  // Three eval frames, two groups: the innermost eval frame is a call being
  // set up (no Python frame of its own yet) and goes; the groups take the
  // outer two. Paired from the inner end, inner() would land below decode.
  std::vector<uint32_t> stack = {
      Native(&p, "memcpy", {}, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Native(&p, "_PyObject_MakeTpCall"),
      Native(&p, "decode", {}, "/opt/ext/codec.so"),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Native(&p, "cfunction_call"),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Native(&p, "main"),
      Py(&p, "inner", 10, true),
      Py(&p, "outer", 20, true),
  };
  EXPECT_EQ(Merged(p, stack), "memcpy;decode;inner;outer;main");
}

TEST(PythonMerge, LeftoverInnerGroupsGoAtTheInnermostEvalFrame) {
  Profile p;
  // Three groups, two eval frames (one lost to a broken unwind, say): the
  // outer group pairs with the outer eval frame, both inner ones go where
  // the innermost eval frame is.
  std::vector<uint32_t> stack = {
      Native(&p, "sha256_block", {}, "/usr/lib/x86_64-linux-gnu/libcrypto.so.3"),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Native(&p, "PyObject_Vectorcall"),
      Native(&p, "collate", {}, "/opt/ext/fast.so"),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Native(&p, "main"),
      Py(&p, "hash_it", 5, true),
      Py(&p, "middle", 6),
      Py(&p, "middle_caller", 7, true),
      Py(&p, "top", 8, true),
  };
  EXPECT_EQ(Merged(p, stack), "sha256_block;hash_it;middle;middle_caller;collate;top;main");
}

TEST(PythonMerge, ACutNativeStackPairsFromTheInnermostEnd) {
  Profile p;
  // The unwinder stopped at PyObject_Call (no thread starts there): the two
  // eval frames it has are the two innermost C calls, so they take the two
  // innermost groups, and the outer groups go on the root side. Paired from
  // the outer end, <module> would sit below ext_work.
  std::vector<uint32_t> stack = {
      Native(&p, "memset", {}, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Native(&p, "_PyObject_MakeTpCall"),
      Native(&p, "ext_work", {}, "/opt/ext/x.so"),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Native(&p, "PyObject_Call"),
      Py(&p, "inner", 1, true),
      Py(&p, "middle", 2, true),
      Py(&p, "outer", 3, true),
      Py(&p, "<module>", 4, true),
  };
  EXPECT_EQ(Merged(p, stack), "memset;inner;ext_work;middle;outer;<module>");
  // Cut in the eval loop itself: the same.
  stack.erase(stack.begin() + 5);
  EXPECT_EQ(Merged(p, stack), "memset;inner;ext_work;middle;outer;<module>");
}

TEST(PythonMerge, ACutPythonStackPairsFromTheInnermostEnd) {
  Profile p;
  // The walk stopped before the thread's first Python frame (its outermost
  // frame has no entry flag): the groups are the innermost ones.
  std::vector<uint32_t> stack = {
      Native(&p, "memset", {}, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Native(&p, "cfunction_call"),
      Native(&p, "ext_work", {}, "/opt/ext/x.so"),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Native(&p, "_PyFunction_Vectorcall"),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Native(&p, "Py_BytesMain"),
      Native(&p, "__libc_start_call_main", {}, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
      Py(&p, "inner", 1, true),
      Py(&p, "deep_95", 2),
      Py(&p, "deep_96", 3),
  };
  EXPECT_EQ(Merged(p, stack), "memset;inner;ext_work;deep_95;deep_96;__libc_start_call_main");
}

// A native location the symbolizer could not name, as it names it.
uint32_t Unnamed(Profile* p, const std::string& module) {
  Location l;
  l.module = module;
  l.module_offset = 0x1000 + 0x10 * p->locations.size();
  l.address = 0x400000 + l.module_offset;
  l.frames.push_back(Frame{UnsymbolizedName(l), "", 0});
  return p->InternLocation(l);
}

TEST(PythonMerge, UnnamedInterpreterFramesGoOthersStay) {
  Profile p;
  // Debian's python3.11 without debug symbols: its static functions have no
  // name. Those of the interpreter's module go (that module is the one of
  // the eval frames); an unnamed frame of an extension stays.
  std::vector<uint32_t> stack = {
      Unnamed(&p, "/opt/ext/_imaging.so"),
      Unnamed(&p, "/usr/bin/python3.11"),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Unnamed(&p, "/usr/bin/python3.11"),
      Unnamed(&p, "/usr/bin/python3.11"),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Unnamed(&p, "/usr/bin/python3.11"),
      Native(&p, "Py_BytesMain"),
      Native(&p, "_start"),
      Py(&p, "decode", 1, true),
      Py(&p, "<module>", 2, true),
  };
  const std::vector<uint32_t> merged = MergePythonStack(p, stack);
  EXPECT_EQ(Names(p, merged), UnsymbolizedName(p.locations[stack[0]]) + ";decode;<module>;_start");
  // Without an eval frame nothing says which module is the interpreter.
  std::vector<uint32_t> no_eval = {stack[0], stack[1], stack[9], stack[10]};
  EXPECT_EQ(MergePythonStack(p, no_eval), no_eval);
}

TEST(PythonMerge, WithoutEvalFramesPythonGoesOnTheRootSide) {
  Profile p;
  // The native unwind stopped inside the extension: nothing to pair with.
  std::vector<uint32_t> stack = {
      Native(&p, "ImagingUnpackRGB", {}, "/opt/ext/_imaging.so"),
      Native(&p, "cfunction_vectorcall_O"),  // machinery still goes
      Py(&p, "unpack", 3),
      Py(&p, "load", 4, true),
      Py(&p, "<module>", 1, true),
  };
  EXPECT_EQ(Merged(p, stack), "ImagingUnpackRGB;unpack;load;<module>");
  // No native frame at all: the Python frames alone.
  std::vector<uint32_t> python_only = {Py(&p, "f", 2, true), Py(&p, "g", 3, true)};
  EXPECT_EQ(Merged(p, python_only), "f;g");
}

TEST(PythonMerge, StacksWithoutPythonFramesAreLeftAsTheyAre) {
  Profile p;
  // A C++ program (or a C thread of a Python process) whose functions have
  // CPython's names: nothing to merge, nothing dropped.
  std::vector<uint32_t> stack = {Native(&p, "PyObject_Call", {}, "/opt/app/app"),
                                 Native(&p, "_PyEval_EvalFrameDefault", {}, "/opt/app/app"),
                                 Native(&p, "main", {}, "/opt/app/app")};
  EXPECT_EQ(MergePythonStack(p, stack), stack);
  Sample s;
  s.stack = p.InternStack(stack);
  p.samples.push_back(s);
  const auto stacks = p.stacks;
  MergePythonStacks(&p);
  EXPECT_EQ(p.stacks, stacks);
  EXPECT_EQ(p.samples[0].stack, s.stack);
  // The same with a Python location elsewhere in the profile.
  Py(&p, "unused", 1);
  MergePythonStacks(&p);
  EXPECT_EQ(p.stacks, stacks);
  EXPECT_EQ(p.samples[0].stack, s.stack);
}

TEST(PythonMerge, MachineryIsDroppedRealWorkKept) {
  for (const char* name :
       {"_PyEval_Vector", "PyEval_EvalCode", "_PyFunction_Vectorcall", "PyObject_Vectorcall",
        "PyObject_VectorcallMethod", "_PyObject_VectorcallTstate", "_PyObject_Call",
        "_PyObject_Call_Prepend", "PyObject_Call", "PyObject_CallOneArg", "_PyObject_MakeTpCall",
        "method_vectorcall_FASTCALL_KEYWORDS", "cfunction_call", "cfunction_vectorcall_O",
        "slot_tp_call", "slot_tp_iternext", "vectorcall_method", "vectorcall_maybe.constprop.0",
        "_PyVectorcall_Call", "PyVectorcall_Call", "Py_RunMain", "Py_BytesMain",
        "pymain_run_python", "_PyRun_SimpleFileObject", "PyRun_StringFlags", "run_mod",
        "run_eval_code_obj", "builtin_exec", "builtin_exec_impl", "t_bootstrap", "thread_run",
        "partial_call", "_PyObject_FastCallDictTstate", "object_vacall", "wrapperdescr_call"}) {
    EXPECT_TRUE(IsPythonCallMachinery(name)) << name;
  }
  for (const char* name :
       {"list_sort", "list_sort_impl", "take_gil", "PyEval_RestoreThread", "PyEval_SaveThread",
        "PyObject_Calloc", "_PyObject_Calloc", "_PyRuntime_Initialize", "PyList_Append",
        "ImagingDecode", "memcpy", "read", "main", "at::native::add_kernel(at::TensorIterator&)",
        "python3.11+0x12345"}) {
    EXPECT_FALSE(IsPythonCallMachinery(name)) << name;
  }
  EXPECT_TRUE(IsPythonEvalFunction("_PyEval_EvalFrameDefault"));
  EXPECT_TRUE(IsPythonEvalFunction("_PyEval_EvalFrameDefault.cold"));
  EXPECT_TRUE(IsPythonEvalFunction("PyEval_EvalFrameEx"));
  EXPECT_FALSE(IsPythonEvalFunction("PyEval_EvalFrame"));
  EXPECT_FALSE(IsPythonEvalFunction("_PyEval_EvalFrameDefaultX"));

  Profile p;
  // A thread waiting for the GIL inside list.sort's key call: the GIL's
  // functions and list_sort are work (or waiting) and stay; the eval loop's
  // cold part is the eval loop; a helper inlined into the loop does not
  // make it less of one.
  std::vector<uint32_t> stack = {
      Native(&p, "__futex_abstimed_wait_common", {}, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
      Native(&p, "take_gil"),
      Native(&p, "PyEval_RestoreThread"),
      Native(&p, "list_sort", {"unsafe_object_compare", "PyObject_RichCompare"}),
      Native(&p, "method_vectorcall_FASTCALL_KEYWORDS"),
      Native(&p, "_PyEval_EvalFrameDefault.cold"),
      Native(&p, "_PyFunction_Vectorcall"),
      Native(&p, "_PyEval_EvalFrameDefault", {"_PyObject_VectorcallTstate"}),
      Py(&p, "sort_keys", 9, true),
      Py(&p, "run", 30, true),
  };
  EXPECT_EQ(Merged(p, stack),
            "__futex_abstimed_wait_common;take_gil;PyEval_RestoreThread;list_sort;sort_keys;run");
}

TEST(PythonMerge, HelpersInlinedIntoRealWorkKeepTheLocation) {
  Profile p;
  std::vector<uint32_t> stack = {
      // Real work with a call helper inlined into it: kept.
      Native(&p, "list_sort_impl", {"_PyObject_VectorcallTstate"}),
      // Only helpers (an inlined one inside another): dropped.
      Native(&p, "_PyEval_Vector", {"_PyEval_EvalFrame"}),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Py(&p, "key", 4, true),
  };
  EXPECT_EQ(Merged(p, stack), "list_sort_impl;key");
}

TEST(PythonMerge, WrappersOfTheEvalLoopAreNotEvalFrames) {
  Profile p;
  // 3.6+: PyEval_EvalFrameEx and an uninlined _PyEval_EvalFrame call the
  // loop; only _PyEval_EvalFrameDefault pairs with a group.
  std::vector<uint32_t> stack = {
      Native(&p, "work", {}, "/opt/ext/x.so"),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Native(&p, "_PyEval_EvalFrame"),
      Native(&p, "PyEval_EvalFrameEx"),
      Native(&p, "legacy_caller", {}, "/opt/ext/old_cython.so"),
      Native(&p, "_PyEval_EvalFrameDefault"),
      Py(&p, "f", 1, true),
      Py(&p, "g", 2, true),
  };
  EXPECT_EQ(Merged(p, stack), "work;f;legacy_caller;g");
  // Up to 3.5 PyEval_EvalFrameEx is the loop, one Python frame each.
  Profile old;
  std::vector<uint32_t> stack2 = {
      Native(&old, "PyEval_EvalFrameEx"), Native(&old, "PyEval_EvalCodeEx"),
      Native(&old, "function_call"),      Native(&old, "PyEval_EvalFrameEx"),
      Py(&old, "f", 1, true),             Py(&old, "g", 2, true),
  };
  EXPECT_EQ(Merged(old, stack2), "f;function_call;g");
}

TEST(PythonMerge, FramesAfterTheLastEntryFlagAreOneGroup) {
  Profile p;
  std::vector<uint32_t> stack = {
      Native(&p, "_PyEval_EvalFrameDefault"), Native(&p, "PyObject_Call"),
      Native(&p, "_PyEval_EvalFrameDefault"), Py(&p, "a", 1, true),
      Py(&p, "b", 2),                         Py(&p, "c", 3),
  };
  EXPECT_EQ(Merged(p, stack), "a;b;c");
}

TEST(PythonMerge, EqualMergedStacksBecomeOneAndMergingTwiceChangesNothing) {
  Profile p;
  const uint32_t f = Py(&p, "f", 3, true), work = Native(&p, "work", {}, "/opt/ext/x.so");
  const uint32_t eval = Native(&p, "_PyEval_EvalFrameDefault");
  // Two native stacks that differ only in the call machinery.
  const uint32_t a = p.InternStack({work, Native(&p, "cfunction_call"), eval, f});
  const uint32_t b = p.InternStack({work, Native(&p, "cfunction_vectorcall_O"), eval, f});
  const uint32_t plain = p.InternStack({work});
  for (uint32_t st : {a, b, plain, a}) {
    Sample s;
    s.stack = st;
    p.samples.push_back(s);
  }
  MergePythonStacks(&p);
  ASSERT_EQ(p.samples.size(), 4u);
  EXPECT_EQ(p.samples[0].stack, p.samples[1].stack);
  EXPECT_EQ(p.samples[0].stack, p.samples[3].stack);
  EXPECT_EQ(p.samples[2].stack, plain);
  EXPECT_EQ(Names(p, p.stacks[p.samples[0].stack]), "work;f");

  const auto stacks = p.stacks;
  std::vector<uint32_t> ids;
  for (const Sample& s : p.samples) ids.push_back(s.stack);
  MergePythonStacks(&p);
  EXPECT_EQ(p.stacks, stacks);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(p.samples[i].stack, ids[i]);
}

// A Python stack the walk cut short (no entry flag on its outermost frame)
// says so past that frame; a whole one does not. Merging again changes
// nothing, and the marker is one location for every stack.
TEST(PythonMerge, ACutPythonStackIsMarkedWhereTheWalkStopped) {
  Profile p;
  const uint32_t libc_main = Native(&p, "__libc_start_call_main", {}, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  const uint32_t eval = Native(&p, "_PyEval_EvalFrameDefault");
  const uint32_t main = Native(&p, "Py_BytesMain");
  const uint32_t cut_a = p.InternStack({eval, main, libc_main, Py(&p, "deep_1", 1, false),
                                        Py(&p, "deep_2", 2), Py(&p, "deep_3", 3)});
  const uint32_t cut_b = p.InternStack({eval, main, libc_main, Py(&p, "deep_1", 1, false),
                                        Py(&p, "deep_2", 2)});
  const uint32_t whole = p.InternStack({eval, main, libc_main, Py(&p, "deep_1", 1, false),
                                        Py(&p, "deep_2", 2), Py(&p, "outer", 9, true)});
  for (uint32_t st : {cut_a, cut_b, whole}) {
    Sample s;
    s.stack = st;
    p.samples.push_back(s);
  }
  MergePythonStacks(&p);
  const std::string marker = kPythonCutFrame;
  EXPECT_EQ(Names(p, p.stacks[p.samples[0].stack]),
            "deep_1;deep_2;deep_3;" + marker + ";__libc_start_call_main");
  EXPECT_EQ(Names(p, p.stacks[p.samples[1].stack]), "deep_1;deep_2;" + marker + ";__libc_start_call_main");
  EXPECT_EQ(Names(p, p.stacks[p.samples[2].stack]), "deep_1;deep_2;outer;__libc_start_call_main");
  EXPECT_EQ(p.stacks[p.samples[0].stack][3], p.stacks[p.samples[1].stack][2]);  // one location
  EXPECT_TRUE(p.locations[p.stacks[p.samples[0].stack][3]].pseudo);
  const auto stacks = p.stacks;
  MergePythonStacks(&p);
  EXPECT_EQ(p.stacks, stacks);
  // The one-stack form leaves the profile alone, and has no marker.
  EXPECT_EQ(Merged(p, p.stacks[cut_a]), "deep_1;deep_2;deep_3;__libc_start_call_main");
}

TEST(PythonMerge, EqualPythonFramesAreOneLocation) {
  Profile p;
  const uint32_t a = Py(&p, "Dataset.__getitem__", 42, true, "/app/data.py", 40);
  EXPECT_EQ(Py(&p, "Dataset.__getitem__", 42, true, "/app/data.py", 40), a);
  EXPECT_NE(Py(&p, "Dataset.__getitem__", 43, true, "/app/data.py", 40), a);   // line
  EXPECT_NE(Py(&p, "Dataset.__getitem__", 42, false, "/app/data.py", 40), a);  // entry
  EXPECT_NE(Py(&p, "Dataset.__getitem__", 42, true, "/app/other.py", 40), a); // file
  EXPECT_NE(Py(&p, "Dataset.__getitem__", 42, true, "/app/data.py", 41), a);  // first line
  EXPECT_EQ(FrameDisplayName(p.locations[a].frames[0]), "Dataset.__getitem__ (data.py:40)");
}

// ---------------------------------------------------------------------------
// .dlprof files with Python frames, written here chunk by chunk.

class FileBuilder {
 public:
  FileBuilder() {
    data_ = std::string(DLPROF_FILE_MAGIC, 8);
    PutU32(DLPROF_FORMAT_VERSION);
    PutU32(0);
  }
  // Appends a chunk; returns its offset in the file.
  size_t Chunk(uint32_t type, const std::string& payload) {
    const size_t at = data_.size();
    PutU32(DLPROF_CHUNK_MAGIC);
    PutU32(type);
    PutU32(static_cast<uint32_t>(payload.size()));
    PutU32(static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(payload.size()))));
    data_ += payload;
    return at;
  }
  size_t Process(const std::vector<std::pair<std::string, std::string>>& fields) {
    std::string b;
    PutVarint(&b, fields.size());
    for (const auto& [k, v] : fields) PutBytes(&b, k), PutBytes(&b, v);
    return Chunk(DLPROF_CHUNK_PROCESS, b);
  }
  size_t Thread(uint32_t index, uint32_t tid) {
    std::string b;
    PutVarint(&b, 1);
    PutVarint(&b, index);
    PutVarint(&b, tid);
    PutBytes(&b, "python");
    return Chunk(DLPROF_CHUNK_THREADS, b);
  }
  size_t Map(uint64_t start, uint64_t end, uint64_t offset, const std::string& path) {
    std::string b;
    PutVarint(&b, 1);
    PutVarint(&b, start);
    PutVarint(&b, end);
    PutVarint(&b, offset);
    PutBytes(&b, path);
    PutBytes(&b, "");
    return Chunk(DLPROF_CHUNK_MAPS, b);
  }
  struct Code {
    uint32_t id;
    std::string qualname, filename;
    uint64_t first_line;
  };
  static std::string CodesPayload(const std::vector<Code>& codes) {
    std::string b;
    PutVarint(&b, codes.size());
    for (const Code& c : codes) {
      PutVarint(&b, c.id);
      PutBytes(&b, c.qualname);
      PutBytes(&b, c.filename);
      PutVarint(&b, c.first_line);
    }
    return b;
  }
  size_t Codes(const std::vector<Code>& codes) {
    return Chunk(DLPROF_CHUNK_PY_CODES, CodesPayload(codes));
  }
  // Stacks first_id, first_id + 1, ... of values (pcs or PyValue()), leaf first.
  size_t Stacks(uint32_t first_id, const std::vector<std::vector<uint64_t>>& stacks) {
    std::string b;
    PutVarint(&b, first_id);
    PutVarint(&b, stacks.size());
    for (const auto& s : stacks) {
      PutVarint(&b, s.size());
      uint64_t prev = 0;
      for (uint64_t v : s) {
        PutVarint(&b, ZigZag(static_cast<int64_t>(v - prev)));
        prev = v;
      }
    }
    return Chunk(DLPROF_CHUNK_STACKS, b);
  }
  // One CPU sample on thread index 1 per stack id.
  size_t Samples(const std::vector<uint32_t>& stacks) {
    std::string b;
    PutVarint(&b, 1000000);
    PutVarint(&b, stacks.size());
    for (uint32_t s : stacks) {
      PutVarint(&b, ZigZag(1000));
      PutVarint(&b, 1);
      PutVarint(&b, s);
      PutVarint(&b, 0);
      PutVarint(&b, 0);
    }
    return Chunk(DLPROF_CHUNK_SAMPLES, b);
  }
  size_t End() {
    std::string b;
    PutVarint(&b, 9000000);
    return Chunk(DLPROF_CHUNK_END, b);
  }
  std::string& data() { return data_; }

 private:
  void PutU32(uint32_t v) {
    for (int i = 0; i < 4; ++i) data_.push_back(static_cast<char>(v >> (8 * i)));
  }
  std::string data_;
};

uint64_t PyValue(uint32_t code, uint32_t line, bool entry = false) {
  return DLPROF_PY_FRAME_BIT | (entry ? DLPROF_PY_ENTRY_BIT : 0) |
         (uint64_t{line} << DLPROF_PY_LINE_SHIFT) | code;
}

std::string AllWarnings(const Profile& p) {
  std::string out;
  for (const Process& proc : p.processes) {
    for (const std::string& w : proc.warnings) out += w + "\n";
  }
  for (const std::string& w : p.warnings) out += w + "\n";
  return out;
}

// A stack's frames, leaf first, as "function@file:line/start[e]".
std::string Frames(const Profile& p, uint32_t stack) {
  std::string out;
  for (uint32_t id : p.stacks.at(stack)) {
    const Location& l = p.locations.at(id);
    if (!out.empty()) out += " | ";
    if (!l.python) {
      out += "native:" + UnsymbolizedName(l);
      continue;
    }
    EXPECT_EQ(l.frames.size(), 1u);
    EXPECT_TRUE(l.module.empty());
    EXPECT_EQ(l.address, 0u);
    const Frame& f = l.frames.at(0);
    EXPECT_TRUE(f.python);
    out += f.function + "@" + f.file + ":" + std::to_string(f.line) + "/" +
           std::to_string(f.start_line) + (l.python_entry ? "e" : "");
  }
  return out;
}

TEST(PythonReader, ReadsCodesAndPythonFrames) {
  FileBuilder f;
  f.Process({{"pid", "100"}, {"role", "main"}, {"python", "3.11.2"}, {"python_frames", "on"}});
  f.Thread(1, 100);
  f.Map(0x41f000, 0x6d2000, 0x1f000, "/usr/bin/python3.11");
  f.Codes({{1, "Dataset.__getitem__", "/app/data.py", 40},
           {2, "<module>", "/app/train.py", 1}});
  f.Stacks(1, {{0x52b100, 0x52b200, PyValue(1, 42, true), PyValue(2, 7, true)},
               {PyValue(1, 0)}});
  f.Samples({1, 2, 1});
  f.End();
  Profile p;
  std::string error;
  ASSERT_TRUE(ReadDlprofBuffer(f.data(), "main-100.dlprof", &p, &error)) << error;
  EXPECT_EQ(AllWarnings(p), "");
  ASSERT_EQ(p.processes.size(), 1u);
  EXPECT_EQ(p.processes[0].fields["python"], "3.11.2");
  EXPECT_EQ(p.processes[0].fields["python_frames"], "on");
  ASSERT_EQ(p.samples.size(), 3u);
  EXPECT_EQ(Frames(p, p.samples[0].stack),
            "native:python3.11+0x12b100 | native:python3.11+0x12b200 | "
            "Dataset.__getitem__@/app/data.py:42/40e | <module>@/app/train.py:7/1e");
  EXPECT_EQ(Frames(p, p.samples[1].stack), "Dataset.__getitem__@/app/data.py:0/40");
  EXPECT_EQ(p.samples[2].stack, p.samples[0].stack);

  // The symbolizer leaves Python locations as they are.
  std::vector<Location> before = p.locations;
  Symbolizer symbolizer;
  symbolizer.Symbolize(&p.locations, {});
  for (size_t i = 0; i < before.size(); ++i) {
    if (!before[i].python) continue;
    ASSERT_EQ(p.locations[i].frames.size(), 1u);
    EXPECT_EQ(p.locations[i].frames[0].function, before[i].frames[0].function);
    EXPECT_EQ(p.locations[i].frames[0].file, before[i].frames[0].file);
  }
}

TEST(PythonReader, ForkedWorkersShareTheirPythonLocations) {
  // The worker numbers its codes its own way: the frames are what count.
  Profile p;
  std::string error;
  for (int worker = 0; worker < 2; ++worker) {
    FileBuilder f;
    f.Process({{"pid", std::to_string(200 + worker)}, {"role", "worker"}});
    f.Thread(1, 200 + worker);
    const uint32_t id = worker == 0 ? 1 : 7;
    f.Codes({{id, "Dataset.__getitem__", "/app/data.py", 40}});
    f.Stacks(1, {{PyValue(id, 42, true)}});
    f.Samples({1});
    f.End();
    ASSERT_TRUE(ReadDlprofBuffer(f.data(), "worker.dlprof", &p, &error)) << error;
  }
  ASSERT_EQ(p.samples.size(), 2u);
  EXPECT_EQ(p.samples[0].stack, p.samples[1].stack);
  size_t python = 0;
  for (const Location& l : p.locations) python += l.python;
  EXPECT_EQ(python, 1u);
}

TEST(PythonReader, DamagedCodesAreWarningsAndUnknownCodesNamedByNumber) {
  FileBuilder f;
  f.Process({{"pid", "100"}});
  f.Thread(1, 100);
  f.Codes({{1, "good", "/app/a.py", 10}});
  // A chunk whose checksum fails: its codes are lost.
  const size_t bad_crc = f.Codes({{2, "lost", "/app/b.py", 20}});
  f.data()[bad_crc + DLPROF_CHUNK_HEADER_SIZE + 3] ^= 0x20;
  // A chunk that checks but does not decode: a qualname longer than any
  // code object's (4 KiB) must be damage, not a 1 GB allocation.
  std::string payload;
  PutVarint(&payload, 1);
  PutVarint(&payload, 3);
  PutVarint(&payload, 1u << 30);
  payload += "x";
  const size_t undecodable = f.Chunk(DLPROF_CHUNK_PY_CODES, payload);
  // A first line past what an int holds is damage too.
  const size_t bad_line = f.Codes({{4, "f", "/app/c.py", uint64_t{1} << 40}});
  f.Stacks(1, {{PyValue(2, 21, true), PyValue(1, 11, true)}, {PyValue(3, 5), PyValue(4, 6)}});
  f.Samples({1, 2});
  f.End();
  Profile p;
  std::string error;
  ASSERT_TRUE(ReadDlprofBuffer(f.data(), "main-100.dlprof", &p, &error)) << error;
  const std::string w = AllWarnings(p);
  EXPECT_NE(w.find("main-100.dlprof: offset " + std::to_string(bad_crc) + ": damaged chunk"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("main-100.dlprof: offset " + std::to_string(undecodable) +
                   ": chunk type 15 does not decode"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("main-100.dlprof: offset " + std::to_string(bad_line) +
                   ": chunk type 15 does not decode"),
            std::string::npos)
      << w;
  // Codes 2, 3 and 4 are lost: three references to lost definitions.
  EXPECT_NE(w.find("main-100.dlprof: 3 records refer to definitions lost with a damaged chunk"),
            std::string::npos)
      << w;
  ASSERT_EQ(p.samples.size(), 2u);
  EXPECT_EQ(Frames(p, p.samples[0].stack), "[python code 2]@:21/0e | good@/app/a.py:11/10e");
  EXPECT_EQ(Frames(p, p.samples[1].stack), "[python code 3]@:5/0 | [python code 4]@:6/0");
}

// ---------------------------------------------------------------------------
// End to end, with the real interpreter's symbols: a file as the runtime
// writes it for a thread of Debian's python3.11 inside PIL's decoder,
// symbolized from the binary's .dynsym, merged, written as stacks.folded.

constexpr char kPython[] = "/usr/bin/python3.11";

// The address of each exported function of python3.11 (nm -D), 0 if absent.
std::map<std::string, uint64_t> PythonSymbols() {
  std::map<std::string, uint64_t> out;
  std::istringstream in(RunCommand(std::string("nm -D --defined-only ") + kPython));
  std::string addr, type, name;
  while (in >> addr >> type >> name) {
    if (type == "T") out[name] = std::strtoull(addr.c_str(), nullptr, 16);
  }
  return out;
}

TEST(PythonReport, RealInterpreterFramesMergeIntoFoldedStacks) {
  if (access(kPython, R_OK) != 0) GTEST_SKIP() << kPython << " is not installed";
  // Its text segment, as /proc/pid/maps shows it for the non-PIE binary.
  const std::string segments = RunCommand(std::string("readelf -lW ") + kPython);
  if (segments.find("0x000000000041f000") == std::string::npos) {
    GTEST_SKIP() << kPython << " is not the build this test knows (text at 0x41f000)";
  }
  std::map<std::string, uint64_t> sym = PythonSymbols();
  for (const char* s : {"_PyEval_EvalFrameDefault", "_PyFunction_Vectorcall", "PyObject_Vectorcall",
                        "PyEval_EvalCode", "Py_RunMain", "Py_BytesMain"}) {
    if (sym[s] < 0x41f000 || sym[s] >= 0x6d2000) GTEST_SKIP() << "no " << s << " in " << kPython;
  }
  FileBuilder f;
  f.Process({{"pid", "300"}, {"role", "worker"}, {"worker", "0"}, {"python", "3.11.2"},
             {"python_frames", "on"}});
  f.Thread(1, 300);
  f.Map(0x41f000, 0x6d2000, 0x1f000, kPython);
  f.Map(0x7f0000000000, 0x7f0000100000, 0, "/nonexistent/PIL/_imaging.cpython-311.so");
  f.Codes({{1, "ImageFile.load", "/usr/lib/python3/dist-packages/PIL/ImageFile.py", 155},
           {2, "Dataset.__getitem__", "/app/data set.py", 40},  // a space in the file name
           {3, "<module>", "/app/train.py", 1}});
  // Return addresses a few bytes into each function (the leaf's pc too).
  f.Stacks(1, {{0x7f0000012340, sym["_PyEval_EvalFrameDefault"] + 0x200,
                sym["_PyFunction_Vectorcall"] + 0x40, sym["PyObject_Vectorcall"] + 0x30,
                sym["_PyEval_EvalFrameDefault"] + 0x300, sym["PyEval_EvalCode"] + 0x50,
                sym["Py_RunMain"] + 0x60, sym["Py_BytesMain"] + 0x10, PyValue(1, 260),
                PyValue(2, 42, true), PyValue(3, 9, true)}});
  f.Samples({1, 1});
  f.End();
  Profile p;
  std::string error;
  ASSERT_TRUE(ReadDlprofBuffer(f.data(), "worker-300.dlprof", &p, &error)) << error;
  Symbolizer symbolizer;
  symbolizer.SymbolizeProfile(&p);  // merges too
  ASSERT_EQ(p.samples.size(), 2u);
  EXPECT_EQ(Names(p, p.stacks[p.samples[0].stack]),
            "_imaging.cpython-311.so+0x12340;ImageFile.load;Dataset.__getitem__;<module>");

  const std::string folded = MakeFoldedWriter()->Render(p, Analyze(p));
  EXPECT_EQ(folded,
            "<module> (train.py:1);Dataset.__getitem__ (data set.py:40);"
            "ImageFile.load (ImageFile.py:155);_imaging.cpython-311.so+0x12340 2\n");
}

TEST(PythonReport, FoldedFramesKeepTheirSpaceAndAreCleaned) {
  Profile p;
  p.processes.emplace_back();
  const uint32_t leaf = Native(&p, "memcpy", {}, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  // A qualname with ';' and a newline, a file with a space, no first line.
  const uint32_t odd = Py(&p, "Odd;name\n", 3, true, "/app/my file.py", -1);
  p.locations[odd].frames[0].start_line = 0;
  const uint32_t top = Py(&p, "<module>", 1, true, "<frozen runpy>", 1);
  Sample s;
  s.stack = p.InternStack({leaf, odd, top});
  s.count = 5;
  p.samples.push_back(s);
  const std::string folded = MakeFoldedWriter()->Render(p, Analyze(p));
  EXPECT_EQ(folded, "<module> (<frozen runpy>:1);Odd:name  (my file.py);memcpy 5\n");
  // flamegraph.pl and speedscope split at the last space: the count.
  const std::string line = folded.substr(0, folded.size() - 1);
  EXPECT_EQ(line.substr(line.rfind(' ') + 1), "5");
}

TEST(PythonReport, AnalysisSaysWhenPythonFramesAreOffOrLost) {
  Profile p;
  p.processes.resize(3);
  p.processes[0].pid = 100;
  p.processes[0].fields = {{"python", "3.14.0"},
                           {"python_frames", "off: dlprof has no structure table for CPython 3.14"}};
  p.processes[1].pid = 101;
  p.processes[1].fields = {{"python", "3.11.2"}, {"python_frames", "on"}};
  p.processes[1].counters = {{"py_frames_unreadable", 12}};
  p.processes[2].pid = 102;  // not Python at all
  std::string all;
  for (const std::string& w : Analyze(p).warnings) all += w + "\n";
  EXPECT_NE(all.find("pid 100: Python 3.14.0 frames off: dlprof has no structure table for "
                     "CPython 3.14; its stacks show the interpreter's native frames only\n"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("12 Python frames in 1 process (pid 101) are \"[unknown python code]\""),
            std::string::npos)
      << all;
  EXPECT_EQ(all.find("pid 101: Python"), std::string::npos) << all;
  EXPECT_EQ(all.find("pid 102"), std::string::npos) << all;
}

TEST(PythonReport, UnknownPythonCodeIsOneLineForTheWholeRun) {
  Profile p;
  p.processes.resize(3);
  for (int i = 0; i < 3; ++i) p.processes[i].pid = 200 + i;
  p.processes[0].counters = {{"py_frames_unreadable", 30}};
  p.processes[2].counters = {{"py_frames_unreadable", 5}};
  int lines = 0;
  std::string all;
  for (const std::string& w : Analyze(p).warnings) {
    all += w + "\n";
    lines += w.find("[unknown python code]") != std::string::npos;
  }
  EXPECT_EQ(lines, 1) << all;
  EXPECT_NE(all.find("35 Python frames in 2 processes (pid 200, 202) are"), std::string::npos) << all;
}

// A profile of one merged Python stack, for report.html.
Profile HtmlProfile() {
  Profile p;
  p.processes.emplace_back();
  p.processes[0].pid = 300;
  p.processes[0].hz = 100;
  const uint32_t leaf = Native(&p, "ImagingDecode", {}, "/opt/ext/_imaging.so");
  const uint32_t get = Py(&p, "Dataset.__getitem__", 42, true, "/app/data.py", 40);
  const uint32_t top = Py(&p, "<module>", 3, true, "/app/train.py", 1);
  Sample s;
  s.stack = p.InternStack({leaf, get, top});
  s.count = 7;
  s.cpu_ns = 70000000;
  p.samples.push_back(s);
  p.processes[0].samples = 7;
  return p;
}

TEST(PythonReport, HtmlFlameGraphNamesPythonFramesAndKindsThem) {
  const Profile p = HtmlProfile();
  const std::string page = MakeHtmlWriter()->Render(p, Analyze(p));
  const std::string open = "<script type=\"application/json\" id=\"dlprof-data\">";
  const size_t b = page.find(open);
  ASSERT_NE(b, std::string::npos);
  const size_t e = page.find("</script>", b);
  const nlohmann::json data = nlohmann::json::parse(page.substr(b + open.size(), e - b - open.size()));
  const nlohmann::json& cpu = data.at("flame").at(0);
  ASSERT_EQ(cpu.at("id"), "cpu");
  std::vector<std::string> names;  // "name/kind", root first
  for (size_t i = 1; i < cpu.at("name").size(); ++i) {
    names.push_back(cpu.at("names").at(cpu.at("name").at(i).get<size_t>()).get<std::string>() + "/" +
                    std::to_string(cpu.at("kind").at(i).get<int>()));
  }
  // 4: a Python frame; 1: a native function.
  EXPECT_EQ(names, (std::vector<std::string>{"<module> (train.py:1)/4",
                                             "Dataset.__getitem__ (data.py:40)/4",
                                             "ImagingDecode/1"}));
}

TEST(PythonReport, HtmlFlameGraphDrawsPythonFrames) {
  if (testing::ChromiumPath().empty()) GTEST_SKIP() << "no /usr/bin/chromium";
  const Profile p = HtmlProfile();
  TempDir dir;
  MakeHtmlWriter()->Write(p, Analyze(p), dir.path());
  const testing::BrowserResult r = testing::LoadPage("file://" + dir.File("report.html"));
  ASSERT_TRUE(r.ran) << r.log;
  EXPECT_TRUE(r.console.empty()) << r.log;
  EXPECT_NE(r.dom.find("data-name=\"Dataset.__getitem__ (data.py:40)\" data-kind=\"python\""),
            std::string::npos)
      << r.dom.substr(0, 3000);
  EXPECT_NE(r.dom.find("data-name=\"ImagingDecode\" data-kind=\"function\""), std::string::npos);
}

}  // namespace
}  // namespace dlprof
