"""dlprof's bootstrap in a profiled Python process.

libdlprof, preloaded, puts this folder first on PYTHONPATH before the
interpreter starts (core/python_bootstrap.cc), so that CPython's site module
imports this file as ``sitecustomize``. It then:

1. puts PYTHONPATH, os.environ and sys.path back as they were, so that the
   program and its children see what they would see without dlprof;
2. imports dlprof (from the folder above this one) and installs the automatic
   torch.utils.data annotations (dlprof/_torch.py);
3. runs the sitecustomize that this file hides, if there is one (Debian's,
   a virtualenv's, the user's), as site would have.

Whatever goes wrong here is one line on stderr; the program always runs.
"""

import os
import sys


def _restore_environment():
    here = os.path.dirname(os.path.abspath(__file__))
    value = os.environ.get("PYTHONPATH")
    if value is not None:
        # "here" (it was unset), "here:here" (it was ""), "here:OLD".
        first, sep, rest = value.partition(os.pathsep)
        if first and os.path.realpath(first) == os.path.realpath(here):
            if not sep:
                del os.environ["PYTHONPATH"]
            elif rest == first:
                os.environ["PYTHONPATH"] = ""
            else:
                os.environ["PYTHONPATH"] = rest
    real_here = os.path.realpath(here)
    sys.path[:] = [p for p in sys.path if not p or os.path.realpath(p) != real_here]
    sys.path_importer_cache.pop(here, None)
    return here


def _start_dlprof(here):
    package_root = os.path.dirname(os.path.dirname(here))
    added = package_root not in sys.path
    if added:
        sys.path.insert(0, package_root)
    try:
        import dlprof  # noqa: F401  (kept in sys.modules for the program's own import)
        from dlprof import _torch
    finally:
        if added:
            try:
                sys.path.remove(package_root)
            except ValueError:
                pass
            sys.path_importer_cache.pop(package_root, None)
    _torch.install()


def _run_hidden_sitecustomize():
    this = sys.modules.get(__name__)
    del sys.modules[__name__]
    try:
        import sitecustomize  # noqa: F401  (the next one on sys.path, if any)
    except ImportError as err:
        if err.name != "sitecustomize":
            raise
    finally:
        # site's import of this module takes whatever is in sys.modules under
        # the name when it ends: the hidden one, or this one when there is none.
        if "sitecustomize" not in sys.modules:
            sys.modules[__name__] = this


def _main():
    try:
        here = _restore_environment()
    except Exception as err:
        sys.stderr.write("dlprof: bootstrap: %s: %s\n" % (type(err).__name__, err))
        return
    try:
        _start_dlprof(here)
    except Exception as err:
        sys.stderr.write("dlprof: automatic annotations off (%s: %s)\n" % (type(err).__name__, err))
    _run_hidden_sitecustomize()


_main()
