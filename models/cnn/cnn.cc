#include "models/cnn/cnn.h"

#include <algorithm>
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

Status CnnLayout::image_of(const std::vector<int64_t>& shape, const std::string& order, CnnLayout* out) {
  if (order != "" && order != "hwc" && order != "chw")
    return invalid_argument("order=" + order + ": hwc (height, width, channels) or chw (channels, height, width)");
  auto fits = [](int64_t v) { return v >= 1 && v <= (1 << 16); };
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  text += "]";
  const std::string takes = "the cnn takes images: [H, W], [H, W, C] or [C, H, W] per example (or a square number of "
                            "values, e.g. 784 = 28 x 28); use the mlp trainer for other data";
  if (shape.size() == 1) {
    const auto side = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(shape[0]))));
    if (shape[0] <= 0 || side * side != shape[0] || !fits(side))
      return invalid_argument("the examples have " + std::to_string(shape[0]) + " values, which is not a square image; " + takes);
    out->height = out->width = static_cast<int>(side);
    out->in_channels = 1;
    out->order = ImageOrder::chw;
    return {};
  }
  for (int64_t d : shape)
    if (!fits(d)) return invalid_argument("an example of shape " + text + ": every side must be in [1, 65536]; " + takes);
  if (shape.size() == 2) {
    out->height = static_cast<int>(shape[0]);
    out->width = static_cast<int>(shape[1]);
    out->in_channels = 1;
    out->order = ImageOrder::chw;
    return {};
  }
  if (shape.size() != 3) return invalid_argument("an example of shape " + text + ": " + takes);
  bool hwc;
  if (!order.empty()) hwc = order == "hwc";
  else if (shape[2] <= 4 && shape[0] > 4) hwc = true;
  else if (shape[0] <= 4 && shape[2] > 4) hwc = false;
  else
    return invalid_argument("an image of shape " + text + ": which side holds the channels? Say it with "
                            "--trainer-arg order=hwc or order=chw");
  out->in_channels = static_cast<int>(hwc ? shape[2] : shape[0]);
  out->height = static_cast<int>(hwc ? shape[0] : shape[1]);
  out->width = static_cast<int>(hwc ? shape[1] : shape[2]);
  out->order = hwc ? ImageOrder::hwc : ImageOrder::chw;
  return {};
}

Expected<CnnLayout> CnnLayout::make(int height, int width, int in_channels, ImageOrder order, int classes,
                                    const std::vector<int64_t>& channels, int64_t kernel,
                                    const std::vector<int64_t>& hidden) {
  CnnLayout l;
  l.height = height;
  l.width = width;
  l.in_channels = in_channels;
  l.order = order;
  if (height < 1 || width < 1 || in_channels < 1)
    return invalid_argument("an image of " + std::to_string(height) + "x" + std::to_string(width) + " with " +
                            std::to_string(in_channels) + " channels");
  if (classes < 2) return invalid_argument("the data has " + std::to_string(classes) + " classes; it needs >= 2");
  l.classes = classes;
  const int shorter = std::min(height, width);
  if (kernel < 1 || kernel % 2 == 0 || kernel > shorter)
    return invalid_argument("kernel=" + std::to_string(kernel) + " must be odd and at most the image's shorter side " +
                            std::to_string(shorter) + " (e.g. kernel=3 or kernel=5)");
  l.kernel = static_cast<int>(kernel);
  auto ch = checked_sizes(channels, "channels", 4096);
  if (!ch.ok()) return ch.status();
  if (ch->empty()) return invalid_argument("channels is empty; give one filter count per conv block, e.g. 32,64");
  int most = 0;  // conv blocks that fit: each halves the sides, which must stay >= 1
  while ((shorter >> (most + 1)) >= 1) ++most;
  if (static_cast<int>(ch->size()) > most)
    return invalid_argument("channels lists " + std::to_string(ch->size()) + " conv blocks, but each halves the " +
                            std::to_string(height) + "x" + std::to_string(width) + " image: at most " +
                            std::to_string(most) + " fit");
  l.channels = *ch;
  auto hid = checked_sizes(hidden, "hidden", 1 << 16);
  if (!hid.ok()) return hid.status();
  l.hidden = *hid;
  return l;
}

