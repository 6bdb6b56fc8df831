#include "data/normalization.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/durable_file.h"
#include "data/inspect.h"

namespace troupe {

void Normalization::apply(float* example) const {
  for (size_t k = 0; k < shift.size(); ++k) example[k] = (example[k] - shift[k]) * scale[k];
}

std::string Normalization::to_json() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const FieldNorm& f : fields) j[f.name] = {{"mean", f.mean}, {"std", f.std}};
  return j.dump();
}

namespace {

// Mean and std of every element of `f` as fed (u8 / 255): the statistics `troupe data inspect
// --stats-out` writes, scaled as from_file scales them.
FieldNorm measured(const data::Field& f) {
  const data::FieldStats s = data::field_stats(f);
  const double k = f.array.type == data::ElemType::u8 ? 1.0 / 255 : 1.0;
  return {f.name, s.mean * k, s.std * k};
}

Expected<std::vector<FieldNorm>> from_file(const std::string& path, const std::vector<const data::Field*>& inputs) {
  auto bytes = read_whole_file(path, "normalization statistics", 16u << 20);
  if (!bytes.ok()) return bytes.status().with_context("--normalize");
  const nlohmann::json j = nlohmann::json::parse(*bytes, nullptr, false);
  const std::string where = "--normalize " + path;
  if (j.is_discarded() || !j.is_object() || !j.contains("fields") || !j["fields"].is_object())
    return corrupt_data(where + ": not statistics `troupe data inspect --stats-out` wrote (no \"fields\" object)");
  std::vector<FieldNorm> out;
  for (const data::Field* f : inputs) {
    if (!j["fields"].contains(f->name))
      return invalid_argument(where + " has no statistics of the input field '" + f->name + "'");
    const auto& s = j["fields"][f->name];
    if (!s.is_object() || !s.contains("mean") || !s["mean"].is_number() || !s.contains("std") || !s["std"].is_number())
      return corrupt_data(where + ": field '" + f->name + "' needs numbers mean and std");
    if (s.contains("type") && s["type"] != data::elem_name(f->array.type))
      return invalid_argument(where + ": its statistics of '" + f->name + "' are of " + s["type"].get<std::string>() +
                              " values; the data's field is " + data::elem_name(f->array.type));
    const double k = f->array.type == data::ElemType::u8 ? 1.0 / 255 : 1.0;  // stored unscaled
    out.push_back({f->name, s["mean"].get<double>() * k, s["std"].get<double>() * k});
  }
  return out;
}

}  // namespace

namespace {

Normalization expanded(std::vector<FieldNorm> fields, const std::vector<const data::Field*>& inputs) {
  Normalization n;
  n.fields = std::move(fields);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const FieldNorm& f = n.fields[i];
    const float scale = f.std > 0 && std::isfinite(f.std) ? static_cast<float>(1.0 / f.std) : 1.0f;
    n.shift.insert(n.shift.end(), static_cast<size_t>(inputs[i]->array.example_elements()), static_cast<float>(f.mean));
    n.scale.insert(n.scale.end(), static_cast<size_t>(inputs[i]->array.example_elements()), scale);
  }
  return n;
}

}  // namespace

Expected<Normalization> normalization_from_json(const std::string& json, const std::vector<const data::Field*>& inputs) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return corrupt_data("the model's troupe.normalization is not a JSON object");
  std::vector<FieldNorm> fields;
  for (const data::Field* f : inputs) {
    if (!j.contains(f->name) || !j[f->name].contains("mean") || !j[f->name].contains("std"))
      return invalid_argument("the model was trained on inputs normalised per field, and its statistics lack the "
                              "input field '" + f->name + "'");
    fields.push_back({f->name, j[f->name]["mean"].get<double>(), j[f->name]["std"].get<double>()});
  }
  return expanded(std::move(fields), inputs);
}

Expected<Normalization> make_normalization(const std::string& how, const std::vector<const data::Field*>& inputs) {
  Normalization n;
  if (how.empty() || how == "none") return n;
  if (how == "standard") {
    for (const data::Field* f : inputs) n.fields.push_back(measured(*f));
  } else {
    auto fields = from_file(how, inputs);
    if (!fields.ok()) return fields.status();
    n.fields = std::move(*fields);
  }
  return expanded(std::move(n.fields), inputs);
}

}  // namespace troupe
