#include "data/safetensors.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/durable_file.h"

namespace troupe::data {

namespace {

constexpr uint64_t kMaxHeader = 100ull << 20;

const std::map<std::string, size_t>& dtypes() {
  static const std::map<std::string, size_t> d{{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                               {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
  return d;
}

}  // namespace

const NamedTensor* TensorFile::find(const std::string& name) const {
  for (const NamedTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

size_t safetensors_dtype_size(const std::string& dtype) {
  auto it = dtypes().find(dtype);
  return it == dtypes().end() ? 0 : it->second;
}

Expected<std::string> safetensors_header(const std::string& path, const std::vector<TensorSpec>& tensors,
                                         const std::map<std::string, std::string>& metadata,
                                         std::vector<uint64_t>* offsets, uint64_t* data_bytes) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors[a].name < tensors[b].name; });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  offsets->assign(tensors.size(), 0);
  uint64_t offset = 0;
  for (size_t i : order) {
    const TensorSpec& t = tensors[i];
    const size_t w = safetensors_dtype_size(t.dtype);
    if (w == 0) return invalid_argument(path + ": tensor '" + t.name + "' has unknown dtype '" + t.dtype + "'");
    const int64_t n = shape_product(t.shape);
    if (n < 0) return invalid_argument(path + ": tensor '" + t.name + "' has a negative dimension");
    if (t.name == "__metadata__" || t.name.empty())
      return invalid_argument(path + ": a tensor cannot be named '" + t.name + "'");
    const uint64_t bytes = static_cast<uint64_t>(n) * w;
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    (*offsets)[i] = offset;
    offset += bytes;
  }
  std::string h = header.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  while (h.size() % 8 != 0) h += ' ';
  std::string out(8, '\0');
  const uint64_t len = h.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  *data_bytes = offset;
  return out + h;
}

Status write_safetensors(const std::string& path, const TensorFile& file) {
  std::vector<TensorSpec> specs;
  for (const NamedTensor& t : file.tensors) {
    specs.push_back({t.name, t.dtype, t.shape});
    const int64_t n = shape_product(t.shape);
    const size_t w = safetensors_dtype_size(t.dtype);
    if (w != 0 && n >= 0 && static_cast<size_t>(n) * w != t.bytes.size())
      return invalid_argument(path + ": tensor '" + t.name + "' holds " + std::to_string(t.bytes.size()) +
                              " bytes, its shape needs " + std::to_string(n * static_cast<int64_t>(w)));
  }
  std::vector<uint64_t> offsets;
  uint64_t data_bytes = 0;
  auto header = safetensors_header(path, specs, file.metadata, &offsets, &data_bytes);
  if (!header.ok()) return header.status();
  std::string out = std::move(*header);
  const size_t start = out.size();
  out.resize(start + data_bytes);
  for (size_t i = 0; i < file.tensors.size(); ++i)
    if (!file.tensors[i].bytes.empty())
      std::memcpy(&out[start + offsets[i]], file.tensors[i].bytes.data(), file.tensors[i].bytes.size());
  return write_file_durably(path, out, "model file");
}

Expected<TensorFile> read_safetensors(const std::string& path) {
  auto f = map_file(path);
  if (!f.ok()) return f.status();
  if (f->size < 8) return corrupt_data(path + ": truncated: " + std::to_string(f->size) + " bytes (not a safetensors file)");
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | f->data[i];
  if (len > kMaxHeader)
    return corrupt_data(path + ": a header of " + std::to_string(len) + " bytes is over the 100 MB limit (not a safetensors file?)");
  if (len > f->size - 8)
    return corrupt_data(path + ": the header length " + std::to_string(len) + " runs past the end of the file (" +
                        std::to_string(f->size) + " bytes)");
  const std::string text(reinterpret_cast<const char*>(f->data + 8), static_cast<size_t>(len));
  nlohmann::json header = nlohmann::json::parse(text, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    return corrupt_data(path + ": the header is not a JSON object");
  TensorFile out;
  struct Span {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      if (!it->is_object()) return corrupt_data(path + ": __metadata__ is not a map of strings");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string())
          return corrupt_data(path + ": __metadata__['" + m.key() + "'] is not a string (safetensors metadata is string to string)");
        out.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const std::string where = path + ": tensor '" + name + "'";
    const nlohmann::json& t = *it;
    if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets") ||
        !t["dtype"].is_string() || !t["shape"].is_array() || !t["data_offsets"].is_array() || t["data_offsets"].size() != 2)
      return corrupt_data(where + ": needs dtype (a string), shape (a list) and data_offsets ([begin, end])");
    NamedTensor nt;
    nt.name = name;
    nt.dtype = t["dtype"].get<std::string>();
    const size_t w = safetensors_dtype_size(nt.dtype);
    if (w == 0) return corrupt_data(where + ": unknown dtype '" + nt.dtype + "'");
    for (const auto& d : t["shape"]) {
      if (!d.is_number_unsigned()) return corrupt_data(where + ": the shape holds " + d.dump() + ", not a size");
      nt.shape.push_back(d.get<int64_t>());
    }
    if (!t["data_offsets"][0].is_number_unsigned() || !t["data_offsets"][1].is_number_unsigned())
      return corrupt_data(where + ": data_offsets are not two non-negative integers");
    const uint64_t b = t["data_offsets"][0].get<uint64_t>(), e = t["data_offsets"][1].get<uint64_t>();
    if (e < b) return corrupt_data(where + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(e) + ") run backwards");
    const int64_t n = shape_product(nt.shape);
    if (n < 0 || static_cast<uint64_t>(n) * w != e - b)
      return corrupt_data(where + ": shape " + describe(ElemType::u8, nt.shape).substr(2) + " of " + nt.dtype + " needs " +
                          std::to_string(n * static_cast<int64_t>(w)) + " bytes, its offsets span " + std::to_string(e - b));
    spans.push_back({b, e, out.tensors.size()});
    out.tensors.push_back(std::move(nt));
  }
  // The tensors tile the data exactly: sorted by offset, each begins where the last ended.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  const uint64_t data_size = f->size - 8 - len;
  uint64_t at = 0;
  for (const Span& s : spans) {
    const std::string& name = out.tensors[s.index].name;
    if (s.begin < at) return corrupt_data(path + ": tensor '" + name + "' overlaps the tensor before it (offset " + std::to_string(s.begin) + ")");
    if (s.begin > at) return corrupt_data(path + ": a gap of " + std::to_string(s.begin - at) + " bytes before tensor '" + name + "'");
    at = s.end;
  }
  if (at != data_size)
    return corrupt_data(path + ": the tensors cover " + std::to_string(at) + " bytes of data, the file holds " +
                        std::to_string(data_size) + (at > data_size ? " (truncated)" : ""));
  const uint8_t* data = f->data + 8 + len;
  std::vector<NamedTensor> ordered(out.tensors.size());
  for (size_t k = 0; k < spans.size(); ++k) {
    NamedTensor& t = out.tensors[spans[k].index];
    t.bytes.assign(data + spans[k].begin, data + spans[k].end);
    ordered[k] = std::move(t);
  }
  out.tensors = std::move(ordered);
  return out;
}

Expected<std::vector<float>> tensor_as_f32(const NamedTensor& t, const std::string& where) {
  const size_t w = safetensors_dtype_size(t.dtype);
  const size_t n = w ? t.bytes.size() / w : 0;
  std::vector<float> out(n);
  const uint8_t* p = t.bytes.data();
  for (size_t i = 0; i < n; ++i, p += w) {
    if (t.dtype == "F32") {
      std::memcpy(&out[i], p, 4);
    } else if (t.dtype == "BF16" || t.dtype == "F16") {
      uint16_t h;
      std::memcpy(&h, p, 2);
      out[i] = t.dtype == "BF16" ? bf16_to_f32(h) : f16_to_f32(h);
    } else if (t.dtype == "F64") {
      double d;
      std::memcpy(&d, p, 8);
      out[i] = static_cast<float>(d);
    } else {
      return invalid_argument(where + ": tensor '" + t.name + "' is " + t.dtype + "; parameters are floating point");
    }
  }
  return out;
}

}  // namespace troupe::data
