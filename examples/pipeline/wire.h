// How a worker sends a batch to the main process over its pipe: a fixed
// header (plain data; both ends are the same binary, forked), then the pixels,
// then the labels.
#ifndef DLPROF_EXAMPLES_PIPELINE_WIRE_H_
#define DLPROF_EXAMPLES_PIPELINE_WIRE_H_

#include <string>

#include "examples/pipeline/buffer.h"
#include "examples/pipeline/stages.h"

namespace dlprof_example {

// Returns 0 or the errno of the failed write (EPIPE: the main process has
// stopped reading, which is how a worker learns to finish early).
int SendBatch(int fd, const Batch& batch, const BufferStats& worker_buffer);

enum class RecvStatus { kOk, kEndOfFile, kStopped, kTimeout, kError };

// Waits (poll) until `fd` has data, `stop_fd` becomes readable (kStopped) or
// timeout_s passes, then reads one batch. kEndOfFile: the worker closed its
// end (exited or crashed) before a complete batch.
RecvStatus ReceiveBatch(int fd, int stop_fd, double timeout_s, Batch* batch,
                        BufferStats* worker_buffer, std::string* error);

}  // namespace dlprof_example

#endif  // DLPROF_EXAMPLES_PIPELINE_WIRE_H_
