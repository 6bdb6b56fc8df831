// A raw token stream (nanoGPT's train.bin / val.bin): no header, a flat array of u8, u16 or u32
// token ids in little-endian order, memory-mapped. A size that is not a whole number of tokens is
// refused, naming the file and the dtype.
#pragma once

#include <string>

#include "core/status.h"
#include "data/array.h"

namespace troupe::data {

Expected<Array> read_tokens(const std::string& path, ElemType type);

}  // namespace troupe::data
