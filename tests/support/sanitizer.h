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
#include <link.h>

#include <cstring>
#include <string>

namespace dlprof::testing {

#ifdef DLPROF_UNDER_SANITIZER
inline constexpr bool kUnderSanitizer = true;
#else
inline constexpr bool kUnderSanitizer = false;
#endif

// What a test preloads into a program that is not instrumented (Debian's
// python3), as an LD_PRELOAD value. Under ASan it adds ASan's runtime: loaded
// only as libdlprof's dependency it comes after libc, so the threads the
// program creates through libdlprof's pthread_create reach libc's directly,
// unknown to ASan, whose stale shadow of their (reused) stacks then reports
// overflows that are not there. Preloaded, it comes before libc. (TSan cannot
// be preloaded that way at all: those tests do not run under TSan.)
inline std::string SanitizerRuntime() {
#if defined(DLPROF_UNDER_SANITIZER) && !defined(DLPROF_UNDER_TSAN)
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const char* name = info->dlpi_name;
        if (name != nullptr && strstr(name, "/libasan.so") != nullptr) {
          *static_cast<std::string*>(out) = name;
          return 1;
        }
        return 0;
      },
      &found);
  return found;
#else
  return "";
#endif
}

inline std::string PreloadIntoUninstrumented(const std::string& lib) {
  const std::string runtime = SanitizerRuntime();
  return runtime.empty() ? lib : lib + ":" + runtime;
}

}  // namespace dlprof::testing

#define DLPROF_SKIP_TIMING_UNDER_SANITIZER()                                                   \
  do {                                                                                         \
    if (::dlprof::testing::kUnderSanitizer) {                                                  \
      GTEST_SKIP() << "timing and sample-count assertions skipped: sanitizer build (slower, " \
                      "unevenly)";                                                             \
    }                                                                                          \
  } while (0)

#endif  // DLPROF_TESTS_SUPPORT_SANITIZER_H_
