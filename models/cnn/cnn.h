// The shape of the built-in convolutional network (trainer "cnn", cnn_trainer.cc): images of C
// channels through conv blocks, then a dense head.
//
//   image [C x H x W] (an HWC image is transposed to it first)
//     -> block b = 0 .. B-1: conv kernel x kernel, "same" zero padding (kernel / 2), stride 1,
//        channels[b] filters + bias -> ReLU -> 2 x 2 max pooling (each side halves, rounding down)
//     -> flatten [channels[B-1] x h x w] (NCHW order)
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
#include "models/mlp/dense_layer.h"

namespace troupe {

// How an example's values lay out an image.
enum class ImageOrder : uint8_t { chw, hwc };

struct CnnLayout {
  int height = 0, width = 0;   // the input image
  int in_channels = 1;
  ImageOrder order = ImageOrder::chw;  // of the input rows (the convolutions compute in CHW)
  int kernel = 0;              // odd
  std::vector<int> channels;   // filters per conv block
  std::vector<int> hidden;     // dense hidden layer widths
  int classes = 0;
  // Augmentation of training images (trainer settings flip=1, crop=P): a horizontal flip half the
  // time; a random crop of the image zero-padded by P pixels on every side.
  bool flip = false;
  int crop = 0;

  // Checks every size and says which one is wrong and what would do: the kernel odd and at most
  // the image's shorter side, each block must leave an image of at least 1 x 1. (The runtime
  // prefixes "trainer 'cnn': setup: ".)
  static Expected<CnnLayout> make(int height, int width, int in_channels, ImageOrder order, int classes,
                                  const std::vector<int64_t>& channels, int64_t kernel,
                                  const std::vector<int64_t>& hidden);

  // The image of examples of per-example `shape` (DataSpec::input_shape): [H, W] (one channel),
  // [H, W, C] or [C, H, W] (C of 1 to 4 tells which; `order` "hwc" or "chw" says it for other
  // channel counts), or [F] with F a square (one channel, as a flat Fashion-MNIST row).
  // invalid_argument saying what the cnn takes otherwise.
  static Status image_of(const std::vector<int64_t>& shape, const std::string& order, CnnLayout* out);

  // The layout the trainer's settings ask for (--trainer-arg channels=32,64,kernel=3,hidden=256;
  // those are the defaults; order=hwc|chw) on examples of shape `data`. An unknown setting is
  // invalid_argument naming the ones there are. Shared by the CPU trainer and the GPU model, so
  // both build the same.
  static Expected<CnnLayout> from_config(const JobConfig& config, const DataSpec& data);

  int side() const { return height == width ? height : 0; }  // square images (the GPU model's)

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

  // "28x28 conv3x3 32-64 dense 256-10 (824458 parameters)"; "32x32x3 ..." with channels
  std::string to_string() const;
};

}  // namespace troupe
