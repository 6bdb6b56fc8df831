#include "data/npy_writer.h"

#include <cstring>

#include "core/durable_file.h"

namespace troupe::data {

std::string npy_header(const std::vector<int64_t>& shape) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";  // "(3,)", as Python writes a 1-tuple
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t unpadded = 10 + header.size() + 1;  // magic, version, length, header, newline
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  const auto len = static_cast<uint16_t>(header.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  out += header;
  return out;
}

std::string npy_bytes(const float* values, const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::string out = npy_header(shape);
  const size_t at = out.size();
  out.resize(at + static_cast<size_t>(n) * sizeof(float));
  if (n > 0) std::memcpy(&out[at], values, static_cast<size_t>(n) * sizeof(float));
  return out;
}

Status write_npy(const std::string& path, const float* values, const std::vector<int64_t>& shape) {
  return write_file_durably(path, npy_bytes(values, shape), "predictions");
}

}  // namespace troupe::data
