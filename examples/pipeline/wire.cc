#include "examples/pipeline/wire.h"

#include <poll.h>

#include <cerrno>
#include <cstring>
#include <type_traits>

#include "examples/pipeline/io_util.h"

namespace dlprof_example {
namespace {

constexpr uint32_t kMagic = 0x444c5042;  // "DLPB"

struct Header {
  uint32_t magic;
  int32_t worker;
  int64_t index;
  int32_t n, channels, height, width;
  uint64_t pixel_count, label_count;
  StageTimes times;
  BufferStats worker_buffer;
};
static_assert(std::is_trivially_copyable_v<Header>);

}  // namespace

int SendBatch(int fd, const Batch& batch, const BufferStats& worker_buffer) {
  Header h{};
  h.magic = kMagic;
  h.worker = batch.worker;
  h.index = batch.index;
  h.n = batch.n;
  h.channels = batch.channels;
  h.height = batch.height;
  h.width = batch.width;
  h.pixel_count = batch.pixels.size();
  h.label_count = batch.labels.size();
  h.times = batch.times;
  h.worker_buffer = worker_buffer;
  if (int e = WriteAll(fd, &h, sizeof h)) return e;
  if (int e = WriteAll(fd, batch.pixels.data(), batch.pixels.size() * sizeof(float))) return e;
  return WriteAll(fd, batch.labels.data(), batch.labels.size() * sizeof(int32_t));
}

RecvStatus ReceiveBatch(int fd, int stop_fd, double timeout_s, Batch* batch,
                        BufferStats* worker_buffer, std::string* error) {
  pollfd fds[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
  for (;;) {
    int r = poll(fds, 2, static_cast<int>(timeout_s * 1000));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      *error = std::string("poll: ") + std::strerror(errno);
      return RecvStatus::kError;
    }
    if (r == 0) return RecvStatus::kTimeout;
    break;
  }
  if (fds[1].revents != 0) return RecvStatus::kStopped;
  Header h;
  long got = ReadAll(fd, &h, sizeof h);
  if (got < 0) {
    *error = std::string("read: ") + std::strerror(errno);
    return RecvStatus::kError;
  }
  if (got < static_cast<long>(sizeof h)) return RecvStatus::kEndOfFile;
  if (h.magic != kMagic || h.pixel_count > (1ull << 31) || h.label_count > (1ull << 24)) {
    *error = "corrupt batch header";
    return RecvStatus::kError;
  }
  batch->worker = h.worker;
  batch->index = h.index;
  batch->n = h.n;
  batch->channels = h.channels;
  batch->height = h.height;
  batch->width = h.width;
  batch->times = h.times;
  *worker_buffer = h.worker_buffer;
  batch->pixels.resize(h.pixel_count);
  batch->labels.resize(h.label_count);
  const size_t pixel_bytes = h.pixel_count * sizeof(float);
  const size_t label_bytes = h.label_count * sizeof(int32_t);
  if (ReadAll(fd, batch->pixels.data(), pixel_bytes) != static_cast<long>(pixel_bytes) ||
      ReadAll(fd, batch->labels.data(), label_bytes) != static_cast<long>(label_bytes)) {
    return RecvStatus::kEndOfFile;
  }
  return RecvStatus::kOk;
}

}  // namespace dlprof_example
