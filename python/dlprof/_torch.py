"""Automatic annotations of torch.utils.data: a DataLoader profiled with no
code change.

Installed by dlprof's bootstrap (dlprof/_bootstrap/sitecustomize.py) in every
profiled Python process. Nothing is imported up front: when the program
imports torch.utils.data, its classes are patched in place:

- the training loop: every ``__next__`` of a DataLoader iterator is a wait for
  data, and the time from one ``__next__`` to the next is a step;
- in whichever process fetches (a worker, or the training process with
  ``num_workers=0``): stage ``fetch`` for the dataset's item access
  (``__getitem__``/``__getitems__``, or the next item of an iterable dataset),
  stage ``collate`` for the collate function, one nested stage per datapipe
  of a datapipe graph (``Mapper(decode_jpeg)``), ``pin_memory`` for the
  copies to pinned memory;
- worker ids from torch's worker info (``dlprof.set_worker``);
- a buffer ``DataLoader`` for the batches ready and not yet taken, with
  capacity ``prefetch_factor * num_workers``.

Every wrapper that runs while the program's code runs is a C object
(``_native.wrap``): it makes no Python frame, so tracebacks, exception texts
and ``warnings.warn(stacklevel=N)`` are the same as without dlprof. Python
code of this module runs only beside the program's (building a fetcher,
sizing the buffer, naming a datapipe). A patch that does not fit the
installed torch is left out with one line on stderr. Written against torch
1.13 (Debian's, tested) and the same private names in torch 2.x.
"""

import sys

from . import _native

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


def _wrapped(original, mode, sid=0, back_id=0, aux=None):
    """original as a C wrapper that passes for it: its __class__, __name__,
    __code__ and the rest are the original's (_native.c); __module__ and
    __doc__, which the wrapper's type has too, are copied."""
    w = _native.wrap(original, mode, sid, back_id, aux)
    for attr in ("__module__", "__doc__"):
        try:
            setattr(w, attr, getattr(original, attr))
        except Exception:
            pass
    return w


def _patch(owner, attr, mode, sid=0, back_id=0, aux=None):
    original = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
    if isinstance(original, _native.Wrapper):
        return
    setattr(owner, attr, _wrapped(original, mode, sid, back_id, aux))


# ---- the training loop's buffer of ready batches ------------------------------

_buffers = {}  # capacity -> buffer handle: one per DataLoader shape, never freed


def _ready_batches(it):
    """(buffer handle, batches the workers finished and the loop has not taken
    yet), or None for a loader without workers. Called before and after each
    __next__, beside the program's code; errors are dropped by the caller."""
    workers = getattr(it, "_num_workers", 0)
    prefetch = getattr(it, "_prefetch_factor", None) or 0
    if not isinstance(workers, int) or workers <= 0 or not isinstance(prefetch, int) or prefetch <= 0:
        return None
    capacity = workers * prefetch
    handle = _buffers.get(capacity)
    if handle is None:
        handle = _buffers[capacity] = _native.buffer_create("DataLoader", capacity)
    ready = 0
    try:
        ready = it._data_queue.qsize()
    except Exception:
        pass
    for info in getattr(it, "_task_info", {}).values():
        if len(info) == 2:
            ready += 1
    return (handle, ready)


# ---- the fetching process ---------------------------------------------------------

def _wrap_fetcher_init(original):
    """The fetcher's collate_fn, as collate: fetch's sibling (the fetcher calls
    it last, with fetch innermost), so that fetch is the item access alone."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last, *args, **kwargs):
        if collate_fn is not None and callable(collate_fn) and not isinstance(collate_fn, _native.Wrapper):
            try:
                collate_fn = _wrapped(collate_fn, _native.WRAP_SWAP, _stage_id("collate"), _stage_id("fetch"))
            except Exception as err:
                _warn("collate", err)
        if _is_datapipe(dataset):
            _annotate_datapipes(dataset)
        original(self, dataset, auto_collation, collate_fn, drop_last, *args, **kwargs)

    return __init__


def _wrap_worker_info_init(original):
    """torch's worker loop makes its WorkerInfo(id=...) first thing."""

    def __init__(self, **kwargs):
        original(self, **kwargs)
        worker_id = kwargs.get("id")
        if isinstance(worker_id, int) and 0 <= worker_id <= 1000000:
            _native.set_worker(worker_id)

    return __init__


# ---- datapipes: one nested stage per datapipe -------------------------------------

_datapipe_base = None


def _is_datapipe(obj):
    return _datapipe_base is not None and isinstance(obj, _datapipe_base)


