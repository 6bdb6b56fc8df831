// The trainer API: what a user implements to train a model on troupe, and the one macro that names
// it. This header and what it includes are installed (include/troupe/...) for user libraries.
//
// Division of labour. The user's Trainer says what the model is: which parameter blocks it has and
// how they start (setup), the loss and gradients of a batch (forward_backward), and the loss and
// correct count of a batch without gradients (evaluate). The runtime owns everything else: one flat
// f32 parameter buffer and one flat gradient buffer of the same layout (so optimizers and all-reduce
// each make one pass over contiguous memory), their initialisation from the job's seed (the same on
// every replica), the optimizer and learning-rate schedule, gradient synchronisation, data sharding
// and batching, checkpoints and metrics.
//
// A minimal trainer:
//
//   class LogReg : public troupe::Trainer {
//    public:
//     troupe::Status setup(const troupe::TrainerContext& ctx, troupe::ParameterSpace& space) override {
//       w_ = space.declare("w", {ctx.data.features, ctx.data.classes}, troupe::Init::zeros());
//       b_ = space.declare("b", {ctx.data.classes}, troupe::Init::zeros());
//       return {};
//     }
//     troupe::Expected<troupe::BatchStats> forward_backward(const troupe::Batch& batch,
//         const troupe::Parameters& params, troupe::Gradients& grads) override { ... }
//     troupe::Expected<troupe::BatchStats> evaluate(const troupe::Batch& batch,
//         const troupe::Parameters& params) override { ... }
//    private:
//     troupe::Param w_, b_;
//   };
//   TROUPE_REGISTER_TRAINER("logreg", LogReg);
//
// Overlapping gradient synchronisation with backward (optional): as soon as a block's gradient is
// final, call `grads.ready(param)`; the runtime may then all-reduce it (in buckets of blocks, like
// PyTorch DDP) while forward_backward goes on computing earlier layers. Announce blocks as backward
// finishes them (any order is correct; the runtime's buckets follow reverse declaration order, the
// usual order of backward, so that order overlaps most), and neither read nor write a block's
// gradient after announcing it. Blocks never announced are synchronised after forward_backward
// returns, so a trainer that never calls ready() is correct, only without overlap.
//
// Build it as a shared library against the installed troupe (find_package(troupe) and link
// troupe::trainer_api, or pkg-config troupe); troupe loads it with `--lib` and refuses a library
// built against another troupe version (trainers/library/trainer_library.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/version.h"
#include "data/schema.h"

// Bumped whenever a type of this header changes layout or a virtual function is added, removed or
// reordered; with the troupe version it is what a library is checked against before it is used.
#define TROUPE_TRAINER_ABI 9  // 2: Gradients is a class with ready(); 3: LayerModel, views of a range;
                              // 4: mixed precision (TrainerContext::precision, Batch::loss_scale);
                              // 5: the data's schema and fields by name, targets of any width,
                              //    required_fields(), predict(), transform_example()
                              // 6: LayerModel::forward_layer_kept / backward_layer_kept, computes_in(),
                              //    LayerInfo::shared
                              // 7: LayerModel::scores_values() / output_loss_values() (value targets),
                              //    views with extra segments (FlatSegment: tied blocks across stages)
                              // 8: blocks declared with their starting values (Init::Kind::given,
                              //    ParamBlock::values: a PyTorch module's own initialisation)
                              // 9: state blocks (ParameterSpace::declare_state, ParamBlock::state: a
                              //    BatchNorm's running statistics kept with the parameters)

namespace troupe {

// ---- what a trainer is given ----

// The job's key=value settings for the trainer (`troupe train --trainer-arg hidden=256,128`), with
// typed getters. A value that does not parse is invalid_argument naming the key and the value.
class JobConfig {
 public:
  JobConfig() = default;
  explicit JobConfig(std::map<std::string, std::string> values) : values_(std::move(values)) {}

