"""Everything that makes a Python stack hard to sample, for a given time.

For SECONDS seconds (default 60) the main thread cycles through:
- generators and generator expressions, suspended and resumed;
- coroutines, awaited in chains and gathered by asyncio;
- recursion down to sys.getrecursionlimit() - 50 frames;
- exceptions raised and caught in a loop, through finally blocks and
  generators;
- lambdas and nested functions made on the fly;
- code compiled at run time (file "<dynamic>", functions dyn_<n>), run once
  and dropped, so that code objects are freed while sampling goes on;
while a background thread keeps creating and joining short-lived threads
(some of which release the GIL in hashlib and time.sleep). At a third and two
thirds of the time the process forks; each child runs a few of the same
workloads for a moment and exits with os._exit.

It prints one JSON line, the same in every run that succeeds: the qualified
names of every function this file defines (co_qualname of every code object
in it, nested functions, lambdas and comprehensions included), what the
dynamic code is called, and whether the forks and threads ended well.

usage: robustness.py [SECONDS]
"""
import asyncio
import hashlib
import json
import os
import sys
import threading
import time

DYNAMIC_FILE = "<dynamic>"
DYNAMIC_PREFIX = "dyn_"


# --- generators -------------------------------------------------------------

def squares(n):
    for i in range(n):
        yield i * i


def pipeline_gen(n):
    evens = (x for x in squares(n) if x % 2 == 0)
    for x in evens:
        yield x + 1


def run_generators():
    total = sum(squares(2000))
    total += sum(pipeline_gen(2000))
    g = squares(100)
    next(g)
    del g  # a suspended generator, closed and freed
    total += sum([x for x in range(500) if x % 3])
    return total


# --- coroutines --------------------------------------------------------------

async def coro_leaf(n):
    acc = 0
    for i in range(n):
        acc += i
        if i % 200 == 0:
            await asyncio.sleep(0)
    return acc


async def coro_chain(depth, n):
    if depth == 0:
        return await coro_leaf(n)
    return await coro_chain(depth - 1, n) + 1


async def coro_main():
    results = await asyncio.gather(*(coro_chain(d, 1500) for d in range(6)))
    return sum(results)


def run_coroutines():
    return asyncio.run(coro_main())


# --- deep recursion ----------------------------------------------------------

def recurse(n):
    if n <= 0:
        acc = 0
        for i in range(3000):
            acc += i
        return acc
    return recurse(n - 1) + 1


def run_recursion():
    # sys.getrecursionlimit() - 50 frames below this one, minus those above.
    return recurse(sys.getrecursionlimit() - 50 - len(current_stack()))


def current_stack():
    frames = []
    f = sys._getframe(1)
    while f is not None:
        frames.append(f)
        f = f.f_back
    return frames


# --- exceptions --------------------------------------------------------------

class WorkloadError(Exception):
    pass


def fail_deep(n):
    if n == 0:
        raise WorkloadError("bottom")
    try:
        return fail_deep(n - 1)
    finally:
        n += 1


def failing_gen():
    yield 1
    raise KeyError("gen")


def run_exceptions():
    caught = 0
    for i in range(300):
        try:
            fail_deep(i % 20)
        except WorkloadError:
            caught += 1
        try:
            {}["missing"]
        except KeyError:
            caught += 1
        try:
            list(failing_gen())
        except KeyError:
            caught += 1
    return caught


# --- lambdas and nested functions --------------------------------------------

def make_adder(k):
    def add(x):
        return x + k
    return add


def make_counter():
    count = 0

    def step():
        nonlocal count
        count += 1
        return count
    return step


def run_closures():
    total = 0
    for k in range(300):
        total += make_adder(k)(k)
        f = lambda x, k=k: x * k + 1  # noqa: E731
        total += f(3)
        total += sorted(range(20), key=lambda v: -v)[0]
    step = make_counter()
    for _ in range(300):
        step()
    return total + step()


# --- code made at run time and dropped ----------------------------------------

dynamic_counter = [0]


def run_dynamic():
    total = 0
    for _ in range(20):
        dynamic_counter[0] += 1
        n = dynamic_counter[0]
        source = (
            f"def {DYNAMIC_PREFIX}{n}(m):\n"
            f"    acc = {n}\n"
            f"    for i in range(m):\n"
            f"        acc = (acc * 7 + i) % 10007\n"
            f"    return acc\n"
            f"result = {DYNAMIC_PREFIX}{n}(2000)\n"
        )
        code = compile(source, DYNAMIC_FILE, "exec")
        namespace = {}
        exec(code, namespace)
        total += namespace["result"]
        del code, namespace  # the module code and the function's code freed here
    total += eval(compile(f"{dynamic_counter[0]} * 2", DYNAMIC_FILE, "eval"))
    return total


# --- threads, created and joined all the time ---------------------------------

def thread_body(i, data):
    # A few ms of CPU: a per-thread CPU timer at 1000 Hz samples a thread
    # only once it has run 1 ms.
    acc = 0
    for j in range(100000):
        acc += j * i
    if i % 2:
        hashlib.sha256(data).digest()  # releases the GIL
    else:
        time.sleep(0.0005)
    return acc


def spawner(stop, failures):
    data = b"x" * 65536
    i = 0
    while not stop.is_set():
        threads = [threading.Thread(target=thread_body, args=(i + k, data)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
            if t.is_alive():
                failures.append("thread did not end")
        i += 4


class Spawner:
    def __init__(self):
        self.stop = threading.Event()
        self.failures = []
        self.thread = None

    def start(self):
        self.stop.clear()
        self.thread = threading.Thread(target=spawner, args=(self.stop, self.failures))
        self.thread.start()

    def halt(self):
        self.stop.set()
        self.thread.join(timeout=60)
        if self.thread.is_alive():
            self.failures.append("spawner did not end")


# --- forks --------------------------------------------------------------------

def fork_child():
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        run_generators()
        run_exceptions()
        run_closures()
        run_dynamic()


def run_fork():
    pid = os.fork()
    if pid == 0:
        try:
            fork_child()
            code = 0
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


# --- the program's own names --------------------------------------------------

def own_qualnames():
    with open(os.path.abspath(__file__)) as f:
        module_code = compile(f.read(), os.path.abspath(__file__), "exec")
    names = set()
    stack = [module_code]
    while stack:
        code = stack.pop()
        names.add(code.co_qualname)
        stack.extend(c for c in code.co_consts if hasattr(c, "co_qualname"))
    return sorted(names)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    workloads = [run_generators, run_coroutines, run_recursion, run_exceptions,
                 run_closures, run_dynamic]
    spawner_threads = Spawner()
    spawner_threads.start()
    start = time.monotonic()
    fork_at = [start + seconds / 3, start + 2 * seconds / 3]
    forks_ok = []
    while time.monotonic() - start < seconds:
        for w in workloads:
            w()
        if fork_at and time.monotonic() >= fork_at[0]:
            fork_at.pop(0)
            spawner_threads.halt()  # fork from a process with one thread
            forks_ok.append(run_fork())
            spawner_threads.start()
    spawner_threads.halt()
    while fork_at:  # a run too short to reach both fork times still forks twice
        fork_at.pop(0)
        forks_ok.append(run_fork())
    print(json.dumps({
        "qualnames": own_qualnames(),
        "dynamic": {"file": DYNAMIC_FILE, "prefix": DYNAMIC_PREFIX},
        "forks": len(forks_ok),
        "forks_ok": all(forks_ok),
        "threads_ok": not spawner_threads.failures,
    }, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
