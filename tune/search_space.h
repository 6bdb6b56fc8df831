// The search space of `troupe tune`: one `--search NAME=KIND(ARGS)` per searched flag, where KIND is
//   choice(v1,v2,...)      a value drawn uniformly for each trial
//   grid(v1,v2,...)        every value in turn: the trials are the grid's points (x --trials)
//   uniform(low,high)      a real drawn uniformly from [low, high)
//   loguniform(low,high)   a real whose logarithm is uniform (0 < low < high)
//   randint(low,high)      an integer from low to high, both included
// Values of choice and grid are flag values as typed; one holding a comma is quoted ('256,128').
// NAME is the submit flag without its dashes (lr, batch-size, hidden, ...) — the CLI checks that
// such a flag exists — or trainer-arg.KEY for a trainer argument.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace troupe::tune {

struct SearchParam {
  enum class Kind { choice, grid, uniform, loguniform, randint };
  std::string name;
  Kind kind = Kind::choice;
  std::vector<std::string> values;  // choice, grid
  double low = 0, high = 0;         // uniform, loguniform, randint
  std::string text;                 // as given
};

// Parses one --search argument; invalid_argument naming it and what is wrong (no '=', an unknown
// kind, an empty choice, low >= high, a loguniform bound <= 0, a number that is not one, ...).
Expected<SearchParam> parse_search_param(const std::string& text);

using TrialSettings = std::vector<std::pair<std::string, std::string>>;  // name -> value, in --search order

// The trials of a search: every point of the grid (the product of the grid(...) parameters; one
// point when there is none) `samples` times, the other parameters drawn for each trial from a
// generator seeded with `seed` (the same seed gives the same trials). invalid_argument for a
// parameter searched twice, samples < 1, or more than `max_trials` trials.
Expected<std::vector<TrialSettings>> expand_trials(const std::vector<SearchParam>& params, int samples, uint64_t seed,
                                                   int max_trials = 10000);

}  // namespace troupe::tune
