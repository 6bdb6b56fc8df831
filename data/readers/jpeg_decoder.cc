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
};
void on_error(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}
void on_warning(j_common_ptr, int) {}  // corrupt-data warnings: libjpeg recovers; errors still jump
}  // namespace

Expected<Image> decode_jpeg(const uint8_t* bytes, size_t size, const std::string& where) {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  cinfo.err = jpeg_std_error(&err.base);
  err.base.error_exit = on_error;
  err.base.emit_message = on_warning;
  err.message[0] = '\0';
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
  return out;
}

}  // namespace troupe::data
