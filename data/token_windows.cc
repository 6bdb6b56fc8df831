#include "data/token_windows.h"

#include <algorithm>
#include <memory>

#include "data/feed/streamed_inputs.h"

namespace troupe {

namespace {

constexpr int64_t kMaxVocab = int64_t{1} << 20;

Expected<const data::Field*> stream_field(const data::Table& t, const DataOptions& o, const std::string& where) {
  if (o.inputs.size() > 1) return invalid_argument(where + ": --seq-len reads one token stream; --inputs names " +
                                                   std::to_string(o.inputs.size()) + " fields");
  const data::Field* f = nullptr;
  if (!o.inputs.empty()) {
    f = t.find(o.inputs.front());
    if (!f) return invalid_argument(where + ": no field '" + o.inputs.front() + "' for --inputs (fields: " +
                                    data::join(t.names()) + ")");
  } else if (t.fields.size() == 1) {
    f = &t.fields.front();
  } else {
    return invalid_argument(where + ": --seq-len reads one token stream, and the data has fields " + data::join(t.names()) +
                            ": name the stream with --inputs");
  }
  if (!data::is_integer(f->array.type) || f->array.example_elements() != 1)
    return invalid_argument(where + ": '" + f->name + "' (" + f->source + ") is " +
                            data::describe(f->array.type, f->array.example_shape()) +
                            ": a token stream is a flat array of integer ids (u8, u16, u32, ...)");
  return f;
}

Expected<int64_t> max_id(const data::Field& f, const std::string& where) {
  int64_t hi = 0;
  for (int64_t i = 0; i < f.array.count(); ++i) {
    const double v = f.array.value(static_cast<size_t>(i));
    if (v < 0 || v >= static_cast<double>(kMaxVocab))
      return invalid_argument(where + ": token " + std::to_string(i) + " of '" + f.name + "' (" + f.source + ") is " +
                              std::to_string(static_cast<int64_t>(v)) + ", outside [0, " + std::to_string(kMaxVocab) + ")");
    hi = std::max(hi, static_cast<int64_t>(v));
  }
  return hi;
}

// The windows' dataset without their ids: count, shape, vocabulary and schema.
Expected<Dataset> window_shell(const data::Field& tokens, int64_t seq_len, int vocab, const std::string& where) {
  if (!data::is_integer(tokens.array.type) || tokens.array.example_elements() != 1)
    return invalid_argument(where + ": '" + tokens.name + "' is not a flat stream of integer token ids");
  if (seq_len < 1) return invalid_argument(where + ": --seq-len " + std::to_string(seq_len) + " must be at least 1");
  const int64_t n = tokens.array.count();
  const int64_t windows = n > 0 ? (n - 1) / seq_len : 0;
  if (windows < 1)
    return invalid_argument(where + ": '" + tokens.name + "' (" + tokens.source + ") holds " + std::to_string(n) +
                            " tokens, fewer than --seq-len " + std::to_string(seq_len) + " + 1: no window fits");
  Dataset d;
  d.count = windows;
  d.rows = 1;
  d.cols = static_cast<int>(seq_len);
  d.classes = vocab;
  d.target_width = seq_len;
  const auto stored = static_cast<ValueType>(tokens.array.type);
  d.schema = {FieldSpec{"tokens", ValueType::f32, stored, {seq_len}, false},
              FieldSpec{"targets", ValueType::i32, stored, {seq_len}, true}};
  return d;
}

}  // namespace

Expected<Dataset> token_windows(const data::Field& tokens, int64_t seq_len, int vocab, const std::string& where) {
  auto shell = window_shell(tokens, seq_len, vocab, where);
  if (!shell.ok()) return shell.status();
  Dataset d = std::move(*shell);
  const int64_t windows = d.count;
  d.images.resize(static_cast<size_t>(windows * seq_len));
  d.labels.resize(static_cast<size_t>(windows * seq_len));
  for (int64_t t = 0; t < windows * seq_len + 1; ++t) {
    const double v = tokens.array.value(static_cast<size_t>(t));
    if (v < 0 || v >= vocab)
      return invalid_argument(where + ": token " + std::to_string(t) + " of '" + tokens.name + "' (" + tokens.source +
                              ") is " + std::to_string(static_cast<int64_t>(v)) + ", outside the vocabulary [0, " +
                              std::to_string(vocab) + ")");
    if (t < windows * seq_len) d.images[static_cast<size_t>(t)] = static_cast<float>(v);
    if (t > 0) d.labels[static_cast<size_t>(t - 1)] = static_cast<int32_t>(v);
  }
  return d;
}

Expected<Dataset> streamed_token_windows(std::shared_ptr<const data::Table> table, size_t field, int64_t seq_len,
                                         int vocab, const std::string& where) {
  auto shell = window_shell(table->fields[field], seq_len, vocab, where);
  if (!shell.ok()) return shell.status();
  shell->stream = StreamedInputs::windows(std::move(table), field, seq_len);
  return shell;
}

Expected<WindowData> token_window_data(const data::Table& train, const data::Table* val, const DataOptions& o,
                                       const std::string& val_from, int min_vocab) {
  auto f = stream_field(train, o, o.data);
  if (!f.ok()) return f.status();
  auto hi = max_id(**f, o.data);
  if (!hi.ok()) return hi.status();
  const data::Field* vf = nullptr;
  if (val) {
    vf = val->find((*f)->name);
    if (!vf && val->fields.size() == 1) vf = &val->fields.front();
    if (!vf) return invalid_argument(val_from + ": no token stream '" + (*f)->name + "' (fields: " + data::join(val->names()) + ")");
    auto vhi = max_id(*vf, val_from);
    if (!vhi.ok()) return vhi.status();
    hi = std::max(*hi, *vhi);
  }
  const int vocab = std::max(static_cast<int>(*hi + 1), min_vocab);
  WindowData out;
  // --stream: the training windows read from the files as batches are cut (every id is below the
  // vocabulary: max_id read them all); the evaluation windows in memory.
  auto windows = o.stream ? streamed_token_windows(std::make_shared<const data::Table>(train),
                                                   static_cast<size_t>(*f - train.fields.data()), o.seq_len, vocab,
                                                   o.data)
                          : token_windows(**f, o.seq_len, vocab, o.data);
  if (!windows.ok()) return windows.status();
  out.train = std::move(*windows);
  std::string evaluated;
  if (vf) {
    auto v = token_windows(*vf, o.seq_len, vocab, val_from);
    if (!v.ok()) return v.status();
    out.test = std::move(*v);
    evaluated = val_from;
  } else {
    if (!(o.val_fraction > 0 && o.val_fraction < 1))
      return invalid_argument("--val-fraction " + std::to_string(o.val_fraction) + " is not in (0, 1), and " + o.data +
                              " has no val or test split (or give --val SPEC)");
    auto [tr, va] = split_fraction(out.train, o.val_fraction, o.seed);
    if (tr.count == 0 || va.count == 0)
      return invalid_argument(o.data + ": --val-fraction " + std::to_string(o.val_fraction) + " of " +
                              std::to_string(out.train.count) + " windows leaves an empty set");
    out.train = std::move(tr);
    out.test = materialize(va);  // (a view of streamed windows: read whole)
    evaluated = std::to_string(o.val_fraction) + " of the training windows (seeded)";
  }
  out.description = "'" + (*f)->name + "' (" + data::elem_name((*f)->array.type) + ", " +
                    std::to_string((*f)->array.count()) + " tokens, vocabulary " + std::to_string(vocab) +
                    ") in windows of " + std::to_string(o.seq_len) + ": " + std::to_string(out.train.count) +
                    " training windows" + (o.stream ? " (streamed from the files)" : "") + "; evaluated on " +
                    std::to_string(out.test.count) + " from " + evaluated;
  return out;
}

}  // namespace troupe
