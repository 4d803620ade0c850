# The collector's cost per thread: N threads blocked on an Event while the
# main thread runs Python for 1.5 s. Every thread is read at every tick, so
# the collector's CPU (the profile's collector_s) grows with N; from outside
# (DLPROF_COLLECTOR=process) each read is a /proc file, inside a clock.
#
#   DLPROF_SAMPLE=1 DLPROF_COLLECTOR=thread|process LD_PRELOAD=build/core/libdlprof.so \
#     python3 bench/python_idle_threads.py 200
#   build/tools/dlprof report dlprof-out/latest -o report   # summary.json: collector_s
import sys
import threading
import time


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    go = threading.Event()
    threads = [threading.Thread(target=go.wait) for _ in range(n)]
    for t in threads:
        t.start()
    start, rounds = time.time(), 0
    while time.time() - start < 1.5:
        sum(i * i for i in range(1000))
        rounds += 1
    go.set()
    for t in threads:
        t.join()
    print("rounds", rounds, file=sys.stderr)


main()
