// The shape of the built-in convolutional network (trainer "cnn", cnn_trainer.cc): square
// one-channel images through conv blocks, then a dense head.
//
//   image [1 x side x side]
//     -> block b = 0 .. B-1: conv kernel x kernel, "same" zero padding (kernel / 2), stride 1,
//        channels[b] filters + bias -> ReLU -> 2 x 2 max pooling (the side halves, rounding down)
//     -> flatten [channels[B-1] x s x s] (NCHW order)
//     -> dense hidden[0] -> ReLU -> ... -> dense classes (logits for softmax cross-entropy)
//
// Layers, as the trainer's LayerModel counts them: the B conv blocks, then the dense layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/cpu/conv.h"
#include "trainers/api/trainer.h"
#include "trainers/dense_layer.h"

namespace troupe {

struct CnnLayout {
  int side = 0;                // input images are side x side, one channel
  int kernel = 0;              // odd
  std::vector<int> channels;   // filters per conv block
  std::vector<int> hidden;     // dense hidden layer widths
  int classes = 0;

  // Checks every size and says which one is wrong and what would do: features must be a square,
  // the kernel odd and at most the side, each block must leave an image of at least 1 x 1. (The
  // runtime prefixes "trainer 'cnn': setup: ".)
  static Expected<CnnLayout> make(int64_t features, int classes, const std::vector<int64_t>& channels,
                                  int64_t kernel, const std::vector<int64_t>& hidden);

  // The layout the trainer's settings ask for (--trainer-arg channels=32,64,kernel=3,hidden=256;
  // those are the defaults) on examples of shape `data`. An unknown setting is invalid_argument
  // naming the ones there are. Shared by the CPU trainer and the GPU model, so both build the same.
  static Expected<CnnLayout> from_config(const JobConfig& config, const DataSpec& data);

  int conv_blocks() const { return static_cast<int>(channels.size()); }
  int dense_layers() const { return static_cast<int>(hidden.size()) + 1; }
  int layers() const { return conv_blocks() + dense_layers(); }

  // Conv block b over `rows` images: its convolution and its pooling.
  kernels::cpu::Conv2dShape conv(int b, int64_t rows) const;
  kernels::cpu::PoolShape pool(int b, int64_t rows) const;
  // Dense layer d of the head (ReLU on all but the last).
  DenseLayer dense(int d) const;

  int64_t in_features(int layer) const;   // per example: the image for layer 0
  int64_t out_features(int layer) const;  // per example
  // Parameter floats of a layer: conv weights [out x in x kernel x kernel] + bias, or dense W + b.
  int64_t weight_count(int layer) const;
  int64_t bias_count(int layer) const;
  // Floating-point operations per example of a training step of the layer: forward, weight
  // gradient and (except for layer 0) input gradient.
  double flops_per_example(int layer) const;

  // "28x28 conv3x3 32-64 dense 256-10 (824458 parameters)"
  std::string to_string() const;
};

}  // namespace troupe
