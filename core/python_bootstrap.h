// Zero-code annotations for Python programs. Before the interpreter starts
// (the constructor of a preloaded libdlprof runs before main), dlprof puts
// the folder of its Python bootstrap first on PYTHONPATH. CPython's site
// module then imports dlprof's sitecustomize, which restores PYTHONPATH,
// os.environ and sys.path, imports the dlprof package and annotates
// torch.utils.data (python/dlprof/_bootstrap/sitecustomize.py).
#ifndef DLPROF_CORE_PYTHON_BOOTSTRAP_H_
#define DLPROF_CORE_PYTHON_BOOTSTRAP_H_

#include <string>

namespace dlprof {

// The bootstrap folder for a libdlprof at `library_path`: next to it in the
// build tree (build/core/libdlprof.so -> build/python/dlprof/_bootstrap), or
// where `cmake --install` puts the package. "" when neither exists.
std::string FindPythonBootstrap(const std::string& library_path);

// Whether CPython, started with this command line, reads PYTHONPATH and runs
// sitecustomize: not with -E, -I or -S (CPython's own option syntax: options
// end at the first argument that is not one, at -c and -m, and -X and -W
// take a value).
bool PythonRunsSitecustomize(const std::string& cmdline_nul_separated);

// At session start, single-threaded, before Py_Initialize: when `enabled`
// (DLPROF_AUTO_ANNOTATE), in a process that
// contains CPython not yet initialised, whose command line lets site run,
// prepends the bootstrap folder to PYTHONPATH and says in
// _DLPROF_PYTHONPATH_BEFORE what it was ("u": unset, "s<value>"; "k" when the
// folder is on it already, which is then left alone); the
// bootstrap puts it back and removes the marker. Returns what it
// did, for the profile's process fields: "on", "off: <why>", or "" when the
// process is not Python. Not signal-safe.
std::string PreparePythonBootstrap(bool enabled);

}  // namespace dlprof

#endif  // DLPROF_CORE_PYTHON_BOOTSTRAP_H_
