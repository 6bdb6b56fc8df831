#include "models/cnn/cnn_cuda.h"

#include <map>
#include <string>
#include <utility>

#include "kernels/cuda/check.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/runtime.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/setup/trainer_setup.h"

#ifdef TROUPE_WITH_CUDNN
#include <spdlog/spdlog.h>

#include "kernels/cuda/conv_filter_grad.h"
#include "kernels/cuda/conv_ops.h"
#include "kernels/cuda/cudnn_conv.h"
#endif

namespace troupe {

namespace kc = kernels::cuda;

Expected<CnnCudaSetup> cnn_cuda_setup(const TrainOptions& options, DataSpec data) {
  TrainOptions o = options;
  o.model = "cnn";
  auto cpu = set_up_trainer(o, data, 0, 1);
  if (!cpu.ok()) return cpu.status();
  auto config = trainer_config(o);
  if (!config.ok()) return config.status();
  auto layout = CnnLayout::from_config(*config, data);
  if (!layout.ok()) return layout.status();
  // What the GPU path was measured on (2026-11-27); other images train on the CPU.
  if (layout->flip || layout->crop > 0)
    return invalid_argument("flip and crop augment in the CPU input pipeline; the GPU cnn does not: train without "
                            "them on the GPU, or with them on the CPU");
  if (layout->in_channels != 1 || layout->side() == 0)
    return invalid_argument("the GPU cnn takes square one-channel images; this data's are " + layout->to_string() +
                            ": train it on the CPU (without --device cuda)");
  CnnCudaSetup s;
  s.layout = *layout;
  std::map<std::string, size_t> offset;
  for (const ParamBlock& b : cpu->space.blocks()) offset[b.name] = b.param.offset;
  for (int l = 0; l < s.layout.layers(); ++l) {
    const bool conv = l < s.layout.conv_blocks();
    const std::string name = conv ? "conv" + std::to_string(l) : "dense" + std::to_string(l - s.layout.conv_blocks());
    if (!offset.count(name + ".w") || !offset.count(name + ".b"))
      return internal_error("the cnn trainer did not declare " + name + ".w and " + name + ".b");
    s.weight_offset.push_back(offset[name + ".w"]);
    s.bias_offset.push_back(offset[name + ".b"]);
  }
  s.initial.resize(cpu->space.size());
  init_parameters(cpu->space, o.seed, s.initial.data());
  return s;
}

#ifdef TROUPE_WITH_CUDNN
namespace {

// Workspace cuDNN's algorithms may use per convolution (the heuristics' first choices for these
// small images need far less).
constexpr size_t kWorkspaceLimit = size_t(256) << 20;
// How long growing the workspace waits for the convolutions queued before it (they may use the old one).
constexpr double kWorkspaceWaitSeconds = 120;

class CnnCuda final : public CudaModel {
 public:
  CnnCuda(const CnnCudaSetup& setup, const kc::CublasHandle& blas, bool tf32)
      : layout_(setup.layout), w_(setup.weight_offset), b_(setup.bias_offset), blas_(blas), tf32_(tf32) {}

  Status reserve(int rows) override {
    if (rows <= capacity_) return {};
    if (!cudnn_.get()) TROUPE_RETURN_IF_ERROR(cudnn_.create(blas_.stream()));
    const int layers = layout_.layers(), blocks = layout_.conv_blocks();
    for (auto* v : {&outs_, &douts_}) {
      v->clear();
      v->resize(layers);
    }
    conv_.clear();
    conv_.resize(blocks);
    argmax_.clear();
    argmax_.resize(blocks);
    for (int l = 0; l < layers; ++l) {
      const size_t n = static_cast<size_t>(rows) * layout_.out_features(l);
      TROUPE_RETURN_IF_ERROR(outs_[l].allocate(n, "cnn activations"));
      TROUPE_RETURN_IF_ERROR(douts_[l].allocate(n, "cnn activation gradients"));
    }
    for (int b = 0; b < blocks; ++b) {
      const kernels::cpu::Conv2dShape c = layout_.conv(b, rows);
      TROUPE_RETURN_IF_ERROR(conv_[b].allocate(static_cast<size_t>(rows) * c.out_channels * c.pixels(),
                                               "cnn convolution outputs"));
      TROUPE_RETURN_IF_ERROR(argmax_[b].allocate(static_cast<size_t>(rows) * layout_.out_features(b),
                                                 "cnn pooling arg-max"));
      auto p = plan(b, rows);
      if (!p.ok()) return p.status();
    }
    capacity_ = rows;
    return {};
  }

