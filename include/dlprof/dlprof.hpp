// dlprof C++ API: RAII scopes and macros over the C API in dlprof.h.
// All of it costs a predictable branch when profiling is off.
#ifndef DLPROF_DLPROF_HPP_
#define DLPROF_DLPROF_HPP_

#include <dlprof/dlprof.h>

#include <cstdint>

namespace dlprof {

// Marks the enclosing scope as pipeline stage `id` on this thread.
class StageScope {
 public:
  explicit StageScope(uint32_t id) noexcept { dlprof_stage_enter(id); }
  ~StageScope() { dlprof_stage_exit(); }
  StageScope(const StageScope&) = delete;
  StageScope& operator=(const StageScope&) = delete;
};

// One training step; the loop's wait for data goes inside it as a WaitScope.
class StepScope {
 public:
  StepScope() noexcept { dlprof_step_begin(); }
  ~StepScope() { dlprof_step_end(); }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;
};

class WaitScope {
 public:
  WaitScope() noexcept { dlprof_wait_begin(); }
  ~WaitScope() { dlprof_wait_end(); }
  WaitScope(const WaitScope&) = delete;
  WaitScope& operator=(const WaitScope&) = delete;
};

// A named bounded buffer; a thin handle, copyable, never freed.
class Buffer {
 public:
  Buffer(const char* name, uint64_t capacity) noexcept
      : b_(dlprof_buffer_create(name, capacity)) {}
  void set_size(uint64_t size) const noexcept { dlprof_buffer_set_size(b_, size); }
  bool stats(dlprof_buffer_stats* out) const noexcept {
    return dlprof_buffer_stats_get(b_, out) == 0;
  }

 private:
  dlprof_buffer* b_;
};

}  // namespace dlprof

#define DLPROF_CONCAT_INNER_(a, b) a##b
#define DLPROF_CONCAT_(a, b) DLPROF_CONCAT_INNER_(a, b)

// DLPROF_STAGE("decode");  marks the rest of the scope as stage "decode".
// The name is interned once per call site (a function-local static).
#define DLPROF_STAGE(name_literal)                                             \
  static const uint32_t DLPROF_CONCAT_(dlprof_stage_id_, __LINE__) =          \
      dlprof_stage_intern(name_literal);                                       \
  ::dlprof::StageScope DLPROF_CONCAT_(dlprof_stage_scope_, __LINE__)(          \
      DLPROF_CONCAT_(dlprof_stage_id_, __LINE__))

#endif  // DLPROF_DLPROF_HPP_
