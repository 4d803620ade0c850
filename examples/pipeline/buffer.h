// The prefetch buffer: a bounded blocking queue between a producer thread and
// its consumer, as torchdata's Prefetcher. Its size is reported to dlprof on
// every change (dlprof::Buffer), and it also keeps its own time-weighted
// statistics, the ground truth for the profiler's buffer snapshots.
#ifndef DLPROF_EXAMPLES_PIPELINE_BUFFER_H_
#define DLPROF_EXAMPLES_PIPELINE_BUFFER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <dlprof/dlprof.hpp>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "examples/pipeline/io_util.h"

namespace dlprof_example {

struct BufferStats {
  uint64_t capacity = 0;
  uint64_t items = 0;         // pushed so far
  double elapsed_s = 0;       // since the buffer was made
  double mean_occupancy = 0;  // time-weighted mean size / capacity, 0..1
  double empty_fraction = 0;  // share of time with nothing in it
  double full_fraction = 0;   // share of time at capacity
  double push_blocked_s = 0;  // producer waiting on a full buffer
  double pop_blocked_s = 0;   // consumer waiting on an empty buffer
};

template <typename T>
class BoundedBuffer {
 public:
  // `name` must outlive the process (dlprof keeps the pointer); capacity >= 1.
  BoundedBuffer(const char* name, size_t capacity)
      : capacity_(capacity < 1 ? 1 : capacity),
        probe_(name, capacity_),
        t0_(WallSeconds()),
        last_change_(t0_) {}

  // Blocks while full. Returns false (dropping item) once the buffer is closed.
  bool Push(T item) {
    std::unique_lock<std::mutex> lock(mu_);
    if (items_.size() >= capacity_ && !closed_) {
      const double t = WallSeconds();
      not_full_.wait(lock, [&] { return items_.size() < capacity_ || closed_; });
      push_blocked_s_ += WallSeconds() - t;
    }
    if (closed_) return false;
    Account();
    items_.push_back(std::move(item));
    ++pushed_;
    probe_.set_size(items_.size());
    lock.unlock();  // the woken consumer should not find the lock taken
    not_empty_.notify_one();
    return true;
  }

  // Blocks while empty. Returns nothing once closed and drained.
  std::optional<T> Pop() {
    std::unique_lock<std::mutex> lock(mu_);
    if (items_.empty() && !closed_) {
      const double t = WallSeconds();
      not_empty_.wait(lock, [&] { return !items_.empty() || closed_; });
      pop_blocked_s_ += WallSeconds() - t;
    }
    if (items_.empty()) return std::nullopt;
    Account();
    T item = std::move(items_.front());
    items_.pop_front();
    probe_.set_size(items_.size());
    lock.unlock();
    not_full_.notify_one();
    return item;
  }

  // No more pushes: producers get false, consumers drain what is left.
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  BufferStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    Account();
    BufferStats s;
    s.capacity = capacity_;
    s.items = pushed_;
    s.elapsed_s = last_change_ - t0_;
    if (s.elapsed_s > 0) {
      s.mean_occupancy = occupancy_integral_ / (capacity_ * s.elapsed_s);
      s.empty_fraction = empty_s_ / s.elapsed_s;
      s.full_fraction = full_s_ / s.elapsed_s;
    }
    s.push_blocked_s = push_blocked_s_;
    s.pop_blocked_s = pop_blocked_s_;
    return s;
  }

 private:
  // Integrates the current size over the time since the last change.
  void Account() {
    const double now = WallSeconds(), dt = now - last_change_;
    occupancy_integral_ += dt * static_cast<double>(items_.size());
    if (items_.empty()) empty_s_ += dt;
    if (items_.size() >= capacity_) full_s_ += dt;
    last_change_ = now;
  }

  const size_t capacity_;
  const dlprof::Buffer probe_;
  std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<T> items_;
  bool closed_ = false;
  uint64_t pushed_ = 0;
  double t0_, last_change_;
  double occupancy_integral_ = 0, empty_s_ = 0, full_s_ = 0;
  double push_blocked_s_ = 0, pop_blocked_s_ = 0;
};

// A thread that calls produce() until it returns nothing, pushing each result
// into a BoundedBuffer; the consumer calls Next(). An exception in produce()
// ends the stream and is kept as error().
template <typename T>
class Prefetcher {
 public:
  using Producer = std::function<std::optional<T>()>;
  Prefetcher(const char* name, size_t capacity, Producer produce)
      : buffer_(name, capacity), thread_([this, p = std::move(produce)] { Run(p); }) {}
  ~Prefetcher() { Stop(); }
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  std::optional<T> Next() { return buffer_.Pop(); }
  // Makes the producer give up at its next push, and joins it.
  void Stop() {
    buffer_.Close();
    if (thread_.joinable()) thread_.join();
  }
  // Set once Next() has returned nothing because produce() threw.
  std::string error() {
    std::lock_guard<std::mutex> lock(error_mu_);
    return error_;
  }
  BufferStats Stats() { return buffer_.Stats(); }

 private:
  void Run(const Producer& produce) {
    // Without this, each batch the consumer takes from a full buffer wakes
    // this thread, which takes the CPU over in the middle of the consumer's
    // wait for data (a few ms a step on a busy machine).
    MakeThisABackgroundThread();
    try {
      while (std::optional<T> item = produce()) {
        if (!buffer_.Push(std::move(*item))) break;
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(error_mu_);
      error_ = e.what();
    }
    buffer_.Close();
  }

  BoundedBuffer<T> buffer_;
  std::mutex error_mu_;
  std::string error_;
  std::thread thread_;  // last: starts after everything it uses exists
};

}  // namespace dlprof_example

#endif  // DLPROF_EXAMPLES_PIPELINE_BUFFER_H_
