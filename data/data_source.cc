#include "data/data_source.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <random>

#include "data/dataset_spec.h"
#include "data/readers/csv_reader.h"
#include "data/tokenizer.h"
#include "data/dataset_cache.h"
#include "data/normalization.h"
#include "data/feed/streamed_inputs.h"
#include "data/token_windows.h"

namespace troupe {

namespace {

using data::Field;
using data::Table;

constexpr int64_t kMaxClasses = int64_t{1} << 20;

Expected<const Field*> pick_target(const Table& t, const std::string& target, const std::string& where) {
  if (!target.empty()) {
    const Field* f = t.find(target);
    if (!f) return invalid_argument(where + ": no field '" + target + "' for --target (fields: " + data::join(t.names()) + ")");
    return f;
  }
  std::vector<const Field*> found;
  for (const auto& name : data::conventional_target_names())
    if (const Field* f = t.find(name)) found.push_back(f);
  if (found.size() == 1) return found.front();
  if (found.empty())
    return invalid_argument(where + ": which field is the target? None is named label, labels, y, target, class or cls; "
                            "name it with --target (fields: " + data::join(t.names()) + ")");
  return invalid_argument(where + ": several fields could be the target (" + found[0]->name + ", " + found[1]->name +
                          "); name it with --target");
}

Expected<std::vector<const Field*>> pick_inputs(const Table& t, const std::vector<std::string>& inputs,
                                               const Field* target, const std::string& where) {
  std::vector<const Field*> out;
  if (!inputs.empty()) {
    for (const auto& name : inputs) {
      const Field* f = t.find(name);
      if (!f) return invalid_argument(where + ": no field '" + name + "' for --inputs (fields: " + data::join(t.names()) + ")");
      if (f == target) return invalid_argument(where + ": '" + name + "' is the target; it cannot also be an input");
      out.push_back(f);
    }
  } else {
    for (const Field& f : t.fields)
      if (&f != target) out.push_back(&f);
  }
  if (out.empty())
    return invalid_argument(where + ": no input fields: the dataset has only its target '" + target->name + "'");
  return out;
}

// Largest label of the target (0 when empty); invalid_argument for a non-integer target or a
// negative label.
Expected<int64_t> max_label(const Field& y, const std::string& where) {
  if (!data::is_integer(y.array.type) || y.array.example_elements() != 1) {
    return invalid_argument(where + ": the target '" + y.name + "' is " +
                            data::describe(y.array.type, y.array.example_shape()) + " (" + y.source +
                            "): a class target holds one integer class per example (for values to regress on, train with --loss mse)");
  }
  int64_t hi = 0;
  for (int64_t i = 0; i < y.array.count(); ++i) {
    const double v = y.array.value(static_cast<size_t>(i));
    if (v < 0)
      return invalid_argument(where + ": label " + std::to_string(static_cast<int64_t>(v)) + " of example " +
                              std::to_string(i) + " in '" + y.name + "' (" + y.source + ") is negative; classes are 0..K-1");
    hi = std::max(hi, static_cast<int64_t>(v));
  }
  if (hi >= kMaxClasses)
    return invalid_argument(where + ": label " + std::to_string(hi) + " in '" + y.name + "' (" + y.source +
                            ") is over the " + std::to_string(kMaxClasses) + " classes troupe's models classify: " +
                            "is it an id rather than a class? (name the target with --target)");
  return hi;
}

// The validation table's target re-indexed to the training table's class names (text labels).
Expected<Field> remap_classes(const Field& val, const Field& train, const std::string& where) {
  std::map<std::string, int32_t> index;
  for (size_t i = 0; i < train.classes.size(); ++i) index[train.classes[i]] = static_cast<int32_t>(i);
  std::vector<uint8_t> b(static_cast<size_t>(val.array.count()) * 4);
  for (int64_t i = 0; i < val.array.count(); ++i) {
    const auto v = static_cast<size_t>(val.array.value(static_cast<size_t>(i)));
    const std::string& name = val.classes.at(v);
    auto it = index.find(name);
    if (it == index.end())
      return invalid_argument(where + ": label '" + name + "' of example " + std::to_string(i) + " (" + val.source +
                              ") is not a class of the training set (" + data::join(train.classes) + ")");
    std::memcpy(b.data() + 4 * i, &it->second, 4);
  }
  Field out = val;
  out.classes = train.classes;
  out.array = data::owned_array(data::ElemType::i32, val.array.shape, std::move(b));
  return out;
}

Expected<Table> training_split(const data::OpenedDataset& d, const std::string& spec) {
  auto it = d.splits.find("train");
  if (it != d.splits.end()) return it->second;
  if (d.splits.size() == 1) return d.splits.begin()->second;
  std::vector<std::string> names;
  for (const auto& [n, _] : d.splits) names.push_back(n);
  return invalid_argument(spec + ": splits " + data::join(names) + ", none named train; name it so in a dataset.yaml");
}

std::string field_list(const std::vector<const Field*>& fs) {
  std::string s;
  for (const Field* f : fs)
    s += (s.empty() ? "" : ", ") + f->name + " (" + data::describe(f->array.type, f->array.example_shape()) + ")";
  return s;
}

ValueType value_type(data::ElemType t) {
  static_assert(static_cast<int>(data::ElemType::f64) == static_cast<int>(ValueType::f64), "the same order");
  return static_cast<ValueType>(t);
}

// The first non-finite value of `v` (n values of `width` per example) as an error, naming its example.
Status check_finite(const std::vector<float>& v, int64_t width, const std::string& what, const std::string& where) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i]))
      return invalid_argument(where + ": example " + std::to_string(static_cast<int64_t>(i) / width) + " has a NaN or infinite " +
                              what + "; nothing is trained on it — clean the data first");
  }
  return {};
}

}  // namespace

