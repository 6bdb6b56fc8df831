// A one-replica pipeline's buddy mirror (live recovery, issue 44): with no other replica holding a
// stage's layers, after every update (or every K: --mirror-every) each stage sends its state — its range of the parameters, the
// optimizer's vectors over it, the step and its place in the epoch — to the stage `distance` ahead
// on the pipe ring and keeps the state of the stage `distance` behind: its newest two rounds, as a
// stage keeps its own newest two states (stage_hold.h). A lost stage's state then comes back from
// its buddy; a stage and its buddy both lost is the checkpoint.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/transport.h"
#include "trainers/checkpoint/checkpoint.h"

namespace troupe::pipeline {

// The rounds of one other stage's state a stage keeps, each as it came over the wire (decoded only
// when a recovery takes it: a round costs its receive and nothing more).
class MirroredStage {
 public:
  int stage() const { return stage_; }  // whose state; -1: none kept
  int64_t newest_step() const { return newest_.step; }
  int64_t oldest_step() const { return older_.step >= 0 ? older_.step : newest_.step; }
  // Exactly its two rounds (with --mirror-every K they are K steps apart, nothing between).
  bool holds(int64_t step) const { return step >= 0 && (step == newest_.step || step == older_.step); }
  // The state of round `step` (holds(step) must be true).
  checkpoint::TrainingState state(int64_t step) const;
  // Keeps `s` (stage `stage`'s) as the newest round, the newest before it becoming the older.
  void keep(int stage, const checkpoint::TrainingState& s);

 private:
  friend Status exchange_stage_state(collectives::Transport&, int, const checkpoint::TrainingState&, size_t,
                                     MirroredStage*, uint64_t, std::chrono::milliseconds);
  struct Round {
    int64_t step = -1;
    std::vector<char> bytes;  // header (int64 step, epoch, epoch step, optimizer steps), params, vectors
  };
  void took(int stage, size_t params, size_t vectors, const std::string& optimizer);  // `incoming_` is newest

  int stage_ = -1;
  size_t params_ = 0, vectors_ = 0;
  std::string optimizer_;
  Round newest_, older_;
  std::vector<char> incoming_;  // a round being received, its memory reused
};

// One round over `pipe` (rank = stage, size = stages): `mine` to stage (rank + distance) % size,
// stage (rank - distance) % size's state into `kept`. `their_params`: that stage's range size; its
// optimizer has as many vectors as `mine`'s, of that size, and the same name. `sequence` stamps the
// messages. On error (the transport's, naming the round's step) `kept` keeps its rounds.
Status exchange_stage_state(collectives::Transport& pipe, int distance, const checkpoint::TrainingState& mine,
                            size_t their_params, MirroredStage* kept, uint64_t sequence,
                            std::chrono::milliseconds timeout);

}  // namespace troupe::pipeline
