#include "data/readers/jpeg_decoder.h"

#include <csetjmp>
#include <cstdio>

#include <jpeglib.h>

namespace troupe::data {

namespace {
struct ErrorManager {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  char warning[JMSG_LENGTH_MAX];  // the first warning: libjpeg's word for damaged data it decoded anyway
};
void on_error(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}
void on_warning(j_common_ptr cinfo, int level) {
  auto* e = reinterpret_cast<ErrorManager*>(cinfo->err);
  if (level < 0 && e->warning[0] == '\0') (*cinfo->err->format_message)(cinfo, e->warning);
}
}  // namespace

Expected<Image> decode_jpeg(const uint8_t* bytes, size_t size, const std::string& where) {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  cinfo.err = jpeg_std_error(&err.base);
  err.base.error_exit = on_error;
  err.base.emit_message = on_warning;
  err.message[0] = '\0';
  err.warning[0] = '\0';
  Image out;  // declared before setjmp: nothing with a destructor is created between it and a longjmp
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return corrupt_data(where + ": corrupt JPEG: " + err.message);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = cinfo.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  if (static_cast<uint64_t>(cinfo.output_width) * cinfo.output_height > kMaxPixels) {
    const std::string dims = std::to_string(cinfo.output_width) + " x " + std::to_string(cinfo.output_height);
    jpeg_destroy_decompress(&cinfo);
    return corrupt_data(where + ": a JPEG of " + dims + " pixels, over the " + std::to_string(kMaxPixels) +
                        " troupe decodes");
  }
  out.height = static_cast<int>(cinfo.output_height);
  out.width = static_cast<int>(cinfo.output_width);
  out.channels = cinfo.output_components;
  out.pixels.resize(static_cast<size_t>(out.height) * out.width * out.channels);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out.pixels.data() + static_cast<size_t>(cinfo.output_scanline) * out.width * out.channels;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  // A truncated or damaged stream decodes with gray rows and a warning: refuse it.
  if (err.warning[0] != '\0') return corrupt_data(where + ": damaged JPEG: " + err.warning);
  return out;
}

}  // namespace troupe::data
