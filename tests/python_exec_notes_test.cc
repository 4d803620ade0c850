// The audit hook's notes of exec()'d code (core/python_exec_notes.h), their
// index (core/python_exec_index.h) and how the collector's table names a
// frame with them (core/python_codes.h): only after the note, only with the
// sample's identity, and by time when one address held several code objects.
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/python_codes.h"
#include "core/python_exec_index.h"
#include "core/python_exec_notes.h"
#include "core/python_layout.h"
#include "core/signal_handler.h"

namespace dlprof {
namespace {

void DrainRing() {
  ExecNote n;
  while (TakeExecNote(&n)) {
  }
}

bool Put(uintptr_t code, uint64_t identity, int64_t t, const std::string& q,
         const std::string& f, int line = 1) {
  return PutExecNote(code, identity, t, line, q.data(), q.size(), f.data(), f.size());
}

TEST(PythonExecNotes, NotesComeOutAsWritten) {
  ASSERT_TRUE(StartExecNotes());
  DrainRing();
  ASSERT_TRUE(Put(0x1000, 7, 100, "<module>", "/a/b.py"));
  ASSERT_TRUE(Put(0x2000, 8, 101, "Klass", "/a/b.py", 12));
  ExecNote n;
  ASSERT_TRUE(TakeExecNote(&n));
  EXPECT_EQ(n.code, 0x1000u);
  EXPECT_EQ(n.identity, 7u);
  EXPECT_EQ(n.time_ns, 100);
  EXPECT_EQ(n.qualname, "<module>");
  EXPECT_EQ(n.filename, "/a/b.py");
  ASSERT_TRUE(TakeExecNote(&n));
  EXPECT_EQ(n.qualname, "Klass");
  EXPECT_EQ(n.first_line, 12);
  EXPECT_FALSE(TakeExecNote(&n));
}

// A full ring drops (and counts) rather than wait; names that do not fit are
// dropped, not cut.
TEST(PythonExecNotes, AFullRingDropsAndCounts) {
  ASSERT_TRUE(StartExecNotes());
  DrainRing();
  const uint64_t dropped = ExecNotesDropped();
  int put = 0;
  while (Put(0x3000, 1, 5, "m", "f.py")) ++put;
  EXPECT_EQ(put, 1024);
  EXPECT_TRUE(ExecNotesFilling());
  EXPECT_EQ(ExecNotesDropped(), dropped + 1);
  DrainRing();
  EXPECT_FALSE(ExecNotesFilling());
  EXPECT_FALSE(Put(0x3000, 1, 5, "m", std::string(kExecNoteTextBytes, 'x')));
  EXPECT_EQ(ExecNotesDropped(), dropped + 2);
  EXPECT_TRUE(Put(0x3000, 1, 5, "m", std::string(kExecNoteTextBytes - 1, 'x')));
  DrainRing();
}

// Writers on several threads and the reader at once: every note is read
// whole once, or counted as dropped.
TEST(PythonExecNotes, ManyWritersOneReader) {
  ASSERT_TRUE(StartExecNotes());
  DrainRing();
  const uint64_t dropped = ExecNotesDropped();
  constexpr int kThreads = 4, kEach = 20000;
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([t] {
      for (int i = 0; i < kEach; ++i) {
        const std::string q = "w" + std::to_string(t) + "_" + std::to_string(i);
        Put(0x10000 * (t + 1) + i, i, i, q, q + ".py");
      }
    });
  }
  int read = 0;
  bool whole = true;
  auto take = [&] {
    ExecNote n;
    while (TakeExecNote(&n)) {
      ++read;
      whole = whole && n.filename == n.qualname + ".py" &&
              n.qualname == "w" + std::to_string(n.code / 0x10000 - 1) + "_" +
                                std::to_string(n.identity);
    }
  };
  for (int spins = 0; spins < 2000; ++spins) take();
  for (auto& w : writers) w.join();
  take();
  EXPECT_TRUE(whole);
  EXPECT_EQ(read + (ExecNotesDropped() - dropped), uint64_t{kThreads * kEach});
}

ExecNote Note(uintptr_t code, uint64_t identity, int64_t t, const std::string& q) {
  ExecNote n;
  n.code = code;
  n.identity = identity;
  n.time_ns = t;
  n.qualname = q;
  n.filename = "/x/" + q + ".py";
  return n;
}

// One address, several code objects over time (a module's code freed and the
// next one's made there): the note at or before a time, and when the next one came.
TEST(PythonExecIndex, TheNoteAtATimeAndTheNextOne) {
  ExecNoteIndex index;
  index.Add(Note(0x100, 5, 1000, "a"));
  index.Add(Note(0x100, 5, 3000, "c"));
  index.Add(Note(0x100, 6, 2000, "b"));  // out of order: another writer's
  index.Add(Note(0x100, 5, 3500, "c"));  // "c" again: nothing new
  EXPECT_EQ(index.size(), 3u);
  int64_t next;
  EXPECT_EQ(index.Before(0x100, 999, &next), nullptr);
  EXPECT_EQ(next, 1000);
  EXPECT_EQ(index.Before(0x100, 1000, &next)->qualname, "a");
  EXPECT_EQ(next, 2000);
  EXPECT_EQ(index.Before(0x100, 2500, &next)->qualname, "b");
  EXPECT_EQ(index.Before(0x100, 9999, &next)->qualname, "c");
  EXPECT_EQ(next, INT64_MAX);
  EXPECT_EQ(index.Before(0x200, 9999, &next), nullptr);
  EXPECT_EQ(next, INT64_MAX);
}

// Notes of code gone for longer than the samples wait are forgotten; a
// replaced note is gone from its successor's time.
TEST(PythonExecIndex, NotesOfCodeLongGoneAreForgotten) {
  ExecNoteIndex index;
  index.Add(Note(0x100, 5, 1000, "a"));
  index.Add(Note(0x100, 6, 2000, "b"));
  index.Add(Note(0x200, 7, 2000, "live"));
  index.Add(Note(0x300, 8, 2000, "dead"));
  auto alive = [](uintptr_t code, uint64_t) { return code != 0x300; };
  index.Prune(/*now=*/2500, /*keep=*/1000, alive);
  EXPECT_EQ(index.size(), 4u);  // "a" gone at 2000, "dead" at 2500: kept a while
  index.Prune(3100, 1000, alive);
  EXPECT_EQ(index.size(), 3u);  // "a" forgotten
  index.Prune(3600, 1000, alive);
  EXPECT_EQ(index.size(), 2u);
  int64_t next;
  EXPECT_EQ(index.Before(0x100, 9999, &next)->qualname, "b");
  EXPECT_EQ(index.Before(0x300, 9999, &next), nullptr);
}

// A code object as the collector reads it: names, file, a line table, by the
// installed CPython's layout. Its type is not checked (the runtime's
// code_type is 0), so a zeroed block reads as no code at all.
struct FakeCode {
  explicit FakeCode(const PythonLayout& l, const char* q, const char* f)
      : block(1024, 0) {
    StringAt(l, 256, q);
    StringAt(l, 512, f);
    const uint32_t name = l.code_qualname != kNoOffset ? l.code_qualname : l.code_name;
    Put(name, base() + 256);
    Put(l.code_name, base() + 256);
    Put(l.code_filename, base() + 512);
    Put(l.code_linetable, base() + 768);  // an empty bytes object
    const uint32_t line = 3;
    std::memcpy(&block[l.code_firstlineno], &line, 4);
  }
  uintptr_t base() const { return reinterpret_cast<uintptr_t>(block.data()); }
  void Put(uint32_t offset, uintptr_t value) { std::memcpy(&block[offset], &value, 8); }
  void StringAt(const PythonLayout& l, uint32_t at, const char* s) {
    const uint64_t length = std::strlen(s);
    const uint32_t state = 1u << l.state_kind_shift | 1u << l.state_compact_bit |
                           1u << l.state_ascii_bit;
    std::memcpy(&block[at + l.unicode_length], &length, 8);
    std::memcpy(&block[at + l.unicode_state], &state, 4);
    std::memcpy(&block[at + l.unicode_ascii_data], s, length);
  }
  std::vector<uint8_t> block;
};

class PythonCodeTableNotes : public ::testing::Test {
 protected:
  void SetUp() override {
    layout_ = FindPythonLayout(3, 11);
    ASSERT_NE(layout_, nullptr);
    py_.layout = layout_;
    ASSERT_TRUE(StartExecNotes());  // each test may run alone (ctest)
    DrainRing();
  }
  // The entry a frame word names, from the PY_CODES chunk taken so far.
  std::string Name(uint64_t word) {
    std::string payload;
    if (table_.TakeChunk(&payload)) chunks_ += payload;
    const uint32_t id = static_cast<uint32_t>(word & 0xffffffff);
    // Entries are varint id, then the qualname's length and bytes: ids here are small.
    for (size_t i = 0; i + 2 < chunks_.size(); ++i) {
      if (static_cast<uint8_t>(chunks_[i]) == id) {
        const size_t n = static_cast<uint8_t>(chunks_[i + 1]);
        const std::string q = chunks_.substr(i + 2, n);
        if (q == "<module>" || q == "Klass" || q == "Other" || q == "[unknown python code]") {
          return q + (q[0] == '[' ? "" : "@" + chunks_.substr(i + 3 + n, chunks_[i + 2 + n]));
        }
      }
    }
    return "?";
  }
  const PythonLayout* layout_ = nullptr;
  PythonRuntime py_;
  PythonCodeTable table_;
  std::string chunks_;
};

// Freed code (here: a zeroed block) is named after the note made at its
// address before the sample, with the sample's identity; never before the
// note, nor with another identity.
TEST_F(PythonCodeTableNotes, FreedCodeIsNamedAfterItsNoteOnly) {
  std::vector<uint8_t> freed(1024, 0);
  const uintptr_t code = reinterpret_cast<uintptr_t>(freed.data());
  ASSERT_TRUE(Put(code, 42, 1000, "<module>", "/m/a.py"));
  EXPECT_EQ(Name(table_.FrameWord(py_, code, 0, 42, 1500)), "<module>@/m/a.py");
  EXPECT_EQ(table_.named_by_exec_notes(), 1u);
  EXPECT_EQ(Name(table_.FrameWord(py_, code, 0, 42, 999)), "[unknown python code]");
  EXPECT_EQ(Name(table_.FrameWord(py_, code, 0, 43, 1500)), "[unknown python code]");
  // The next module's code at the same address, with the same identity
  // (its name and file objects made where the first one's were).
  ASSERT_TRUE(Put(code, 42, 2000, "<module>", "/m/b.py"));
  EXPECT_EQ(Name(table_.FrameWord(py_, code, 0, 42, 1500)), "<module>@/m/a.py");
  EXPECT_EQ(Name(table_.FrameWord(py_, code, 0, 42, 2500)), "<module>@/m/b.py");
  EXPECT_EQ(table_.unreadable(), 2u);
}

// Code the collector read, then another code object with the same identity
// at its address (its name and file objects where the first one's were), as
// a note says: a sample before the note is the code read then, one after it
// is not (the code there now is read); once the address was read again, a
// sample from before the note has no name rather than the new one.
TEST_F(PythonCodeTableNotes, ANoteAtTheAddressOutdatesWhatWasRead) {
  FakeCode klass(*layout_, "Klass", "/m/k.py");
  const uintptr_t code = klass.base();
  const uint64_t identity = PyCodeIdentity(code, *layout_);
  const int64_t t0 = MonotonicNs();
  EXPECT_EQ(Name(table_.FrameWord(py_, code, 0, identity, t0)), "Klass@/m/k.py");
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const int64_t t1 = MonotonicNs();  // as the hook's clock reads it, after the read
  ASSERT_TRUE(Put(code, identity, t1, "Other", "/m/o.py"));
  klass.StringAt(*layout_, 256, "Other");
  klass.StringAt(*layout_, 512, "/m/o.py");
  ASSERT_EQ(PyCodeIdentity(code, *layout_), identity);
  EXPECT_EQ(Name(table_.FrameWord(py_, code, 0, identity, t0)), "Klass@/m/k.py");
  EXPECT_EQ(Name(table_.FrameWord(py_, code, 0, identity, t1 + 10)), "Other@/m/o.py");
  EXPECT_EQ(Name(table_.FrameWord(py_, code, 0, identity, t0)), "[unknown python code]");
}

}  // namespace
}  // namespace dlprof
