#include <dlprof/dlprof.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "examples/pipeline/reading_service.h"
#include "examples/pipeline/wire.h"

namespace dlprof_example {
namespace {

// How long Shutdown() lets workers finish their current batch before it
// kills them.
constexpr double kReapTimeoutS = 3.0;

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status) == 0 ? "ok" : "exit " + std::to_string(WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "unknown status " + std::to_string(status);
}

[[noreturn]] void CrashForTesting() {
  // A real crash, minus the core file.
  rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  signal(SIGSEGV, SIG_DFL);
  raise(SIGSEGV);
  _exit(128 + SIGSEGV);
}

// The body of worker process `id`. Never returns.
[[noreturn]] void WorkerMain(int id, int fd, pid_t parent, const Dataset& dataset,
                             const ServiceOptions& options) {
  // Die with the main process, whatever happens to it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  // A closed pipe is how the main process says "stop": handle EPIPE instead.
  signal(SIGPIPE, SIG_IGN);
  dlprof_set_worker(id);

  PipelineConfig config = options.pipeline;
  if (id == options.slow_worker) config.read_mbps = options.slow_worker_mbps;
  int code = 0;
  {
    Pipeline pipeline(dataset, config);
    int64_t k = id;
    Prefetcher<Batch> prefetch("worker_prefetch",
                               static_cast<size_t>(std::max(1, options.worker_prefetch)),
                               [&]() -> std::optional<Batch> {
                                 if (k >= options.total_batches) return std::nullopt;
                                 Batch b = pipeline.MakeBatch(k);
                                 b.worker = id;
                                 k += options.workers;
                                 return b;
                               });
    int64_t sent = 0;
    while (std::optional<Batch> b = prefetch.Next()) {
      const int err = SendBatch(fd, *b, prefetch.Stats());
      if (err == EPIPE) break;  // the main process is done with us
      if (err != 0) {
        std::fprintf(stderr, "dlprof_example_pipeline: worker %d: write: %s\n", id,
                     std::strerror(err));
        code = 1;
        break;
      }
      if (++sent == 1 && id == options.crash_worker) CrashForTesting();
    }
    prefetch.Stop();
    if (const std::string e = prefetch.error(); !e.empty()) {
      std::fprintf(stderr, "dlprof_example_pipeline: worker %d: %s\n", id, e.c_str());
      code = 1;
    }
  }
  close(fd);
  // A normal exit, so that atexit handlers run: dlprof's writes the end of
  // this worker's profile. Safe here: stdio was flushed before fork() and the
  // worker has written nothing to it since.
  std::exit(code);
}

class MultiprocessingReadingService : public ReadingService {
 public:
  MultiprocessingReadingService(const Dataset& dataset, const ServiceOptions& options)
      : options_(options) {
    main_report_.pid = getpid();
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    for (int i = 0; i < options_.workers; ++i) {
      int fds[2];
      if (pipe2(fds, O_CLOEXEC) != 0) Fail("pipe");
      // A batch is megabytes; a 1 MiB pipe (the default pipe-max-size) takes
      // it in a few writes instead of dozens of 64 KiB round trips. Best
      // effort: a smaller pipe only costs context switches.
      fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
      const pid_t pid = fork();
      if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        Fail("fork");
      }
      if (pid == 0) {
        close(fds[0]);
        for (const Worker& w : workers_) close(w.fd);
        WorkerMain(i, fds[1], main_report_.pid, dataset, options_);
      }
      close(fds[1]);
      Worker w;
      w.fd = fds[0];
      w.report.role = "worker";
      w.report.worker = i;
      w.report.pid = pid;
      workers_.push_back(w);
    }
    if (pipe2(stop_pipe_, O_CLOEXEC) != 0) Fail("pipe");
    buffer_ = std::make_unique<BoundedBuffer<Batch>>(
        "prefetch", static_cast<size_t>(std::max(1, options_.prefetch)));
    receiver_ = std::thread([this] { Receive(); });
  }

  ~MultiprocessingReadingService() override { Shutdown(); }

  bool Next(Batch* batch) override {
    std::optional<Batch> b = buffer_->Pop();
    if (!b) return false;
    *batch = std::move(*b);
    return true;
  }

