# The C extension dlprof._native (stable ABI, CPython 3.10+). Everything else
# is in pyproject.toml. Offline: pip install --no-build-isolation ./python
# (Debian: python3-setuptools and python3-wheel).
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "dlprof._native",
            ["dlprof/_native.c"],
            define_macros=[("Py_LIMITED_API", "0x030A0000")],
            py_limited_api=True,
            libraries=["dl"],
        )
    ],
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
