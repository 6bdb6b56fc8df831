#include "trainers/predict/predict.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>

#include "data/dataset_spec.h"
#include "data/npy_writer.h"
#include "data/path_names.h"
#include "data/readers/csv_reader.h"
#include "data/safetensors.h"
#include "data/data_source.h"
#include "trainers/setup/model_file.h"
#include "data/normalization.h"
#include "data/token_windows.h"
#include "trainers/setup/trainer_setup.h"

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

// Rows [first, first + rows) of every field: views into the same (mapped) bytes.
data::Table slice(const data::Table& t, int64_t first, int64_t rows) {
  data::Table out = t;
  for (data::Field& f : out.fields) {
    if (f.array.shape.empty()) continue;
    f.array.bytes += static_cast<size_t>(first) * f.array.example_bytes();
    f.array.shape[0] = rows;
  }
  return out;
}

}  // namespace

struct PredictSession::State {
  PredictOptions o;
  TrainOptions t;
  data::Table table;               // the split, with a stand-in target when it has none
  std::vector<std::string> inputs;
  std::string target;
  int classes = 0;
  bool values = false, scored = false;
  std::string note;
  std::optional<Normalization> norm;
  std::optional<TrainerSetup> setup;
  std::vector<float> params;
  DataSpec spec;
  int64_t width = 0;
  BatchFields fields;
  std::optional<Dataset> windows;  // a language model's (--seq-len): the stream's windows, in order
};

PredictSession::PredictSession(std::unique_ptr<State> s) : s_(std::move(s)) {}
PredictSession::~PredictSession() = default;
int64_t PredictSession::rows() const { return s_->windows ? s_->windows->count : s_->table.count(); }
bool PredictSession::windows() const { return s_->windows.has_value(); }

Expected<std::unique_ptr<PredictSession>> PredictSession::loaded(std::unique_ptr<State> st) {
  const std::string& model = st->o.model;
  auto setup = set_up_trainer(st->t, st->spec, 0, 1);
  if (!setup.ok()) return setup.status().with_context("setting up " + model + "'s trainer");
  st->setup = std::move(*setup);
  st->params.resize(st->setup->space.size());
  TROUPE_RETURN_IF_ERROR(load_model_into(model, st->setup->space, st->t.model, false, st->params.data()));
  st->width = st->setup->trainer->prediction_width();
  if (st->width <= 0) return invalid_argument(st->setup->where + " does not predict (Trainer::predict)");
  return std::unique_ptr<PredictSession>(new PredictSession(std::move(st)));
}

Expected<std::unique_ptr<PredictSession>> PredictSession::open_windows(std::unique_ptr<State> st,
                                                                       const data::Table& table, int vocab) {
  const PredictOptions& o = st->o;
  // The stream: the table's one field, else the one --inputs names.
  const data::Field* stream = table.fields.size() == 1 ? &table.fields.front() : nullptr;
  if (!stream && !o.inputs.empty()) stream = table.find(o.inputs.front());
  if (!stream)
    return invalid_argument(o.data + " holds fields " + data::join(table.names()) + "; " + o.model +
                            " reads one token stream: name it with --inputs FIELD");
  auto windows = token_windows(*stream, st->t.seq_len, vocab, o.data);
  if (!windows.ok()) return windows.status();
  st->windows = std::move(*windows);
  st->scored = true;
  st->classes = vocab;
  st->spec = st->windows->spec();
  return loaded(std::move(st));
}

