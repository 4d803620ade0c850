# A Python program that turns itself undumpable half-way (as a setuid drop
# does): before_drop() and after_drop() each burn 0.5 s of CPU, before and
# after prctl(PR_SET_DUMPABLE, 0). Run as an ordinary user under
# DLPROF_COLLECTOR=process, the collector process may read the program's
# memory before the drop but not after (python_frames_test.cc).
import ctypes
import sys
import time


def burn(seconds):
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def before_drop():
    burn(0.5)


def after_drop():
    burn(0.5)


before_drop()
PR_SET_DUMPABLE = 4
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
    sys.exit("prctl(PR_SET_DUMPABLE) failed: errno %d" % ctypes.get_errno())
after_drop()
print("done")
