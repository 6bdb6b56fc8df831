#include "trainers/job/pipeline_model.h"

#include <spdlog/spdlog.h>

#include "trainers/setup/model_file.h"

namespace troupe::job {

Status save_pipeline_model(const JobSetup& s, const pipeline::StageResult& result, collectives::Communicator* pipe,
                           bool writer, std::chrono::milliseconds timeout) {
  const pipeline::StageReport& r = result.report;
  if (result.params.size() != r.end - r.begin)
    return internal_error("stage " + std::to_string(r.stage) + " holds " + std::to_string(result.params.size()) +
                          " parameters for its range [" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ")");
  const int stages = pipe ? pipe->size() : 1;
  collectives::CollectiveOptions co;
  co.timeout = timeout;
  // Every stage's range, as two doubles (exact) each travelling as four opaque f32 words.
  const double mine[2] = {static_cast<double>(r.begin), static_cast<double>(r.end)};
  std::vector<double> ranges(2 * static_cast<size_t>(stages));
  if (pipe) {
    TROUPE_RETURN_IF_ERROR(pipe->allgather(mine, ranges.data(), 4, DType::f32, co)
                               .with_context("--save: gathering the stages' parameter ranges"));
  } else {
    ranges.assign(mine, mine + 2);
  }
  for (int i = 0; i < stages; ++i) {
    const double begin = ranges[2 * i], end = ranges[2 * i + 1];
    const double expected_begin = i == 0 ? 0.0 : ranges[2 * i - 1];
    if (begin != expected_begin || end < begin)
      return internal_error("--save: stage " + std::to_string(i) + "'s range [" + std::to_string(begin) + ", " +
                            std::to_string(end) + ") does not follow the stage before it");
  }
  const size_t total = static_cast<size_t>(ranges.back());
  std::vector<float> params(total);
  std::copy(result.params.begin(), result.params.end(), params.begin() + static_cast<std::ptrdiff_t>(r.begin));
  for (int i = 0; pipe && i < stages; ++i) {
    const size_t begin = static_cast<size_t>(ranges[2 * i]), end = static_cast<size_t>(ranges[2 * i + 1]);
    TROUPE_RETURN_IF_ERROR(pipe->broadcast(params.data() + begin, end - begin, DType::f32, i, co)
                               .with_context("--save: stage " + std::to_string(i) + " sending its parameters"));
  }
  if (!writer) return {};
  const TrainOptions& o = s.spec.train;
  TROUPE_RETURN_IF_ERROR(save_trained_model(o, s.train(), params, result.train));
  spdlog::info("model written to {}", o.save_path);
  return {};
}

}  // namespace troupe::job