  // Parses "key=value" items; an item without '=' or with an empty key is invalid_argument.
  static Expected<JobConfig> parse(const std::vector<std::string>& items);

  void set(const std::string& key, const std::string& value) { values_[key] = value; }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const std::map<std::string, std::string>& values() const { return values_; }

  // Each returns `fallback` when the key is absent.
  std::string get(const std::string& key, const std::string& fallback = "") const;
  Expected<int64_t> get_int(const std::string& key, int64_t fallback) const;
  Expected<double> get_double(const std::string& key, double fallback) const;
  // "256,128" -> {256, 128}; "" -> {}.
  Expected<std::vector<int64_t>> get_int_list(const std::string& key, const std::vector<int64_t>& fallback) const;

 private:
  std::map<std::string, std::string> values_;
};

// ---- the data ----

// The schema of the examples (ValueType, FieldSpec, DataSpec) and the batch a trainer is fed
// (FieldView, Batch) are the data layer's: data/schema.h.

// A field a trainer needs (Trainer::required_fields): the runtime refuses a dataset without it
// before anything starts, naming the field and the type it should have.
struct FieldNeed {
  std::string name;
  std::vector<ValueType> types;  // accepted types as fed (empty: any)
  int rank = -1;                 // the per-example rank it must have (-1: any)
};

struct TrainerContext {
  int rank = 0;        // this replica, 0 .. world_size-1
  int world_size = 1;  // replicas training together (1 for a local job)
  Device device;       // where the parameter, gradient and batch buffers live (the CPU for now)
  DataSpec data;
  uint64_t seed = 1;   // the job's seed; parameters are initialised from it by the runtime
  JobConfig config;
  // The compute precision (`--precision`): f32, or bf16 / f16 with the parameters kept in f32 (the
  // master weights) — only for a trainer whose supports_precision() says yes.
  DType precision = DType::f32;
};

// ---- parameters ----

// How the runtime fills a parameter block before the first step. Blocks are filled in declaration
// order from one random stream seeded with the job's seed, so every replica starts identical. A
// block declared with its values (given, ABI 8) starts from them and draws nothing from the stream.
struct Init {
  enum class Kind : uint8_t { zeros, constant, uniform, normal, given };
  Kind kind = Kind::zeros;
  float a = 0;  // constant: the value; uniform: the bound (values in [-a, a)); normal: the std deviation
  static Init zeros() { return {Kind::zeros, 0}; }
  static Init constant(float value) { return {Kind::constant, value}; }
  static Init uniform(float bound) { return {Kind::uniform, bound}; }
  static Init normal(float stddev) { return {Kind::normal, stddev}; }
};

// A declared parameter block: where it sits in the flat buffers.
struct Param {
  int index = -1;     // declaration order
  size_t offset = 0;  // in floats, from the start of the flat buffer
  size_t numel = 0;
};

struct ParamBlock {
  std::string name;
  std::vector<int64_t> shape;
  Init init;
  Param param;
  std::vector<float> values;  // Init::Kind::given: the block's starting values (ABI 8)
  bool state = false;         // model state, not trained (ParameterSpace::declare_state, ABI 9)
};

// Collects the blocks a trainer declares in setup(). Blocks are laid out back to back, in
// declaration order, in one flat buffer of size() floats.
class ParameterSpace {
 public:
  // Declares a block; dimensions must be > 0 and the name unique. A bad declaration is remembered and
  // reported by the runtime after setup() returns (status()), so setup code can stay linear.
  Param declare(const std::string& name, const std::vector<int64_t>& shape, Init init);
  // Declares a block that starts from `values` (as many as the shape holds; the same on every
  // replica: e.g. a PyTorch module's own initialisation), ABI 8.
  Param declare(const std::string& name, const std::vector<int64_t>& shape, std::vector<float> values);
  // Declares a block of model state that is not trained (ABI 9): a BatchNorm's running mean and
  // variance, its batch count. It sits in the flat parameter buffer like a parameter, so --save,
  // checkpoints, --resume and --init-from keep it under its name, and starts from `values`. Its
  // slot in the gradient buffer carries the CHANGE the step makes to it (new value - value in
  // `params`, times Batch::loss_scale as every gradient): the runtime averages that change over
  // the replicas as it averages gradients (so replicas stay identical) and adds it to the block
  // outside the optimizer — no learning rate, momentum, weight decay or clipping. A trainer that
  // writes nothing there leaves the block as it is. An empty shape is a scalar (one float).
  Param declare_state(const std::string& name, const std::vector<int64_t>& shape, std::vector<float> values);
  const std::vector<ParamBlock>& blocks() const { return blocks_; }
  bool has_state() const;  // whether any block is state
  size_t size() const { return size_; }
  Status status() const { return status_; }

