#include "trainers/export/checkpoint_choice.h"

#include <algorithm>

namespace troupe::exporting {
namespace {

// Verifies every shard of `e`, one at a time, keeping its step and epoch; its problem, if it has
// one, as corrupt_data.
Expected<checkpoint::TrainingState> load(const CheckpointEntry& e, size_t total_floats) {
  if (!e.problem.empty()) return corrupt_data(e.problem);
  return checkpoint::load_ranges(e.manifest, total_floats, {}, {});
}

std::string where_of(const CheckpointSource& src) {
  return src.where == src.job_dir ? src.job_dir : src.where + " (" + src.job_dir + ")";
}

}  // namespace

std::string list_steps(const CheckpointSource& src) {
  std::vector<int64_t> steps;
  for (const CheckpointEntry& e : src.checkpoints)
    if (e.problem.empty()) steps.push_back(e.step);
  std::sort(steps.begin(), steps.end());
  std::string out;
  for (int64_t s : steps) out += (out.empty() ? "" : ", ") + std::to_string(s);
  return out;
}

Expected<ChosenCheckpoint> choose_checkpoint(const CheckpointSource& src, int64_t step, size_t total_floats) {
  if (src.only_step >= 0) {
    if (step >= 0 && step != src.only_step)
      return invalid_argument("--step " + std::to_string(step) + " contradicts the step directory given (step " +
                              std::to_string(src.only_step) + "): give the job's directory " + src.job_dir);
    step = src.only_step;
  }
  if (src.checkpoints.empty())
    return not_found(src.where + " has no checkpoint yet (" + src.job_dir + " holds no committed step directory)");
  ChosenCheckpoint out;
  if (step >= 0) {
    auto it = std::find_if(src.checkpoints.begin(), src.checkpoints.end(),
                           [&](const CheckpointEntry& e) { return e.step == step; });
    if (it == src.checkpoints.end()) {
      const std::string steps = list_steps(src);
      return not_found(where_of(src) + " has no checkpoint of step " + std::to_string(step) +
                       (steps.empty() ? "; none of its checkpoints is usable" : "; its checkpoints are of steps " + steps));
    }
    auto state = load(*it, total_floats);
    if (!state.ok()) {
      const std::string steps = list_steps(src);
      return state.status().with_context("the checkpoint of step " + std::to_string(step) + " (" +
                                         (steps.empty() ? "none of the job's checkpoints is usable"
                                                        : "the job's checkpoints: steps " + steps) + ")");
    }
    out.state = std::move(*state);
    out.manifest = it->manifest;
    out.dir = it->manifest.dir;
    return out;
  }
  for (const CheckpointEntry& e : src.checkpoints) {  // newest first
    auto state = load(e, total_floats);
    if (state.ok()) {
      out.state = std::move(*state);
      out.manifest = e.manifest;
      out.dir = e.manifest.dir;
      return out;
    }
    // Another parameter count is no damage: every checkpoint of the job has it.
    if (state.status().code() == Code::invalid_argument)
      return state.status().with_context("the checkpoint of step " + std::to_string(e.step));
    out.skipped.push_back("step " + std::to_string(e.step) + ": " + state.status().message());
  }
  std::string why;
  for (const std::string& s : out.skipped) why += "; " + s;
  return not_found(where_of(src) + ": no intact checkpoint among " + std::to_string(src.checkpoints.size()) + why);
}

}  // namespace troupe::exporting
