#include "trainers/cnn.h"

#include <cmath>
#include <sstream>

namespace troupe {

namespace cpu = kernels::cpu;

namespace {

// Every entry of `sizes` in [1, max], copied to ints; else invalid_argument naming the setting.
Expected<std::vector<int>> checked_sizes(const std::vector<int64_t>& sizes, const char* setting, int64_t max) {
  std::vector<int> out;
  for (int64_t v : sizes) {
    if (v < 1 || v > max)
      return invalid_argument(std::string(setting) + ": size " + std::to_string(v) + " must be in [1, " +
                              std::to_string(max) + "]");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

}  // namespace

Expected<CnnLayout> CnnLayout::make(int64_t features, int classes, const std::vector<int64_t>& channels,
                                    int64_t kernel, const std::vector<int64_t>& hidden) {
  CnnLayout l;
  l.side = static_cast<int>(std::lround(std::sqrt(static_cast<double>(features))));
  if (features <= 0 || static_cast<int64_t>(l.side) * l.side != features)
    return invalid_argument("the examples have " + std::to_string(features) +
                            " features, which is not a square image; the cnn trainer takes side x side one-channel "
                            "images (784 = 28 x 28 for Fashion-MNIST): use the mlp trainer for other data");
  if (classes < 2) return invalid_argument("the data has " + std::to_string(classes) + " classes; it needs >= 2");
  l.classes = classes;
  if (kernel < 1 || kernel % 2 == 0 || kernel > l.side)
    return invalid_argument("kernel=" + std::to_string(kernel) + " must be odd and at most the image side " +
                            std::to_string(l.side) + " (e.g. kernel=3 or kernel=5)");
  l.kernel = static_cast<int>(kernel);
  auto ch = checked_sizes(channels, "channels", 4096);
  if (!ch.ok()) return ch.status();
  if (ch->empty()) return invalid_argument("channels is empty; give one filter count per conv block, e.g. 32,64");
  int most = 0;  // conv blocks that fit: each halves the side, which must stay >= 1
  while ((l.side >> (most + 1)) >= 1) ++most;
  if (static_cast<int>(ch->size()) > most)
    return invalid_argument("channels lists " + std::to_string(ch->size()) + " conv blocks, but each halves the " +
                            std::to_string(l.side) + "x" + std::to_string(l.side) + " image: at most " +
                            std::to_string(most) + " fit");
  l.channels = *ch;
  auto hid = checked_sizes(hidden, "hidden", 1 << 16);
  if (!hid.ok()) return hid.status();
  l.hidden = *hid;
  return l;
}

Expected<CnnLayout> CnnLayout::from_config(const JobConfig& config, const DataSpec& data) {
  for (const auto& kv : config.values()) {
    if (kv.first != "channels" && kv.first != "kernel" && kv.first != "hidden")
      return invalid_argument("unknown setting '" + kv.first + "'; the cnn takes channels (e.g. 32,64), "
                              "kernel (odd, e.g. 3) and hidden (e.g. 256)");
  }
  auto channels = config.get_int_list("channels", {32, 64});
  if (!channels.ok()) return channels.status();
  auto kernel = config.get_int("kernel", 3);
  if (!kernel.ok()) return kernel.status();
  auto hidden = config.get_int_list("hidden", {256});
  if (!hidden.ok()) return hidden.status();
  return make(data.features, data.classes, *channels, *kernel, *hidden);
}

cpu::Conv2dShape CnnLayout::conv(int b, int64_t rows) const {
  cpu::Conv2dShape s;
  s.batch = static_cast<int>(rows);
  s.in_channels = b == 0 ? 1 : channels[b - 1];
  s.height = s.width = side >> b;
  s.out_channels = channels[b];
  s.kernel = kernel;
  s.pad = kernel / 2;
  s.stride = 1;
  return s;
}

cpu::PoolShape CnnLayout::pool(int b, int64_t rows) const {
  cpu::PoolShape p;
  p.planes = static_cast<int>(rows) * channels[b];
  p.height = p.width = side >> b;
  p.window = 2;
  return p;
}

DenseLayer CnnLayout::dense(int d) const {
  const int in = static_cast<int>(in_features(conv_blocks() + d));
  const int out = d < static_cast<int>(hidden.size()) ? hidden[d] : classes;
  return DenseLayer{in, out, d + 1 < dense_layers()};
}

int64_t CnnLayout::in_features(int layer) const {
  return layer == 0 ? static_cast<int64_t>(side) * side : out_features(layer - 1);
}

int64_t CnnLayout::out_features(int layer) const {
  if (layer < conv_blocks()) {
    const int64_t s = (side >> layer) / 2;
    return channels[layer] * s * s;
  }
  return dense(layer - conv_blocks()).out;
}

int64_t CnnLayout::weight_count(int layer) const {
  if (layer < conv_blocks()) return static_cast<int64_t>(channels[layer]) * conv(layer, 1).patch();
  const DenseLayer d = dense(layer - conv_blocks());
  return static_cast<int64_t>(d.in) * d.out;
}

int64_t CnnLayout::bias_count(int layer) const {
  return layer < conv_blocks() ? channels[layer] : dense(layer - conv_blocks()).out;
}

double CnnLayout::flops_per_example(int layer) const {
  // A conv block's multiply-adds are its weights times the output pixels they slide over.
  const double pixels = layer < conv_blocks() ? static_cast<double>(conv(layer, 1).pixels()) : 1.0;
  const double mac = static_cast<double>(weight_count(layer)) * pixels;
  return (layer > 0 ? 6 : 4) * mac;
}

std::string CnnLayout::to_string() const {
  std::ostringstream os;
  os << side << "x" << side << " conv" << kernel << "x" << kernel;
  for (size_t b = 0; b < channels.size(); ++b) os << (b ? "-" : " ") << channels[b];
  os << " dense";
  for (int d = 0; d < dense_layers(); ++d) os << (d ? "-" : " ") << dense(d).out;
  int64_t params = 0;
  for (int l = 0; l < layers(); ++l) params += weight_count(l) + bias_count(l);
  os << " (" << params << " parameters)";
  return os.str();
}

}  // namespace troupe
