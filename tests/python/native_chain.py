"""zlib's C code under a Python function, in the main process and in two
forked children: the native frames between the leaf (libz) and the Python
frames (zlibmodule's compress, the interpreter's calls) are there only when
the walk can cross code built without frame pointers, as Debian's python3 is
(tests/python_frames_test.cc, ...WalksPythonsNativeFramesWithoutFramePointers).

    native_chain.py MAIN_SECONDS CHILD_SECONDS
"""
import os
import sys
import time
import zlib

DATA = os.urandom(1 << 16) * 4


def squeeze():
    return zlib.compress(DATA, 9)


def spin(seconds):
    # The process's own CPU clock: a busy machine does not shorten the work.
    end = time.process_time() + seconds
    while time.process_time() < end:
        squeeze()


def main():
    main_seconds, child_seconds = float(sys.argv[1]), float(sys.argv[2])
    spin(main_seconds)
    children = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            spin(child_seconds)
            os._exit(0)
        children.append(pid)
    for pid in children:
        _, status = os.waitpid(pid, 0)
        if status != 0:
            sys.exit(1)
    print("done")


main()