Expected<Dataset> to_dataset(const Table& table, const std::vector<std::string>& inputs, const std::string& target,
                             int classes, const std::string& where, bool values, bool stream) {
  TROUPE_RETURN_IF_ERROR(table.check(where));
  if (table.count() == 0) return invalid_argument(where + ": no examples");
  auto y = pick_target(table, target, where);
  if (!y.ok()) return y.status();
  auto xs = pick_inputs(table, inputs, *y, where);
  if (!xs.ok()) return xs.status();
  const Field& yf = **y;
  Dataset d;
  d.count = table.count();
  if (values) {
    d.classes = 0;
    d.target_width = std::max<int64_t>(1, yf.array.example_elements());
    if (!yf.classes.empty())
      return invalid_argument(where + ": the target '" + yf.name + "' (" + yf.source + ") holds text labels; --loss mse " +
                              "needs numbers (for classes leave --loss at xent)");
  } else {
    auto hi = max_label(yf, where);
    if (!hi.ok()) return hi.status();
    d.classes = classes > 0 ? classes : static_cast<int>(*hi + 1);
    if (!yf.classes.empty() && classes == 0) d.classes = static_cast<int>(yf.classes.size());
    if (*hi >= d.classes) {
      for (int64_t i = 0; i < d.count; ++i) {
        if (yf.array.value(static_cast<size_t>(i)) >= d.classes)
          return invalid_argument(where + ": label " + std::to_string(static_cast<int64_t>(yf.array.value(i))) +
                                  " of example " + std::to_string(i) + " in '" + yf.name + "' (" + yf.source +
                                  ") is out of range: the training set has classes 0.." + std::to_string(d.classes - 1));
      }
    }
  }
  int64_t features = 0;
  for (const Field* f : *xs) features += f->array.example_elements();
  if (table.count() > INT32_MAX)
    return invalid_argument(where + ": " + std::to_string(table.count()) + " examples; troupe's shard plans and "
                            "shuffles index up to 2^31 - 1 of them: split the data into several datasets");
  if (features <= 0 || features > INT32_MAX)
    return invalid_argument(where + ": inputs of " + std::to_string(features) + " values per example");
  d.rows = 1;
  d.cols = static_cast<int>(features);
  if (xs->size() == 1) {
    std::vector<int64_t> s = xs->front()->array.example_shape();
    if (s.size() == 3 && s[2] == 1) s.pop_back();
    if (s.size() == 3 && s[0] == 1) s.erase(s.begin());
    if (s.size() == 2) {
      d.rows = static_cast<int>(s[0]);
      d.cols = static_cast<int>(s[1]);
    }
  }
  for (const Field* f : *xs)
    d.schema.push_back(FieldSpec{f->name, ValueType::f32, value_type(f->array.type), f->array.example_shape(), false});
  d.schema.push_back(FieldSpec{yf.name, values ? ValueType::f32 : ValueType::i32, value_type(yf.array.type),
                               yf.array.example_shape(), true});
  if (values) d.targets.resize(static_cast<size_t>(d.count * d.target_width));
  else d.labels.resize(static_cast<size_t>(d.count));
  for (int64_t i = 0; i < d.count; ++i) {
    if (values) convert_example(yf, i, false, d.targets.data() + i * d.target_width);
    else d.labels[static_cast<size_t>(i)] = static_cast<int32_t>(yf.array.value(static_cast<size_t>(i)));
  }
  bool floats = false;  // integers are finite: only floating inputs need the check
  for (const Field* f : *xs) floats = floats || !data::is_integer(f->array.type);
  if (stream) {
    // The inputs stay in the files; floating ones are checked there, a pass without a copy.
    for (const Field* f : *xs) {
      if (data::is_integer(f->array.type)) continue;
      const int64_t n = f->array.example_elements();
      for (int64_t i = 0; i < d.count; ++i) {
        for (int64_t k = 0; k < n; ++k) {
          if (!std::isfinite(f->array.value(static_cast<size_t>(i * n + k))))
            return invalid_argument(where + ": example " + std::to_string(i) + " has a NaN or infinite input ('" +
                                    f->name + "', " + f->source + "); nothing is trained on it — clean the data first");
        }
      }
    }
    auto shared = std::make_shared<const Table>(table);
    std::vector<size_t> inputs;
    for (const Field* f : *xs) inputs.push_back(static_cast<size_t>(f - table.fields.data()));
    d.stream = std::make_shared<const StreamedInputs>(shared, std::move(inputs), features);
  } else {
    d.images.resize(static_cast<size_t>(d.count * features));
    float* out = d.images.data();
    for (int64_t i = 0; i < d.count; ++i) {
      for (const Field* f : *xs) {
        convert_example(*f, i, true, out);
        out += f->array.example_elements();
      }
    }
    if (floats) TROUPE_RETURN_IF_ERROR(check_finite(d.images, features, "input (" + field_list(*xs) + ")", where));
  }
  if (values) TROUPE_RETURN_IF_ERROR(check_finite(d.targets, d.target_width, "target value ('" + yf.name + "')", where));
  return d;
}

