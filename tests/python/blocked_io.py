# A Python program whose time is blocked inside slow_io(): a thread that
# sleeps in it from reader_loop(), and a forked worker that reads a pipe in
# it from worker_main() (tests/blocked_stacks_test.cc). Neither uses CPU to
# speak of, so their Python frames come from the collector's walks of
# blocked threads, not from CPU samples.
import os
import sys
import threading
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5


def slow_io(fd=None):
    if fd is None:
        time.sleep(0.05)
        return b""
    return os.read(fd, 1)


def reader_loop():
    end = time.monotonic() + SECONDS
    while time.monotonic() < end:
        slow_io()


def worker_main(fd):
    n = 0
    while slow_io(fd):
        n += 1
    return n


def main():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        worker_main(r)
        os._exit(0)
    os.close(r)
    t = threading.Thread(target=reader_loop, name="reader")
    t.start()
    end = time.monotonic() + SECONDS
    while time.monotonic() < end:
        time.sleep(0.05)
        os.write(w, b"x")
    os.close(w)
    t.join()
    os.waitpid(pid, 0)
    print("done")


if __name__ == "__main__":
    main()
