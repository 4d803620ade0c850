#include "core/python_bootstrap.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

// Where `cmake --install` puts the Python package, relative to the installed
// library's folder (core/CMakeLists.txt).
#ifndef DLPROF_PYTHON_INSTALL_REL
#define DLPROF_PYTHON_INSTALL_REL ""
#endif

namespace dlprof {
namespace {

bool IsBootstrap(const std::string& dir) {
  return access((dir + "/sitecustomize.py").c_str(), R_OK) == 0;
}

std::string ReadCmdline() {
  std::string out;
  const int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  ssize_t n;
  while (out.size() < (1 << 20) && (n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fd);
  return out;
}

std::string LibraryPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&FindPythonBootstrap), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  return info.dli_fname;
}

}  // namespace

std::string FindPythonBootstrap(const std::string& library_path) {
  const size_t slash = library_path.rfind('/');
  const std::string lib_dir = slash == std::string::npos ? "." : library_path.substr(0, slash);
  const std::string candidates[] = {
      lib_dir + "/../python/dlprof/_bootstrap",
      std::string(DLPROF_PYTHON_INSTALL_REL).empty()
          ? std::string()
          : lib_dir + "/" + DLPROF_PYTHON_INSTALL_REL + "/dlprof/_bootstrap",
  };
  for (const std::string& dir : candidates) {
    if (!dir.empty() && IsBootstrap(dir)) {
      char* real = realpath(dir.c_str(), nullptr);
      std::string out = real ? real : dir;
      free(real);
      return out;
    }
  }
  return "";
}

bool PythonRunsSitecustomize(const std::string& cmdline) {
  std::vector<std::string> args;
  for (size_t at = 0; at < cmdline.size();) {
    size_t end = cmdline.find('\0', at);
    if (end == std::string::npos) end = cmdline.size();
    args.push_back(cmdline.substr(at, end - at));
    at = end + 1;
  }
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a[0] != '-' || a == "--") return true;  // the script, "-", or the end
    if (a[1] == '-') continue;  // --check-hash-based-pycs takes a value, but never E/I/S
    for (size_t c = 1; c < a.size(); ++c) {
      const char o = a[c];
      if (o == 'E' || o == 'I' || o == 'S') return false;
      if (o == 'c' || o == 'm') return true;  // what follows is the program
      if (o == 'X' || o == 'W') {
        if (c + 1 == a.size()) ++i;  // the value is the next argument
        break;
      }
    }
  }
  return true;
}

std::string PreparePythonBootstrap(bool enabled) {
  using IsInitializedFn = int (*)();
  auto initialized = reinterpret_cast<IsInitializedFn>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
  if (initialized == nullptr || dlsym(RTLD_DEFAULT, "Py_Main") == nullptr) return "";
  if (initialized()) return "off: the interpreter was running before libdlprof loaded";
  if (!enabled) return "off: DLPROF_AUTO_ANNOTATE=0";
  if (!PythonRunsSitecustomize(ReadCmdline())) {
    return "off: python runs without PYTHONPATH or site (-E, -I or -S)";
  }
  const std::string dir = FindPythonBootstrap(LibraryPath());
  if (dir.empty()) return "off: dlprof's Python package is not next to libdlprof";
  // CPython ignores an empty PYTHONPATH, but "dir:" would add the current
  // folder: "dir:dir" says "it was empty" to the bootstrap instead.
  const char* old = getenv("PYTHONPATH");
  const std::string value = old == nullptr ? dir : *old == '\0' ? dir + ":" + dir : dir + ":" + old;
  if (setenv("PYTHONPATH", value.c_str(), 1) != 0) return "off: cannot set PYTHONPATH";
  return "on";
}

}  // namespace dlprof