 private:
  std::vector<ParamBlock> blocks_;
  size_t size_ = 0;
  Status status_;
};

// Views of the runtime's flat buffers, addressed by the Params that declare() returned. Trainers must
// not keep the pointers past the call they were given in: the runtime may move the buffers.
// A view may hold only a range [first, first + size) of the flat layout (a pipeline stage holds
// only its layers' blocks): then only the Params inside it may be looked up, and data() is the
// start of the range.
//
// A view may also hold blocks outside its range, kept apart (ABI 7): a pipeline stage's copies of
// tied blocks another stage owns (LayerInfo::shared). Looking such a Param up finds its segment;
// data() and size() stay the range's.
template <class T>
struct FlatSegment {
  T* data = nullptr;
  size_t first = 0;  // offset in the whole flat layout
  size_t size = 0;
};

template <class T>
class FlatBuffer {
 public:
  FlatBuffer(T* data, size_t size, size_t first = 0) : data_(data), size_(size), first_(first) {}
  // With `extras` segments besides the range (kept alive by the caller while the view is used).
  FlatBuffer(T* data, size_t size, size_t first, const FlatSegment<T>* extras, int extra_count)
      : data_(data), size_(size), first_(first), extras_(extras), extra_count_(extra_count) {}
  T* operator[](const Param& p) const {
    for (int i = 0; i < extra_count_; ++i)
      if (p.offset >= extras_[i].first && p.offset < extras_[i].first + extras_[i].size)
        return extras_[i].data + (p.offset - extras_[i].first);
    return data_ + (p.offset - first_);
  }
  T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t first() const { return first_; }  // offset of data() in the whole flat layout

 private:
  T* data_;
  size_t size_;
  size_t first_;
  const FlatSegment<T>* extras_ = nullptr;
  int extra_count_ = 0;
};
using Parameters = FlatBuffer<const float>;

// Where Gradients::ready() reports to: implemented by the runtime (the gradient synchronisation of
// a `sync` job); trainers only call ready().
class GradientHook {
 public:
  virtual void ready(const Param& p) = 0;

 protected:
  ~GradientHook() = default;
};

// The gradient buffer handed to forward_backward: all zeros when it is called.
class Gradients {
 public:
  Gradients(float* data, size_t size, GradientHook* hook = nullptr, size_t first = 0)
      : data_(data), size_(size), hook_(hook), first_(first) {}
  // With segments besides the range, as FlatBuffer's (ABI 7).
  Gradients(float* data, size_t size, GradientHook* hook, size_t first, const FlatSegment<float>* extras,
            int extra_count)
      : data_(data), size_(size), hook_(hook), first_(first), extras_(extras), extra_count_(extra_count) {}
  float* operator[](const Param& p) const {
    for (int i = 0; i < extra_count_; ++i)
      if (p.offset >= extras_[i].first && p.offset < extras_[i].first + extras_[i].size)
        return extras_[i].data + (p.offset - extras_[i].first);
    return data_ + (p.offset - first_);
  }
  float* data() const { return data_; }
  size_t size() const { return size_; }
  size_t first() const { return first_; }  // as FlatBuffer::first

