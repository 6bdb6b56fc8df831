#include "trainers/predict.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "data/dataset_spec.h"
#include "data/npy_writer.h"
#include "data/path_names.h"
#include "data/readers/csv_reader.h"
#include "data/safetensors.h"
#include "trainers/data_source.h"
#include "trainers/model_file.h"
#include "trainers/normalization.h"
#include "trainers/trainer_setup.h"

namespace troupe {

namespace {

// "a;b" -> {"a", "b"} (trainer arguments, which may hold commas themselves).
std::vector<std::string> split_list(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

Expected<int64_t> int_of(const std::map<std::string, std::string>& m, const std::string& key, const std::string& file) {
  auto it = m.find(key);
  if (it == m.end())
    return invalid_argument(file + " has no " + key + " in its metadata: save it again with this troupe (--save or "
                                                      "troupe export) to predict with it");
  try {
    return std::stoll(it->second);
  } catch (...) {
    return corrupt_data(file + ": metadata " + key + " = '" + it->second + "' is not a number");
  }
}

Expected<data::Table> chosen_split(const data::OpenedDataset& d, const PredictOptions& o) {
  std::vector<std::string> names;
  for (const auto& [n, _] : d.splits) names.push_back(n);
  if (!o.split.empty()) {
    auto it = d.splits.find(o.split);
    if (it == d.splits.end()) return invalid_argument(o.data + ": no split '" + o.split + "' (splits: " + data::join(names) + ")");
    return it->second;
  }
  if (d.splits.size() == 1) return d.splits.begin()->second;
  auto it = d.splits.find("test");
  if (it != d.splits.end()) return it->second;
  return invalid_argument(o.data + " has splits " + data::join(names) + ": say which to predict with --split");
}

}  // namespace

Expected<PredictResult> predict_local(const PredictOptions& o, const PredictProgress& progress) {
  const auto start = std::chrono::steady_clock::now();
  if (o.batch_size < 1) return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " must be at least 1");
  auto file = data::read_safetensors(o.model);
  if (!file.ok()) return file.status().with_context("--model");
  const auto& meta = file->metadata;
  auto trainer = meta.find(kModelTrainer);
  if (trainer == meta.end())
    return invalid_argument(o.model + " names no trainer (metadata " + std::string(kModelTrainer) +
                            "): not a model troupe saved");
  TrainOptions t;
  t.model = trainer->second;
  if (meta.count("troupe.trainer_args")) t.trainer_args = split_list(meta.at("troupe.trainer_args"), ';');
  if (meta.count("troupe.hidden")) {
    t.hidden.clear();
    for (const auto& h : data::comma_parts(meta.at("troupe.hidden"))) {
      try {
        t.hidden.push_back(std::stoi(h));
      } catch (...) {
        return corrupt_data(o.model + ": metadata troupe.hidden = '" + meta.at("troupe.hidden") + "' is not a list of sizes");
      }
    }
  }
  t.loss = meta.count("troupe.loss") ? meta.at("troupe.loss") : "xent";
  auto classes = int_of(meta, "troupe.classes", o.model);
  if (!classes.ok()) return classes.status();
  auto target_width = int_of(meta, "troupe.target_width", o.model);
  if (!target_width.ok()) return target_width.status();
  if (meta.count("troupe.seq_len"))
    return invalid_argument(o.model + " was trained on --seq-len " + meta.at("troupe.seq_len") +
                            " token windows; troupe predict does not cut windows yet (generation comes with the gpt)");
  if (meta.count("troupe.normalize") && !meta.count("troupe.normalization"))
    return invalid_argument(o.model + " was trained with --normalize " + meta.at("troupe.normalize") +
                            " but does not carry the statistics (troupe.normalization): save it again with this troupe");
  const bool values = t.loss == "mse";

