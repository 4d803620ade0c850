"""Automatic annotations of torch.utils.data: a DataLoader profiled with no
code change.

Installed by dlprof's bootstrap (dlprof/_bootstrap/sitecustomize.py) in every
profiled Python process. Nothing is imported here up front: when the program
imports torch.utils.data, its classes are patched in place:

- the training loop: every ``__next__`` of a DataLoader iterator is a wait for
  data, and the time from one ``__next__`` to the next is a step;
- in whichever process fetches (a worker, or the training process with
  ``num_workers=0``): stage ``fetch`` for the dataset's item access
  (``__getitem__``/``__getitems__``, or the next item of an iterable dataset),
  stage ``collate`` for the collate function, one nested stage per datapipe
  of a datapipe graph (``Mapper(decode_jpeg)``), ``pin_memory`` for the pin
  memory thread's copies;
- worker ids from torch's worker loop (``dlprof.set_worker``);
- a buffer ``DataLoader`` for the batches ready and not yet taken, with
  capacity ``prefetch_factor * num_workers``.

The patches keep each function's signature, name and module (spawn pickles
``_worker_loop`` by name), and a patch that does not fit the installed torch
is left out with one line on stderr: the program runs on as without dlprof.
Written against torch 1.13 (Debian's, tested) and the same private names in
torch 2.x.
"""

import functools
import sys
import threading

from dlprof import _native

_PATCHED_MARK = "__dlprof_original__"
_warned = set()


def _warn(what, err):
    if what in _warned:
        return
    _warned.add(what)
    try:
        sys.stderr.write("dlprof: automatic annotation of %s off (%s: %s)\n" %
                         (what, type(err).__name__, err))
    except Exception:
        pass


_ids = {}


def _stage_id(name):
    sid = _ids.get(name)
    if sid is None:
        sid = _ids[name] = _native.intern(name)
    return sid


def _patch(owner, attr, make_wrapper):
    """Replaces owner.attr by make_wrapper(original), once."""
    original = getattr(owner, attr)
    if getattr(original, _PATCHED_MARK, None) is not None:
        return
    wrapper = make_wrapper(original)
    functools.update_wrapper(wrapper, original)
    setattr(wrapper, _PATCHED_MARK, original)
    setattr(owner, attr, wrapper)


# ---- the training loop: waits and steps -------------------------------------

_loop = threading.local()  # in_step: a step is open on this thread


def _ready_batches(it):
    """Batches the workers finished and the loop has not taken yet."""
    ready = 0
    try:
        ready = it._data_queue.qsize()
    except Exception:
        pass
    for info in getattr(it, "_task_info", {}).values():
        if len(info) == 2:
            ready += 1
    return ready


_buffers = {}  # capacity -> buffer handle: one per DataLoader shape, never freed


def _buffer_for(it):
    workers = getattr(it, "_num_workers", 0)
    prefetch = getattr(it, "_prefetch_factor", None) or 0
    if workers <= 0 or prefetch <= 0:
        return 0
    capacity = workers * prefetch
    handle = _buffers.get(capacity)
    if handle is None:
        handle = _buffers[capacity] = _native.buffer_create("DataLoader", capacity)
    return handle


def _wrap_next(original):
    step_begin, step_end = _native.step_begin, _native.step_end
    wait_begin, wait_end = _native.wait_begin, _native.wait_end
    set_size = _native.buffer_set_size

    def __next__(self):
        if getattr(_loop, "in_step", False):
            step_end()
        step_begin()
        buffer = _buffer_for(self)
        if buffer:
            set_size(buffer, _ready_batches(self))
        wait_begin()
        try:
            batch = original(self)
        except StopIteration:
            # The end of an epoch: the step begun here and its wait are left
            # open (the reader drops a span that never ends), so that joining
            # the workers is not counted as a step spent waiting.
            _loop.in_step = False
            raise
        except BaseException:
            wait_end()
            _loop.in_step = True
            raise
        wait_end()
        if buffer:
            set_size(buffer, _ready_batches(self))
        _loop.in_step = True
        return batch

    return __next__


# ---- the fetching process: fetch, collate, datapipes, worker ids ------------

def _wrap_fetch(original):
    enter, leave = _native.enter, _native.exit

    def fetch(self, possibly_batched_index):
        enter(_stage_id("fetch"))
        try:
            return original(self, possibly_batched_index)
        finally:
            leave()

    return fetch


def _collate_in_own_stage(collate_fn):
    """collate_fn as a stage beside fetch, not inside it: the fetcher calls it
    as its last act, with 'fetch' innermost on the stage stack."""
    if getattr(collate_fn, _PATCHED_MARK, None) is not None:
        return collate_fn
    enter, leave = _native.enter, _native.exit

    def collate(data):
        fetch_id, collate_id = _stage_id("fetch"), _stage_id("collate")
        leave()
        enter(collate_id)
        try:
            return collate_fn(data)
        finally:
            leave()
            enter(fetch_id)

    try:
        functools.update_wrapper(collate, collate_fn)
    except Exception:
        pass
    setattr(collate, _PATCHED_MARK, collate_fn)
    return collate


def _wrap_fetcher_init(original):
    def __init__(self, dataset, auto_collation, collate_fn, drop_last, *args, **kwargs):
        if collate_fn is not None:
            collate_fn = _collate_in_own_stage(collate_fn)
        if _is_datapipe(dataset):
            _annotate_datapipes(dataset)
        original(self, dataset, auto_collation, collate_fn, drop_last, *args, **kwargs)

    return __init__


