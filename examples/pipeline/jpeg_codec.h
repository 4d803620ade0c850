// JPEG encoding (for the generated data set) and decoding (the pipeline's
// decode stage) with libjpeg-turbo, errors turned into exceptions.
#ifndef DLPROF_EXAMPLES_PIPELINE_JPEG_CODEC_H_
#define DLPROF_EXAMPLES_PIPELINE_JPEG_CODEC_H_

#include <cstdint>
#include <vector>

namespace dlprof_example {

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // interleaved, row-major
};

// Interleaved RGB pixels to a baseline JPEG. Throws std::runtime_error.
std::vector<uint8_t> EncodeJpeg(const uint8_t* rgb, int width, int height, int quality);

// A JPEG to RGB, scaled down by `scale` (1, 2, 4 or 8) in the DCT, which is
// cheaper than decoding at full size and resizing (PIL's "draft" mode).
// Throws std::runtime_error on a corrupt or truncated file.
Image DecodeJpeg(const std::vector<uint8_t>& jpeg, int scale);

}  // namespace dlprof_example

#endif  // DLPROF_EXAMPLES_PIPELINE_JPEG_CODEC_H_
