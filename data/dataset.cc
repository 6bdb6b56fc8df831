#include "data/dataset.h"

#include "data/feed/streamed_inputs.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

namespace troupe {

namespace {

std::vector<FieldSpec> default_schema(const Dataset& d) {
  FieldSpec image{"image", ValueType::f32, ValueType::u8, {d.rows, d.cols}, false};
  FieldSpec label{"label", ValueType::i32, ValueType::u8, {}, true};
  return {image, label};
}

}  // namespace

bool Dataset::one_class_per_example() const {
  // (windows of 1 token streamed: their classes are in the files, not at hand for stratified plans)
  return classes > 0 && target_width == 1 && !(stream && stream->holds_targets());
}

const std::vector<int32_t>& Dataset::class_labels() const {
  static const std::vector<int32_t> none;
  return one_class_per_example() ? labels : none;
}

DataSpec Dataset::spec() const {
  DataSpec s;
  s.features = features();
  s.classes = classes;
  s.target_width = target_width;
  s.fields = schema.empty() ? default_schema(*this) : schema;
  return s;
}

void copy_example(const Dataset& d, int64_t idx, float* x, int32_t* y, float* t) {
  const int64_t f = d.features();
  if (d.stream) d.stream->copy(idx, x);
  else std::memcpy(x, d.images.data() + idx * f, static_cast<size_t>(f) * sizeof(float));
  const auto w = static_cast<size_t>(d.target_width);
  if (d.stream && d.stream->holds_targets()) d.stream->copy_targets(idx, y);
  else if (d.classifies()) std::memcpy(y, d.labels.data() + idx * d.target_width, w * sizeof(int32_t));
  else std::memcpy(t, d.targets.data() + idx * d.target_width, w * sizeof(float));
}

Dataset select_rows(const Dataset& d, const std::vector<int64_t>& keep) {
  Dataset out;
  out.rows = d.rows;
  out.cols = d.cols;
  out.classes = d.classes;
  out.target_width = d.target_width;
  out.schema = d.schema;
  out.normalization = d.normalization;
  out.count = static_cast<int64_t>(keep.size());
  const int64_t f = d.features();
  const auto w = static_cast<size_t>(d.target_width);
  if (d.stream && d.stream->holds_targets()) {  // windows: a view of inputs and targets, both in the files
    out.stream = d.stream->select(keep);
    return out;
  }
  if (d.classifies()) out.labels.resize(keep.size() * w);
  else out.targets.resize(keep.size() * w);
  if (d.stream) {  // a view: the labels or targets copied, the inputs left in the files
    out.stream = d.stream->select(keep);
    for (size_t i = 0; i < keep.size(); ++i) {
      const auto k = static_cast<size_t>(keep[i]);
      if (d.classifies()) std::copy_n(d.labels.data() + k * w, w, out.labels.data() + i * w);
      else std::copy_n(d.targets.data() + k * w, w, out.targets.data() + i * w);
    }
    return out;
  }
  out.images.resize(static_cast<size_t>(out.count * f));
  for (size_t i = 0; i < keep.size(); ++i)
    copy_example(d, keep[i], out.images.data() + i * f, out.labels.data() + i * w, out.targets.data() + i * w);
  return out;
}

Dataset materialize(const Dataset& d) {
  if (!d.stream) return d;
  Dataset out = d;
  out.stream.reset();
  const int64_t f = d.features();
  out.images.resize(static_cast<size_t>(d.count * f));
  for (int64_t i = 0; i < d.count; ++i) d.stream->copy(i, out.images.data() + i * f);
  if (d.stream->holds_targets()) {  // windows: their targets too
    const int64_t w = d.target_width;
    out.labels.resize(static_cast<size_t>(d.count * w));
    for (int64_t i = 0; i < d.count; ++i) d.stream->copy_targets(i, out.labels.data() + i * w);
  }
  return out;
}

Status require_in_memory(const Dataset& d, const std::string& what) {
  if (!d.stream) return {};
  return invalid_argument(what + " needs the training set in memory; it was opened with --stream: leave --stream out "
                                 "(or train it on CPU workers)");
}

// A seeded split: from each class (stratified; one group when the target is not one class),
// round(fraction x its examples) go to validation.
std::pair<Dataset, Dataset> split_fraction(const Dataset& d, double fraction, uint64_t seed) {
  std::map<int32_t, std::vector<int64_t>> by_class;
  for (int64_t i = 0; i < d.count; ++i)
    by_class[d.one_class_per_example() ? d.labels[static_cast<size_t>(i)] : 0].push_back(i);
  std::mt19937_64 rng(seed ^ 0x7661'6c5f'7370'6c74ull);  // "val_splt"
  std::vector<int64_t> train, val;
  for (auto& [_, idx] : by_class) {
    std::shuffle(idx.begin(), idx.end(), rng);
    const auto k = static_cast<size_t>(std::llround(fraction * static_cast<double>(idx.size())));
    val.insert(val.end(), idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k));
    train.insert(train.end(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end());
  }
  std::sort(train.begin(), train.end());
  std::sort(val.begin(), val.end());
  return {select_rows(d, train), select_rows(d, val)};
}

void BatchFields::bind(const DataSpec& spec, Batch* b) {
  views_.clear();
  int64_t offset = 0;  // of the input field in an example's row
  for (const FieldSpec& f : spec.fields) {
    FieldView v;
    v.name = f.name.c_str();
    v.type = f.type;
    v.rank = std::min<int>(FieldView::kMaxRank, 1 + static_cast<int>(f.shape.size()));
    v.shape[0] = b->size;
    int64_t n = 1;
    for (size_t i = 0; i < f.shape.size(); ++i) {
      if (i + 1 < static_cast<size_t>(FieldView::kMaxRank)) v.shape[i + 1] = f.shape[i];
      n *= f.shape[i];
    }
    if (f.target) {
      v.row_stride = b->target_width;
      v.data = b->labels ? static_cast<const void*>(b->labels) : static_cast<const void*>(b->targets);
    } else {
      v.row_stride = b->features;
      v.data = b->inputs ? b->inputs + offset : nullptr;
      offset += n;
    }
    views_.push_back(v);
  }
  b->fields = views_.data();
  b->num_fields = static_cast<int>(views_.size());
}

namespace {

size_t value_size(ValueType t) {
  switch (t) {
    case ValueType::u8:
    case ValueType::i8: return 1;
    case ValueType::u16:
    case ValueType::i16:
    case ValueType::f16: return 2;
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::f32: return 4;
    case ValueType::i64:
    case ValueType::f64: return 8;
  }
  return 4;
}

}  // namespace

Batch batch_rows(const Batch& b, int64_t first, int64_t rows, std::vector<FieldView>* views) {
  Batch out = b;
  out.size = rows;
  out.inputs = b.inputs ? b.inputs + first * b.features : nullptr;
  out.labels = b.labels ? b.labels + first * b.target_width : nullptr;
  out.targets = b.targets ? b.targets + first * b.target_width : nullptr;
  views->assign(b.fields, b.fields + b.num_fields);
  for (FieldView& v : *views) {
    v.shape[0] = rows;
    if (v.data) v.data = static_cast<const char*>(v.data) + first * v.row_stride * value_size(v.type);
  }
  out.fields = views->data();
  return out;
}

Status require_one_class(const DataSpec& d, const std::string& what) {
  if (d.classes > 0 && d.target_width == 1) return {};
  const std::string target = d.classes <= 0 ? "values (regression)" :
                             std::to_string(d.target_width) + " labels per example (a sequence)";
  return invalid_argument(what + " trains on one class per example; this dataset's target holds " + target +
                          ": train it with `troupe train` or a sync job (--strategy sync)");
}

}  // namespace troupe
