#include "core/python_bootstrap.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/private_fd.h"

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
  const int fd = OpenOwn(AT_FDCWD, "/proc/self/cmdline", O_RDONLY);
  if (fd < 0) return out;
  char buf[4096];
  ssize_t n;
  while (out.size() < (1 << 20) && (n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fd);
  return out;
}

// `path` without empty or "." components, each ".." taking the one before it
// (at the root, nothing), no trailing '/': std::filesystem's lexically_normal
// for POSIX paths, written out because std::filesystem would bring
// libstdc++'s locales and iostreams, and their static initializers, into
// libdlprof (core/CMakeLists.txt links libstdc++ in).
std::string LexicallyNormal(const std::string& path) {
  const bool absolute = !path.empty() && path[0] == '/';
  std::vector<std::string> parts;
  for (size_t at = 0; at <= path.size();) {
    size_t end = path.find('/', at);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(at, end - at);
    at = end + 1;
    if (part.empty() || part == ".") continue;
    if (part == ".." && !parts.empty() && parts.back() != "..") {
      parts.pop_back();
    } else if (part != ".." || !absolute) {
      parts.push_back(part);
    }
  }
  std::string out = absolute ? "/" : "";
  for (size_t i = 0; i < parts.size(); ++i) out += (i > 0 ? "/" : "") + parts[i];
  return out.empty() ? "." : out;
}

// The path without symlinks, "." or "..": realpath, or, where it fails (an
// ASan runtime loaded after libc fails it this early), the path as written,
// lexically normalised.
std::string Canonical(const std::string& path) {
  if (char* real = realpath(path.c_str(), nullptr)) {
    std::string out = real;
    free(real);
    return out;
  }
  return LexicallyNormal(path);
}

// Whether `dir` (Canonical) is one of the entries of a PYTHONPATH value.
bool OnPath(const std::string& value, const std::string& dir) {
  for (size_t at = 0; at <= value.size();) {
    size_t end = value.find(':', at);
    if (end == std::string::npos) end = value.size();
    const std::string entry = value.substr(at, end - at);
    if (!entry.empty() && Canonical(entry) == dir) return true;
    at = end + 1;
  }
  return false;
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
    if (!dir.empty() && IsBootstrap(dir)) return Canonical(dir);
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
    if (a[1] == '-') {
      if (a == "--check-hash-based-pycs") ++i;  // its value is the next argument
      continue;
    }
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
  // What PYTHONPATH was, for the bootstrap to put back: "u" (unset) or
  // "s" and the value.
  const char* old = getenv("PYTHONPATH");
  if (old != nullptr && OnPath(old, dir)) {
    // Put there by the user: left alone ("k"), and site's removal of
    // duplicate entries cannot move it.
    return setenv("_DLPROF_PYTHONPATH_BEFORE", "k", 1) == 0 ? "on" : "off: cannot set the environment";
  }
  const std::string before = old == nullptr ? "u" : std::string("s") + old;
  const std::string value = old == nullptr || *old == '\0' ? dir : dir + ":" + old;
  if (setenv("_DLPROF_PYTHONPATH_BEFORE", before.c_str(), 1) != 0 ||
      setenv("PYTHONPATH", value.c_str(), 1) != 0) {
    unsetenv("_DLPROF_PYTHONPATH_BEFORE");
    return "off: cannot set PYTHONPATH";
  }
  return "on";
}

}  // namespace dlprof
