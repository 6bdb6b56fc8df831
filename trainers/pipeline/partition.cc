#include "trainers/pipeline/partition.h"

#include <algorithm>
#include <limits>
#include <sstream>

namespace troupe::pipeline {
namespace {

size_t layer_floats(const LayerInfo& l) {
  size_t n = 0;
  for (const Param& p : l.params) n += p.numel;
  return n;
}

double layer_flops(const LayerInfo& l) {
  return l.flops_per_example > 0 ? l.flops_per_example : 6.0 * static_cast<double>(layer_floats(l));
}

}  // namespace

Status check_layers(const std::vector<LayerInfo>& layers) {
  if (layers.empty()) return invalid_argument("the trainer's LayerModel declares no layers");
  size_t next = layers.front().params.empty() ? 0 : layers.front().params.front().offset;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerInfo& l = layers[i];
    const std::string who = "layer " + std::to_string(i) + " ('" + l.name + "')";
    if (l.params.empty()) return invalid_argument(who + " owns no parameter blocks; merge it into a neighbour");
    if (l.out_features <= 0) return invalid_argument(who + " has out_features " + std::to_string(l.out_features) +
                                                     "; it must be the width of its output (> 0)");
    for (const Param& p : l.params) {
      if (p.offset != next) {
        return invalid_argument(who + "'s blocks are not where the previous layer's end (block #" +
                                std::to_string(p.index) + " at float " + std::to_string(p.offset) + ", expected " +
                                std::to_string(next) + "): declare each layer's blocks together, layers in order, "
                                "and list them in LayerInfo::params in declaration order");
      }
      next += p.numel;
    }
  }
  return {};
}

Expected<std::vector<int>> parse_stage_layers(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 100000) {
      return invalid_argument("--stage-layers '" + text + "': '" + item + "' is not a layer count >= 1 "
                              "(give one count per stage, e.g. 2,1,1,1)");
    }
    out.push_back(static_cast<int>(v));
  }
  return out;
}

Expected<std::vector<StagePlan>> partition_layers(const std::vector<LayerInfo>& layers, int64_t input_features,
                                                  int stages, const std::vector<int>& explicit_layers) {
  TROUPE_RETURN_IF_ERROR(check_layers(layers));
  const int n = static_cast<int>(layers.size());
  if (stages < 1) return invalid_argument("--stages must be >= 1 (got " + std::to_string(stages) + ")");
  if (stages > n) {
    return invalid_argument("--stages " + std::to_string(stages) + " is more stages than the model has layers (" +
                            std::to_string(n) + "): every stage needs at least one layer; use --stages <= " +
                            std::to_string(n) + " or a deeper model (e.g. --hidden 1024,1024,512,256)");
  }
  // Each layer's weight: half its share of the parameters, half its share of the FLOPs.
  double total_floats = 0, total_flops = 0;
  for (const LayerInfo& l : layers) {
    total_floats += static_cast<double>(layer_floats(l));
    total_flops += layer_flops(l);
  }
  std::vector<double> w(n), prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    w[i] = 0.5 * layer_floats(layers[i]) / total_floats + 0.5 * layer_flops(layers[i]) / total_flops;
    prefix[i + 1] = prefix[i] + w[i];
  }
  std::vector<int> counts;
  if (!explicit_layers.empty()) {
    int sum = 0;
    for (int c : explicit_layers) sum += c;
    if (static_cast<int>(explicit_layers.size()) != stages || sum != n) {
      return invalid_argument("--stage-layers gives " + std::to_string(explicit_layers.size()) + " stages of " +
                              std::to_string(sum) + " layers in all; the job has --stages " + std::to_string(stages) +
                              " and the model " + std::to_string(n) + " layers: give one count >= 1 per stage, "
                              "summing to " + std::to_string(n));
    }
    counts = explicit_layers;
  } else {
    // best[k][i]: the lightest heaviest stage cutting layers [0, i) into k stages; cut[k][i] its last cut.
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
    std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
    best[0][0] = 0;
    for (int k = 1; k <= stages; ++k)
      for (int i = k; i <= n; ++i)
        for (int j = k - 1; j < i; ++j) {
          const double v = std::max(best[k - 1][j], prefix[i] - prefix[j]);
          if (v < best[k][i]) {
            best[k][i] = v;
            cut[k][i] = j;
          }
        }
    counts.assign(stages, 0);
    for (int k = stages, i = n; k >= 1; --k) {
      counts[k - 1] = i - cut[k][i];
      i = cut[k][i];
    }
  }
  std::vector<StagePlan> plans;
  int layer = 0;
  for (int s = 0; s < stages; ++s) {
    StagePlan p;
    p.first_layer = layer;
    p.end_layer = layer + counts[s];
    p.begin = layers[p.first_layer].params.front().offset;
    const Param& last = layers[p.end_layer - 1].params.back();
    p.end = last.offset + last.numel;
    p.in_features = p.first_layer == 0 ? input_features : layers[p.first_layer - 1].out_features;
    p.out_features = layers[p.end_layer - 1].out_features;
    p.weight = prefix[p.end_layer] - prefix[p.first_layer];
    // (a block shared with a layer of another stage is copied there: tied_blocks.h)
    plans.push_back(p);
    layer = p.end_layer;
  }
  return plans;
}

}  // namespace troupe::pipeline
