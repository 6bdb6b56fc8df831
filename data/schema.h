// The schema of a dataset's examples and the batch a model is fed: what the data layer produces
// (readers, datasets, feeds) and what a trainer consumes (trainers/api/trainer.h includes it, and it
// is installed with the trainer API for user libraries: keep its includes to the standard library).
//
// An example is named, typed, shaped fields (FieldSpec); the DataSpec lists them with the flat
// layout the runtime feeds: every input field flattened into `features` f32 values per example,
// the target as class labels (i32) or values (f32). A Batch is `size` such examples with a view of
// every field by name (FieldView).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

// The type of a field's values. In a Batch, inputs arrive as f32 (u8 scaled to [0, 1], every other
// type converted) and class or token targets as i32; DataSpec::fields also says what the files hold.
enum class ValueType : uint8_t { u8, i8, u16, i16, u32, i32, i64, f16, f32, f64 };
const char* value_type_name(ValueType t);  // "u8", ..., "f64"
bool parse_value_type(const std::string& name, ValueType* out);  // false for a name it does not give

// One field of the examples: `image: u8[28,28]` in the files, fed as f32[28,28].
struct FieldSpec {
  std::string name;
  ValueType type = ValueType::f32;    // as a Batch hands it to the trainer
  ValueType stored = ValueType::f32;  // as the dataset's files hold it
  std::vector<int64_t> shape;         // per example ({} for a scalar)
  bool target = false;                // the target (else an input)
  std::string describe() const;       // "image: f32[28,28] (u8 in the files)"
};

// The examples the runtime will feed. Every example's inputs are `features` f32 values: the input
// fields flattened and concatenated in `fields` order (Batch::inputs). Its target is either
// classes (`classes` > 0: `target_width` i32 labels in [0, classes) per example — one class, or a
// token window's next tokens) or values (`classes` == 0: `target_width` f32 per example,
// regression).
struct DataSpec {
  int64_t features = 0;
  int classes = 0;
  int64_t target_width = 1;
  std::vector<FieldSpec> fields;  // the inputs in order, then the target
  // The field named `name`, or null.
  const FieldSpec* field(const std::string& name) const;
  // The per-example shape of the single input field; {features} when there are several.
  std::vector<int64_t> input_shape() const;
};

// ---- what a model is fed ----

// One field of a batch, by name: `shape[0]` = the batch's examples, then the field's per-example
// shape; example i starts `row_stride` values after example i - 1 (an input field is a view into
// Batch::inputs, whose rows hold every input field).
struct FieldView {
  static constexpr int kMaxRank = 8;
  const char* name = "";
  ValueType type = ValueType::f32;
  int rank = 0;  // of shape, batch dimension included
  int64_t shape[kMaxRank] = {};
  int64_t row_stride = 0;
  const void* data = nullptr;
  const float* f32() const { return type == ValueType::f32 ? static_cast<const float*>(data) : nullptr; }
  const int32_t* i32() const { return type == ValueType::i32 ? static_cast<const int32_t*>(data) : nullptr; }
};

// `size` examples, row-major, on ctx.device: inputs [size x features] f32; the target as labels
// [size x target_width] int32 (a classifying DataSpec) or targets [size x target_width] f32
// (values); and every field by name.
struct Batch {
  const float* inputs = nullptr;
  const int32_t* labels = nullptr;
  int64_t size = 0;
  int64_t features = 0;
  // f16 training's dynamic loss scale: forward_backward multiplies the loss's gradient by it before
  // backward (the gradients it writes are scaled; the runtime divides it out, and skips the step
  // when they overflowed). 1 otherwise; the loss it returns is never scaled.
  float loss_scale = 1.0f;
  const float* targets = nullptr;  // values, when DataSpec::classes == 0 (labels is then null)
  int64_t target_width = 1;
  const FieldView* fields = nullptr;  // the DataSpec's fields, in its order
  int num_fields = 0;
  // The field named `name`, or null.
  const FieldView* field(const std::string& name) const;
};

}  // namespace troupe
