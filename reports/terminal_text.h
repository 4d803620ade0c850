// Program-supplied names (stages, buffers, roles) in the tables of the text
// outputs (summary.txt, `dlprof diff`): one line of valid UTF-8 that cannot
// move a terminal's cursor, cut to a width in terminal columns.
#ifndef DLPROF_REPORTS_TERMINAL_TEXT_H_
#define DLPROF_REPORTS_TERMINAL_TEXT_H_

#include <cstddef>
#include <string>

namespace dlprof {

// One line, valid UTF-8 (bad bytes become U+FFFD), no character that moves
// the cursor, recolours or reorders the text ('?' instead), at most `max`
// terminal columns (cut between characters, "..."). *columns, if given, gets
// the columns of the result.
std::string Clean(const std::string& s, size_t max = 40, size_t* columns = nullptr);

// A table cell: Clean(s, width) padded with spaces to exactly `width`
// columns, which printf's %-24s cannot do for characters of several bytes.
std::string Cell(const std::string& s, size_t width);

// printf into one line of text ending in '\n' (cut at 1023 bytes).
std::string Line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace dlprof

#endif  // DLPROF_REPORTS_TERMINAL_TEXT_H_
