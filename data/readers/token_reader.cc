#include "data/readers/token_reader.h"

namespace troupe::data {

Expected<Array> read_tokens(const std::string& path, ElemType type) {
  if (type != ElemType::u8 && type != ElemType::u16 && type != ElemType::u32)
    return invalid_argument(path + ": token ids are u8, u16 or u32, not " + elem_name(type) + " (--token-dtype)");
  auto f = map_file(path);
  if (!f.ok()) return f.status();
  const size_t w = elem_size(type);
  if (f->size % w != 0) {
    return corrupt_data(path + ": " + std::to_string(f->size) + " bytes is not a whole number of " + elem_name(type) +
                        " tokens; is --token-dtype right (nanoGPT writes u16)?");
  }
  Array a;
  a.type = type;
  a.shape = {static_cast<int64_t>(f->size / w)};
  a.keep = f->keep;
  a.bytes = f->data;
  return a;
}

}  // namespace troupe::data
