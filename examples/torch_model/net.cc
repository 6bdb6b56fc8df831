// A PyTorch model written in C++ with libtorch, trained by troupe (docs/torch.md): a small
// convolutional network for 28x28 images (Fashion-MNIST, troupe's default data). Build it as a
// library (CMakeLists.txt here) and train it:
//
//   troupe train --lib build-net/libtorch_net.so --model fashion-cnn --trainer-arg input_shape=1,28,28
//   troupe submit --strategy sync --workers 2 --lib build-net/libtorch_net.so --model fashion-cnn \
//                 --trainer-arg input_shape=1,28,28
#include <torch/torch.h>

#include "models/torch/module_trainer.h"

struct FashionCnn : torch::nn::Module {
  explicit FashionCnn(const troupe::TrainerContext& ctx)
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 8, 3).padding(1)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 16, 3).padding(1)))),
        fc(register_module("fc", torch::nn::Linear(16 * 7 * 7, ctx.data.classes))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), 2);
    x = torch::max_pool2d(torch::relu(conv2(x)), 2);
    return fc(x.flatten(1));
  }

  torch::nn::Conv2d conv1, conv2;
  torch::nn::Linear fc;
};

TROUPE_REGISTER_TORCH_MODULE("fashion-cnn", FashionCnn);
