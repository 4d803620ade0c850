"""What starting the collector helper costs a Python process that imported
torch (core/collector_spawn.h), against os.fork() + os._exit + waitpid and
os.posix_spawn + waitpid. The child is /bin/true. SpawnInvisibleChild is
timed alone (it returns once the helper has exec'd) and its end is waited
for, untimed, through a pidfd. Prints wall and process CPU ms per call.

SpawnInvisibleChild comes from the source compiled alone (not exported by
libdlprof.so), called through ctypes by its C++ name:
    g++ -O2 -shared -fPIC -I. core/collector_spawn.cc -o /tmp/libcollector_spawn.so
    /usr/bin/python3 bench/collector_spawn_python.py /tmp/libcollector_spawn.so 200
"""
import ctypes
import os
import select
import sys
import time

import torch  # noqa: F401  (the point: a large address space)

SPAWN = "_ZN6dlprof19SpawnInvisibleChildEPKcPKS1_S3_iPNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
TRUE = b"/bin/true"


def timed(n, call, after):
    wall = cpu = 0.0
    for _ in range(n):
        w0, c0 = time.perf_counter(), time.process_time()
        result = call()
        wall += time.perf_counter() - w0
        cpu += time.process_time() - c0
        after(result)
    return wall / n * 1e3, cpu / n * 1e3


def wait_ended(pid):
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    select.select([fd], [], [])
    os.close(fd)


def main():
    lib = ctypes.CDLL(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    spawn = getattr(lib, SPAWN)
    spawn.restype = ctypes.c_int
    spawn.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p),
                      ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_void_p]
    argv = (ctypes.c_char_p * 2)(TRUE, None)

    def fork():
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        return pid

    cases = [
        ("SpawnInvisibleChild", lambda: spawn(TRUE, argv, None, -1, None), wait_ended),
        ("fork (call only)", fork, lambda pid: os.waitpid(pid, 0)),
        ("fork+_exit+waitpid", lambda: os.waitpid(fork(), 0), lambda _: None),
        ("posix_spawn+waitpid", lambda: os.waitpid(os.posix_spawn(TRUE, [TRUE], {}), 0),
         lambda _: None),
    ]
    rss = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20
    print(f"RSS {rss} MiB, {n} calls each")
    for name, call, after in cases:
        timed(5, call, after)  # warm-up
        wall, cpu = timed(n, call, after)
        print(f"{name:22s} wall {wall:7.3f} ms  CPU {cpu:7.3f} ms")


if __name__ == "__main__":
    main()
