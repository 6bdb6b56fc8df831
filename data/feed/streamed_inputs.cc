#include "data/feed/streamed_inputs.h"

#include <algorithm>
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

namespace {

// n ids of a flat integer array from element `first`, converted as `T` (f32 inputs, i32 targets).
template <typename T>
void read_ids(const data::Array& a, int64_t first, int64_t n, T* out) {
  const uint8_t* p = a.example(first);
  switch (a.type) {
    case data::ElemType::u8:
      for (int64_t k = 0; k < n; ++k) out[k] = static_cast<T>(p[k]);
      return;
    case data::ElemType::u16: {
      uint16_t v[64];
      for (int64_t at = 0; at < n; at += 64) {  // (unaligned in a raw file: copied out first)
        const int64_t m = std::min<int64_t>(64, n - at);
        std::memcpy(v, p + at * 2, static_cast<size_t>(m) * 2);
        for (int64_t k = 0; k < m; ++k) out[at + k] = static_cast<T>(v[k]);
      }
      return;
    }
    default: {
      const size_t w = data::elem_size(a.type);
      for (int64_t k = 0; k < n; ++k) out[k] = static_cast<T>(data::elem_value(a.type, p + k * w));
    }
  }
}

}  // namespace

std::shared_ptr<const StreamedInputs> StreamedInputs::windows(std::shared_ptr<const data::Table> table, size_t stream,
                                                              int64_t seq_len) {
  auto out = std::make_shared<StreamedInputs>(std::move(table), std::vector<size_t>{stream}, seq_len);
  out->seq_len_ = seq_len;
  return out;
}

int64_t StreamedInputs::count() const {
  if (!rows_.empty()) return static_cast<int64_t>(rows_.size());
  if (seq_len_ > 0) return (table_->fields[inputs_.front()].array.count() - 1) / seq_len_;
  return table_->count();
}

void StreamedInputs::copy_targets(int64_t example, int32_t* y) const {
  read_ids(table_->fields[inputs_.front()].array, row_of(example) * seq_len_ + 1, seq_len_, y);
}

void StreamedInputs::copy(int64_t example, float* x) const {
  const int64_t row = row_of(example);
  if (seq_len_ > 0) {
    read_ids(table_->fields[inputs_.front()].array, row * seq_len_, seq_len_, x);
    return;
  }
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
  out->seq_len_ = seq_len_;
  out->rows_.reserve(keep.size());
  for (int64_t k : keep) out->rows_.push_back(rows_.empty() ? k : rows_[static_cast<size_t>(k)]);
  return out;
}

}  // namespace troupe
