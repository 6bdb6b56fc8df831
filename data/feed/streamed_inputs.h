// A training set's inputs read from its files as batches are cut (--stream), for datasets larger
// than memory: the fields stay as the readers left them — .npy files (and stored .npz members)
// memory-mapped, other formats as read — and an example is converted to f32 (u8 scaled to [0, 1])
// only when a feed copies it: in the input pipeline's threads in jobs, so a worker reads only the
// examples of the shards it claims. No f32 copy of the dataset is made; the mapped pages belong to
// the page cache, which the kernel reclaims under memory pressure.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "data/table.h"
#include "data/normalization.h"

namespace troupe {

// n bytes as f32 x / 255 (float(x) / 255.0f, the built-in dataset's values), vectorised as wide
// as the CPU allows.
void bytes_to_unit_floats(const uint8_t* p, int64_t n, float* out);

// Example `i` of field `f` as f32 into out[0, f's example elements): u8 as x / 255 when
// `scale_u8` (correctly rounded, as the built-in loader), f32 copied, any other type converted.
void convert_example(const data::Field& f, int64_t i, bool scale_u8, float* out);

class StreamedInputs {
 public:
  // The input fields `inputs` (indices into table.fields, concatenated per example in that order).
  StreamedInputs(std::shared_ptr<const data::Table> table, std::vector<size_t> inputs, int64_t features);

  // Language-model windows of the one flat integer field `stream` (--seq-len T with --stream):
  // example w is ids [wT, wT + T) as f32 and its targets ids [wT + 1, wT + T + 1), both read from
  // the files as batches are cut, so no token is held in memory (data/token_windows.h). The ids
  // must have been checked against the vocabulary already.
  static std::shared_ptr<const StreamedInputs> windows(std::shared_ptr<const data::Table> table, size_t stream,
                                                       int64_t seq_len);

  // Example `example` of this view's rows, converted, into x[0, features).
  void copy(int64_t example, float* x) const;
  // Windows: the targets are in the files too (Dataset::labels stays empty).
  bool holds_targets() const { return seq_len_ > 0; }
  // A window's T targets (next ids) into y[0, T); windows only.
  void copy_targets(int64_t example, int32_t* y) const;
  int64_t count() const;
  // A view of rows `keep` of this one, in that order (the table shared, not copied).
  std::shared_ptr<const StreamedInputs> select(const std::vector<int64_t>& keep) const;
  // The same rows, normalised as they are converted.
  std::shared_ptr<const StreamedInputs> normalized(Normalization n) const;

 private:
  std::shared_ptr<const data::Table> table_;
  std::vector<size_t> inputs_;
  int64_t features_ = 0;
  std::vector<int64_t> rows_;  // the table's row of each example; empty: all of them, in order
  Normalization norm_;
  int64_t seq_len_ = 0;        // > 0: token windows of inputs_[0]
  int64_t row_of(int64_t example) const { return rows_.empty() ? example : rows_[static_cast<size_t>(example)]; }
};

}  // namespace troupe
