"""The cost of dlprof's Python annotations, in ns per call, profiled or not.

Run it as the README's users run Python, once unprofiled and once under
libdlprof (scripts/bench.sh does both):
    PYTHONPATH=build/python python3 bench/python_api_bench.py
    DLPROF_SAMPLE=1 LD_PRELOAD=build/core/libdlprof.so python3 bench/python_api_bench.py
Each figure is the best of 7 repeats of a timed loop, minus the same loop's
empty body, so it is what the annotation adds to a program.
"""
import json
import sys
import timeit

import dlprof

N = 200000
decode = dlprof.stage("decode")


@dlprof.stage("augment")
def augment():
    pass


def plain():
    pass


buf = dlprof.Buffer("prefetch", 8)

cases = {
    "with stage (cached object)": ("with decode: pass", "pass"),
    "with dlprof.stage(name)": ("with dlprof.stage('decode'): pass", "pass"),
    "decorated call": ("augment()", "plain()"),
    "with step + with wait": ("with dlprof.step():\n  with dlprof.wait(): pass", "pass"),
    "Buffer.set_size": ("buf.set_size(3)", "pass"),
}
env = {"decode": decode, "dlprof": dlprof, "augment": augment, "plain": plain, "buf": buf}
out = {"profiled": dlprof.enabled(), "python": sys.version.split()[0]}
for name, (stmt, base) in cases.items():
    t = min(timeit.repeat(stmt, number=N, repeat=7, globals=env)) / N
    b = min(timeit.repeat(base, number=N, repeat=7, globals=env)) / N
    out[name] = round((t - b) * 1e9, 1)
print(json.dumps(out))
