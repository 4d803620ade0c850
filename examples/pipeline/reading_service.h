// Reading services, after torchdata's DataLoader2: they run the pipeline and
// hand the training loop its batches in order.
//
//   InProcessReadingService        the pipeline runs in this process: inline
//                                  in the caller (prefetch 0, like
//                                  DataLoader(num_workers=0)) or on a
//                                  prefetch thread.
//   MultiprocessingReadingService  fork()ed worker processes; worker i makes
//                                  batches i, i+N, i+2N... into its own
//                                  prefetch buffer and sends them over a
//                                  pipe; a receiver thread here puts them, in
//                                  order, into the main prefetch buffer.
#ifndef DLPROF_EXAMPLES_PIPELINE_READING_SERVICE_H_
#define DLPROF_EXAMPLES_PIPELINE_READING_SERVICE_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "examples/pipeline/buffer.h"
#include "examples/pipeline/dataset.h"
#include "examples/pipeline/stages.h"

namespace dlprof_example {

// What one process of the pipeline did, as measured by the example itself.
struct ProcessReport {
  std::string role = "main";  // "main" or "worker"
  int worker = -1;
  pid_t pid = 0;
  int64_t batches = 0;  // batches it produced that were consumed
  StageTimes times;
  bool has_buffer = false;  // its prefetch buffer, if it has one
  std::string buffer_name;
  BufferStats buffer;
  std::string exit = "ok";  // for workers: "ok", "exit 3", "signal 11 (Segmentation fault)"
};

struct ServiceOptions {
  int workers = 0;            // 0: in-process
  int prefetch = 2;           // main prefetch buffer capacity (0: none, in-process only)
  int worker_prefetch = 2;    // each worker's buffer capacity
  int64_t total_batches = 0;  // the stream's length
  PipelineConfig pipeline;
  int slow_worker = -1;  // this worker reads at slow_worker_mbps
  double slow_worker_mbps = 0;
  int crash_worker = -1;         // testing: this worker crashes after its first batch
  double worker_timeout_s = 60;  // a worker silent this long is an error
};

class ReadingService {
 public:
  virtual ~ReadingService() = default;
  // The next batch, in order. False at the end of the stream or on failure;
  // then error() is empty or says why.
  virtual bool Next(Batch* batch) = 0;
  virtual std::string error() = 0;
  // Stops every producer and reaps every worker (idempotent, also done by the
  // destructor). Returns false if a worker failed; error() then says which.
  virtual bool Shutdown() = 0;
  // One entry per process (main first), valid after Shutdown().
  virtual std::vector<ProcessReport> Report() = 0;
};

std::unique_ptr<ReadingService> MakeInProcessReadingService(const Dataset& dataset,
                                                            const ServiceOptions& options);
// Forks the workers before returning. Throws std::runtime_error if it cannot.
std::unique_ptr<ReadingService> MakeMultiprocessingReadingService(const Dataset& dataset,
                                                                  const ServiceOptions& options);

}  // namespace dlprof_example

#endif  // DLPROF_EXAMPLES_PIPELINE_READING_SERVICE_H_
