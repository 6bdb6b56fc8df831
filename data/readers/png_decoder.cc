#include "data/readers/png_decoder.h"

#include <png.h>

#include <cstring>

namespace troupe::data {

Expected<Image> decode_png(const uint8_t* bytes, size_t size, const std::string& where) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, bytes, size)) {
    const std::string why = img.message;
    png_image_free(&img);
    return corrupt_data(where + ": not a readable PNG: " + why);
  }
  if (static_cast<uint64_t>(img.width) * img.height > kMaxPixels) {
    const std::string dims = std::to_string(img.width) + " x " + std::to_string(img.height);
    png_image_free(&img);
    return corrupt_data(where + ": a PNG of " + dims + " pixels, over the " + std::to_string(kMaxPixels) + " troupe decodes");
  }
  Image out;
  const bool color = img.format & PNG_FORMAT_FLAG_COLOR;
  img.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;  // 16-bit samples are sRGB values scaled down, not linear light
  const bool alpha = img.format & PNG_FORMAT_FLAG_ALPHA;
  img.format = color ? (alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB) : (alpha ? PNG_FORMAT_GA : PNG_FORMAT_GRAY);
  out.height = static_cast<int>(img.height);
  out.width = static_cast<int>(img.width);
  out.channels = static_cast<int>(PNG_IMAGE_SAMPLE_CHANNELS(img.format));
  out.pixels.resize(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, out.pixels.data(), 0, nullptr)) {
    const std::string why = img.message;
    png_image_free(&img);
    return corrupt_data(where + ": corrupt PNG: " + why);
  }
  return out;
}

}  // namespace troupe::data
