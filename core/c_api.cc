// Temporary inert C API so the tree links while the runtime is written.
#include <dlprof/dlprof.h>
#include <string.h>
extern "C" {
int dlprof_enabled(void) { return 0; }
uint32_t dlprof_stage_intern(const char*) { return 0; }
void dlprof_stage_enter(uint32_t) {}
void dlprof_stage_exit(void) {}
dlprof_buffer* dlprof_buffer_create(const char*, uint64_t) { return nullptr; }
void dlprof_buffer_set_size(dlprof_buffer*, uint64_t) {}
int dlprof_buffer_stats_get(const dlprof_buffer*, dlprof_buffer_stats* out) { if (out) memset(out, 0, sizeof *out); return -1; }
void dlprof_step_begin(void) {}
void dlprof_step_end(void) {}
void dlprof_wait_begin(void) {}
void dlprof_wait_end(void) {}
void dlprof_set_worker(int) {}
int dlprof_flush(int) { return -1; }
size_t dlprof_backends_describe(char* buf, size_t len) { if (len) buf[0] = 0; return 0; }
}
