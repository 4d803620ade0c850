// The map of the code objects the collector has met (core/python_codes_seen.h):
// a code object is met only with the identity it was met with (a module's
// code made where the last module's was is new), and wakes for new code are
// at most one a millisecond.
#include "core/python_codes_seen.h"

#include <gtest/gtest.h>

#include "core/python_frames.h"

namespace dlprof {
namespace {

TEST(PythonCodesSeen, ACodeObjectIsMetWithItsIdentityOnly) {
  const uintptr_t code = 0x7f1234560010;
  const uint64_t identity = 0x0001123456789abcull;
  const uint64_t next_module = 0x0001123456789000ull;  // same address, another file
  EXPECT_FALSE(PyCodeSeen(code, identity));
  MarkPyCodeSeen(code, identity);
  EXPECT_TRUE(PyCodeSeen(code, identity));
  EXPECT_FALSE(PyCodeSeen(code, next_module));
  // Marking again changes nothing.
  MarkPyCodeSeen(code, identity);
  EXPECT_TRUE(PyCodeSeen(code, identity));
}

// Of 1,000 code objects met, 1,000 others are still new but for bits shared
// by chance (2 KiB of bits: about 6% of them).
TEST(PythonCodesSeen, FewUnmetCodeObjectsLookMet) {
  for (uintptr_t i = 0; i < 1000; ++i) MarkPyCodeSeen(0x560000000000 + 0x90 * i, 0x42 + i);
  int look_met = 0;
  for (uintptr_t i = 0; i < 1000; ++i) {
    look_met += PyCodeSeen(0x7f0000000000 + 0x90 * i, 0x77 + 3 * i) ? 1 : 0;
  }
  EXPECT_LT(look_met, 120);
}

// Frames as the walk writes them: any frame's code not met says so, the
// entry mark on a code word does not change which code it is.
TEST(PythonCodesSeen, AnyFrameWithCodeNotMetIsSeen) {
  uint64_t frames[3 * kPyFrameWords] = {};
  for (int f = 0; f < 3; ++f) {
    frames[kPyFrameWords * f] = 0x7e0000001000 + 0x100 * f;
    frames[kPyFrameWords * f + 2] = 0x5000 + f;
  }
  frames[kPyFrameWords * 2] |= kPyEntryBit;
  for (int f = 0; f < 2; ++f) MarkPyCodeSeen(0x7e0000001000 + 0x100 * f, 0x5000 + f);
  EXPECT_FALSE(HasUnseenPyCode(frames, 2));
  EXPECT_TRUE(HasUnseenPyCode(frames, 3));  // the outermost, marked entry
  MarkPyCodeSeen(0x7e0000001200, 0x5002);
  EXPECT_FALSE(HasUnseenPyCode(frames, 3));
  EXPECT_FALSE(HasUnseenPyCode(frames, 0));
}

TEST(PythonCodesSeen, WakesAreAtMostOneAMillisecond) {
  const int64_t t0 = 5000000000;
  EXPECT_TRUE(TakePyCodeWake(t0));
  EXPECT_FALSE(TakePyCodeWake(t0 + 1));
  EXPECT_FALSE(TakePyCodeWake(t0 + 999999));
  EXPECT_TRUE(TakePyCodeWake(t0 + 1000000));
  EXPECT_FALSE(TakePyCodeWake(t0 + 1500000));
  EXPECT_TRUE(TakePyCodeWake(t0 + 2100000));
}

}  // namespace
}  // namespace dlprof
