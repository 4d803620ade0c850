#include "examples/pipeline/dataset.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "examples/pipeline/io_util.h"
#include "examples/pipeline/jpeg_codec.h"
#include "examples/pipeline/random.h"

namespace dlprof_example {
namespace {

// Layout version: bump when the file format or the synthesis changes, so old
// caches are not mistaken for new ones.
constexpr int kLayoutVersion = 1;

std::string DatasetName(const DatasetSpec& s) {
  std::ostringstream name;
  name << "jpeg-v" << kLayoutVersion << "-n" << s.images << "-px" << s.size_px << "-q" << s.quality
       << "-c" << s.classes << "-s" << s.seed;
  return name.str();
}

std::string ImageName(int index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%06d.jpg", index);
  return buf;
}

void MakeDirs(const std::string& path) {
  std::string partial;
  std::stringstream parts(path);
  std::string part;
  if (!path.empty() && path[0] == '/') partial = "/";
  while (std::getline(parts, part, '/')) {
    if (part.empty()) continue;
    partial += part;
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      throw std::runtime_error("cannot create " + partial + ": " + std::strerror(errno));
    }
    partial += "/";
  }
}

void RemoveTree(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      unlink((dir + "/" + e->d_name).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

bool LoadDataset(const std::string& dir, const DatasetSpec& spec, Dataset* out) {
  std::ifstream labels(dir + "/labels.txt");
  if (!labels) return false;
  out->dir = dir;
  out->files.clear();
  out->labels.clear();
  out->total_bytes = 0;
  int32_t label;
  while (labels >> label) out->labels.push_back(label);
  if (static_cast<int>(out->labels.size()) != spec.images) return false;
  for (int i = 0; i < spec.images; ++i) {
    out->files.push_back(dir + "/" + ImageName(i));
    struct stat st;
    if (stat(out->files.back().c_str(), &st) != 0) return false;
    out->total_bytes += static_cast<uint64_t>(st.st_size);
  }
  return true;
}

void Generate(const std::string& tmp, const DatasetSpec& spec) {
  std::vector<int32_t> labels(spec.images);
  std::atomic<int> next{0};
  std::string error;
  std::mutex error_mu;
  auto work = [&] {
    try {
      for (int i = next++; i < spec.images; i = next++) {
        std::vector<uint8_t> rgb = SynthesizeImage(spec, i, &labels[i]);
        std::vector<uint8_t> jpeg =
            EncodeJpeg(rgb.data(), spec.size_px, spec.size_px, spec.quality);
        WriteFile(tmp + "/" + ImageName(i), jpeg.data(), jpeg.size());
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(error_mu);
      error = e.what();
      next = spec.images;
    }
  };
  unsigned n = std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < n; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (!error.empty()) throw std::runtime_error(error);
  std::ostringstream text;
  for (int32_t l : labels) text << l << "\n";
  std::string s = text.str();
  // labels.txt last: a folder with labels.txt is complete (the rename makes
  // that true for readers anyway; this keeps a stray temp folder obvious).
  WriteFile(tmp + "/labels.txt", s.data(), s.size());
}

}  // namespace

std::string DefaultDataDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return std::string(xdg) + "/dlprof-example";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::string(home) + "/.cache/dlprof-example";
  }
  return "/tmp/dlprof-example";
}

std::vector<uint8_t> SynthesizeImage(const DatasetSpec& spec, int index, int32_t* label) {
  const int n = spec.size_px;
  const uint64_t key = Mix(spec.seed * 0x100000001b3ull + static_cast<uint64_t>(index));
  const int cls = static_cast<int>(key % static_cast<uint64_t>(spec.classes));
  *label = cls;
  // Each class is a family of oriented stripes with its own frequency and
  // colour; per image: phase, tint, a disc, and sensor-like noise. Enough
  // texture that the JPEGs are realistic to decode (not flat colour).
  const double angle = M_PI * cls / spec.classes + 0.2 * ((key >> 8) % 100) / 100.0;
  const double freq = 2 * M_PI * (3 + cls) / n;
  const double ca = std::cos(angle) * freq, sa = std::sin(angle) * freq;
  const double phase = ((key >> 16) % 628) / 100.0;
  const int base[3] = {static_cast<int>(40 + (cls * 53) % 160),
                       static_cast<int>(40 + (cls * 97) % 160),
                       static_cast<int>(40 + (cls * 31) % 160)};
  const int cx = static_cast<int>((key >> 24) % n), cy = static_cast<int>((key >> 34) % n);
  const int r2 = (n / 6) * (n / 6);
  std::vector<uint8_t> rgb(static_cast<size_t>(n) * n * 3);
  // sin(a + b) = sin a cos b + cos a sin b: two small tables, not n*n sin().
  std::vector<float> sx(n), cx_(n), sy(n), cy_(n);
  for (int i = 0; i < n; ++i) {
    sx[i] = static_cast<float>(std::sin(i * ca + phase));
    cx_[i] = static_cast<float>(std::cos(i * ca + phase));
    sy[i] = static_cast<float>(std::sin(i * sa));
    cy_[i] = static_cast<float>(std::cos(i * sa));
  }
  uint64_t noise = key | 1;
  for (int y = 0; y < n; ++y) {
    for (int x = 0; x < n; ++x) {
      const float wave = sx[x] * cy_[y] + cx_[x] * sy[y];
      const bool disc = (x - cx) * (x - cx) + (y - cy) * (y - cy) < r2;
      noise ^= noise << 13;
      noise ^= noise >> 7;
      noise ^= noise << 17;
      for (int c = 0; c < 3; ++c) {
        int v =
            base[c] + static_cast<int>(60 * wave) + static_cast<int>((noise >> (8 * c)) % 25) - 12;
        if (disc) v = 255 - v;
        rgb[(static_cast<size_t>(y) * n + x) * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0, 255));
      }
    }
  }
  return rgb;
}

Dataset EnsureDataset(const std::string& data_dir, const DatasetSpec& spec) {
  if (spec.images <= 0 || spec.size_px < 8 || spec.classes <= 0 || spec.quality < 1 ||
      spec.quality > 100) {
    throw std::runtime_error("invalid data set parameters");
  }
  Dataset ds;
  const std::string final_dir = data_dir + "/" + DatasetName(spec);
  if (LoadDataset(final_dir, spec, &ds)) return ds;

  MakeDirs(data_dir);
  std::string tmpl = data_dir + "/.tmp-" + DatasetName(spec) + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("cannot create a folder in " + data_dir + ": " + std::strerror(errno));
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    Generate(tmpl, spec);
  } catch (...) {
    RemoveTree(tmpl);
    throw;
  }
  chmod(tmpl.c_str(), 0755);  // mkdtemp makes it 0700
  // Publish: rename(2) of a folder is atomic. If another run published first,
  // the rename fails (the target is a non-empty folder) and we use theirs.
  bool won = rename(tmpl.c_str(), final_dir.c_str()) == 0;
  if (!won) {
    const int e = errno;
    RemoveTree(tmpl);
    if (e != ENOTEMPTY && e != EEXIST) {
      throw std::runtime_error("cannot publish " + final_dir + ": " + std::strerror(e));
    }
  }
  if (!LoadDataset(final_dir, spec, &ds)) {
    throw std::runtime_error("data set in " + final_dir + " is incomplete; delete it and rerun");
  }
  ds.generated = won;
  ds.generate_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return ds;
}

}  // namespace dlprof_example
