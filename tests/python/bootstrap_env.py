"""Prints, as JSON, what a program can see of its environment: PYTHONPATH,
sys.path, sitecustomize, and whether dlprof is imported. Run with and
without dlprof; the two must agree except for "dlprof_imported" (and the one finder
dlprof adds to sys.meta_path until torch.utils.data is imported)."""
import json
import os
import sys

site_mod = sys.modules.get("sitecustomize")
print(json.dumps({
    "PYTHONPATH": os.environ.get("PYTHONPATH"),
    "environ": {k: v for k, v in os.environ.items() if not k.startswith(("DLPROF_", "LD_PRELOAD"))},
    "sys_path": sys.path,
    "sitecustomize": getattr(site_mod, "__file__", None),
    "user_site_marker": os.environ.get("USER_SITECUSTOMIZE_RAN"),
    "dlprof_imported": "_dlprof" in sys.modules,  # dlprof's private copy
    "dlprof_module": getattr(sys.modules.get("dlprof"), "__file__", None),
    "meta_path": len(sys.meta_path),
}))
