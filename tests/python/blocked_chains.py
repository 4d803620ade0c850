# A thread that blocks in os.read() of a pipe again and again, through one
# of two Python chains picked by a seeded coin: chain_a -> via_a -> wait_byte
# or chain_b -> via_b -> wait_byte. Both chains have the same depth, so the
# frames sit at the same addresses of the interpreter's data stack and the
# C stack is the same: only the frames' code objects tell them apart. A
# second thread writes a byte every 2 ms. The program measures its own
# blocked time in each chain and prints it as JSON
# (tests/blocked_stacks_test.cc: walks taken again must be the chain the
# thread is in).
import json
import os
import random
import sys
import threading
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
blocked_ns = {"a": 0, "b": 0}


def wait_byte(fd, chain):
    t = time.perf_counter_ns()
    got = os.read(fd, 1)
    blocked_ns[chain] += time.perf_counter_ns() - t
    return got


def via_a(fd):
    return wait_byte(fd, "a")


def via_b(fd):
    return wait_byte(fd, "b")


def chain_a(fd):
    return via_a(fd)


def chain_b(fd):
    return via_b(fd)


def writer(fd, end):
    while time.monotonic() < end:
        time.sleep(0.002)
        os.write(fd, b"x")
    os.write(fd, b"")
    os.close(fd)


def main():
    r, w = os.pipe()
    end = time.monotonic() + SECONDS
    t = threading.Thread(target=writer, args=(w, end))
    t.start()
    coin = random.Random(1)
    # Runs of either chain (a walk taken again) and switches between them.
    chain = "a"
    while True:
        if coin.random() < 0.3:
            chain = "b" if chain == "a" else "a"
        got = chain_a(r) if chain == "a" else chain_b(r)
        if not got:
            break
    t.join()
    print(json.dumps(blocked_ns))


main()
