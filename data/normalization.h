// Normalisation of the inputs (--normalize): every input field shifted and scaled to zero mean and
// unit variance by the training split's statistics — computed as the data loads (`standard`), or
// read from the file `troupe data inspect --stats-out FILE` wrote (`--normalize FILE`). Applied
// after u8 scaling, the same way to the training and evaluation sets (in memory at load; a streamed
// training set's examples as they are converted, in the input pipeline's threads), and kept in the
// saved model's metadata (troupe.normalization) for whoever runs the model next. A field of one
// constant value (std 0) is only shifted.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "data/table.h"

namespace troupe {

struct FieldNorm {
  std::string name;
  double mean = 0, std = 1;  // of the values as fed (u8 scaled to [0, 1])
};

struct Normalization {
  std::vector<FieldNorm> fields;  // the input fields, in input order
  std::vector<float> shift, scale;  // per input value (features of them): x' = (x - shift) * scale

  bool empty() const { return fields.empty(); }
  void apply(float* example) const;  // one example's inputs, in place
  std::string to_json() const;       // {"x": {"mean": 0.286, "std": 0.353}, ...}
};

// The normalisation `how` asks for ("" or "none": none; "standard"; else a statistics file) of the
// input fields `inputs` of the training table. invalid_argument naming the file and the field when
// the file lacks an input field or holds another type for it; not_found / corrupt_data for a
// missing or malformed file.
Expected<Normalization> make_normalization(const std::string& how, const std::vector<const data::Field*>& inputs);

}  // namespace troupe

namespace troupe {

// The normalisation a saved model's metadata carries (Normalization::to_json: statistics of the
// values as fed) for the input fields `inputs`; invalid_argument naming the field it lacks.
Expected<Normalization> normalization_from_json(const std::string& json, const std::vector<const data::Field*>& inputs);

}  // namespace troupe