  data::SpecOptions so;
  so.token_dtype = o.token_dtype;
  auto opened = data::open_dataset(o.data, so);
  if (!opened.ok()) return opened.status().with_context("--data");
  auto table = chosen_split(*opened, o);
  if (!table.ok()) return table.status();
  std::vector<std::string> inputs = o.inputs;
  if (inputs.empty() && meta.count("troupe.inputs")) inputs = data::comma_parts(meta.at("troupe.inputs"));
  // The target: the one named (here or in the model), else a conventionally named field; when the
  // data has none, a stand-in of zeros (nothing is scored).
  std::string target = !o.target.empty() ? o.target : (meta.count("troupe.target") ? meta.at("troupe.target") : "");
  if (target.empty())
    for (const auto& n : data::conventional_target_names())
      if (table->find(n)) target = n;
  if (inputs.empty())  // (as in training: every field but the target)
    for (const auto& f : table->fields)
      if (f.name != target) inputs.push_back(f.name);
  bool scored = !target.empty() && table->find(target) != nullptr;
  std::string note;
  if (scored && !table->find(target)->classes.empty()) {
    // Text labels: their classes are this file's sorted names, which need not be the training
    // set's (the model file does not record those), so nothing is scored against them.
    scored = false;
    note = "the data's labels are text; the model does not record the training classes' names, so they are not scored";
  }
  if (!scored) {
    if (!o.target.empty() && !table->find(o.target))
      return invalid_argument(o.data + ": no field '" + target + "' for --target (fields: " + data::join(table->names()) + ")");
    target = "__troupe_no_target";
    data::Field none;  // a stand-in of the trained target's type and width: zeros, never scored
    none.name = target;
    none.source = "(none: the data has no target)";
    const int64_t w = values ? *target_width : 1;
    std::vector<int64_t> shape{table->count()};
    if (values && w > 1) shape.push_back(w);
    none.array = data::owned_array(values ? data::ElemType::f32 : data::ElemType::i32, shape,
                                   std::vector<uint8_t>(static_cast<size_t>(table->count() * w) * 4, 0));
    table->fields.push_back(std::move(none));
  }
  auto d = to_dataset(*table, inputs, target, values ? 0 : static_cast<int>(*classes), o.data, values);
  if (!d.ok()) return d.status();
  if (meta.count("troupe.normalization")) {
    std::vector<const data::Field*> xs;
    for (const auto& n : inputs) xs.push_back(table->find(n));
    Expected<Normalization> norm = invalid_argument("");
    try {
      norm = normalization_from_json(meta.at("troupe.normalization"), xs);
    } catch (const std::exception& e) {
      return corrupt_data(o.model + ": metadata troupe.normalization is malformed (" + e.what() + ")");
    }
    if (!norm.ok()) return norm.status().with_context(o.model);
    for (int64_t i = 0; i < d->count; ++i) norm->apply(d->images.data() + i * d->features());
  }
  auto setup = set_up_trainer(t, d->spec(), 0, 1);
  if (!setup.ok()) return setup.status().with_context("setting up " + o.model + "'s trainer");
  std::vector<float> params(setup->space.size());
  TROUPE_RETURN_IF_ERROR(load_model_into(o.model, setup->space, t.model, false, params.data()));
  const int64_t width = setup->trainer->prediction_width();
  if (width <= 0) return invalid_argument(setup->where + " does not predict (Trainer::predict)");

  PredictResult r;
  r.model = setup->model;
  r.note = note;
  r.rows = d->count;
  r.outputs = width;
  std::vector<float> out(static_cast<size_t>(d->count * width));
  const Parameters view(params.data(), params.size());
  BatchFields fields;
  const DataSpec spec = d->spec();
  int64_t right = 0;
  double sq = 0;
  for (int64_t first = 0; first < d->count; first += o.batch_size) {
    const int64_t rows = std::min(o.batch_size, d->count - first);
    TROUPE_RETURN_IF_ERROR(setup->trainer->predict(rows_batch(*d, first, rows, &fields, spec), view,
                                                   out.data() + first * width)
                               .with_context(setup->where + ": predict of rows " + std::to_string(first)));
    for (int64_t i = first; scored && i < first + rows; ++i) {
      const float* y = out.data() + i * width;
      if (values) {
        for (int64_t k = 0; k < width; ++k) {
          const double e = static_cast<double>(y[k]) - d->targets[static_cast<size_t>(i * width + k)];
          sq += e * e;
        }
      } else if (d->one_class_per_example()) {
        right += (std::max_element(y, y + width) - y) == d->labels[static_cast<size_t>(i)];
      }
    }
    if (progress) progress(first + rows, d->count);
  }
  if (scored && values) r.mse = sq / static_cast<double>(std::max<int64_t>(1, d->count * width));
  if (scored && !values && d->one_class_per_example()) r.accuracy = static_cast<double>(right) / std::max<int64_t>(1, d->count);
  TROUPE_RETURN_IF_ERROR(data::write_npy(o.out, out.data(), {d->count, width}).with_context("--out"));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.rows_per_second = r.seconds > 0 ? static_cast<double>(r.rows) / r.seconds : 0;
  return r;
}

}  // namespace troupe
