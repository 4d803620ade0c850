#include <unistd.h>

#include "examples/pipeline/reading_service.h"

namespace dlprof_example {
namespace {

class InProcessReadingService : public ReadingService {
 public:
  InProcessReadingService(const Dataset& dataset, const ServiceOptions& options)
      : options_(options), pipeline_(dataset, options.pipeline) {
    report_.pid = getpid();
    if (options_.prefetch > 0) {
      int64_t k = 0;
      prefetcher_ = std::make_unique<Prefetcher<Batch>>(
          "prefetch", static_cast<size_t>(options_.prefetch), [this, k]() mutable {
            std::optional<Batch> b;
            if (k < options_.total_batches) b = pipeline_.MakeBatch(k++);
            return b;
          });
    }
  }
  ~InProcessReadingService() override { Shutdown(); }

  bool Next(Batch* batch) override {
    if (prefetcher_) {
      std::optional<Batch> b = prefetcher_->Next();
      if (!b) {
        error_ = prefetcher_->error();
        return false;
      }
      *batch = std::move(*b);
    } else {
      if (next_ >= options_.total_batches) return false;
      try {
        *batch = pipeline_.MakeBatch(next_++);
      } catch (const std::exception& e) {
        error_ = e.what();
        return false;
      }
    }
    report_.times.Add(batch->times);
    ++report_.batches;
    return true;
  }

  std::string error() override { return error_; }

  bool Shutdown() override {
    if (prefetcher_ && !stopped_) {
      prefetcher_->Stop();
      report_.has_buffer = true;
      report_.buffer_name = "prefetch";
      report_.buffer = prefetcher_->Stats();
    }
    stopped_ = true;
    return true;
  }

  std::vector<ProcessReport> Report() override { return {report_}; }

 private:
  ServiceOptions options_;
  Pipeline pipeline_;
  int64_t next_ = 0;
  std::string error_;
  ProcessReport report_;
  bool stopped_ = false;
  std::unique_ptr<Prefetcher<Batch>> prefetcher_;  // last: its thread uses the rest
};

}  // namespace

std::unique_ptr<ReadingService> MakeInProcessReadingService(const Dataset& dataset,
                                                            const ServiceOptions& options) {
  return std::make_unique<InProcessReadingService>(dataset, options);
}

}  // namespace dlprof_example