  Status forward_backward(const float* params, const float* x, const int32_t* labels, int batch, float* grads,
                          float* loss_acc, unsigned long long* correct_acc) override {
    TROUPE_RETURN_IF_ERROR(forward(params, x, batch));
    cudaStream_t stream = blas_.stream();
    const int last = layout_.layers() - 1, blocks = layout_.conv_blocks();
    float* d = douts_[last].get();
    TROUPE_RETURN_IF_ERROR(
        kc::softmax_xent(outs_[last].get(), labels, batch, layout_.classes, d, loss_acc, correct_acc, stream));
    TROUPE_RETURN_IF_ERROR(kc::bias_grad(d, batch, layout_.classes, grads + b_[last], stream));
    // The dense head, as MlpCuda: a hidden layer's ReLU backward is fused with its bias gradient.
    for (int l = last; l >= blocks; --l) {
      const DenseLayer dl = layout_.dense(l - blocks);
      TROUPE_RETURN_IF_ERROR(
          kc::matmul(blas_, true, false, dl.in, dl.out, batch, 1.0f, outs_[l - 1].get(), d, 0.0f, grads + w_[l]));
      float* dprev = douts_[l - 1].get();
      TROUPE_RETURN_IF_ERROR(
          kc::matmul(blas_, false, true, batch, dl.in, dl.out, 1.0f, d, params + w_[l], 0.0f, dprev));
      if (l - 1 >= blocks) {
        TROUPE_RETURN_IF_ERROR(
            kc::relu_backward_bias_grad(dprev, outs_[l - 1].get(), batch, dl.in, grads + b_[l - 1], stream));
      }
      d = dprev;
    }
    // The conv blocks: the pooled output's gradient back through pooling and ReLU (into the
    // convolution's output buffer, no longer needed), then the convolution's three gradients.
    for (int b = blocks - 1; b >= 0; --b) {
      const kernels::cpu::Conv2dShape c = layout_.conv(b, batch);
      auto p = plan(b, batch);
      if (!p.ok()) return p.status();
      float* dconv = conv_[b].get();
      TROUPE_RETURN_IF_ERROR(
          kc::max_pool_relu_backward(douts_[b].get(), outs_[b].get(), argmax_[b].get(), layout_.pool(b, batch), dconv,
                                     stream));
      TROUPE_RETURN_IF_ERROR(kc::channel_sums(dconv, batch, c.out_channels, c.pixels(), grads + b_[b], stream));
      const float* in = b == 0 ? x : outs_[b - 1].get();
      if (tf32_) {
        TROUPE_RETURN_IF_ERROR((*p)->backward_filter(cudnn_, in, dconv, grads + w_[b], workspace_.get(),
                                                     workspace_.bytes()));
      } else {  // strict f32: one cuBLAS product, several times cuDNN's strict algorithm (conv_filter_grad.h)
        TROUPE_RETURN_IF_ERROR(
            kc::conv_filter_grad(blas_, c, in, dconv, grads + w_[b], workspace_.get(), workspace_.bytes()));
      }
      if (b > 0) {
        TROUPE_RETURN_IF_ERROR((*p)->backward_data(cudnn_, params + w_[b], dconv, douts_[b - 1].get(),
                                                   workspace_.get(), workspace_.bytes()));
      }
    }
    return {};
  }

  Status evaluate(const float* params, const float* x, const int32_t* labels, int batch, float* loss_acc,
                  unsigned long long* correct_acc) override {
    TROUPE_RETURN_IF_ERROR(forward(params, x, batch));
    return kc::softmax_xent(outs_.back().get(), labels, batch, layout_.classes, nullptr, loss_acc, correct_acc,
                            blas_.stream());
  }

