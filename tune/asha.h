// Asynchronous successive halving (ASHA; Li et al., "A System for Massively Parallel Hyperparameter
// Tuning"): trials report their metric every epoch; at each rung — epochs grace, grace x eta,
// grace x eta^2, ... below the trials' epochs — a trial goes on only when it is among the best
// ceil(k / eta) of the k trials that reached that rung so far (itself included), so the first to
// arrive always goes on and the bar rises as more arrive. Nothing waits for a rung to fill.
#pragma once

#include <vector>

namespace troupe::tune {

// The rung epochs: grace x eta^i for i = 0, 1, ... while below `epochs` (the last epoch is no rung:
// a trial that got there is done). Empty when grace >= epochs.
std::vector<int> asha_rungs(int grace, int eta, int epochs);

// Whether a trial with `value` at a rung goes on, given `others`: the values of the trials that
// reached the rung before it. `maximize`: larger is better.
bool asha_keeps(const std::vector<double>& others, double value, int eta, bool maximize);

// The value a trial must reach at a rung to go on (for messages): the ceil(k/eta)-th best of
// `others` plus `value`.
double asha_cutoff(const std::vector<double>& others, double value, int eta, bool maximize);

}  // namespace troupe::tune
