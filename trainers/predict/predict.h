// `troupe predict` in one process: a saved model (trainers/setup/model_file.h) run over a dataset's
// examples, its outputs — logits of a classifier, values of a regression — written as an f32
// .npy of [rows, outputs] in the data's order. The trainer, its settings, the target's shape and
// the input normalisation come from the model file's metadata; the data is read the way its
// training data was (the same input fields, in order). When the data holds the target, a
// classifier's accuracy (or a regression's mean squared error) is reported beside rows/s.
//
// A language model (trained on --seq-len T windows: metadata troupe.seq_len) reads a token stream
// cut into its windows in order (window w = ids [wT, wT + T)): one row per window, its outputs the
// next-token logits after the window's last position; scored, the accuracy of that next token
// and the mean next-token cross-entropy over every position (PredictResult::loss, nats per token).
//
// A PredictSession is the model loaded once over the opened (mapped) data: any range of rows can
// be predicted from it, converting only those rows. `predict_local` runs it over every row; a
// prediction job's predictors (trainers/job/predict_worker.h) over the rows of the shards they
// claim. Batches start at multiples of batch_size from row 0 in both, so the outputs are the same
// bit for bit.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/table.h"
#include "trainers/setup/train_options.h"

namespace troupe {

struct PredictOptions {
  std::string model;      // the .safetensors file
  std::string data;       // --data SPEC
  std::string split;      // which split of it ("": the only one, else "test")
  std::vector<std::string> inputs;  // overrides the model's (troupe.inputs)
  std::string target;     // overrides the model's (troupe.target)
  std::string token_dtype = "u16";
  std::string out;        // the .npy written
  int64_t batch_size = 1024;
};

struct PredictResult {
  std::string model;       // "mlp 784-256-128-10 (235146 parameters)"
  int64_t rows = 0, outputs = 0;
  double seconds = 0, rows_per_second = 0;
  double accuracy = -1;    // when the data has the classes
  double mse = -1;         // when the data has a regression's values
  double loss = -1;        // a language model's: mean next-token cross-entropy, nats per token
  std::string note;        // why the outputs were not scored although the data has a target
};

// What predicting some rows scored against the data's target (sums, so ranges add up).
struct PredictScore {
  int64_t right = 0;       // classifier: rows whose largest output is the label
  int64_t scored = 0;      // rows scored
  double squared = 0;      // regression: sum of squared errors over every output
  double loss_sum = 0;     // language model: sum over windows of their mean next-token loss
};

class PredictSession {
 public:
  // Reads the model, opens the data (mapped: nothing is converted yet), sets the trainer up and
  // loads the parameters. Errors name the file, the split, the field or the metadata at fault.
  static Expected<std::unique_ptr<PredictSession>> open(const PredictOptions& o);
  ~PredictSession();

  int64_t rows() const;
  int64_t width() const;          // outputs per row
  const std::string& model() const;
  bool scored() const;            // the data holds the target
  bool values() const;            // a regression (scores are squared errors)
  const std::string& note() const;

  // Predicts rows [first, first + rows) into `out` (rows x width() floats) in batches of
  // batch_size that start at `first`, adding to `score`. `first` should be a multiple of
  // batch_size for outputs equal to one pass over every row. invalid_argument outside the data.
  Status run(int64_t first, int64_t rows, float* out, PredictScore* score,
             const std::function<void(int64_t done)>& progress = {});

  // The accuracy / mean squared error of `score` (-1 when not that kind of model or not scored).
  double accuracy(const PredictScore& score) const;
  double mse(const PredictScore& score) const;
  double loss(const PredictScore& score) const;  // a language model's (-1 otherwise)
  bool windows() const;                          // a language model's windows are the rows

 private:
  struct State;
  explicit PredictSession(std::unique_ptr<State> s);
  // The trainer set up for st->spec, the model's parameters loaded: the session.
  static Expected<std::unique_ptr<PredictSession>> loaded(std::unique_ptr<State> st);
  static Expected<std::unique_ptr<PredictSession>> open_windows(std::unique_ptr<State> st, const data::Table& table,
                                                                int vocab);
  Status run_windows(int64_t first, int64_t rows, float* out, PredictScore* score,
                     const std::function<void(int64_t done)>& progress);
  std::unique_ptr<State> s_;
};

using PredictProgress = std::function<void(int64_t done, int64_t total)>;

Expected<PredictResult> predict_local(const PredictOptions& o, const PredictProgress& progress = {});

}  // namespace troupe
