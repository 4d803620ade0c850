"""dlprof's bootstrap in a profiled Python process.

libdlprof, preloaded, puts this folder first on PYTHONPATH before the
interpreter starts, and what PYTHONPATH was in _DLPROF_PYTHONPATH_BEFORE
(core/python_bootstrap.cc: "u" unset, "s" and the value, "k" kept as it was
because this folder was on it already), so that CPython's site module imports this file
as ``sitecustomize``. It then:

1. puts PYTHONPATH, os.environ and sys.path back as they were, so that the
   program and its children see what they would see without dlprof;
2. imports the dlprof package from the folder above this one, as the private
   module ``_dlprof`` (a module of the program's called ``dlprof``, or an
   installed dlprof, stays the program's), and installs the automatic
   torch.utils.data annotations (dlprof/_torch.py);
3. runs the sitecustomize that this file hides, if there is one (Debian's,
   a virtualenv's, the user's), as site would have.

Without the marker (this folder put on PYTHONPATH by someone else) it only
does 3. Whatever goes wrong is one line on stderr; the program always runs.
"""

import os
import sys

_MARKER = "_DLPROF_PYTHONPATH_BEFORE"


def _restore_environment(here):
    """Undoes what libdlprof did; False when it did nothing."""
    before = os.environ.pop(_MARKER, None)
    if before is None:
        return False
    if before == "k":  # the user's PYTHONPATH had this folder already: kept
        return True
    if before.startswith("s"):
        os.environ["PYTHONPATH"] = before[1:]
    else:
        os.environ.pop("PYTHONPATH", None)
    real_here = os.path.realpath(here)
    for i, entry in enumerate(sys.path):  # the first one is libdlprof's
        if entry and os.path.realpath(entry) == real_here:
            del sys.path[i]
            break
    sys.path_importer_cache.pop(here, None)
    return True


def _start_dlprof(here, this):
    # The import system's own functions, already loaded: importlib.util would
    # import a dozen modules the program then finds in sys.modules.
    bootstrap = sys.modules["_frozen_importlib"]
    external = sys.modules["_frozen_importlib_external"]
    package_dir = os.path.dirname(here)
    spec = external.spec_from_file_location(
        "_dlprof", os.path.join(package_dir, "__init__.py"), submodule_search_locations=[package_dir])
    module = bootstrap.module_from_spec(spec)
    sys.modules["_dlprof"] = module
    try:
        spec.loader.exec_module(module)
        from _dlprof import _torch
    except BaseException:
        sys.modules.pop("_dlprof", None)
        raise
    _torch.install(forget=this)


def _run_hidden_sitecustomize(here):
    """Runs the next sitecustomize on sys.path, leaving out this folder (it
    may be on PYTHONPATH twice, or put there by the user). Returns whether
    there was one; if not, this module stays in sys.modules under the name
    (site's import takes whatever is there when it ends) until the first
    import."""
    this = sys.modules.get(__name__)
    real_here = os.path.realpath(here)
    path = [p for p in sys.path if not (p and os.path.realpath(p) == real_here)]
    spec = sys.modules["_frozen_importlib_external"].PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return False
    module = sys.modules["_frozen_importlib"].module_from_spec(spec)
    sys.modules[__name__] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules[__name__] = this
        raise
    return True


def _main():
    here = os.path.dirname(os.path.abspath(__file__))
    this = sys.modules.get(__name__)
    try:
        ours = _restore_environment(here)
    except Exception as err:
        sys.stderr.write("dlprof: bootstrap: %s: %s\n" % (type(err).__name__, err))
        ours = False
    hid_one = _run_hidden_sitecustomize(here)
    if ours:
        try:
            _start_dlprof(here, None if hid_one else this)
        except Exception as err:
            sys.stderr.write("dlprof: automatic annotations off (%s: %s)\n" % (type(err).__name__, err))


_main()
