// Whether this test binary is one of the sanitizer builds of scripts/test.sh
// (-DDLPROF_SANITIZE=address,undefined or thread, which define
// DLPROF_UNDER_SANITIZER). There every program runs 2-20 times slower, and
// unevenly (instrumented code slows, libjpeg and libc do not; TSan delivers
// signals late), so assertions on timing, rates and sample counts do not hold.
// Tests put DLPROF_SKIP_TIMING_UNDER_SANITIZER() right before such assertions:
// everything before it (the run itself, under the sanitizer, and the checks
// that do not depend on speed) still runs.
#ifndef DLPROF_TESTS_SUPPORT_SANITIZER_H_
#define DLPROF_TESTS_SUPPORT_SANITIZER_H_

#include <gtest/gtest.h>

namespace dlprof::testing {

#ifdef DLPROF_UNDER_SANITIZER
inline constexpr bool kUnderSanitizer = true;
#else
inline constexpr bool kUnderSanitizer = false;
#endif

}  // namespace dlprof::testing

#define DLPROF_SKIP_TIMING_UNDER_SANITIZER()                                                   \
  do {                                                                                         \
    if (::dlprof::testing::kUnderSanitizer) {                                                  \
      GTEST_SKIP() << "timing and sample-count assertions skipped: sanitizer build (slower, " \
                      "unevenly)";                                                             \
    }                                                                                          \
  } while (0)

#endif  // DLPROF_TESTS_SUPPORT_SANITIZER_H_
