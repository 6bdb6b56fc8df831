// The cnn trainer's network (models/cnn/cnn.h) on a GPU: cuDNN convolutions (kernels/cuda/cudnn_conv.h),
// fused bias + ReLU + max pooling and its backward (kernels/cuda/conv_ops.h), and the dense head
// through cuBLAS and the MLP's fused kernels. Parameters use the CPU trainer's flat layout and
// start where it starts for the same seed, so a GPU run follows the CPU trainer's trajectory up to
// float rounding (strict f32; `tf32` lets cuDNN's convolutions use TF32 tensor cores).
//
// Built where cuDNN was found (TROUPE_WITH_CUDNN); elsewhere make_cnn_cuda says so.
#pragma once

#include <memory>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/blas.h"
#include "models/cnn/cnn.h"
#include "trainers/cuda/cuda_model.h"
#include "trainers/setup/train_options.h"

namespace troupe {

// What a GPU job needs to train the cnn as the CPU trainer would.
struct CnnCudaSetup {
  CnnLayout layout;
  std::vector<size_t> weight_offset, bias_offset;  // per layer, in the flat parameter buffer
  std::vector<float> initial;                      // the CPU trainer's starting parameters
};

// The layout options.trainer_args (and --hidden) ask for on examples of shape `data`, the CPU
// trainer's parameter layout and its initial values for options.seed. invalid_argument for bad
// settings, as the CPU trainer reports them.
Expected<CnnCudaSetup> cnn_cuda_setup(const TrainOptions& options, DataSpec data);

// The model on the current device, enqueuing on blas.stream() (`blas` must outlive it).
// unavailable when this troupe was built without cuDNN or cuDNN cannot be loaded.
Expected<std::unique_ptr<CudaModel>> make_cnn_cuda(const CnnCudaSetup& setup, const kernels::cuda::CublasHandle& blas,
                                                   bool tf32);

}  // namespace troupe
