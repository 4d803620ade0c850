#!/usr/bin/env python3
"""Writes a synthetic dlprof run: P processes x N CPU samples each, in the
.dlprof format of docs/FORMAT.md (an independent writer of the spec).

Stacks are drawn from the real functions of an ELF binary (default: the
rt_workload test program), mapped as a PIE at a fixed base, so `dlprof report`
symbolizes them for real. Like a real run: 1500 distinct stacks shaped as
walks down one call tree and shared by every process (forked workers run the
same code), stages that last ~25 ms each, a wall tick every 10 ms (as runs). Usage:
  make_synthetic_run.py OUT_DIR [--processes 8] [--samples 250000] [--binary PATH]
"""
import argparse
import os
import random
import struct
import subprocess
import zlib

MAGIC = b"DLPROF\r\n"
CHUNK = 0x4B4E4843
BASE = 0x555555554000


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def zigzag(v):
    return (v << 1) ^ (v >> 63) if v >= 0 else ((-v) << 1) - 1


def string(s):
    b = s.encode() if isinstance(s, str) else s
    return varint(len(b)) + b


def chunk(kind, payload):
    return struct.pack("<IIII", CHUNK, kind, len(payload), zlib.crc32(payload)) + payload


def functions(binary):
    """(address, size) of the defined functions of `binary`."""
    out = subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True, text=True).stdout
    funcs = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tT" and int(parts[1], 16) > 8:
            funcs.append((int(parts[0], 16), int(parts[1], 16)))
    return funcs


def build_id(binary):
    out = subprocess.run(["readelf", "-n", binary], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "Build ID:" in line:
            return bytes.fromhex(line.split("Build ID:")[1].strip())
    return b""


def make_stacks(funcs, rng, count=1500):
    """Stacks shaped like a real program's: random walks down one call tree
    (callers shared by many stacks), depth 8..40, a few call sites per edge."""
    children = {}
    stacks = []
    for _ in range(count):
        depth = rng.randint(8, 40)
        node = ()
        for _ in range(depth):
            options = children.setdefault(node, [])
            if len(options) < 3 and (not options or rng.random() < 0.3):
                a, size = rng.choice(funcs)
                options.append(BASE + a + rng.randrange(0, max(1, size)))
            node = node + (rng.choice(options),)
        stacks.append(list(reversed(node)))  # leaf first
    return stacks


def write_process(path, pid, role, worker, samples, stacks, binary, bid, rng):
    stages = ["read", "decode", "augment", "batch", "forward", "backward"]
    size = os.path.getsize(binary)
    out = bytearray(MAGIC + struct.pack("<II", 1, 0))
    fields = {"pid": str(pid), "ppid": "1", "role": role, "worker": str(worker), "hz": "1000",
              "mode": "light", "unwinder": "synthetic", "timer": "synthetic", "clock": "monotonic",
              "start_ns": "1000000000", "run_id": "synthetic", "warmup_steps": "2"}
    p = varint(len(fields)) + b"".join(string(k) + string(v) for k, v in fields.items())
    out += chunk(1, p)
    out += chunk(2, varint(1) + varint(0) + varint(pid) + string("main"))
    out += chunk(3, varint(len(stages)) + b"".join(varint(i + 1) + string(s) for i, s in enumerate(stages)))
    out += chunk(4, varint(1) + varint(len(stages)) + b"".join(varint(1) + varint(i + 1) for i in range(len(stages))))
    out += chunk(6, varint(1) + varint(BASE) + varint(BASE + size + 0x10000) + varint(0) + string(binary) + string(bid))
    body = bytearray()
    for i, st in enumerate(stacks):
        body += varint(len(st))
        prev = 0
        for pc in st:
            body += varint(zigzag(pc - prev))
            prev = pc
    out += chunk(5, varint(1) + varint(len(stacks)) + bytes(body))
    t = 1000000000
    per_chunk = 1000  # one flush per second at 1000 Hz
    for first in range(0, samples, per_chunk):
        n = min(per_chunk, samples - first)
        body = bytearray()
        base = t
        last = t
        for j in range(n):
            t += 1000000
            stage = ((first + j) // 25) % len(stages)  # stages run for ~25 ms at a time
            body += varint(zigzag(t - last)) + varint(0) + varint(rng.randrange(len(stacks)) + 1) + varint(stage + 1) + varint(0)
            last = t
        out += chunk(7, varint(base) + varint(n) + bytes(body))
        # wall ticks every 10 ms of the same second, run-length encoded as the
        # runtime writes them (WALL_RUNS): a record per run of ticks in one stage
        runs = []  # [end time, stage, ticks, cpu ns]
        for k in range(n // 10):
            wt = base + (k + 1) * 10000000
            stage = ((first + (k + 1) * 10) // 25) % len(stages)
            cpu = rng.randrange(10000000)
            if runs and runs[-1][1] == stage:
                runs[-1][0] = wt
                runs[-1][2] += 1
                runs[-1][3] += cpu
            else:
                runs.append([wt, stage, 1, cpu])
        wall = bytearray()
        wlast = base
        for end, stage, ticks, cpu in runs:
            wall += (varint(zigzag(end - wlast)) + varint(0) + varint(stage + 1) + varint(ticks) +
                     varint(ticks * 10000000) + varint(cpu) + varint(0))
            wlast = end
        out += chunk(14, varint(base) + varint(len(runs)) + bytes(wall))
    stats = {"samples": samples, "dropped_ring": 0, "dropped_busy": 0, "handler_ns": samples * 1000}
    out += chunk(12, varint(len(stats)) + b"".join(string(k) + varint(v) for k, v in stats.items()))
    out += chunk(13, varint(t))
    with open(path, "wb") as f:
        f.write(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--processes", type=int, default=8)
    ap.add_argument("--samples", type=int, default=250000)
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "../../build/tests/rt_workload"))
    a = ap.parse_args()
    binary = os.path.realpath(a.binary)
    funcs = functions(binary)
    bid = build_id(binary)
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(1)
    stacks = make_stacks(funcs, rng)  # forked workers run the same code
    for i in range(a.processes):
        role = "main" if i == 0 else "worker"
        write_process(os.path.join(a.out, "%s-%d.dlprof" % (role, 1000 + i)), 1000 + i, role, i - 1,
                      a.samples, stacks, binary, bid, rng)


if __name__ == "__main__":
    main()