namespace {

// The built-in Fashion-MNIST, which takes none of the options that describe a --data dataset.
Expected<TrainData> builtin_train_data(const DataOptions& o) {
  if (!o.normalize.empty() && o.normalize != "none")
    return invalid_argument("--normalize applies to --data; the built-in dataset is fed as it is (pixels / 255)");
  if (o.loss != "xent") return invalid_argument("--loss " + o.loss + " applies to --data; the built-in dataset holds classes");
  if (o.seq_len > 0) return invalid_argument("--seq-len applies to a token stream given with --data");
  if (o.stream) return invalid_argument("--stream applies to --data; the built-in dataset is small and kept in memory");
  auto train = cached_fashion_mnist(o.dataset_dir, Split::train);
  if (!train.ok()) return train.status().with_context("loading the training set");
  auto test = cached_fashion_mnist(o.dataset_dir, Split::test);
  if (!test.ok()) return test.status().with_context("loading the test set");
  TrainData out;
  out.train = *train;
  out.test = *test;
  out.description = "fashion-mnist (" + o.dataset_dir + ")";
  return out;
}

// The table a model is evaluated on, when there is one, and where it came from (for messages).
struct ValidationTable {
  std::optional<Table> table;
  std::string from;
};

// The validation table: --val, else the dataset's own val or test split.
Expected<ValidationTable> validation_table(const DataOptions& o, const data::SpecOptions& so,
                                           const data::OpenedDataset& opened) {
  ValidationTable val;
  if (!o.val.empty()) {
    auto v = data::open_dataset(o.val, so);
    if (!v.ok()) return v.status().with_context("--val");
    auto t = training_split(*v, o.val);
    if (!t.ok()) return t.status();
    val.table = std::move(*t);
    val.from = o.val;
  } else {
    for (const char* name : {"val", "test"}) {
      auto it = opened.splits.find(name);
      if (it != opened.splits.end() && opened.splits.size() > 1) {  // (a lone split is the training one)
        val.table = it->second;
        val.from = o.data + " (split " + name + ")";
        break;
      }
    }
  }
  return val;
}

// --seq-len: next-token windows over a token stream.
Expected<TrainData> token_train_data(const DataOptions& o, const data::OpenedDataset& opened, const Table& train,
                                     const ValidationTable& val) {
  if (o.loss != "xent") return invalid_argument("--seq-len trains next-token classes: --loss mse does not apply");
  if (!o.normalize.empty() && o.normalize != "none")
    return invalid_argument("--normalize with --seq-len: token ids are classes, not values to normalise");
  // The tokenizer's pieces when the dataset names one (troupe data tokenize); every byte for
  // text:FILE (a byte-level model reads any text).
  int min_vocab = o.data.rfind("text:", 0) == 0 ? 256 : 0;
  if (!opened.tokenizer.empty()) {
    auto tokenizer = data::Tokenizer::load(opened.tokenizer);
    if (!tokenizer.ok()) return tokenizer.status().with_context("--data " + o.data + ": its dataset.yaml's tokenizer");
    min_vocab = tokenizer->vocab();
  }
  auto w = token_window_data(train, val.table ? &*val.table : nullptr, o, val.from, min_vocab);
  if (!w.ok()) return w.status();
  TrainData out;
  out.train = std::make_shared<const Dataset>(std::move(w->train));
  out.test = std::make_shared<const Dataset>(std::move(w->test));
  out.description = o.data + ": " + w->description;
  return out;
}

// Checks that the validation table reads like the training one: the same inputs (type and shape)
// and a target of the same kind. Text labels are re-indexed to the training set's classes; numeric
// ones raise *classes to cover the validation set's largest label.
Status match_validation(const Field& y, const std::vector<const Field*>& xs, bool values, ValidationTable& val,
                        int* classes) {
  auto vy = pick_target(*val.table, y.name, val.from);
  if (!vy.ok()) return vy.status();
  for (const Field* f : xs) {
    const Field* v = val.table->find(f->name);
    if (!v) return invalid_argument(val.from + ": no field '" + f->name + "' (an input of the training set)");
    if (v->array.type != f->array.type || v->array.example_shape() != f->array.example_shape())
      return invalid_argument(val.from + ": field '" + f->name + "' is " +
                              data::describe(v->array.type, v->array.example_shape()) + " (" + v->source +
                              "), the training set's is " + data::describe(f->array.type, f->array.example_shape()) +
                              " (" + f->source + "): they would be read differently");
  }
  if (values) {
    if ((*vy)->array.example_shape() != y.array.example_shape())
      return invalid_argument(val.from + ": the target '" + (*vy)->name + "' is " +
                              data::describe((*vy)->array.type, (*vy)->array.example_shape()) +
                              ", the training set's is " + data::describe(y.array.type, y.array.example_shape()));
  } else if (y.classes.empty() && !(*vy)->classes.empty())
    return invalid_argument(val.from + ": the validation set's labels are text (" + data::join((*vy)->classes) +
                            "), the training set's are numbers");
  if (!values && !y.classes.empty()) {
    if ((*vy)->classes.empty())
      return invalid_argument(val.from + ": the training set's labels are text (" + data::join(y.classes) +
                              "), the validation set's are numbers");
    auto remapped = remap_classes(**vy, y, val.from);
    if (!remapped.ok()) return remapped.status();
    for (Field& f : val.table->fields)
      if (f.name == remapped->name) f = std::move(*remapped);
  } else if (!values) {
    auto vhi = max_label(**vy, val.from);
    if (!vhi.ok()) return vhi.status();
    *classes = std::max<int>(*classes, static_cast<int>(*vhi + 1));
  }
  return {};
}

// The set evaluated on: the validation table's, else a seeded share (--val-fraction) split off
// *train, which keeps the rest. val.from then says which share it is.
Expected<Dataset> evaluation_set(const DataOptions& o, ValidationTable& val, const std::vector<std::string>& input_names,
                                 const std::string& target, int classes, bool values, Dataset* train) {
  if (val.table) {
    auto t = to_dataset(*val.table, input_names, target, classes, val.from, values);
    if (!t.ok()) return t.status();
    if (t->features() != train->features())
      return invalid_argument(val.from + ": " + std::to_string(t->features()) + " input values per example, the training set has " +
                              std::to_string(train->features()));
    return std::move(*t);
  }
  if (!(o.val_fraction > 0 && o.val_fraction < 1))
    return invalid_argument("--val-fraction " + std::to_string(o.val_fraction) + " is not in (0, 1), and " + o.data +
                            " has no val or test split (or give --val SPEC)");
  auto [tr, va] = split_fraction(*train, o.val_fraction, o.seed);
  if (va.count == 0 || tr.count == 0)
    return invalid_argument(o.data + ": --val-fraction " + std::to_string(o.val_fraction) + " of " +
                            std::to_string(train->count) + " examples leaves an empty set");
  *train = std::move(tr);
  Dataset test = materialize(va);
  val.from = std::to_string(o.val_fraction) + " of the training split (seeded" + (values ? ")" : ", stratified)");
  return test;
}

}  // namespace

