// bench_step_timeline: what recording the step timeline (trainers/report/step_timeline.h) costs a training
// step — begin, three phase changes and end, as train_replica calls them — alone and while another
// thread drains and reads the live phase every 500 ms, as the job layer's publisher does.
//
//   build/bin/bench_step_timeline
//   build/bin/bench_step_timeline --benchmark_filter=Drained --benchmark_repetitions=5
//
// One record per case (Google Benchmark), with ns per recorded step; every step recorded is
// checked to come out of a drain exactly once, in order. The MLP's step takes ~1-3 ms here
// (docs/benchmarks.md), so ~100 ns is ~1e-4 of it.
#include <benchmark/benchmark.h>

#include <atomic>
#include <thread>

#include "trainers/report/step_timeline.h"

using namespace troupe;

namespace {

void record_one(StepRecorder& rec, int64_t step) {
  rec.begin(1, step);
  rec.phase(StepPhase::forward_backward);
  rec.phase(StepPhase::communication);
  rec.phase(StepPhase::optimizer);
  rec.end(64, 0.5, 0.0);
}

void BM_Record(benchmark::State& state) {
  StepRecorder rec(1 << 20);
  int64_t step = 0, drained = 0;
  for (auto _ : state) {
    record_one(rec, ++step);
    if ((step & 0xffff) == 0) drained += static_cast<int64_t>(rec.drain().size());
  }
  drained += static_cast<int64_t>(rec.drain().size());
  if (drained != step) state.SkipWithError("a recorded step was lost");
  state.counters["ns_per_step"] = benchmark::Counter(static_cast<double>(step), benchmark::Counter::kIsRate |
                                                                                 benchmark::Counter::kInvert);
}
BENCHMARK(BM_Record)->Unit(benchmark::kNanosecond);

// With a publisher-like thread draining every `ms` milliseconds. The loop records far faster than
// any training step, so with the default capacity (8192 steps between drains) some are dropped:
// counted, never reordered.
void BM_Drained(benchmark::State& state) {
  StepRecorder rec;
  std::atomic<bool> stop{false};
  int64_t drained = 0, dropped = 0, last = 0;
  bool in_order = true;
  auto take = [&] {
    int64_t d = 0;
    for (const auto& s : rec.drain(&d)) {
      in_order = in_order && s.step > last;
      last = s.step;
      ++drained;
    }
    dropped += d;
  };
  std::thread publisher([&] {
    while (!stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(state.range(0)));
      take();
      (void)rec.now();
    }
  });
  int64_t step = 0;
  for (auto _ : state) record_one(rec, ++step);
  stop.store(true);
  publisher.join();
  take();
  if (!in_order || drained + dropped != step) state.SkipWithError("steps lost uncounted or out of order");
  state.counters["dropped"] = static_cast<double>(dropped);
}
BENCHMARK(BM_Drained)->Arg(500)->Arg(10)->Unit(benchmark::kNanosecond);

}  // namespace

BENCHMARK_MAIN();