  // Announces that p's gradient is final for this call: the runtime may start synchronising it now
  // (in place), so the trainer must not read or write it again before forward_backward returns. Optional (see the top
  // of this header); a no-op where nothing synchronises. An unknown Param, or one announced twice
  // in one call, fails the step after forward_backward returns with an error naming the block.
  void ready(const Param& p) const {
    if (hook_) hook_->ready(p);
  }

 private:
  float* data_;
  size_t size_;
  GradientHook* hook_;
  size_t first_;
  const FlatSegment<float>* extras_ = nullptr;
  int extra_count_ = 0;
};

// ---- what a trainer is fed and returns ----

struct BatchStats {
  float loss = 0;        // mean loss over the batch
  int64_t correct = -1;  // examples predicted right; -1 when the model does not classify
};

// ---- pipeline parallelism (optional): the model as a chain of layers ----
//
// A trainer whose model is a chain of layers (each layer's output the next one's input, the last
// one's output scored by a loss) can be split into pipeline stages (`--strategy pipeline`): each
// stage holds a run of consecutive layers, their parameters, gradients and optimizer state only,
// and activations travel between stages over the data plane. The trainer says where the layer
// boundaries are by returning a LayerModel from Trainer::layers().

struct LayerInfo {
  std::string name;
  // The blocks this layer owns. Declare each layer's blocks together and the layers in order, so a
  // run of layers owns one contiguous range of the flat buffer (checked: a clear error otherwise).
  std::vector<Param> params;
  int64_t out_features = 0;      // width of the layer's output per example (> 0)
  double flops_per_example = 0;  // forward + backward; 0: estimated as 6 x its parameter count
  // Blocks another (earlier) layer owns that this one reads too and ADDS gradients into: tied
  // weights, e.g. a language model's head that is its token embedding (ABI 6). The layer's
  // forward_layer/backward_layer then get views that hold those blocks too (look blocks up by
  // Param as always). `--shard parameters` keeps the owner's layer gathered from its forward until
  // its own backward; a pipeline stage holds a copy of a shared block another stage owns, kept
  // equal to the owner's every step (trainers/pipeline/tied_blocks.h, ABI 7).
  std::vector<Param> shared;
};

class LayerModel {
 public:
  // The layers in order, valid after setup(); at least one.
  virtual std::vector<LayerInfo> layer_infos() const = 0;

  // out [rows x out_features(l)] = layer l of in [rows x in_features(l)], where in_features(0) is
  // the data's features and in_features(l) = out_features(l - 1). `params` may hold only the
  // stage's range: look blocks up by Param.
  virtual Status forward_layer(int layer, const float* in, int64_t rows, const Parameters& params, float* out) = 0;

  // The backward of forward_layer for the same rows: `in` and `out` are what forward_layer read and
  // wrote (anything else it needs must be recomputed from them), `dout` the loss gradient with
  // respect to `out` (scratch: the layer may overwrite it). ADDS the layer's parameter gradients
  // into `grads` (the runtime sums micro-batches this way) and writes the gradient with respect to
  // `in` into `din` [rows x in_features(l)] unless din is null (the first layer's is never needed).
  virtual Status backward_layer(int layer, const float* in, const float* out, float* dout, int64_t rows,
                                const Parameters& params, Gradients& grads, float* din) = 0;

  // The mean loss (and correct count) of the last layer's output `out` for `labels`; when `dout` is
  // not null it receives the gradient of that mean loss with respect to `out`.
  virtual Expected<BatchStats> output_loss(const float* out, const int32_t* labels, int64_t rows, float* dout) = 0;