 private:
  Status forward(const float* params, const float* x, int batch) {
    if (batch < 1 || batch > capacity_) {
      return invalid_argument("CnnCuda: a batch of " + std::to_string(batch) + " rows; " +
                              std::to_string(capacity_) + " reserved (call reserve() first)");
    }
    cudaStream_t stream = blas_.stream();
    const float* in = x;
    for (int b = 0; b < layout_.conv_blocks(); ++b) {
      auto p = plan(b, batch);
      if (!p.ok()) return p.status();
      TROUPE_RETURN_IF_ERROR((*p)->forward(cudnn_, in, params + w_[b], conv_[b].get(), workspace_.get(),
                                           workspace_.bytes()));
      TROUPE_RETURN_IF_ERROR(kc::bias_relu_max_pool(conv_[b].get(), params + b_[b], layout_.channels[b],
                                                    layout_.pool(b, batch), outs_[b].get(), argmax_[b].get(),
                                                    stream));
      in = outs_[b].get();
    }
    for (int l = layout_.conv_blocks(); l < layout_.layers(); ++l) {
      const DenseLayer dl = layout_.dense(l - layout_.conv_blocks());
      TROUPE_RETURN_IF_ERROR(
          kc::matmul(blas_, false, false, batch, dl.out, dl.in, 1.0f, in, params + w_[l], 0.0f, outs_[l].get()));
      TROUPE_RETURN_IF_ERROR(kc::bias_act(outs_[l].get(), params + b_[l], batch, dl.out, dl.relu, stream));
      in = outs_[l].get();
    }
    return {};
  }

  // Block b's convolution at `rows` images, made the first time it is asked for with the algorithms
  // cuDNN ranks first within kWorkspaceLimit, the workspace grown to fit. Made on the host only
  // (descriptors and heuristics) but growing the workspace waits for the stream (bounded), so every
  // batch size a graph captures must have been run once before (CudaJob warms up first).
  Expected<const kc::ConvPlan*> plan(int b, int rows) {
    auto& slot = plans_[{b, rows}];
    if (!slot) {
      auto made = std::make_unique<kc::ConvPlan>();
      const kernels::cpu::Conv2dShape shape = layout_.conv(b, rows);
      TROUPE_RETURN_IF_ERROR(made->create(cudnn_, shape, tf32_, kWorkspaceLimit));
      const size_t need =
          std::max(made->workspace_bytes(), tf32_ ? size_t(0) : kc::conv_filter_grad_workspace_bytes(shape));
      if (!workspace_.get() || need > workspace_.bytes()) {
        if (!grown_.get()) TROUPE_RETURN_IF_ERROR(grown_.create());
        TROUPE_CUDA_CHECK(cudaEventRecord(grown_.get(), blas_.stream()));  // queued convolutions may use the old one
        TROUPE_RETURN_IF_ERROR(kc::wait_event(grown_.get(), kWorkspaceWaitSeconds,
                                              "the convolutions queued before the cuDNN workspace grows"));
        TROUPE_RETURN_IF_ERROR(workspace_.allocate(std::max<size_t>(need, 1), "convolution workspace"));
      }
      spdlog::debug("cnn block {} at {} rows: cuDNN {}{}", b, rows, made->describe(),
                    tf32_ ? "" : "; the filter gradient by cuBLAS (conv_filter_grad)");
      slot = std::move(made);
    }
    return slot.get();
  }

  CnnLayout layout_;
  std::vector<size_t> w_, b_;  // parameter offsets per layer
  const kc::CublasHandle& blas_;
  const bool tf32_;
  kc::CudnnHandle cudnn_;
  int capacity_ = 0;
  std::vector<kc::DeviceBuffer<float>> outs_;      // per layer: output [rows x out_features] (pooled for a block)
  std::vector<kc::DeviceBuffer<float>> douts_;     // per layer: dLoss/d(output)
  std::vector<kc::DeviceBuffer<float>> conv_;      // per block: the convolution's output, then its gradient
  std::vector<kc::DeviceBuffer<int32_t>> argmax_;  // per block: the pooling's arg-max
  kc::DeviceBuffer<char> workspace_;
  kc::Event grown_;  // recorded before the workspace grows
  std::map<std::pair<int, int>, std::unique_ptr<kc::ConvPlan>> plans_;
};

}  // namespace

Expected<std::unique_ptr<CudaModel>> make_cnn_cuda(const CnnCudaSetup& setup, const kc::CublasHandle& blas,
                                                   bool tf32) {
  return std::unique_ptr<CudaModel>(new CnnCuda(setup, blas, tf32));
}

#else

Expected<std::unique_ptr<CudaModel>> make_cnn_cuda(const CnnCudaSetup&, const kc::CublasHandle&, bool) {
  return unavailable("this troupe was built without cuDNN (cudnn.h and libcudnn were not found next to the CUDA "
                     "toolkit when it was configured), so the cnn trains on CPUs only: use --device cpu, or "
                     "install cuDNN 9 and rebuild");
}

#endif

}  // namespace troupe
