// bench_input_pipeline: how fast the input pipeline (data/feed/input_pipeline.h) builds
// Fashion-MNIST batches, and whether a training loop ever waits for one.
//
//   build/bin/bench_input_pipeline                                   # every case
//   build/bin/bench_input_pipeline --benchmark_filter=Step --benchmark_repetitions=5
//
// Two families, Google Benchmark style (one record per case, checked):
//   BM_Produce/threads/batch      the consumer takes batches and does nothing else: batches/s is
//                                 what the producers can deliver (the pipeline's ceiling).
//   BM_Step/threads/step_us       the consumer spins step_us per batch of 128, like a training step
//                                 (0.86 ms is the MLP's step on dev, docs/benchmarks.md): wait_us
//                                 per step is the data-wait metric; ~0 means the worker never waits.
// The dataset is synthetic with Fashion-MNIST's shape (60,000 x 784 floats): the gather does the
// same work on any values. Every batch is checked against the indices it claims to hold.
#include <benchmark/benchmark.h>

#include <chrono>
#include <numeric>

#include "data/feed/input_pipeline.h"
#include "trainers/local/local_trainer.h"

using namespace troupe;
using namespace troupe::data;

namespace {

const Dataset& fashion_shaped() {
  static const Dataset d = [] {
    Dataset ds;
    ds.count = 60000;
    ds.rows = ds.cols = 28;
    ds.images.resize(static_cast<size_t>(ds.count * 784));
    for (size_t i = 0; i < ds.images.size(); ++i) ds.images[i] = static_cast<float>(i % 256) / 255.0f;
    ds.labels.resize(static_cast<size_t>(ds.count));
    for (int64_t i = 0; i < ds.count; ++i) ds.labels[static_cast<size_t>(i)] = static_cast<int32_t>(i % 10);
    return ds;
  }();
  return d;
}

// Shards of 3,750 examples (60,000 / 16) of a shuffled epoch, forever: the benchmark decides when
// to stop.
class EndlessShards final : public IndexSource {
 public:
  EndlessShards() : order_(epoch_permutation(60000, 1, 1)) {}
  Expected<std::optional<IndexChunk>> next() override {
    const size_t begin = (shard_ % 16) * 3750;
    IndexChunk c{shard_++, std::vector<int32_t>(order_.begin() + static_cast<long>(begin),
                                                order_.begin() + static_cast<long>(begin + 3750))};
    return std::optional<IndexChunk>(std::move(c));
  }

 private:
  std::vector<int32_t> order_;
  int64_t shard_ = 0;
};

// A batch's rows must be the dataset rows of its indices: first and last pixel of each.
bool check(const data::Batch& b) {
  const Dataset& d = fashion_shaped();
  for (int64_t r = 0; r < b.size; r += 17) {
    const int64_t idx = b.indices[static_cast<size_t>(r)];
    if (b.inputs[static_cast<size_t>(r * 784)] != d.images[static_cast<size_t>(idx * 784)] ||
        b.inputs[static_cast<size_t>(r * 784 + 783)] != d.images[static_cast<size_t>(idx * 784 + 783)] ||
        b.labels[static_cast<size_t>(r)] != d.labels[static_cast<size_t>(idx)]) {
      return false;
    }
  }
  return true;
}

void spin_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

void run(benchmark::State& state, int threads, int64_t batch, std::chrono::microseconds step) {
  InputPipelineOptions o;
  o.batch_size = batch;
  o.threads = threads;
  o.depth = 4;
  auto p = InputPipeline::start(fashion_shaped(), std::make_unique<EndlessShards>(), o);
  if (!p.ok()) {
    state.SkipWithError(p.status().to_string().c_str());
    return;
  }
  // Let the queue fill once, as it does while a worker sets up its model.
  (void)(*p)->next();
  const double wait0 = (*p)->stats().wait_ms;
  int64_t batches = 0;
  for (auto _ : state) {
    auto b = (*p)->next();
    if (!b.ok() || !b->has_value() || !check(**b)) {
      state.SkipWithError(b.ok() ? "a batch does not hold the rows of its indices" : b.status().to_string().c_str());
      return;
    }
    benchmark::DoNotOptimize((*b)->inputs.data());
    if (step.count() > 0) spin_for(step);
    ++batches;
  }
  const InputPipelineStats s = (*p)->stats();
  state.SetItemsProcessed(batches * batch);
  state.counters["batches_per_s"] = benchmark::Counter(static_cast<double>(batches), benchmark::Counter::kIsRate);
  state.counters["wait_us_per_step"] = batches ? (s.wait_ms - wait0) * 1000.0 / static_cast<double>(batches) : 0;
}

void BM_Produce(benchmark::State& state) {
  run(state, static_cast<int>(state.range(0)), state.range(1), std::chrono::microseconds(0));
}
BENCHMARK(BM_Produce)->ArgNames({"threads", "batch"})->Args({1, 128})->Args({2, 128})->Args({1, 512})->Args({2, 512})
    ->UseRealTime();

void BM_Step(benchmark::State& state) {
  run(state, static_cast<int>(state.range(0)), 128, std::chrono::microseconds(state.range(1)));
}
BENCHMARK(BM_Step)->ArgNames({"threads", "step_us"})->Args({1, 860})->Args({1, 200})->Args({2, 200})->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