def _datapipe_name(dp):
    """'Mapper(decode_jpeg)': the class (without torch's IterDataPipe suffix:
    MapperIterDataPipe is what users call Mapper), and the function it
    applies if it has one. Reads only the instance's own attributes."""
    name = type(dp).__name__
    for suffix in ("IterDataPipe", "MapDataPipe"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    try:
        attrs = vars(dp)
        fn = attrs.get("fn")
        if fn is None:
            fn = attrs.get("filter_fn")
        if fn is not None and callable(fn):
            import functools

            inner = fn.func if isinstance(fn, functools.partial) else fn
            fn_name = getattr(inner, "__name__", None)
            if not isinstance(fn_name, str):
                fn_name = type(inner).__name__
            name += "(%s)" % fn_name
    except Exception:
        pass
    return name


def _datapipe_stage(dp):
    return _stage_id(_datapipe_name(dp))


def _graph_datapipes(root):
    """The datapipes of the graph that ends at root, from their attributes
    (and lists, tuples and dicts of them, up to 1000 items): no pickling,
    unlike torch's traverse_dps, so the program's __getstate__ never runs."""
    seen, out, todo = set(), [], [root]
    while todo and len(out) < 1000:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if _is_datapipe(obj):
            out.append(obj)
            try:
                todo.extend(vars(obj).values())
            except TypeError:
                pass
        elif isinstance(obj, (list, tuple)) and len(obj) <= 1000:
            todo.extend(obj)
        elif isinstance(obj, dict) and len(obj) <= 1000:
            todo.extend(obj.values())
    return out


def _annotate_datapipes(root):
    try:
        for dp in _graph_datapipes(root):
            cls = type(dp)
            # torch's own wrappers (_IterDataPipeSerializationWrapper) are
            # plumbing, not a step of the user's pipeline.
            if cls.__name__.startswith("_") or "__iter__" not in cls.__dict__:
                continue
            _patch(cls, "__iter__", _native.WRAP_ITER, aux=_datapipe_stage)
    except Exception as err:
        _warn("datapipes", err)


# ---- installing -----------------------------------------------------------------------

def patch_torch_data(data):
    """Patches the torch.utils.data package module `data` (already imported)."""
    global _datapipe_base
    import types

    _native.set_generator_type(types.GeneratorType)
    _datapipe_base = getattr(data, "IterDataPipe", None)
    fetch = data._utils.fetch if hasattr(data, "_utils") else None
    patches = [
        ("DataLoader iterators", lambda: _patch(data.dataloader._BaseDataLoaderIter, "__next__",
                                                _native.WRAP_LOOP, aux=_ready_batches)),
        ("map-style fetch", lambda: _patch(fetch._MapDatasetFetcher, "fetch", _native.WRAP_STAGE,
                                           _stage_id("fetch"))),
        ("iterable fetch", lambda: _patch(fetch._IterableDatasetFetcher, "fetch", _native.WRAP_STAGE,
                                          _stage_id("fetch"))),
        ("collate", lambda: setattr(fetch._BaseDatasetFetcher, "__init__",
                                    _wrap_fetcher_init(fetch._BaseDatasetFetcher.__init__))),
        ("worker ids", lambda: setattr(data._utils.worker.WorkerInfo, "__init__",
                                       _wrap_worker_info_init(data._utils.worker.WorkerInfo.__init__))),
        ("pin_memory", lambda: _patch(data._utils.pin_memory, "pin_memory", _native.WRAP_STAGE,
                                      _stage_id("pin_memory"))),
    ]
    for what, apply in patches:
        try:
            apply()
        except Exception as err:
            _warn(what, err)


class _WhenImported:
    """A meta path finder that runs hook(module) right after `name` is
    imported, then takes itself off sys.meta_path. It asks the finders after
    it (those before it were asked already) and wraps the loader found."""

    def __init__(self, name, hook, forget=None):
        self._name = name
        self._hook = hook
        self._forget = forget  # a module to drop from sys.modules at the first import

    def find_spec(self, fullname, path, target=None):
        if self._forget is not None:
            # The bootstrap stood in for a sitecustomize that does not exist;
            # site is done with it by now.
            if sys.modules.get("sitecustomize") is self._forget:
                del sys.modules["sitecustomize"]
            self._forget = None
        if fullname != self._name:
            return None
        try:
            later = sys.meta_path[sys.meta_path.index(self) + 1:]
        except ValueError:
            return None
        for finder in later:
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is not None:
                spec = find_spec(fullname, path, target)
            elif hasattr(finder, "find_module"):  # before 3.12: legacy finders
                import importlib.util

                loader = finder.find_module(fullname, path)
                spec = importlib.util.spec_from_loader(fullname, loader) if loader else None
            else:
                continue
            if spec is None:
                continue
            if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _ThenRun(spec.loader, self._hook, self)
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


def install(forget=None):
    """Patches torch.utils.data now if it is imported, else when it is.
    `forget`: the bootstrap module, to drop from sys.modules as
    'sitecustomize' once site is done (when it hid no other)."""
    module = sys.modules.get("torch.utils.data")
    if module is not None:
        patch_torch_data(module)
    else:
        sys.meta_path.insert(0, _WhenImported("torch.utils.data", patch_torch_data, forget))