Expected<TrainData> load_train_data(const DataOptions& o) {
  if (o.data.empty()) return builtin_train_data(o);
  data::SpecOptions so;
  so.target = o.target;
  so.token_dtype = o.token_dtype;
  auto opened = data::open_dataset(o.data, so);
  if (!opened.ok()) return opened.status().with_context("--data");
  const std::string target = o.target.empty() ? opened->target : o.target;
  auto train_table = training_split(*opened, o.data);
  if (!train_table.ok()) return train_table.status();
  auto val = validation_table(o, so, *opened);
  if (!val.ok()) return val.status();
  if (o.loss != "xent" && o.loss != "mse") return invalid_argument("--loss " + o.loss + ": xent or mse");
  if (o.seq_len > 0) return token_train_data(o, *opened, *train_table, *val);
  const bool values = o.loss == "mse";
  auto y = pick_target(*train_table, target, o.data);
  if (!y.ok()) return y.status();
  int classes = 0;
  if (!values) {
    auto hi = max_label(**y, o.data);
    if (!hi.ok()) return hi.status();
    classes = (*y)->classes.empty() ? static_cast<int>(*hi + 1) : static_cast<int>((*y)->classes.size());
  }
  // The inputs by name from the training table: the validation set is read the same way, field by
  // field, whatever order its file lists them in.
  auto xs = pick_inputs(*train_table, o.inputs, *y, o.data);
  if (!xs.ok()) return xs.status();
  std::vector<std::string> input_names;
  for (const Field* f : *xs) input_names.push_back(f->name);
  if (val->table) TROUPE_RETURN_IF_ERROR(match_validation(**y, *xs, values, *val, &classes));
  auto train = to_dataset(*train_table, input_names, (*y)->name, classes, o.data, values, o.stream);
  if (!train.ok()) return train.status();
  auto norm = make_normalization(o.normalize, *xs);
  if (!norm.ok()) return norm.status();
  auto test = evaluation_set(o, *val, input_names, (*y)->name, classes, values, &*train);
  if (!test.ok()) return test.status();
  if (!norm->empty()) {  // the training split's statistics, on both sets alike
    for (Dataset* d : {&*train, &*test}) {
      d->normalization = norm->to_json();
      if (d->stream) d->stream = d->stream->normalized(*norm);
      for (int64_t i = 0; !d->stream && i < d->count; ++i) norm->apply(d->images.data() + i * d->features());
    }
  }
  const std::string target_text = values ? std::to_string(train->target_width) + " value(s), --loss mse"
                                         : std::to_string(classes) + " classes";
  TrainData out;
  out.description = o.data + ": " + std::to_string(train->count) + " training examples" +
                    (o.stream ? " (streamed from the files)" : "") + ", inputs " + field_list(*xs) +
                    (norm->empty() ? "" : ", normalised (" + o.normalize + ")") + ", target " + (*y)->name + " (" +
                    target_text + "); evaluated on " +
                    std::to_string(test->count) + " from " + val->from;
  out.train = std::make_shared<const Dataset>(std::move(*train));
  out.test = std::make_shared<const Dataset>(std::move(*test));
  return out;
}

}  // namespace troupe
