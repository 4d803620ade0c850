"""dlprof for Python: mark a data pipeline's stages, steps, waits and buffers.

Profiling is switched on from outside (``dlprof run -- python3 train.py``, or
``DLPROF_SAMPLE=1 LD_PRELOAD=.../libdlprof.so python3 train.py``). Without it
every call here is a no-op, so an annotated program runs unchanged.

A torch DataLoader needs none of this: dlprof annotates ``torch.utils.data``
by itself (dlprof/_torch.py). Use these to name your own stages; they nest
inside the automatic ones::

    import dlprof

    with dlprof.stage("decode"):
        img = decode(raw)

    @dlprof.stage("augment")
    def augment(img): ...

    with dlprof.step():            # one training step
        with dlprof.wait():        # the part spent waiting for data
            batch = next(it)

    buf = dlprof.Buffer("prefetch", 8)
    buf.set_size(len(queue))
    buf.stats()   # {'mean_occupancy': ..., 'empty_fraction': ..., 'full_fraction': ...}
"""

from . import _native

__all__ = ["enabled", "stage", "step", "wait", "Buffer", "set_worker", "flush"]
__version__ = "0.1.0"


def enabled():
    """True when this process is being profiled."""
    return _native.enabled()


class Stage(_native.StageBase):
    """One named stage: a context manager, reusable and re-entrant, and a
    decorator. Get one with :func:`stage`."""

    __slots__ = ()

    def __call__(self, fn):
        import functools

        enter, leave = _native.enter, _native.exit

        @functools.wraps(fn)
        def in_stage(*args, **kwargs):
            enter(self.id)
            try:
                return fn(*args, **kwargs)
            finally:
                leave()

        return in_stage

    def __repr__(self):
        return "dlprof.stage(%r)" % (self.name,)


_stages = {}


def stage(name):
    """The stage called ``name``: ``with dlprof.stage("decode"): ...`` or
    ``@dlprof.stage("decode")``. The same name is the same stage object."""
    s = _stages.get(name)
    if s is None:
        if not isinstance(name, str):
            raise TypeError("stage name must be a str, not %s" % type(name).__name__)
        s = _stages.setdefault(name, Stage(name))
    return s


def step():
    """A training step: ``with dlprof.step(): ...``."""
    return _native.STEP


def wait():
    """Inside a step, the time the loop waits for its data: ``with dlprof.wait(): ...``."""
    return _native.WAIT


def set_worker(worker_id):
    """This process is data worker ``worker_id`` (role "worker" in the report)."""
    _native.set_worker(worker_id)


def flush(timeout_ms=1000):
    """Writes what was recorded so far; True when written. Rarely needed: the
    profile is flushed once a second and at exit."""
    return _native.flush(timeout_ms)


class Buffer:
    """A bounded queue between stages (a prefetch buffer). Tell dlprof its
    size as it changes; dlprof snapshots it in the background."""

    __slots__ = ("name", "capacity", "_handle")

    def __init__(self, name, capacity):
        if not isinstance(name, str):
            raise TypeError("buffer name must be a str")
        capacity = int(capacity)
        if capacity < 1:
            raise ValueError("buffer capacity must be at least 1")
        self.name = name
        self.capacity = capacity
        self._handle = _native.buffer_create(name, capacity)

    def set_size(self, size):
        """The number of items in the buffer now."""
        _native.buffer_set_size(self._handle, size)

    def stats(self):
        """The live prefetcher statistics torchdata proposed, over the snapshots
        so far: ``mean_occupancy`` (mean size / capacity), ``empty_fraction``
        and ``full_fraction`` (shares of snapshots), ``snapshots`` and
        ``capacity``. None when profiling is off or no snapshot was taken yet."""
        return _native.buffer_stats(self._handle)

    def __repr__(self):
        return "dlprof.Buffer(%r, %d)" % (self.name, self.capacity)
