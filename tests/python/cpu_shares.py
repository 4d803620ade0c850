"""Burns CPU in three pure-Python functions, a, b and c, in the ratio 10/30/60.

The work is interleaved in small slices of random length (a fixed cycle could
alias with a sampling timer), and each function measures its own CPU time with
time.thread_time(), read only when it starts and when it ends: it runs as many
chunks of 50 iterations as its own rate so far fits in its slice. (Reading the
clock after every chunk put a fifth of the CPU in its system call, a different
part of each function's; dlprof's user-mode timer carries kernel time to its
next sample, a period later and often in another function: c came out 1.4
points low on average under ASan with CPython 3.12.) At the end the process
prints one JSON line:
{"pid": ..., "role": "main" or "worker", "cpu_s": {...}, "shares": {...}},
the shares in percent of a + b + c.

usage: cpu_shares.py [SECONDS] [--fork]
  SECONDS  CPU seconds to burn in a, b and c together (default 2.5)
  --fork   also run the same work at the same time in a worker process
           (multiprocessing, 'fork' start method); each process prints its
           own line.
"""
import json
import multiprocessing
import os
import random
import sys
import time

spent = {"a": 0.0, "b": 0.0, "c": 0.0}
chunks_run = {"a": 0, "b": 0, "c": 0}


def chunks(name, seconds):
    """The chunks `name` runs in `seconds` of CPU, at its rate so far."""
    if spent[name] <= 0:
        return 1
    return max(1, round(seconds * chunks_run[name] / spent[name]))


def a(seconds):
    t0 = time.thread_time()
    n = chunks("a", seconds)
    x = 0
    for _ in range(n):
        for i in range(50):
            x = (x + i * i) % 1000003
    spent["a"] += time.thread_time() - t0
    chunks_run["a"] += n
    return x


def b(seconds):
    t0 = time.thread_time()
    n = chunks("b", seconds)
    x = 0
    for _ in range(n):
        for i in range(50):
            x = (x * 3 + i) % 1000003
    spent["b"] += time.thread_time() - t0
    chunks_run["b"] += n
    return x


def c(seconds):
    t0 = time.thread_time()
    n = chunks("c", seconds)
    x = 0
    for _ in range(n):
        for i in range(50):
            x = (x ^ (i << 3)) % 1000003
    spent["c"] += time.thread_time() - t0
    chunks_run["c"] += n
    return x


def run(total_s, role, seed):
    rng = random.Random(seed)
    targets = [(a, 0.10), (b, 0.30), (c, 0.60)]
    while sum(spent.values()) < total_s:
        # One round: 1 to 5 ms split 10/30/60, the three in a random order.
        slice_s = rng.uniform(0.001, 0.005)
        rng.shuffle(targets)
        for f, share in targets:
            f(slice_s * share)
    total = sum(spent.values())
    line = {
        "pid": os.getpid(),
        "role": role,
        "cpu_s": {k: round(v, 4) for k, v in spent.items()},
        "shares": {k: round(100.0 * v / total, 2) for k, v in spent.items()},
    }
    print(json.dumps(line, sort_keys=True), flush=True)


def main():
    args = [x for x in sys.argv[1:] if not x.startswith("--")]
    total_s = float(args[0]) if args else 2.5
    if "--fork" in sys.argv[1:]:
        ctx = multiprocessing.get_context("fork")
        worker = ctx.Process(target=run, args=(total_s, "worker", 2))
        worker.start()
        run(total_s, "main", 1)
        worker.join()
        sys.exit(worker.exitcode)
    run(total_s, "main", 1)


if __name__ == "__main__":
    main()
