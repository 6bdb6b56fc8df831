// PNG images decoded with libpng's simplified API into u8 height x width x channels (gray 1, gray +
// alpha 2, RGB 3, RGBA 4; 16-bit samples reduced to 8; palettes expanded to RGB or RGBA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace troupe::data {

// Larger images are refused before any pixel is allocated (a damaged header).
inline constexpr uint64_t kMaxPixels = uint64_t{1} << 28;

struct Image {
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // height * width * channels, row-major, channels last (HWC)
};

// corrupt_data naming `where` for anything libpng cannot decode.
Expected<Image> decode_png(const uint8_t* bytes, size_t size, const std::string& where);

}  // namespace troupe::data
