// JPEG images decoded with libjpeg (Debian's libjpeg-turbo) into u8 HWC: grayscale 1 channel,
// everything else converted to RGB (3).
#pragma once

#include "data/readers/png_decoder.h"  // Image

namespace troupe::data {

// corrupt_data naming `where` for anything libjpeg cannot decode (its message included).
Expected<Image> decode_jpeg(const uint8_t* bytes, size_t size, const std::string& where);

}  // namespace troupe::data
