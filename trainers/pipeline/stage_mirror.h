// A one-replica pipeline's buddy mirror (live recovery, issue 44): with no other replica holding a
// stage's layers, after every update each stage sends its state — its range of the parameters, the
// optimizer's vectors over it, the step and its place in the epoch — to the stage `distance` ahead
// on the pipe ring and keeps the state of the stage `distance` behind: its newest two rounds, as a
// stage keeps its own newest two states (stage_hold.h). A lost stage's state then comes back from
// its buddy; a stage and its buddy both lost is the checkpoint.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "collectives/transport.h"
#include "trainers/checkpoint/checkpoint.h"

namespace troupe::pipeline {

// The rounds of one other stage's state a stage keeps.
struct MirroredStage {
  int stage = -1;                                 // whose state; -1: none kept
  std::optional<checkpoint::TrainingState> newest, older;
  int64_t newest_step() const { return newest ? newest->step : -1; }
  int64_t oldest_step() const { return older ? older->step : newest_step(); }
  bool holds(int64_t step) const { return newest && step >= oldest_step() && step <= newest_step(); }
};

// One round over `pipe` (rank = stage, size = stages): `mine` to stage (rank + distance) % size,
// stage (rank - distance) % size's state into `kept` (its newest round; the previous one becomes the
// older). `their_params`: that stage's range size; its optimizer has as many vectors as `mine`'s, of
// that size, and the same name. `sequence` stamps the messages. Errors: the transport's, naming the
// round's step.
Status exchange_stage_state(collectives::Transport& pipe, int distance, const checkpoint::TrainingState& mine,
                            size_t their_params, MirroredStage* kept, uint64_t sequence,
                            std::chrono::milliseconds timeout);

}  // namespace troupe::pipeline
