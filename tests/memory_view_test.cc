// core/memory_view.h: BlockCachedView serves what its base view would, with
// fewer reads of it, and falls back where a block cannot be read whole. And
// the same through another process's memory (ProcessMemory), where each
// base read is a process_vm_readv.
#include "core/memory_view.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace dlprof {
namespace {

// Memory [lo, lo + bytes.size()) with the bytes given; [bad_lo, bad_hi)
// unreadable. Counts its reads.
class FakeMemory : public MemoryView {
 public:
  FakeMemory(uintptr_t lo, size_t size, uintptr_t bad_lo, uintptr_t bad_hi)
      : lo_(lo), bytes_(size), bad_lo_(bad_lo), bad_hi_(bad_hi) {
    for (size_t i = 0; i < size; ++i) bytes_[i] = static_cast<unsigned char>(i * 7 + 3);
  }
  bool Copy(uintptr_t address, void* out, size_t n) const override {
    ++reads;
    if (address < lo_ || n > bytes_.size() || address - lo_ > bytes_.size() - n) return false;
    if (address < bad_hi_ && address + n > bad_lo_) return false;
    memcpy(out, bytes_.data() + (address - lo_), n);
    return true;
  }
  mutable int reads = 0;

 private:
  uintptr_t lo_;
  std::vector<unsigned char> bytes_;
  uintptr_t bad_lo_, bad_hi_;
};

TEST(BlockCachedView, ServesWhatItsBaseWouldWithFewerReads) {
  constexpr uintptr_t B = BlockCachedView::kBlockBytes;
  const uintptr_t lo = 0x100000;
  const uintptr_t hole = lo + 16 * B;  // the 17th block has a hole inside
  FakeMemory base(lo, 17 * B, hole + 100, hole + 200);
  const BlockCachedView cached(base);
  // Every 8-byte read of the first 16 blocks, at every alignment.
  int reads = 0;
  for (uintptr_t a = lo; a + 8 <= lo + 16 * B; a += 3, ++reads) {
    uint64_t want = 0, got = 0;
    ASSERT_TRUE(base.Copy(a, &want, 8));
    ASSERT_TRUE(cached.Copy(a, &got, 8)) << std::hex << a;
    EXPECT_EQ(got, want) << std::hex << a;
  }
  // 16 blocks held kBlocks at a time, read in order: each block once, and
  // each read across two blocks straight from the base.
  const int crossing = 16 - 1;
  EXPECT_LE(cached.base_reads(), 16u + crossing * 3u);
  EXPECT_LT(cached.base_reads(), static_cast<uint64_t>(reads) / 100)
      << "nearly every read went to the base";

  // Around the hole: readable bytes of its block still read, the hole not.
  uint64_t v = 0;
  EXPECT_TRUE(cached.Copy(hole + 8, &v, 8));
  EXPECT_FALSE(cached.Copy(hole + 96, &v, 8));
  EXPECT_TRUE(cached.Copy(hole + 200, &v, 8));
  uint64_t want = 0;
  ASSERT_TRUE(base.Copy(hole + 200, &want, 8));
  EXPECT_EQ(v, want);
  // Past the end, and a read larger than a block.
  EXPECT_FALSE(cached.Copy(lo + 17 * B - 4, &v, 8));
  std::vector<unsigned char> big(B + 1000), big_want(B + 1000);
  ASSERT_TRUE(base.Copy(lo + 10, big_want.data(), big_want.size()));
  ASSERT_TRUE(cached.Copy(lo + 10, big.data(), big.size()));
  EXPECT_EQ(big, big_want);
  // Wrapping around the address space.
  EXPECT_FALSE(cached.Copy(UINTPTR_MAX - 3, &v, 8));
}

TEST(BlockCachedView, ReadsAnotherProcessAsItsOwnBytesAreThere) {
  // A child with a page of known bytes, then a gap: what ProcessMemory and
  // the view over it read of it must agree, and the gap must fail in both.
  const long page = sysconf(_SC_PAGESIZE);
  auto* area = static_cast<unsigned char*>(
      mmap(nullptr, static_cast<size_t>(2 * page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(area, MAP_FAILED);
  for (long i = 0; i < page; ++i) area[i] = static_cast<unsigned char>(i * 13 + 1);
  ASSERT_EQ(munmap(area + page, static_cast<size_t>(page)), 0);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  const ProcessMemory process(child);
  const BlockCachedView cached(process);
  const uintptr_t at = reinterpret_cast<uintptr_t>(area);
  int reads = 0;
  for (long off = 0; off + 8 <= page; off += 8, ++reads) {
    uint64_t a = 0, b = 0;
    ASSERT_TRUE(process.Copy(at + static_cast<uintptr_t>(off), &a, 8));
    ASSERT_TRUE(cached.Copy(at + static_cast<uintptr_t>(off), &b, 8));
    EXPECT_EQ(a, b);
  }
  EXPECT_EQ(cached.base_reads(), (static_cast<uint64_t>(page) + BlockCachedView::kBlockBytes - 1) /
                                     BlockCachedView::kBlockBytes);
  uint64_t v;
  EXPECT_FALSE(process.Copy(at + static_cast<uintptr_t>(page), &v, 8));
  EXPECT_FALSE(cached.Copy(at + static_cast<uintptr_t>(page), &v, 8));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_GT(reads, 100);
}

}  // namespace
}  // namespace dlprof

namespace dlprof {
namespace {

// A walk's reads through a view with a trace, checked again in one call
// (ProcessMemory::SameAsTraced): true while every traced read would get the
// same bytes, false once one changed, and false where the trace cannot
// tell (incomplete, a read failed, too many spans).
TEST(ReadTrace, SameAsTracedSeesEveryChangeOfATracedRead) {
  const size_t bytes = 64 << 12;  // 64 pages, shared with the child
  auto* area = static_cast<unsigned char*>(
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(area, MAP_FAILED);
  for (size_t i = 0; i < bytes; ++i) area[i] = static_cast<unsigned char>(i * 31 + 7);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  const ProcessMemory process(child);
  const uintptr_t at = reinterpret_cast<uintptr_t>(area);
  // Reads of 1, 4 and 8 bytes, scattered over 10 pages and side by side.
  ReadTrace trace;
  {
    const BlockCachedView view(process, &trace);
    uint64_t v8;
    uint32_t v4;
    uint8_t v1;
    for (int page = 0; page < 10; ++page) {
      const uintptr_t base = at + static_cast<uintptr_t>(page) * 4096 * 3;
      ASSERT_TRUE(view.Copy(base + 16, &v8, 8));
      ASSERT_TRUE(view.Copy(base + 24, &v4, 4));
      ASSERT_TRUE(view.Copy(base + 1000, &v1, 1));
    }
  }
  ASSERT_TRUE(trace.complete);
  ASSERT_EQ(trace.reads, 30);
  EXPECT_TRUE(process.SameAsTraced(trace));
  // A byte of each kind of read changed, then put back.
  for (uintptr_t off : {uintptr_t{4096 * 3 * 4 + 16 + 7}, uintptr_t{4096 * 3 * 9 + 24},
                        uintptr_t{1000}}) {
    area[off] ^= 1;
    EXPECT_FALSE(process.SameAsTraced(trace)) << off;
    area[off] ^= 1;
    EXPECT_TRUE(process.SameAsTraced(trace)) << off;
  }
  // A byte beside a read (inside the span read, outside every read) is not one.
  area[4096 * 3 * 2 + 40] ^= 1;
  EXPECT_TRUE(process.SameAsTraced(trace));

  // A trace that cannot tell: a failed read, or more spans than one call takes.
  ReadTrace failed;
  {
    const BlockCachedView view(process, &failed);
    uint64_t v;
    EXPECT_TRUE(view.Copy(at, &v, 8));
    EXPECT_FALSE(view.Copy(8, &v, 8));  // unmapped
  }
  EXPECT_FALSE(failed.complete);
  EXPECT_FALSE(process.SameAsTraced(failed));
  ReadTrace scattered;
  {
    const BlockCachedView view(process, &scattered);
    uint64_t v;
    for (uintptr_t off = 0; off + 8 <= bytes && scattered.reads < ReadTrace::kMaxReads; off += 1024) {
      ASSERT_TRUE(view.Copy(at + off, &v, 8));
    }
  }
  ASSERT_TRUE(scattered.complete);
  ASSERT_GT(scattered.reads, ProcessMemory::kMaxTraceSpans);
  EXPECT_FALSE(process.SameAsTraced(scattered));
  // Past kMaxReads the trace is incomplete.
  ReadTrace many;
  {
    const BlockCachedView view(process, &many);
    uint64_t v;
    for (int i = 0; i <= ReadTrace::kMaxReads; ++i) ASSERT_TRUE(view.Copy(at + 8 * i, &v, 8));
  }
  EXPECT_FALSE(many.complete);
  EXPECT_FALSE(process.SameAsTraced(many));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  // The process gone: nothing can be told.
  EXPECT_FALSE(process.SameAsTraced(trace));
  munmap(area, bytes);
}

}  // namespace
}  // namespace dlprof