  // Value targets (a regression: DataSpec::classes == 0, DataSpec::target_width values per
  // example), ABI 7. Whether the layers score them — the runtime refuses a layer-by-layer strategy
  // (pipelines, `--shard parameters`) on such data when not — and the mean loss of `out` for
  // `targets` [rows x target_width], its gradient into `dout` when not null, as output_loss.
  virtual bool scores_values() const { return false; }
  virtual Expected<BatchStats> output_loss_values(const float* out, const float* targets, int64_t rows, float* dout) {
    (void)out;
    (void)targets;
    (void)rows;
    (void)dout;
    return invalid_argument("these layers score class targets only (LayerModel::scores_values() is false)");
  }

  // Kept activations (optional, ABI 6). When training, the runtime calls forward_layer_kept and
  // later backward_layer_kept for the same layer, `slot`, in, out, rows and parameter values: a layer
  // whose backward needs more of its forward than `in` and `out` (a transformer block's attention
  // probabilities, a conv block's pre-pooling output) may keep that under (layer, slot) rather than
  // compute it again. A slot is one micro-batch in flight (0 <= slot < kKeptSlots; a pipeline stage has
  // several, one step of a sharded job one); a later forward of the same (layer, slot) replaces what
  // was kept, and a forward may have no backward (a step given up after an error). forward_layer
  // and backward_layer stay the stateless pair (evaluation, prediction). By default these call them:
  // nothing kept, backward recomputes.
  // Whether forward_layer / backward_layer compute in `p` (TrainerContext::precision) the way
  // Trainer::forward_backward does — rounding where it rounds, dout carrying Batch::loss_scale — so
  // a layer-by-layer strategy (`--shard parameters`) ends where the whole model's step does. f32
  // only by default (ABI 6).
  virtual bool computes_in(DType p) const { return p == DType::f32; }

  static constexpr int kKeptSlots = 64;
  virtual Status forward_layer_kept(int layer, int slot, const float* in, int64_t rows, const Parameters& params,
                                    float* out) {
    (void)slot;
    return forward_layer(layer, in, rows, params, out);
  }
  virtual Status backward_layer_kept(int layer, int slot, const float* in, const float* out, float* dout,
                                     int64_t rows, const Parameters& params, Gradients& grads, float* din) {
    (void)slot;
    return backward_layer(layer, in, out, dout, rows, params, grads, din);
  }

 protected:
  ~LayerModel() = default;
};

// ---- the interface ----

class Trainer {
 public:
  virtual ~Trainer() = default;

  // Called once per replica before training: read the config, declare the parameter blocks. Errors
  // (a bad config value, a data shape the model cannot take) stop the job with the message.
  virtual Status setup(const TrainerContext& ctx, ParameterSpace& space) = 0;

  // The mean loss of `batch` and its gradient with respect to every parameter, written into `grads`
  // (zero on entry; write or add), announcing finished blocks with grads.ready() if it can. Called once
  // per step (per micro-batch when accumulating); the runtime then synchronises what is left of the
  // gradients and applies the optimizer. A non-finite loss is caught by the runtime.
  virtual Expected<BatchStats> forward_backward(const Batch& batch, const Parameters& params,
                                                Gradients& grads) = 0;

  // The mean loss (and correct count) of `batch` without gradients: test-set evaluation.
  virtual Expected<BatchStats> evaluate(const Batch& batch, const Parameters& params) = 0;

  // Shown in results and logs after the trainer's name, e.g. "784-256-128-10".
  virtual std::string describe() const { return {}; }

  // Whether the trainer computes in `p` (TrainerContext::precision) and honours Batch::loss_scale;
  // the runtime refuses `--precision bf16|f16` for a trainer that says no. f32 only by default.
  virtual bool supports_precision(DType p) const { return p == DType::f32; }

  // The model as a chain of layers, for pipeline parallelism (see LayerModel above); null (the
  // default) when the trainer cannot be split, and `--strategy pipeline` refuses it saying so.
  // Owned by the trainer; called after setup().
  virtual LayerModel* layers() { return nullptr; }