Status PredictSession::run_windows(int64_t first, int64_t rows, float* out, PredictScore* score,
                                   const std::function<void(int64_t done)>& progress) {
  State& s = *s_;
  const Dataset& d = *s.windows;
  const int64_t width = s.width, T = d.target_width;
  const Parameters view(s.params.data(), s.params.size());
  for (int64_t b = first; b < first + rows; b += s.o.batch_size) {
    const int64_t m = std::min(s.o.batch_size, first + rows - b);
    const std::string where = s.setup->where + ": windows " + std::to_string(b) + "-" + std::to_string(b + m - 1);
    float* y0 = out + (b - first) * width;
    const Batch batch = rows_batch(d, b, m, &s.fields, s.spec);
    TROUPE_RETURN_IF_ERROR(s.setup->trainer->predict(batch, view, y0).with_context(where));
    auto loss = s.setup->trainer->evaluate(batch, view);  // every position's next-token loss
    if (!loss.ok()) return loss.status().with_context(where);
    score->loss_sum += static_cast<double>(loss->loss) * static_cast<double>(m);
    for (int64_t i = 0; i < m; ++i) {  // the next token after each window's last position
      const float* y = y0 + i * width;
      score->right += (std::max_element(y, y + width) - y) == d.labels[static_cast<size_t>((b + i) * T + T - 1)];
    }
    score->scored += m;
    if (progress) progress(b - first + m);
  }
  return {};
}
int64_t PredictSession::width() const { return s_->width; }
const std::string& PredictSession::model() const { return s_->setup->model; }
bool PredictSession::scored() const { return s_->scored; }
bool PredictSession::values() const { return s_->values; }
const std::string& PredictSession::note() const { return s_->note; }

Expected<std::unique_ptr<PredictSession>> PredictSession::open(const PredictOptions& o) {
  if (o.batch_size < 1) return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " must be at least 1");
  auto st = std::make_unique<State>();
  st->o = o;
  auto file = data::read_safetensors(o.model);
  if (!file.ok()) return file.status().with_context("--model");
  const auto& meta = file->metadata;
  auto trainer = meta.find(kModelTrainer);
  if (trainer == meta.end())
    return invalid_argument(o.model + " names no trainer (metadata " + std::string(kModelTrainer) +
                            "): not a model troupe saved");
  TrainOptions& t = st->t;
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
  if (meta.count("troupe.seq_len")) {
    auto seq = int_of(meta, "troupe.seq_len", o.model);
    if (!seq.ok()) return seq.status();
    if (*seq < 1) return corrupt_data(o.model + ": metadata troupe.seq_len = " + meta.at("troupe.seq_len"));
    t.seq_len = *seq;
    if (*classes <= 0)
      return invalid_argument(o.model + " was trained on --seq-len " + std::to_string(t.seq_len) +
                              " token windows but its metadata holds no vocabulary (troupe.classes " +
                              std::to_string(*classes) + "): not a language model troupe saved");
  }
  if (t.seq_len == 0 && meta.count("troupe.normalize") && !meta.count("troupe.normalization"))
    return invalid_argument(o.model + " was trained with --normalize " + meta.at("troupe.normalize") +
                            " but does not carry the statistics (troupe.normalization): save it again with this troupe");
  st->values = t.loss == "mse";
  const bool values = st->values;

  data::SpecOptions so;
  so.token_dtype = o.token_dtype;
  auto opened = data::open_dataset(o.data, so);
  if (!opened.ok()) return opened.status().with_context("--data");
  auto table = chosen_split(*opened, o);
  if (!table.ok()) return table.status();
  if (t.seq_len > 0) return open_windows(std::move(st), *table, static_cast<int>(*classes));
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
  if (scored && !table->find(target)->classes.empty()) {
    // Text labels: their classes are this file's sorted names, which need not be the training
    // set's (the model file does not record those), so nothing is scored against them.
    scored = false;
    st->note = "the data's labels are text; the model does not record the training classes' names, so they are not scored";
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
  st->scored = scored;
  st->classes = values ? 0 : static_cast<int>(*classes);
  st->inputs = inputs;
  st->target = target;
  st->table = std::move(*table);
  // The trainer is set up from the first row's shapes (every row has the same).
  auto probe = to_dataset(slice(st->table, 0, std::min<int64_t>(1, st->table.count())), inputs, target, st->classes,
                          o.data, values);
  if (!probe.ok()) return probe.status();
  if (meta.count("troupe.normalization")) {
    std::vector<const data::Field*> xs;
    for (const auto& n : inputs) xs.push_back(st->table.find(n));
    Expected<Normalization> norm = invalid_argument("");
    try {
      norm = normalization_from_json(meta.at("troupe.normalization"), xs);
    } catch (const std::exception& e) {
      return corrupt_data(o.model + ": metadata troupe.normalization is malformed (" + e.what() + ")");
    }
    if (!norm.ok()) return norm.status().with_context(o.model);
    st->norm = std::move(*norm);
  }
  st->spec = probe->spec();
  return loaded(std::move(st));
}

