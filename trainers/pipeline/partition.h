// How a model's layers are cut into pipeline stages: each stage gets a run of consecutive layers
// and, with them, one contiguous range of the flat parameter buffer (so a stage allocates its
// parameters, gradients and optimizer state only, about 1/K of the model's).
//
// Balanced (the default): the cut minimises the heaviest stage, a layer weighing half its share
// of the parameter bytes and half its share of the FLOPs (LayerInfo::flops_per_example), found
// exactly by dynamic programming over the cut points. Explicit: `--stage-layers 2,1,1,1` gives
// the number of layers of each stage, first to last.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/status.h"
#include "trainers/api/trainer.h"

namespace troupe::pipeline {

struct StagePlan {
  int first_layer = 0, end_layer = 0;  // layers [first_layer, end_layer)
  size_t begin = 0, end = 0;           // its range of the flat buffer, in floats
  int64_t in_features = 0;             // width of its input per example (the data's for stage 0)
  int64_t out_features = 0;            // width of its output per example
  double weight = 0;                   // its share of the model (bytes and FLOPs), 0..1
};

// Checks that every layer owns at least one block, that out_features > 0, and that the layers'
// blocks follow each other in the flat buffer (layer by layer, in order, nothing between).
// invalid_argument naming the first layer that does not, and what to change in the trainer.
Status check_layers(const std::vector<LayerInfo>& layers);

// The stages' plans. `explicit_layers` empty: balanced; else one count per stage. Errors
// (invalid_argument): stages < 1, more stages than layers ("4 stages but the model has 3 layers
// ..."), explicit counts that are not `stages` positive numbers summing to the layer count.
Expected<std::vector<StagePlan>> partition_layers(const std::vector<LayerInfo>& layers, int64_t input_features,
                                                  int stages, const std::vector<int>& explicit_layers = {});

// "2,1,1,1" -> {2, 1, 1, 1}; invalid_argument naming the item that is not a positive number.
Expected<std::vector<int>> parse_stage_layers(const std::string& text);

}  // namespace troupe::pipeline
