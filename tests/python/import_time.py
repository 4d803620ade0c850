"""Spends its CPU importing modules whose top-level code does the work.

A module's code object runs once, at import, and the interpreter frees it as
soon as the import is done: a profiler that names frames after the fact must
read it within milliseconds. This is import time, which a spawned DataLoader
worker spends importing torch. Each generated module burns CPU in its own
body (no function of its own) for a few milliseconds, less than the
collector's tick, and measures it with time.thread_time(). With CLASS_MS,
each module also defines a class `Burner` whose body (a code object of its
own, a constant of the module's, freed with it) burns that long. At the end
the process prints one JSON line:
  {"pid": ..., "files": [...], "burn_s": B, "class_burn_s": C}
with the generated modules' paths and the CPU their bodies and their class
bodies measured.

usage: import_time.py FOLDER [MODULES] [MS_EACH] [CLASS_MS]
  FOLDER    where to write the modules (made if missing)
  MODULES   how many (default 100)
  MS_EACH   CPU milliseconds each module's body burns (default 3)
  CLASS_MS  CPU milliseconds each module's class body burns (default 0: no class)
"""
import importlib
import json
import os
import sys
import time

BODY = '''\
import time as _time
_t0 = _time.thread_time()
_x = 0
while _time.thread_time() - _t0 < {seconds!r}:
    for _i in range(50):
        _x = (_x * 31 + _i) % 1000003
BURN = _time.thread_time() - _t0
'''

CLASS = '''\
class Burner:
    _t0 = _time.thread_time()
    _x = 0
    while _time.thread_time() - _t0 < {seconds!r}:
        for _i in range(50):
            _x = (_x * 31 + _i) % 1000003
    BURN = _time.thread_time() - _t0
'''


def main():
    folder = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    ms_each = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
    class_ms = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    os.makedirs(folder, exist_ok=True)
    files = []
    for k in range(count):
        path = os.path.join(folder, "gen_import_%03d.py" % k)
        with open(path, "w") as f:
            f.write(BODY.format(seconds=ms_each / 1000.0))
            if class_ms > 0:
                f.write(CLASS.format(seconds=class_ms / 1000.0))
        files.append(path)
    sys.path.insert(0, folder)
    importlib.invalidate_caches()
    burn = class_burn = 0.0
    for k in range(count):
        module = importlib.import_module("gen_import_%03d" % k)
        burn += module.BURN
        class_burn += module.Burner.BURN if class_ms > 0 else 0.0
    print(json.dumps({"pid": os.getpid(), "files": files, "burn_s": burn,
                      "class_burn_s": class_burn}))


if __name__ == "__main__":
    main()
