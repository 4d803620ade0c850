"""What an os.fork() costs the parent: N forks of a child that leaves at once
by os._exit(0), each waited for. Prints the wall time and the process's CPU
time (every thread's: dlprof's collector included) per fork, in ms.

Run it alternated without and with dlprof, e.g. for Python 3.12 (where the
collector leaves around each fork, core/python_fork.h):
    PY=~/.pyenv/versions/3.12.1/bin/python3
    $PY bench/python_fork_cost.py 200
    DLPROF_SAMPLE=1 DLPROF_OUT=/tmp/fc LD_PRELOAD=build/core/libdlprof.so $PY bench/python_fork_cost.py 200
"""
import os
import sys
import time


def fork_and_wait():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    for _ in range(5):  # warm-up: the first forks fault in page tables
        fork_and_wait()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        fork_and_wait()
    wall = (time.perf_counter() - wall0) / n * 1e3
    cpu = (time.process_time() - cpu0) / n * 1e3
    print("%.3f %.3f" % (wall, cpu))


if __name__ == "__main__":
    main()