  std::string error() override {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  bool Shutdown() override {
    if (shut_down_) return ok_;
    shut_down_ = true;
    if (receiver_.joinable()) {
      char x = 1;
      (void)!write(stop_pipe_[1], &x, 1);
      buffer_->Close();
      receiver_.join();
    }
    if (buffer_) {
      main_report_.has_buffer = true;
      main_report_.buffer_name = "prefetch";
      main_report_.buffer = buffer_->Stats();
    }
    for (int fd : stop_pipe_) {
      if (fd >= 0) close(fd);
    }
    // Closing our ends makes any worker still sending get EPIPE and finish.
    for (Worker& w : workers_) {
      if (w.fd >= 0) close(w.fd);
      w.fd = -1;
    }
    Reap();
    return ok_;
  }

  std::vector<ProcessReport> Report() override {
    std::vector<ProcessReport> out{main_report_};
    for (const Worker& w : workers_) out.push_back(w.report);
    return out;
  }

 private:
  struct Worker {
    int fd = -1;
    bool reaped = false;
    ProcessReport report;
  };

  [[noreturn]] void Fail(const char* what) {
    const std::string message = std::string(what) + ": " + std::strerror(errno);
    Shutdown();
    throw std::runtime_error(message);
  }

  void SetError(const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.empty()) error_ += "; ";
    error_ += message;
    ok_ = false;
  }

  std::string Name(const Worker& w) const {
    return "worker " + std::to_string(w.report.worker) + " (pid " + std::to_string(w.report.pid) +
           ")";
  }

  // Receiver thread: batch k comes from worker k % N, in order (as
  // DataLoader's in_order=True): a slow worker holds everyone up.
  void Receive() {
    MakeThisABackgroundThread();  // as a Prefetcher's thread, see buffer.h
    for (int64_t k = 0; k < options_.total_batches; ++k) {
      Worker& w = workers_[static_cast<size_t>(k % options_.workers)];
      Batch batch;
      BufferStats worker_buffer;
      std::string err;
      const RecvStatus s = ReceiveBatch(w.fd, stop_pipe_[0], options_.worker_timeout_s, &batch,
                                        &worker_buffer, &err);
      if (s == RecvStatus::kStopped) break;
      if (s != RecvStatus::kOk || batch.index != k) {
        if (s == RecvStatus::kEndOfFile) {
          SetError(Name(w) + " closed its pipe before sending batch " + std::to_string(k));
        } else if (s == RecvStatus::kTimeout) {
          SetError(Name(w) + " sent nothing for " + std::to_string(options_.worker_timeout_s) +
                   " s");
        } else if (s == RecvStatus::kOk) {
          SetError(Name(w) + " sent batch " + std::to_string(batch.index) + ", expected " +
                   std::to_string(k));
        } else {
          SetError(Name(w) + ": " + err);
        }
        break;
      }
      w.report.times.Add(batch.times);
      ++w.report.batches;
      w.report.has_buffer = true;
      w.report.buffer_name = "worker_prefetch";
      w.report.buffer = worker_buffer;
      if (!buffer_->Push(std::move(batch))) break;
    }
    buffer_->Close();
  }

  void Reap() {
    const double deadline = WallSeconds() + kReapTimeoutS;
    for (Worker& w : workers_) {
      if (w.reaped) continue;
      int status = 0;
      for (;;) {
        const pid_t r = waitpid(w.report.pid, &status, WNOHANG);
        if (r == w.report.pid || (r < 0 && errno != EINTR)) break;
        if (WallSeconds() > deadline) {
          kill(w.report.pid, SIGKILL);
          while (waitpid(w.report.pid, &status, 0) < 0 && errno == EINTR) {
          }
          SetError(Name(w) + " did not finish within " + std::to_string(kReapTimeoutS) +
                   " s of shutdown and was killed");
          break;
        }
        usleep(2000);
      }
      w.reaped = true;
      w.report.exit = DescribeStatus(status);
      if (w.report.exit != "ok") SetError(Name(w) + " ended with " + w.report.exit);
    }
  }

  ServiceOptions options_;
  ProcessReport main_report_;
  std::vector<Worker> workers_;
  int stop_pipe_[2] = {-1, -1};
  std::unique_ptr<BoundedBuffer<Batch>> buffer_;
  std::thread receiver_;
  std::mutex mu_;
  std::string error_;
  bool ok_ = true;
  bool shut_down_ = false;
};

}  // namespace

std::unique_ptr<ReadingService> MakeMultiprocessingReadingService(const Dataset& dataset,
                                                                  const ServiceOptions& options) {
  if (options.workers < 1) throw std::runtime_error("the multiprocessing service needs workers");
  return std::make_unique<MultiprocessingReadingService>(dataset, options);
}

}  // namespace dlprof_example