def _wrap_worker_loop(original):
    import inspect

    try:
        position = list(inspect.signature(original).parameters).index("worker_id")
    except ValueError:
        position = None

    def _worker_loop(*args, **kwargs):
        worker_id = kwargs.get("worker_id")
        if worker_id is None and position is not None and position < len(args):
            worker_id = args[position]
        if isinstance(worker_id, int) and worker_id >= 0:
            _native.set_worker(worker_id)
        return original(*args, **kwargs)

    return _worker_loop


def _wrap_pin_memory(original):
    enter, leave = _native.enter, _native.exit

    def pin_memory(*args, **kwargs):
        enter(_stage_id("pin_memory"))
        try:
            return original(*args, **kwargs)
        finally:
            leave()

    return pin_memory


# ---- datapipes: one nested stage per datapipe ---------------------------------

_datapipe_base = None


def _is_datapipe(obj):
    return _datapipe_base is not None and isinstance(obj, _datapipe_base)


def _datapipe_name(dp):
    """'Mapper(decode_jpeg)': the class (without torch's IterDataPipe suffix:
    MapperIterDataPipe is what users call Mapper), and the function it
    applies if any."""
    name = type(dp).__name__
    for suffix in ("IterDataPipe", "MapDataPipe"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    fn = getattr(dp, "fn", None) or getattr(dp, "filter_fn", None)
    if fn is not None:
        fn_name = getattr(fn, "__name__", None) or type(fn).__name__
        if isinstance(fn, functools.partial):
            fn_name = getattr(fn.func, "__name__", "partial")
        name += "(%s)" % fn_name
    return name


def _graph_datapipes(root):
    """Every datapipe of the graph that ends at root."""
    from torch.utils.data import graph

    traverse = getattr(graph, "traverse_dps", None)
    tree = traverse(root) if traverse else graph.traverse(root, only_datapipe=True)
    seen, out, todo = set(), [], [tree]
    while todo:
        node = todo.pop()
        for key, value in node.items():
            if isinstance(value, tuple):  # {id: (datapipe, subgraph)}
                dp, sub = value
            else:  # older torch: {datapipe: subgraph}
                dp, sub = key, value
            if id(dp) not in seen:
                seen.add(id(dp))
                out.append(dp)
            todo.append(sub)
    return out


def _wrap_datapipe_iter(original):
    enter, leave = _native.enter, _native.exit

    def __iter__(self):
        sid = _stage_id(_datapipe_name(self))
        it = original(self)
        while True:
            enter(sid)
            try:
                item = next(it)
            except StopIteration:
                return
            finally:
                leave()
            yield item

    return __iter__


def _annotate_datapipes(root):
    try:
        for dp in _graph_datapipes(root):
            cls = type(dp)
            # torch's own wrappers (_IterDataPipeSerializationWrapper) are
            # plumbing, not a step of the user's pipeline.
            if cls.__name__.startswith("_"):
                continue
            if "__iter__" in cls.__dict__:
                _patch(cls, "__iter__", _wrap_datapipe_iter)
    except Exception as err:
        _warn("datapipes", err)


# ---- installing ---------------------------------------------------------------

def patch_torch_data(data):
    """Patches the torch.utils.data package module `data` (already imported)."""
    global _datapipe_base
    try:
        _datapipe_base = data.IterDataPipe
    except Exception:
        _datapipe_base = None
    patches = [
        ("DataLoader iterators", lambda: _patch(data.dataloader._BaseDataLoaderIter, "__next__", _wrap_next)),
        ("map-style fetch", lambda: _patch(data._utils.fetch._MapDatasetFetcher, "fetch", _wrap_fetch)),
        ("iterable fetch", lambda: _patch(data._utils.fetch._IterableDatasetFetcher, "fetch", _wrap_fetch)),
        ("collate", lambda: _patch(data._utils.fetch._BaseDatasetFetcher, "__init__", _wrap_fetcher_init)),
        ("worker ids", lambda: _patch(data._utils.worker, "_worker_loop", _wrap_worker_loop)),
        ("pin_memory", lambda: _patch(data._utils.pin_memory, "pin_memory", _wrap_pin_memory)),
    ]
    for what, apply in patches:
        try:
            apply()
        except Exception as err:
            _warn(what, err)


class _WhenImported:
    """A meta path finder that runs hook(module) right after `name` is
    imported, then takes itself off sys.meta_path."""

    def __init__(self, name, hook):
        self._name = name
        self._hook = hook

    def find_spec(self, fullname, path, target=None):
        if fullname != self._name:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _ThenRun(spec.loader, self._hook, self)
                return spec
            if spec is not None:
                return spec
        return None


class _ThenRun:
    """A loader that runs the module, then the hook; everything else is the
    original loader's."""

    def __init__(self, loader, hook, finder):
        self._loader = loader
        self._hook = hook
        self._finder = finder

    def __getattr__(self, attr):
        return getattr(self._loader, attr)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        try:
            self._loader.exec_module(module)
        finally:
            try:
                sys.meta_path.remove(self._finder)
            except ValueError:
                pass
            # The module's loader is the original one, as without dlprof.
            try:
                module.__loader__ = self._loader
                module.__spec__.loader = self._loader
            except Exception:
                pass
        self._hook(module)


def install():
    """Patches torch.utils.data now if it is imported, else when it is."""
    module = sys.modules.get("torch.utils.data")
    if module is not None:
        patch_torch_data(module)
    else:
        sys.meta_path.insert(0, _WhenImported("torch.utils.data", patch_torch_data))
