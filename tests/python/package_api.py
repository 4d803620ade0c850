"""Exercises the dlprof package's API and prints what the program itself
measured, as JSON, for tests/python_package_test.cc to compare with the
profile. The same script runs unprofiled, where every call is a no-op.

Main thread, STEPS steps: each a step with a 2 ms wait inside, then 3 ms in
stage "decode" (context manager), 5 ms in "augment" (decorator), 1 ms in
"inner" inside "outer". A Buffer is empty for the first half of the run and
full for the second. A forked child declares itself worker 3 and burns in
"child".
"""
import json
import os
import sys
import time

import dlprof

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 40


def burn(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


@dlprof.stage("augment")
def augment():
    burn(0.005)


truth = {"cpu": {}, "steps": 0, "enabled": dlprof.enabled()}


def timed(name, fn):
    t = time.thread_time()
    fn()
    truth["cpu"][name] = truth["cpu"].get(name, 0) + time.thread_time() - t


buf = dlprof.Buffer("prefetch", 8)
assert dlprof.stage("decode") is dlprof.stage("decode")
pid = os.fork()
if pid == 0:
    dlprof.set_worker(3)
    with dlprof.stage("child"):
        burn(0.2)
    os._exit(0)

start = time.monotonic()
empty_s = 0.0
for i in range(STEPS):
    full = i >= STEPS // 2
    buf.set_size(8 if full else 0)
    t0 = time.monotonic()
    with dlprof.step():
        with dlprof.wait():
            timed("wait", lambda: burn(0.002))
        with dlprof.stage("decode"):
            timed("decode", lambda: burn(0.003))
        timed("augment", augment)
        with dlprof.stage("outer"), dlprof.stage("inner"):
            timed("inner", lambda: burn(0.001))
    truth["steps"] += 1
    if not full:
        empty_s += time.monotonic() - t0
total_s = time.monotonic() - start
truth["empty_fraction"] = empty_s / total_s
truth["stats"] = buf.stats()
truth["flushed"] = dlprof.flush(2000)
_, status = os.waitpid(pid, 0)
truth["child_status"] = status
try:
    dlprof.stage(42)
except TypeError as err:
    truth["bad_name"] = str(err)
print(json.dumps(truth))
