// The example's data set: a folder of small JPEG images, generated on first
// use into a cache folder, deterministically, and published atomically so that
// concurrent runs never see (or write over) half a data set.
#ifndef DLPROF_EXAMPLES_PIPELINE_DATASET_H_
#define DLPROF_EXAMPLES_PIPELINE_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

namespace dlprof_example {

struct DatasetSpec {
  int images = 2048;  // number of files
  int size_px = 224;  // every image is size_px x size_px RGB
  int quality = 90;   // JPEG quality
  int classes = 10;   // label = class of the image's pattern
  uint32_t seed = 1;
};

struct Dataset {
  std::string dir;                 // the published folder
  std::vector<std::string> files;  // absolute paths, index i is image i
  std::vector<int32_t> labels;
  uint64_t total_bytes = 0;
  bool generated = false;  // true when this call wrote it
  double generate_s = 0;
};

// $XDG_CACHE_HOME/dlprof-example, else $HOME/.cache/dlprof-example, else
// /tmp/dlprof-example.
std::string DefaultDataDir();

// Returns the data set for `spec` under `data_dir`, generating it first if it
// is not there. Generation writes into a private temporary folder and renames
// it into place; if another process wins the race, its copy is used.
// Throws std::runtime_error on I/O errors.
Dataset EnsureDataset(const std::string& data_dir, const DatasetSpec& spec);

// The RGB pixels (size_px * size_px * 3 bytes) of image `index`; exposed so
// tests and the generator agree on what each image should look like.
std::vector<uint8_t> SynthesizeImage(const DatasetSpec& spec, int index, int32_t* label);

}  // namespace dlprof_example

#endif  // DLPROF_EXAMPLES_PIPELINE_DATASET_H_