  // Augmentation (optional): whether transform_example() changes training inputs (false: never called).
  virtual bool transforms_inputs() const { return false; }
  // One training example's inputs (DataSpec::features f32, after conversion and normalisation)
  // changed in place — a random crop, a flip — drawing its randomness from `seed` alone, which the
  // runtime derives from (the job's seed, the epoch, the example), so runs, restarts and replays
  // see the same example. Called from the input pipeline's threads, several at once: it must not
  // change the trainer. Never called on evaluation or prediction data.
  virtual void transform_example(uint64_t seed, float* inputs) const {
    (void)seed;
    (void)inputs;
  }

  // The fields this trainer reads by name (Batch::field), given its settings: checked against the
  // dataset before setup(), so a dataset without them is refused at once, naming the field. None
  // by default (a trainer of Batch::inputs and the target takes any dataset its setup() accepts).
  virtual std::vector<FieldNeed> required_fields(const JobConfig& config) const {
    (void)config;
    return {};
  }

  // Prediction (`troupe predict`): values per example after setup(), 0 (the default) when the
  // trainer does not predict.
  virtual int64_t prediction_width() const { return 0; }
  // The model's outputs for `batch` (its inputs; the target may be absent): [size x
  // prediction_width()] f32 into `out` — logits for a classifier, values for a regression.
  virtual Status predict(const Batch& batch, const Parameters& params, float* out) {
    (void)batch;
    (void)params;
    (void)out;
    return invalid_argument("this trainer does not implement predict()");
  }
};

// ---- registration ----

using TrainerFactory = std::unique_ptr<Trainer> (*)();

// One registered trainer of a binary or library.
struct TrainerRegistration {
  const char* name;
  TrainerFactory factory;
};

// Adds a trainer to the registrations of the binary or library this is linked into (each shared
// library has its own list; the runtime reads it after checking the library's version). Used by
// TROUPE_REGISTER_TRAINER at load time; names must match [a-z0-9_.-]+ (checked when read).
struct TrainerRegistrar {
  TrainerRegistrar(const char* name, TrainerFactory factory);
};

namespace detail {
// The registrations of this binary or library so far, in registration order.
const std::vector<TrainerRegistration>& local_trainer_registrations();
}  // namespace detail

}  // namespace troupe

#define TROUPE_TRAINER_CONCAT_(a, b) a##b
#define TROUPE_TRAINER_CONCAT(a, b) TROUPE_TRAINER_CONCAT_(a, b)

// Registers `Class` (default-constructible, derived from troupe::Trainer) under `name`, a string
// literal, when the binary or library is loaded. Use at namespace scope in a .cc file.
#define TROUPE_REGISTER_TRAINER(name, Class)                                                    \
  static const ::troupe::TrainerRegistrar TROUPE_TRAINER_CONCAT(troupe_trainer_registrar_, __LINE__)( \
      name, []() -> std::unique_ptr<::troupe::Trainer> { return std::unique_ptr<::troupe::Trainer>(new Class()); })

// ---- the library's identity, read by the runtime before anything else ----

extern "C" {
// Plain C so it can be read from a library of any troupe version. Its layout never changes.
struct troupe_trainer_abi_info {
  uint32_t abi;                // TROUPE_TRAINER_ABI of the headers the library was built with
  const char* troupe_version;  // TROUPE_VERSION_STRING of those headers
};
}
// Exported by every library that registers a trainer (defined in troupe::trainer_api):
//   extern "C" const troupe_trainer_abi_info* troupe_trainer_abi(void);
//   extern "C" const std::vector<troupe::TrainerRegistration>* troupe_trainer_registrations(void);
#define TROUPE_TRAINER_ABI_SYMBOL "troupe_trainer_abi"
#define TROUPE_TRAINER_REGISTRATIONS_SYMBOL "troupe_trainer_registrations"
