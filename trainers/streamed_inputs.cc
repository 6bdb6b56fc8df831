#include "trainers/streamed_inputs.h"

#include <cstring>

namespace troupe {

// Compiled for AVX-512, AVX2 and the baseline, picked at load by the CPU (GCC's target_clones):
// the same IEEE division in every version, so the same bits, with wider vectors where the CPU has
// them (1.5x the baseline's SSE division on the dev machine, bench_data's npy batches).
__attribute__((target_clones("avx512f", "avx2", "default"))) void bytes_to_unit_floats(const uint8_t* p, int64_t n,
                                                                                        float* out) {
  for (int64_t k = 0; k < n; ++k) out[k] = static_cast<float>(p[k]) / 255.0f;
}

void convert_example(const data::Field& f, int64_t i, bool scale_u8, float* out) {
  const int64_t n = f.array.example_elements();
  const uint8_t* p = f.array.example(i);
  if (f.array.type == data::ElemType::u8 && scale_u8) {
    bytes_to_unit_floats(p, n, out);
  } else if (f.array.type == data::ElemType::f32) {
    std::memcpy(out, p, static_cast<size_t>(n) * 4);
  } else {
    const size_t w = data::elem_size(f.array.type);
    for (int64_t k = 0; k < n; ++k) out[k] = static_cast<float>(data::elem_value(f.array.type, p + k * w));
  }
}

StreamedInputs::StreamedInputs(std::shared_ptr<const data::Table> table, std::vector<size_t> inputs, int64_t features)
    : table_(std::move(table)), inputs_(std::move(inputs)), features_(features) {}

void StreamedInputs::copy(int64_t example, float* x) const {
  const int64_t row = rows_.empty() ? example : rows_[static_cast<size_t>(example)];
  float* first = x;
  for (size_t i : inputs_) {
    const data::Field& f = table_->fields[i];
    convert_example(f, row, true, x);
    x += f.array.example_elements();
  }
  if (!norm_.empty()) norm_.apply(first);
}

std::shared_ptr<const StreamedInputs> StreamedInputs::normalized(Normalization n) const {
  auto out = std::make_shared<StreamedInputs>(*this);
  out->norm_ = std::move(n);
  return out;
}

std::shared_ptr<const StreamedInputs> StreamedInputs::select(const std::vector<int64_t>& keep) const {
  auto out = std::make_shared<StreamedInputs>(table_, inputs_, features_);
  out->norm_ = norm_;
  out->rows_.reserve(keep.size());
  for (int64_t k : keep) out->rows_.push_back(rows_.empty() ? k : rows_[static_cast<size_t>(k)]);
  return out;
}

}  // namespace troupe
