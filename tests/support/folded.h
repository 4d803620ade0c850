// Checks of stacks.folded lines without std::regex: libstdc++'s regex
// executor recurses once per character a pattern like "[^\n]*" eats, so a
// long line (deep stacks, long symbols) overflowed the test's stack under
// ASan's bigger frames.
#ifndef DLPROF_TESTS_SUPPORT_FOLDED_H_
#define DLPROF_TESTS_SUPPORT_FOLDED_H_

#include <initializer_list>
#include <string_view>

namespace dlprof::testing {

// "frame;frame;... N" as flamegraph.pl reads it: frames are non-empty and
// hold no ';' or newline (spaces they may hold), and the count after the
// last space is a positive integer without a leading zero.
bool IsFoldedLine(std::string_view line);

// Whether some line of `folded` starts with `root` and then holds each of
// `frames`, in that order (each found after the end of the one before).
bool HasFoldedChain(std::string_view folded, std::string_view root,
                    std::initializer_list<std::string_view> frames);

}  // namespace dlprof::testing

#endif  // DLPROF_TESTS_SUPPORT_FOLDED_H_