Status PredictSession::run(int64_t first, int64_t rows, float* out, PredictScore* score,
                           const std::function<void(int64_t done)>& progress) {
  State& s = *s_;
  if (first < 0 || rows < 0 || first + rows > this->rows())
    return invalid_argument("rows " + std::to_string(first) + " + " + std::to_string(rows) + " are outside the " +
                            std::to_string(this->rows()) + " rows of " + s.o.data);
  if (s.windows) return run_windows(first, rows, out, score, progress);
  const int64_t width = s.width;
  const Parameters view(s.params.data(), s.params.size());
  // Converted a chunk at a time (whole batches), so memory stays small whatever the range.
  const int64_t chunk = std::max<int64_t>(1, 16384 / s.o.batch_size) * s.o.batch_size;
  for (int64_t c = first; c < first + rows; c += chunk) {
    const int64_t n = std::min(chunk, first + rows - c);
    const std::string range = "rows " + std::to_string(c) + "-" + std::to_string(c + n - 1);
    auto d = to_dataset(slice(s.table, c, n), s.inputs, s.target, s.classes, s.o.data, s.values);
    if (!d.ok()) return d.status().with_context(range);
    if (s.norm)
      for (int64_t i = 0; i < d->count; ++i) s.norm->apply(d->images.data() + i * d->features());
    for (int64_t b = 0; b < n; b += s.o.batch_size) {
      const int64_t m = std::min(s.o.batch_size, n - b);
      float* y0 = out + (c - first + b) * width;
      TROUPE_RETURN_IF_ERROR(s.setup->trainer->predict(rows_batch(*d, b, m, &s.fields, s.spec), view, y0)
                                 .with_context(s.setup->where + ": predict of rows " + std::to_string(c + b)));
      for (int64_t i = b; s.scored && i < b + m; ++i) {
        const float* y = y0 + (i - b) * width;
        if (s.values) {
          for (int64_t k = 0; k < width; ++k) {
            const double e = static_cast<double>(y[k]) - d->targets[static_cast<size_t>(i * width + k)];
            score->squared += e * e;
          }
          ++score->scored;
        } else if (d->one_class_per_example()) {
          score->right += (std::max_element(y, y + width) - y) == d->labels[static_cast<size_t>(i)];
          ++score->scored;
        }
      }
      if (progress) progress(c - first + b + m);
    }
  }
  return {};
}

double PredictSession::accuracy(const PredictScore& score) const {
  if (!s_->scored || s_->values || score.scored == 0) return -1;
  return static_cast<double>(score.right) / static_cast<double>(score.scored);
}

double PredictSession::loss(const PredictScore& score) const {
  if (!s_->windows || score.scored == 0) return -1;
  return score.loss_sum / static_cast<double>(score.scored);
}

double PredictSession::mse(const PredictScore& score) const {
  if (!s_->scored || !s_->values) return -1;
  return score.squared / static_cast<double>(std::max<int64_t>(1, score.scored * s_->width));
}

Expected<PredictResult> predict_local(const PredictOptions& o, const PredictProgress& progress) {
  const auto start = std::chrono::steady_clock::now();
  auto session = PredictSession::open(o);
  if (!session.ok()) return session.status();
  PredictSession& p = **session;
  PredictResult r;
  r.model = p.model();
  r.note = p.note();
  r.rows = p.rows();
  r.outputs = p.width();
  std::vector<float> out(static_cast<size_t>(r.rows * r.outputs));
  PredictScore score;
  TROUPE_RETURN_IF_ERROR(p.run(0, r.rows, out.data(), &score, [&](int64_t done) {
    if (progress) progress(done, r.rows);
  }));
  r.accuracy = p.accuracy(score);
  r.mse = p.mse(score);
  r.loss = p.loss(score);
  TROUPE_RETURN_IF_ERROR(data::write_npy(o.out, out.data(), {r.rows, r.outputs}).with_context("--out"));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.rows_per_second = r.seconds > 0 ? static_cast<double>(r.rows) / r.seconds : 0;
  return r;
}

}  // namespace troupe