Expected<CnnLayout> CnnLayout::from_config(const JobConfig& config, const DataSpec& data) {
  for (const auto& kv : config.values()) {
    if (kv.first != "channels" && kv.first != "kernel" && kv.first != "hidden" && kv.first != "order" &&
        kv.first != "flip" && kv.first != "crop")
      return invalid_argument("unknown setting '" + kv.first + "'; the cnn takes channels (e.g. 32,64), "
                              "kernel (odd, e.g. 3), hidden (e.g. 256), order (hwc or chw), flip (0 or 1) and crop "
                              "(padding in pixels)");
  }
  auto channels = config.get_int_list("channels", {32, 64});
  if (!channels.ok()) return channels.status();
  auto kernel = config.get_int("kernel", 3);
  if (!kernel.ok()) return kernel.status();
  auto hidden = config.get_int_list("hidden", {256});
  if (!hidden.ok()) return hidden.status();
  if (data.classes <= 0 || data.target_width != 1)
    return invalid_argument(std::string("the cnn classifies an image into one class; this data's target holds ") +
                            (data.classes <= 0 ? "values (--loss mse)" : std::to_string(data.target_width) +
                                                                             " labels per example (a sequence)") +
                            ": train it with the mlp or a trainer of yours");
  int image_fields = 0;
  for (const FieldSpec& f : data.fields) image_fields += f.target ? 0 : 1;
  if (image_fields > 1)
    return invalid_argument("the cnn reads one image field; the data has " + std::to_string(image_fields) +
                            " input fields: name the image with --inputs");
  std::vector<int64_t> shape = data.input_shape();
  if (shape.empty() || data.fields.empty()) shape = {data.features};
  CnnLayout image;
  TROUPE_RETURN_IF_ERROR(image_of(shape, config.get("order"), &image));
  if (static_cast<int64_t>(image.height) * image.width * image.in_channels != data.features)
    return invalid_argument("the image " + std::to_string(image.height) + "x" + std::to_string(image.width) + "x" +
                            std::to_string(image.in_channels) + " does not hold the examples' " +
                            std::to_string(data.features) + " values");
  auto layout = make(image.height, image.width, image.in_channels, image.order, data.classes, *channels, *kernel, *hidden);
  if (!layout.ok()) return layout;
  auto flip = config.get_int("flip", 0);
  if (!flip.ok()) return flip.status();
  auto crop = config.get_int("crop", 0);
  if (!crop.ok()) return crop.status();
  if (*flip != 0 && *flip != 1) return invalid_argument("flip=" + std::to_string(*flip) + ": 0 or 1");
  if (*crop < 0 || *crop >= std::min(layout->height, layout->width))
    return invalid_argument("crop=" + std::to_string(*crop) + ": the padding must be in [0, the image's shorter side)");
  layout->flip = *flip == 1;
  layout->crop = static_cast<int>(*crop);
  return layout;
}

cpu::Conv2dShape CnnLayout::conv(int b, int64_t rows) const {
  cpu::Conv2dShape s;
  s.batch = static_cast<int>(rows);
  s.in_channels = b == 0 ? in_channels : channels[b - 1];
  s.height = height >> b;
  s.width = width >> b;
  s.out_channels = channels[b];
  s.kernel = kernel;
  s.pad = kernel / 2;
  s.stride = 1;
  return s;
}

cpu::PoolShape CnnLayout::pool(int b, int64_t rows) const {
  cpu::PoolShape p;
  p.planes = static_cast<int>(rows) * channels[b];
  p.height = height >> b;
  p.width = width >> b;
  p.window = 2;
  return p;
}

DenseLayer CnnLayout::dense(int d) const {
  const int in = static_cast<int>(in_features(conv_blocks() + d));
  const int out = d < static_cast<int>(hidden.size()) ? hidden[d] : classes;
  return DenseLayer{in, out, d + 1 < dense_layers()};
}

int64_t CnnLayout::in_features(int layer) const {
  return layer == 0 ? static_cast<int64_t>(height) * width * in_channels : out_features(layer - 1);
}

int64_t CnnLayout::out_features(int layer) const {
  if (layer < conv_blocks()) {
    return static_cast<int64_t>(channels[layer]) * ((height >> layer) / 2) * ((width >> layer) / 2);
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
  os << height << "x" << width;
  if (in_channels > 1) os << "x" << in_channels << (order == ImageOrder::hwc ? " hwc" : " chw");
  os << " conv" << kernel << "x" << kernel;
  for (size_t b = 0; b < channels.size(); ++b) os << (b ? "-" : " ") << channels[b];
  os << " dense";
  for (int d = 0; d < dense_layers(); ++d) os << (d ? "-" : " ") << dense(d).out;
  int64_t params = 0;
  for (int l = 0; l < layers(); ++l) params += weight_count(l) + bias_count(l);
  os << " (" << params << " parameters)";
  return os.str();
}

}  // namespace troupe
