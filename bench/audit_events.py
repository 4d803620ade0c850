"""A loop that raises one frequent audit event, timed by the program itself.

What an audit hook costs a program that raises many events: with any C hook
installed, CPython builds each event's argument tuple and calls the hooks
(dlprof's returns at once for every event but "exec"). Prints one line:
  EVENT ns_per_call

usage: audit_events.py getframe|open [CALLS]
"""
import os
import sys
import tempfile
import time


def main():
    event = sys.argv[1]
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 1000000
    if event == "getframe":  # sys._getframe: one event, no argument
        getframe = sys._getframe
        t0 = time.perf_counter()
        for _ in range(calls):
            getframe()
        t1 = time.perf_counter()
    elif event == "open":  # open(): the event with (path, mode, flags)
        fd, path = tempfile.mkstemp()
        os.write(fd, b"x" * 64)
        os.close(fd)
        t0 = time.perf_counter()
        for _ in range(calls):
            with open(path, "rb") as f:
                f.read()
        t1 = time.perf_counter()
        os.unlink(path)
    else:
        sys.exit("unknown event " + event)
    print(event, round((t1 - t0) / calls * 1e9, 1))


if __name__ == "__main__":
    main()
