// PythonCodeReader against the real thing: an embedded CPython compiles
// functions with known names and lines, and what the reader gets from their
// code objects' memory must be what CPython itself says (co_qualname,
// co_filename, co_firstlineno, and co_lines() and PyCode_Addr2Line for every
// code unit). Line tables of versions not installed (3.10, 3.12, 3.13) are
// checked as recorded from those interpreters, in objects built by hand.
#if __has_include(<Python.h>)
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define DLPROF_HAVE_PYTHON 1
#endif

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/memory_view.h"
#include "core/python_code.h"
#include "core/safe_load.h"

#ifdef DLPROF_HAVE_PYTHON
#include "core/fault_handler.h"
#include "core/python_frames.h"

namespace dlprof {
namespace {

// ASCII names in "pipeline.py"; then one name of each string kind (Latin-1,
// UCS-2, UCS-4) in a file name of kind 4. The line numbers are expected below.
// many() gets 200 blank lines and a line past column 255 (long forms).
// make(k, name): a fresh code object of one size; recycle(address): new ones
// until one lands at `address` (pymalloc hands a freed block out again).
const char kSetUp[] = R"(PIPELINE = '''class Outer:
    class Inner:
        def method(self):
            return 1

square = lambda v: (v *
                    v)
def gen(n):
    for i in range(n):
        yield i * 2
def outer():
    def inner():
        return 3
    return inner
inner = outer()
def many(n):
    total = 0
    for i in range(n):
        if i % 2:
            total += i
        else:
            total -= 1
    x = [j
         for j in range(3)]
    try:
        total += len(x)
    except ValueError:
        pass
    with open("/dev/null") as f:
        total += len(f.read())
''' + '\n' * 200 + '    return (total +' + ' ' * 300 + '5)\n'
MODULE_CODE = compile(PIPELINE, 'pipeline.py', 'exec')
exec(MODULE_CODE)
exec(compile('def función(x): return x\ndef 関数(): return 2\ndef 𠀀(): return 3\n',
             '/données/パイプライン_😀.py', 'exec'))
def make(k, name):
    ns = {}
    exec(compile('\n' * k + 'def %s():\n    return 1\n' % name, 'recycled.py', 'exec'), ns)
    return ns[name].__code__
def recycle(address, keep=[]):
    for k in range(1, 2000):
        keep.append(make(k, 'b'))
        if id(keep[-1]) == address:
            return keep[-1]
WORK = 'work'  # keeps the interned name alive: each compile's 'work' is this object
def make_in(file, name):
    ns = {}
    exec(compile('def %s():\n    return 1\n' % name, file, 'exec'), ns)
    return ns[name].__code__
def recycle_in(address, file, name, keep=[]):
    for k in range(1, 5000):
        keep.append(make_in(file, name))
        if id(keep[-1]) == address:
            return keep[-1]
)";

PyObject* Globals() {
  static PyObject* globals = [] {
    Py_InitializeEx(0);  // 0: no signal handlers of Python's
    PyObject* g = PyDict_New();
    PyDict_SetItemString(g, "__builtins__", PyEval_GetBuiltins());
    PyObject* r = PyRun_String(kSetUp, Py_file_input, g, g);
    if (r == nullptr) PyErr_Print();
    Py_XDECREF(r);
    return g;
  }();
  return globals;
}

// A new reference, or nullptr (and the exception printed).
PyObject* Eval(const std::string& expr) {
  PyObject* r = PyRun_String(expr.c_str(), Py_eval_input, Globals(), Globals());
  if (r == nullptr) PyErr_Print();
  return r;
}

PyObject* CodeObject(const std::string& name) {
  return Eval(name == "MODULE_CODE" ? name : name + ".__code__");
}

uintptr_t Address(PyObject* object) { return reinterpret_cast<uintptr_t>(object); }

// One co_lines() tuple: bytes [start, end) run `line` (-1: None).
struct LineRange {
  int start, end, line;
};

// LineAt() for every code unit (and a few past them) against co_lines: the
// tuple that holds byte 2 * unit gives the line; none, or None: first_line.
void ExpectLinesAgree(const std::vector<LineRange>& co_lines, int64_t units,
                      const PyCodeInfo& info) {
  EXPECT_EQ(PythonCodeReader::LineAt(info, -1), info.first_line);
  for (int64_t unit = 0; unit < units + 4; ++unit) {
    int expected = info.first_line;
    for (const LineRange& r : co_lines) {
      if (r.start <= 2 * unit && 2 * unit < r.end && r.line != -1) expected = r.line;
    }
    ASSERT_EQ(PythonCodeReader::LineAt(info, unit), expected) << "code unit " << unit;
  }
}

// The same with CPython's own co_lines() of `code`, and PyCode_Addr2Line.
void ExpectLinesAgree(PyObject* code, const PyCodeInfo& info) {
  PyObject* list = PySequence_List(PyObject_CallMethod(code, "co_lines", nullptr));
  ASSERT_NE(list, nullptr);
  std::vector<LineRange> co_lines;
  for (Py_ssize_t i = 0; i < PyList_Size(list); ++i) {
    PyObject* line;
    LineRange r;
    ASSERT_TRUE(PyArg_ParseTuple(PyList_GetItem(list, i), "iiO", &r.start, &r.end, &line));
    r.line = line == Py_None ? -1 : static_cast<int>(PyLong_AsLong(line));
    co_lines.push_back(r);
  }
  const int64_t units = PyBytes_Size(PyObject_GetAttrString(code, "co_code")) / 2;
  ASSERT_GT(units, 0);
  ExpectLinesAgree(co_lines, units, info);
  for (int64_t unit = 0; unit < units; ++unit) {
    const int line = PyCode_Addr2Line(reinterpret_cast<PyCodeObject*>(code), 2 * unit);
    ASSERT_EQ(PythonCodeReader::LineAt(info, unit), line == -1 ? info.first_line : line)
        << "code unit " << unit;
  }
}

// Objects built by hand from the layout: 8-byte aligned, zeroed.
struct FakeObject {
  explicit FakeObject(size_t bytes) : words(bytes / 8 + 1, 0) {}
  uintptr_t address() const { return reinterpret_cast<uintptr_t>(words.data()); }
  void Put(uint32_t offset, const void* v, size_t n) {
    std::memcpy(reinterpret_cast<char*>(words.data()) + offset, v, n);
  }
  void Put64(uint32_t offset, uint64_t v) { Put(offset, &v, 8); }
  std::vector<uint64_t> words;
};

struct StringSpec {
  std::u32string chars;
  int kind = 0;         // 0: the smallest that holds `chars`
  int ascii = -1;       // -1: whether `chars` are
  bool compact = true;
  int64_t length = -2;  // -2: chars.size()
};

FakeObject FakeString(const PythonLayout& l, StringSpec s) {
  const char32_t max = s.chars.empty() ? 0 : *std::max_element(s.chars.begin(), s.chars.end());
  if (s.kind == 0) s.kind = max < 0x100 ? 1 : max < 0x10000 ? 2 : 4;
  if (s.ascii == -1) s.ascii = max < 0x80 && s.kind == 1;
  if (s.length == -2) s.length = static_cast<int64_t>(s.chars.size());
  const uint32_t data = s.ascii ? l.unicode_ascii_data : l.unicode_compact_data;
  FakeObject o(data + 4 * s.chars.size() + 8);
  o.Put64(l.unicode_length, static_cast<uint64_t>(s.length));
  const uint32_t state = (static_cast<uint32_t>(s.kind) << l.state_kind_shift) |
                         (uint32_t{s.compact} << l.state_compact_bit) |
                         (static_cast<uint32_t>(s.ascii) << l.state_ascii_bit);
  o.Put(l.unicode_state, &state, 4);
  for (size_t i = 0; i < s.chars.size(); ++i) {
    const uint32_t c = s.chars[i];
    o.Put(static_cast<uint32_t>(data + i * s.kind), &c, s.kind);  // little-endian
  }
  return o;
}

uint32_t NameOffset(const PythonLayout& l) {
  return l.code_qualname != kNoOffset ? l.code_qualname : l.code_name;
}

// A code object (of type 0: for a reader that does not check it) and its parts.
struct FakeCode {
  FakeCode(const PythonLayout& l, const std::u32string& qualname, const std::vector<uint8_t>& t,
           int first_line, const StringSpec& name_spec = {})
      : name(FakeString(l, name_spec.chars.empty() ? StringSpec{qualname} : name_spec)),
        file(FakeString(l, {U"f.py"})), table(l.bytes_data + t.size()), code(512) {
    table.Put64(l.varobject_size, t.size());
    table.Put(l.bytes_data, t.data(), t.size());
    code.Put64(NameOffset(l), name.address());
    code.Put64(l.code_name, name.address());
    code.Put64(l.code_filename, file.address());
    code.Put64(l.code_linetable, table.address());
    code.Put(l.code_firstlineno, &first_line, 4);
  }
  uintptr_t address() const { return code.address(); }
  FakeObject name, file, table, code;
};

// Every test: the embedded CPython and its layout (skipped without one).
class PythonCodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Globals();
    layout_ = FindPythonLayout(PY_MAJOR_VERSION, PY_MINOR_VERSION);
    if (layout_ == nullptr) GTEST_SKIP() << "dlprof has no layout for this CPython";
  }
  const PythonLayout& layout() const { return *layout_; }
  PythonCodeReader Checked() const {
    return PythonCodeReader(*layout_, reinterpret_cast<uintptr_t>(&PyCode_Type));
  }
  const PythonLayout* layout_ = nullptr;
};

TEST_F(PythonCodeTest, NamesAndFirstLinesAreCPythons) {
  struct Case {
    const char *expr, *qualname, *filename;
    int first_line;
  };
  const char* unicode_file = "/données/パイプライン_😀.py";
  const Case cases[] = {
      {"Outer.Inner.method", "Outer.Inner.method", "pipeline.py", 3},
      {"square", "<lambda>", "pipeline.py", 6},
      {"gen", "gen", "pipeline.py", 8},
      {"inner", "outer.<locals>.inner", "pipeline.py", 12},
      {"many", "many", "pipeline.py", 16},
      {"MODULE_CODE", "<module>", "pipeline.py", 1},
      {"función", "función", unicode_file, 1},  // Latin-1 (kind 1)
      {"関数", "関数", unicode_file, 2},          // UCS-2 (kind 2)
      {"𠀀", "𠀀", unicode_file, 3},              // UCS-4 (kind 4)
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expr);
    PyObject* code = CodeObject(c.expr);
    ASSERT_NE(code, nullptr);
    PyCodeInfo info;
    ASSERT_TRUE(Checked().Read(Address(code), &info));
    EXPECT_EQ(info.qualname, c.qualname);
    EXPECT_EQ(info.filename, c.filename);
    EXPECT_EQ(info.first_line, c.first_line);
    // And CPython agrees with the expectations above.
    EXPECT_STREQ(PyUnicode_AsUTF8(PyObject_GetAttrString(code, "co_qualname")), c.qualname);
    EXPECT_STREQ(PyUnicode_AsUTF8(PyObject_GetAttrString(code, "co_filename")), c.filename);
    ExpectLinesAgree(code, info);
  }
  // many()'s table has most entry forms: short (0-9), one line (10-12), long
  // (14) and none (15).
  EXPECT_EQ(Eval("{(b >> 3) & 15 for b in many.__code__.co_linetable if b & 128} >= "
                 "{0, 1, 2, 3, 10, 11, 12, 14, 15}"),
            Py_True);
}

// The collector process reads the same objects from outside
// (process_vm_readv, core/memory_view.h): a fork child of this test holds
// them at the same addresses, and the reader gets from it what it gets
// here; once the child is gone, nothing, and no fault.
TEST_F(PythonCodeTest, ReadFromAnotherProcessTheyAreTheSame) {
  const char* exprs[] = {"Outer.Inner.method", "inner", "many", "関数", "𠀀"};
  std::vector<uintptr_t> codes;
  for (const char* e : exprs) {
    PyObject* code = CodeObject(e);
    ASSERT_NE(code, nullptr) << e;
    codes.push_back(Address(code));
  }
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    close(ready[0]);
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(1);
    pause();  // until the test kills it
    _exit(0);
  }
  ASSERT_GT(child, 0);
  close(ready[1]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  const ProcessMemory theirs(child);
  const PythonCodeReader outside(layout(), reinterpret_cast<uintptr_t>(&PyCode_Type),
                                 reinterpret_cast<uintptr_t>(&PyUnicode_Type), theirs);
  for (size_t i = 0; i < codes.size(); ++i) {
    SCOPED_TRACE(exprs[i]);
    PyCodeInfo here, there;
    ASSERT_TRUE(Checked().Read(codes[i], &here));
    ASSERT_TRUE(outside.Read(codes[i], &there)) << "errno " << theirs.last_error();
    EXPECT_EQ(there.qualname, here.qualname);
    EXPECT_EQ(there.filename, here.filename);
    EXPECT_EQ(there.first_line, here.first_line);
    ASSERT_EQ(there.lines.size(), here.lines.size());
    for (size_t r = 0; r < here.lines.size(); ++r) {
      EXPECT_EQ(there.lines[r].start, here.lines[r].start);
      EXPECT_EQ(there.lines[r].line, here.lines[r].line);
    }
    EXPECT_EQ(outside.Identity(codes[i]), PyCodeIdentity(codes[i], layout()));
    EXPECT_NE(outside.Identity(codes[i]), 0u);
  }
  // Not a code object there: its type does not match.
  PyCodeInfo scratch;
  EXPECT_FALSE(outside.Read(reinterpret_cast<uintptr_t>(Globals()), &scratch));
  // Unmapped there.
  PyCodeInfo none;
  EXPECT_FALSE(outside.Read(16, &none));
  EXPECT_EQ(theirs.refused(), 0u);
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_FALSE(outside.Read(codes[0], &none)) << "read a process that is gone";
}

// A name that cannot be a qualified name is not used: under ASan one was a
// string constant of the module imported next, read where a freed module
// code object's name had been.
TEST_F(PythonCodeTest, ANameThatIsNoQualifiedNameIsNotTrusted) {
  for (const char* bad : {"r'\\u{0:04x}'", "'a b'", "'x:y'", "''", "'f()'"}) {
    SCOPED_TRACE(bad);
    PyObject* code = Eval(std::string("square.__code__.replace(co_qualname=") + bad + ")");
    ASSERT_NE(code, nullptr);
    PyCodeInfo info;
    EXPECT_FALSE(Checked().Read(Address(code), &info));
  }
  PyObject* good = Eval("square.__code__.replace(co_qualname='Dataset.__getitem__.<locals>.f')");
  ASSERT_NE(good, nullptr);
  PyCodeInfo info;
  EXPECT_TRUE(Checked().Read(Address(good), &info));
  EXPECT_EQ(info.qualname, "Dataset.__getitem__.<locals>.f");
}

// Entries CPython's compiler rarely writes (code 13, negative and multi-chunk
// svarints, long varints to skip) in a real code object (code.replace()):
// CPython's own co_lines() is the reference.
TEST_F(PythonCodeTest, HandBuiltLocationTablesReadAsCPythonReadsThem) {
  if (layout().line_table != PyLineTable::kLocations311) GTEST_SKIP() << "not a 3.11+ table";
  std::string t;
  auto entry = [&t](int code, int length, std::initializer_list<int> bytes) {
    t.push_back(static_cast<char>(0x80 | (code << 3) | (length - 1)));
    for (int b : bytes) t.push_back(static_cast<char>(b));
  };
  auto varint = [&t](uint32_t v) {  // 6-bit chunks, bit 6: more to come
    for (; v >= 64; v >>= 6) t.push_back(static_cast<char>((v & 63) | 64));
    t.push_back(static_cast<char>(v));
  };
  auto svarint = [&](int s) { varint(s < 0 ? ((-s) << 1) | 1 : s << 1); };
  entry(3, 2, {0x12});      // short form: same line
  entry(11, 1, {5, 9});     // one line form, +1
  entry(12, 3, {0, 100});   // +2 (columns below 128: bit 7 starts an entry)
  entry(13, 2, {}); svarint(-5);  // no columns
  entry(14, 8, {}); svarint(200); varint(3); varint(100); varint(5000);
  entry(15, 4, {});         // no line; the running line stays
  entry(13, 1, {}); svarint(0);
  entry(14, 5, {}); svarint(-150); varint(0); varint(0); varint(0);
  entry(0, 1, {0x01});
  entry(10, 7, {1, 2});
  entry(13, 8, {}); svarint(70000);  // three chunks
  entry(15, 3, {});
  entry(12, 2, {1, 2});
  PyDict_SetItemString(Globals(), "TABLE", PyBytes_FromStringAndSize(t.data(), t.size()));
  PyObject* code = Eval("many.__code__.replace(co_linetable=TABLE, co_firstlineno=1000)");
  ASSERT_NE(code, nullptr);
  PyCodeInfo info;
  ASSERT_TRUE(Checked().Read(Address(code), &info));
  EXPECT_EQ(info.first_line, 1000);
  ExpectLinesAgree(code, info);
  EXPECT_EQ(PythonCodeReader::LineAt(info, 14), 1198);  // 1000 +1 +2 -5 +200
  EXPECT_EQ(PythonCodeReader::LineAt(info, 16), 1000);  // code 15: no line
}

// Line tables recorded from CPython 3.10.13, 3.12.1 and 3.13.0 for one
// function (a loop, a try, 300 blank lines), with the co_lines() of that
// interpreter (-1: None). Three pairs were added to the 3.10 one: a -128 (no
// line), a zero-length line move and an odd byte delta.
TEST_F(PythonCodeTest, RecordedTablesOfOtherVersions) {
  struct Recorded {
    PyLineTable format;
    const char* hex;
    std::vector<LineRange> co_lines;
  };
  const Recorded tables[] = {
      {PyLineTable::kLnotab310,
       "04010c0108010a010a0202010a01007f007f0431008100810cd00201007f007f042f0081008102d004"
       "80000503800201",
       {{0, 4, 2}, {4, 16, 3}, {16, 24, 4}, {24, 34, 5}, {34, 44, 7}, {44, 46, 8},
        {46, 56, 9}, {56, 60, 312}, {60, 72, 10}, {72, 74, 11}, {74, 78, 312}, {78, 80, 10},
        {80, 84, -1}, {84, 87, -1}, {87, 89, 16}}},
      {PyLineTable::kLocations311,
       "8000d808098041dc0d1290318b58f2000405138801d80b0c88718a35d80c0d901189468941e00c0d9011"
       "89468941f009040513f00a03050dd80809885189068801f05e09000c0d8048f8f45d09000c16f2000105"
       "0dd8080cf05a09000c0d8048f05d0901050dfa",
       {{0, 2, 1}, {2, 6, 2}, {6, 34, 3}, {34, 44, 4}, {44, 56, 5}, {56, 68, 7}, {68, 70, 3},
        {70, 72, 8}, {72, 82, 9}, {82, 86, 312}, {86, 88, -1}, {88, 104, 10}, {104, 106, 11},
        {106, 110, 312}, {110, 112, 10}, {112, 118, -1}}},
      {PyLineTable::kLocations311,
       "8000d808098041dc0d1290318e588801d80b0c88718f35d80c0d89468a41e00c0d901189468a41f10900"
       "0e16f00a03050dd80809885189068801f05e09000c0d8048f8f45d09000c16f30001050dd8080cf05a09"
       "000c0d8048f05d0901050dfa",
       {{0, 2, 1}, {2, 6, 2}, {6, 34, 3}, {34, 54, 4}, {54, 66, 5}, {66, 80, 7}, {80, 84, 3},
        {84, 86, 8}, {86, 96, 9}, {96, 100, 312}, {100, 102, -1}, {102, 120, 10},
        {120, 122, 11}, {122, 126, 312}, {126, 128, 10}, {128, 134, -1}}},
  };
  for (const Recorded& r : tables) {
    SCOPED_TRACE(r.hex);
    PythonLayout l = layout();
    l.line_table = r.format;
    if (r.format == PyLineTable::kLnotab310) l.code_qualname = kNoOffset;  // co_name, as 3.10
    std::vector<uint8_t> bytes;
    for (size_t i = 0; r.hex[i] != 0; i += 2) {
      bytes.push_back(static_cast<uint8_t>(std::stoi(std::string(r.hex + i, 2), nullptr, 16)));
    }
    FakeCode fake(l, U"f", bytes, 1);
    PyCodeInfo info;
    ASSERT_TRUE(PythonCodeReader(l, 0).Read(fake.address(), &info));
    EXPECT_EQ(info.qualname, "f");
    EXPECT_EQ(info.filename, "f.py");
    ExpectLinesAgree(r.co_lines, r.co_lines.back().end / 2, info);
  }
}

TEST_F(PythonCodeTest, StringsAreBoundedAndValidUtf8) {
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    while (n-- > 0) out += s;
    return out;
  };
  // Cut at 1 KiB of UTF-8 between characters: 341 euro signs are 1023 bytes,
  // and the 'a' after the 342nd does not make it either.
  const std::pair<const char*, std::string> cases[] = {
      {"co_qualname='a' * 5000", repeat("a", 1024)},
      {"co_qualname='é' * 1000", repeat("é", 512)},
      {"co_qualname='€' * 342 + 'a'", repeat("€", 341)},
      {"co_qualname='😀' * 300", repeat("😀", 256)},
      {"co_qualname='x\\ud800y\\udfffz'", "x\uFFFDy\uFFFDz"},  // lone surrogates
  };
  for (const auto& [replace, expected] : cases) {
    SCOPED_TRACE(replace);
    PyObject* code = Eval(std::string("many.__code__.replace(") + replace + ")");
    ASSERT_NE(code, nullptr);
    PyCodeInfo info;
    ASSERT_TRUE(Checked().Read(Address(code), &info));
    EXPECT_EQ(info.qualname, expected);
    EXPECT_EQ(info.filename, "pipeline.py");
  }
}

// Strings no real code object has, built by hand.
TEST_F(PythonCodeTest, StringsThatAreNotTrusted) {
  const std::vector<uint8_t> table = {0x80 | (13 << 3), 0};  // one unit, the first line
  auto read = [&](const StringSpec& name, PyCodeInfo* info) {
    FakeCode fake(layout(), U"", table, 7, name);
    return PythonCodeReader(layout(), 0).Read(fake.address(), info);
  };
  PyCodeInfo info;
  // Code points UTF-8 cannot carry become U+FFFD.
  ASSERT_TRUE(read({std::u32string{U'a', 0x110000, 0xdc00, U'b'}}, &info));
  EXPECT_EQ(info.qualname, "a\uFFFD\uFFFDb");
  EXPECT_EQ(PythonCodeReader::LineAt(info, 0), 7);
  // Said to be ASCII, and not: no byte above 0x7f reaches the text.
  ASSERT_TRUE(read({U"a\u00e9", /*kind=*/1, /*ascii=*/1}, &info));
  EXPECT_EQ(info.qualname, "a\uFFFD");
  // A legacy (not compact) string, a kind that does not exist, an ASCII
  // string with two bytes a character, a negative length.
  EXPECT_FALSE(read({U"abc", 1, 1, /*compact=*/false}, &info));
  EXPECT_FALSE(read({U"abc", /*kind=*/3, 0}, &info));
  EXPECT_FALSE(read({U"abc", /*kind=*/2, /*ascii=*/1}, &info));
  EXPECT_FALSE(read({U"abc", 1, 1, true, /*length=*/-1}, &info));
  EXPECT_TRUE(info.qualname.empty() && info.lines.empty());  // a false Read leaves nothing
}

// 64 KiB of a longer table are read: one-line entries (3 bytes, +1 line
// each), the last one cut after its first byte, and nothing after it.
TEST_F(PythonCodeTest, LineTablesAreBounded) {
  PythonLayout l = layout();
  l.line_table = PyLineTable::kLocations311;
  std::vector<uint8_t> table;
  for (int i = 0; i < 30000; ++i) table.insert(table.end(), {0x80 | (11 << 3), 1, 2});
  FakeCode fake(l, U"f", table, 10);
  PyCodeInfo info;
  ASSERT_TRUE(PythonCodeReader(l, 0).Read(fake.address(), &info));
  EXPECT_EQ(PythonCodeReader::LineAt(info, 0), 11);
  EXPECT_EQ(PythonCodeReader::LineAt(info, 65536 / 3), 10 + 65536 / 3 + 1);
  EXPECT_EQ(PythonCodeReader::LineAt(info, 65536 / 3 + 1), 10);  // past the table: first_line
}

TEST_F(PythonCodeTest, OtherObjectsAreNotCode) {
  for (const char* expr : {"'no code object'", "12345678901234567890", "[1, 2]", "many", "Outer"}) {
    SCOPED_TRACE(expr);
    PyObject* object = Eval(expr);
    ASSERT_NE(object, nullptr);
    PyCodeInfo info;
    EXPECT_FALSE(Checked().Read(Address(object), &info));
  }
  PyCodeInfo info;
  EXPECT_FALSE(Checked().Read(0, &info));
  EXPECT_FALSE(Checked().Read(Address(CodeObject("many")) + 1, &info));
}

TEST_F(PythonCodeTest, StillSameTellsAnotherCodeObject) {
  const uintptr_t many = Address(CodeObject("many"));
  PyCodeInfo info;
  ASSERT_TRUE(Checked().Read(many, &info));
  EXPECT_TRUE(Checked().StillSame(many, info));
  EXPECT_FALSE(Checked().StillSame(Address(CodeObject("gen")), info));
  EXPECT_FALSE(Checked().StillSame(Address(Eval("'many'")), info));
  // The same name and file objects at another line.
  PyObject* moved = Eval("many.__code__.replace(co_firstlineno=99)");
  EXPECT_FALSE(Checked().StillSame(Address(moved), info));

  // A code object freed, and its block given to another code object (pymalloc
  // reuses it): the same address, not the same code.
  PyObject* first = Eval("make(0, 'a')");
  const uintptr_t address = Address(first);
  PyCodeInfo first_info;
  ASSERT_TRUE(Checked().Read(address, &first_info));
  EXPECT_EQ(first_info.qualname, "a");
  Py_DECREF(first);
  PyObject* again = Eval("recycle(" + std::to_string(address) + ")");
  ASSERT_NE(again, nullptr);
  if (again == Py_None) GTEST_SKIP() << "the block was not reused in 2000 tries";
  EXPECT_FALSE(Checked().StillSame(address, first_info));
}

// A code object made where another was, with the same name object (an
// interned "work") and first line, in another file: its identity differs
// (PyCodeIdentity mixes in the file's object), so the collector reads it
// instead of naming it after the first one's file.
TEST_F(PythonCodeTest, IdentityTellsTheSameNameAndLineInAnotherFile) {
  PyObject* first = Eval("make_in('/parent/a.py', 'work')");
  ASSERT_NE(first, nullptr);
  const uintptr_t address = Address(first);
  const uint64_t first_identity = PyCodeIdentity(address, layout());
  ASSERT_NE(first_identity, 0u);
  uintptr_t first_name = 0;
  ASSERT_TRUE(SafeLoadPtr(address + NameOffset(layout()), &first_name));
  PyCodeInfo first_info;
  ASSERT_TRUE(Checked().Read(address, &first_info));
  Py_DECREF(first);
  Py_XDECREF(Eval("__import__('gc').collect()"));
  PyObject* again = Eval("recycle_in(" + std::to_string(address) + ", '/child/b.py', 'work')");
  ASSERT_NE(again, nullptr);
  if (again == Py_None) GTEST_SKIP() << "the block was not reused in 5000 tries";
  PyCodeInfo info;
  ASSERT_TRUE(Checked().Read(address, &info));
  EXPECT_EQ(info.filename, "/child/b.py");
  EXPECT_EQ(info.qualname, first_info.qualname);
  EXPECT_EQ(info.first_line, first_info.first_line);
  uintptr_t name = 0;
  ASSERT_TRUE(SafeLoadPtr(address + NameOffset(layout()), &name));
  ASSERT_EQ(name, first_name) << "the premise: the same name object";
  EXPECT_NE(PyCodeIdentity(address, layout()), first_identity);
}

// A code object freed and not (yet) reused keeps its type and its fields, so
// only its reference count tells: pymalloc's free-list link, or glibc's
// tcache entry (which also overwrites the type). Such a block is not read,
// and neither is a freed name string.
TEST_F(PythonCodeTest, FreedCodeObjectsAndNamesAreNotRead) {
  const PythonCodeReader checked(*layout_, reinterpret_cast<uintptr_t>(&PyCode_Type),
                                 reinterpret_cast<uintptr_t>(&PyUnicode_Type));
  // A small code object (pymalloc's) and one past 512 bytes (malloc's).
  const char* big =
      "(lambda ns: (exec(compile('def freed_big():\\n' + '    x = 1\\n' * 300, 'big.py', "
      "'exec'), ns), ns['freed_big'].__code__)[1])({})";
  for (const char* source : {"make(0, 'freed_small')", big}) {
    SCOPED_TRACE(source);
    PyObject* code = Eval(source);
    ASSERT_NE(code, nullptr);
    const uintptr_t address = Address(code);
    PyCodeInfo info;
    ASSERT_TRUE(checked.Read(address, &info));
    // Its function and namespace are a cycle (f.__globals__ holds f): the
    // collector frees them, then our reference is the last.
    Py_XDECREF(Eval("__import__('gc').collect()"));
    ASSERT_EQ(Py_REFCNT(code), 1) << "another reference keeps it alive";
    Py_DECREF(code);  // freed now
    EXPECT_FALSE(checked.Read(address, &info)) << "read a freed code object as " << info.qualname;
  }
  // What the name check relies on: a freed string's count is no count.
  PyObject* name = PyUnicode_FromString("a_name_freed_now");
  const uintptr_t name_address = Address(name);
  Py_DECREF(name);
  uint64_t refcnt = 0;
  ASSERT_TRUE(SafeLoadU64(name_address, &refcnt));
  EXPECT_TRUE(refcnt == 0 || refcnt > (1ull << 33)) << "freed string's count " << refcnt;
}

// Addresses in a PROT_NONE page, for the code object or what it points to:
// dlprof's fault handler turns SafeLoad's faults into false.
TEST_F(PythonCodeTest, UnreadableMemoryGivesFalse) {
  ASSERT_TRUE(InstallFaultHandler());
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mapped =
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  const uintptr_t none = reinterpret_cast<uintptr_t>(mapped) + page;  // the second page
  ASSERT_EQ(mprotect(reinterpret_cast<void*>(none), page, PROT_NONE), 0);
  auto put64 = [](uintptr_t at, uint64_t v) { std::memcpy(reinterpret_cast<void*>(at), &v, 8); };
  const PythonCodeReader unchecked(layout(), 0);
  PyCodeInfo info;
  EXPECT_FALSE(Checked().Read(none, &info));
  EXPECT_FALSE(unchecked.Read(none, &info));
  EXPECT_FALSE(Checked().StillSame(none, info));
  EXPECT_FALSE(unchecked.StillSame(none, info));

  // A line table whose size can be read and its bytes not; a compact ASCII
  // name whose characters run into the page.
  const uintptr_t cut_table = none - layout().bytes_data;
  put64(cut_table + layout().varobject_size, 100);
  const uintptr_t cut_name = none - 8 - layout().unicode_ascii_data;
  put64(cut_name + layout().unicode_length, 1 << 20);
  put64(cut_name + layout().unicode_state, (1u << layout().state_kind_shift) |
                                               (1u << layout().state_compact_bit) |
                                               (1u << layout().state_ascii_bit));
  const std::pair<uint32_t, uintptr_t> bad[] = {
      {NameOffset(layout()), none},
      {layout().code_filename, none + 64},
      {layout().code_linetable, none + 128},
      {layout().code_linetable, cut_table},
      {NameOffset(layout()), cut_name},
  };
  for (const auto& [offset, pointer] : bad) {
    FakeCode fake(layout(), U"f", {0x80, 0}, 1);
    ASSERT_TRUE(unchecked.Read(fake.address(), &info));
    fake.code.Put64(offset, pointer);
    EXPECT_FALSE(unchecked.Read(fake.address(), &info))
        << "offset " << offset << ", page + " << static_cast<intptr_t>(pointer - none);
  }
  munmap(mapped, 2 * page);
}

}  // namespace
}  // namespace dlprof

#else
TEST(PythonCodeTest, NeedsPythonHeaders) { GTEST_SKIP() << "Python.h not found"; }
#endif
