// The order in which a pipeline stage runs the forward (F) and backward (B) passes of a step's M
// micro-batches. Both schedules run the same passes and sum the same gradients in the same order
// (B of micro-batch 0 first), so they give bit-identical updates; they differ in when the passes
// run, hence in the idle time (the bubble) and in how many micro-batches' activations a stage
// keeps at once.
//
//   gpipe   every stage: F0 F1 ... F(M-1), then B0 B1 ... B(M-1). Stage s keeps M micro-batches'
//           activations. Idle fraction per stage (equal pass times, no communication cost):
//           (K-1) / (M+K-1), the GPipe estimate.
//   1f1b    stage s of K: min(K-1-s, M) forwards to fill the pipeline, then alternately one F and
//           one B, then the remaining Bs. Same bubble as gpipe, but at most K-s micro-batches'
//           activations at once (PipeDream-flush / Megatron's non-interleaved schedule).
//
// Stage s receives micro-batch m's input from s-1 before F(m) and sends its output to s+1 after;
// B(m) receives the output's gradient from s+1 and sends the input's gradient to s-1. When an op
// sends to the peer the next op receives from, the two go in one send_recv (the transport's
// simultaneous exchange): two stages that both have something to send each other then never wait
// on each other with blocking sends. Every link carries its messages in one order on both ends.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace troupe::pipeline {

enum class Schedule { gpipe, one_f_one_b };

// "gpipe" or "1f1b"; invalid_argument naming both otherwise.
Expected<Schedule> parse_schedule(const std::string& text);
const char* schedule_name(Schedule s);

struct PipeOp {
  bool forward = true;
  int micro = 0;
};

// The ops of stage `stage` of `stages` for `micro` micro-batches, in order.
std::vector<PipeOp> stage_ops(Schedule schedule, int stage, int stages, int micro);

// Micro-batches whose activations stage `stage` keeps at once under `schedule`.
int stash_slots(Schedule schedule, int stage, int stages, int micro);

// (K-1) / (M+K-1): the GPipe estimate of the idle fraction of a stage.
double gpipe_bubble_estimate(int stages, int micro);

}  // namespace troupe::pipeline
