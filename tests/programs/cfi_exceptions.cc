// C++ exceptions thrown through 20 frames and caught, continuously on four
// threads for ~1.5 s: the program's own unwinder (libgcc's) reads the same
// .eh_frame the cfi tables are decoded from, at the same time. Prints how
// many throws were caught correctly (the same every run: each thread stops
// after a fixed count).
#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

extern "C" __attribute__((noinline)) int cfi_thrower(int depth, int value) {
  if (depth == 0) throw std::runtime_error(std::to_string(value));
  const int r = cfi_thrower(depth - 1, value);
  __asm__ volatile("" ::: "memory");
  return r + 1;
}

int main() {
  constexpr int kThreads = 4;
  constexpr int kThrows = 12000;
  std::atomic<long> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&good, t] {
      for (int i = 0; i < kThrows; ++i) {
        try {
          cfi_thrower(20, i + t);
        } catch (const std::runtime_error& e) {
          if (std::stoi(e.what()) == i + t) good.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  std::printf("caught %ld of %d\n", good.load(), kThreads * kThrows);
  return 0;
}
