// The device worker loop (trainers/ps/device_worker.h) on the CPU StepDevice, against the CPU
// async worker (async_worker.h) on the same shards, data and seed: one worker pulls, pushes, tags,
// replays and ends with exactly the CPU worker's parameters, gradients and accuracy; two workers
// keep the staleness bound and apply every example exactly once; the device's rules are enforced;
// the GPU entry point without a usable device says so and lets the shards go on.
#include <catch2/catch.hpp>

#include <memory>
#include <thread>

#include "tests/trainers/blobs.h"
#include "tests/trainers/ps/ps_recording.h"
#include "trainers/cuda/cuda_ps_worker.h"
#include "trainers/setup/gpu_options.h"
#include "trainers/ps/cpu_step_device.h"
#include "trainers/ps/device_worker.h"
#include "trainers/ps/ps_job.h"

using namespace troupe;
using namespace troupe::ps;

namespace {

TrainOptions tiny() {
  TrainOptions o;
  o.hidden = {16};
  o.batch_size = 40;
  o.epochs = 3;
  o.seed = 5;
  return o;
}

PsJobShape async_shape(int workers, int shards, int64_t staleness, const Dataset& train) {
  PsJobShape s;
  s.mode = PsMode::async;
  s.workers = workers;
  s.shards = shards;
  s.staleness = staleness;
  s.train_examples = train.count;
  s.wait_timeout = std::chrono::seconds(20);
  return s;
}

struct Shards {
  std::vector<std::unique_ptr<ParameterShard>> owned;
  std::vector<ParameterShard*> views;
};

Shards make_shards(const TrainOptions& o, const Dataset& train, const PsJobShape& shape) {
  Shards s;
  for (int i = 0; i < shape.shards; ++i) {
    auto shard = make_job_shard(o, DataSpec{train.features(), train.classes}, shape, i);
    REQUIRE(shard.ok());
    s.views.push_back(shard->get());
    s.owned.push_back(std::move(*shard));
  }
  return s;
}

struct Trained {
  Expected<TrainResult> result = internal_error("not run");
  PsWorkerReport report;
  std::vector<float> params;
  std::vector<RecordingClient::Call> calls;
  std::vector<std::vector<float>> replays;
  std::vector<DataTag> emitted;
  int64_t trained_calls = 0;
  std::vector<AppliedShard> applied;  // shard 0's record
  int64_t computed = -1, replayed = -1;
};

// One worker on fresh shards, on the CPU worker (device == false) or the CPU StepDevice.
Trained train_one(bool device, const TrainOptions& o, const Dataset& train, const Dataset& test) {
  Shards shards = make_shards(o, train, async_shape(1, 2, 0, train));
  RecordingClient client(local_ps_client(shards.views, 0));
  client.replay_at = {{5, 2}, {30, 29}};
  TaggedFeed feed(train, o, 0, 1);
  Trained t;
  const PsWorker w{&client, 0, 1};
  if (device) {
    auto d = CpuStepDevice::make(o, DataSpec{train.features(), train.classes}, 0, 1, o.batch_size);
    REQUIRE(d.ok());
    t.result = train_ps_worker_on(**d, o, train, test, feed, w, {}, &t.report, &t.params);
    t.computed = (*d)->computed();
    t.replayed = (*d)->replayed();
  } else {
    t.result = train_ps_worker(o, train, test, feed, w, {}, &t.report, &t.params);
  }
  t.calls = client.calls;
  t.replays = client.replays;
  t.emitted = feed.emitted;
  t.trained_calls = feed.trained_calls;
  t.applied = shards.views[0]->applied();
  return t;
}

}  // namespace

TEST_CASE("device worker: one worker on the CPU device pulls, pushes, tags, replays and trains exactly as the CPU "
          "async worker",
          "[ps][device_worker]") {
  const Dataset train = blobs(800, 4, 6, 1), test = blobs(200, 4, 6, 2);
  TrainOptions o = tiny();
  o.batch_size = 20;  // 40 steps an epoch
  Trained cpu = train_one(false, o, train, test), dev = train_one(true, o, train, test);
  INFO(cpu.result.status().to_string() << " / " << dev.result.status().to_string());
  REQUIRE(cpu.result.ok());
  REQUIRE(dev.result.ok());
  const int64_t steps = 3 * (800 / 20);
  CHECK(dev.result->steps == steps);
  CHECK(dev.report.steps == steps);
  CHECK(dev.computed == steps);  // one gradient per step, none computed twice
  // The same parameters, bit for bit, and so the same accuracy and losses.
  CHECK(dev.params == cpu.params);
  CHECK(dev.result->test_accuracy == cpu.result->test_accuracy);
  CHECK(dev.result->test_accuracy > 0.9);
  REQUIRE(dev.result->history.size() == cpu.result->history.size());
  for (size_t e = 0; e < cpu.result->history.size(); ++e)
    CHECK(dev.result->history[e].train_loss == cpu.result->history[e].train_loss);
  CHECK(dev.result->device == "cpu (trainer 'mlp')");

  // The same conversation with the shards: pull(c) before push(c), clocks 0, 1, 2, ... each pushed
  // once, with the gradient the CPU worker pushed and the tag of the batch it came from.
  REQUIRE(dev.calls.size() == cpu.calls.size());
  int64_t next_clock = 0, pushes = 0;
  int64_t pulled = -1;
  for (size_t i = 0; i < dev.calls.size(); ++i) {
    const auto &d = dev.calls[i], &c = cpu.calls[i];
    INFO("call " << i << ": " << d.kind << " clock " << d.clock);
    REQUIRE(d.kind == c.kind);
    CHECK(d.clock == c.clock);
    if (d.kind == 'p') {
      CHECK(d.clock == next_clock);
      pulled = d.clock;
    }
    if (d.kind == 'P') {
      CHECK(d.clock == next_clock);
      CHECK(pulled == d.clock);  // computed from this clock's pull
      CHECK(d.tag == dev.emitted.at(static_cast<size_t>(pushes)));
      CHECK(d.tag == c.tag);
      CHECK(d.grads == c.grads);
      ++next_clock;
      ++pushes;
    }
  }
  CHECK(pushes == steps);
  CHECK(dev.trained_calls == steps);  // trained() once per push, after it
  CHECK(dev.calls.back().kind == 'F');  // rank 0 judges the final parameters
  // Replays recompute a batch's gradient on the current parameters, as the CPU worker does.
  REQUIRE(dev.replays.size() == 2u);
  CHECK(dev.replayed == 2);
  CHECK(dev.replays == cpu.replays);
  CHECK(dev.replays[1] != dev.calls.back().grads);  // not the push buffer's gradient: a recomputed one
  // Every example of every epoch applied exactly once on the shard.
  REQUIRE(dev.applied.size() == 3u);
  for (const AppliedShard& a : dev.applied) {
    CHECK(a.applied == 800);
    CHECK(a.duplicates == 0);
    CHECK(a.gaps == 0);
  }
}

TEST_CASE("device worker: two workers on CPU devices keep the staleness bound and apply every example once",
          "[ps][device_worker]") {
  const Dataset train = blobs(800, 4, 6, 1), test = blobs(200, 4, 6, 2);
  const TrainOptions o = tiny();
  for (int64_t staleness : {0, 2}) {
    CAPTURE(staleness);
    Shards shards = make_shards(o, train, async_shape(2, 2, staleness, train));
    std::vector<Expected<TrainResult>> results(2, Expected<TrainResult>(internal_error("not run")));
    std::vector<PsWorkerReport> reports(2);
    std::vector<std::vector<float>> params(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        auto client = local_ps_client(shards.views, r);
        TaggedFeed feed(train, o, r, 2);
        auto d = CpuStepDevice::make(o, DataSpec{train.features(), train.classes}, r, 2, o.batch_size / 2);
        if (!d.ok()) {
          results[r] = d.status();
          return;
        }
        results[r] = train_ps_worker_on(**d, o, train, test, feed, PsWorker{client.get(), r, 2}, {}, &reports[r],
                                        &params[r]);
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < 2; ++r) {
      INFO("worker " << r << ": " << results[r].status().to_string());
      REQUIRE(results[r].ok());
      CHECK(results[r]->steps == 3 * (800 / 40));
    }
    CHECK(results[0]->test_accuracy > 0.9);
    CHECK(results[1]->test_accuracy == -1);  // only rank 0 evaluates
    CHECK(params[0] == params[1]);           // both read the final parameters
    // Every push applied once on each of the 2 shards; none later than the bound allows: when a
    // worker pulls clock c the other's clock is >= c - S, and it pulls no clock past c + S before
    // this worker pushed c, so it pushes at most 2S + 1 times in between.
    CHECK(reports[0].staleness.count == 2 * 2 * 3 * 20);
    CHECK(reports[0].staleness.max <= 2 * staleness + 1);
    for (ParameterShard* s : shards.views) {
      const auto applied = s->applied();
      REQUIRE(applied.size() == 6u);  // 3 epochs x the 2 workers' ledger shards
      for (const AppliedShard& a : applied) {
        CHECK(a.applied == 400);
        CHECK(a.duplicates == 0);
        CHECK(a.gaps == 0);
      }
    }
  }
}

TEST_CASE("device worker: a loop that breaks the device's rules, and jobs it does not train, are refused",
          "[ps][device_worker][errors]") {
  const Dataset train = blobs(200, 4, 6, 1), test = blobs(40, 4, 6, 2);
  const TrainOptions o = tiny();
  auto d = CpuStepDevice::make(o, DataSpec{train.features(), train.classes}, 0, 1, 40);
  REQUIRE(d.ok());
  CpuStepDevice& dev = **d;
  CHECK_THAT(dev.compute(0).message(), Catch::Contains("compute() before any upload_batch()"));
  SliceFeed slices(train, o.seed, 40, 0, 1);
  REQUIRE(slices.begin_epoch(1).ok());
  Batch b;
  REQUIRE(*slices.next(&b));
  REQUIRE(dev.upload_batch(b).ok());
  REQUIRE(dev.compute(1).ok());
  CHECK_THAT(dev.compute(1).message(), Catch::Contains("called again before wait_gradient()"));
  std::vector<float> out(dev.parameters());
  CHECK_THAT(dev.replay(0, b, out.data()).message(), Catch::Contains("in flight"));
  (void)dev.pull_buffer(1);  // a pull into the parameters the step in flight reads
  auto stats = dev.wait_gradient();
  REQUIRE_FALSE(stats.ok());
  CHECK_THAT(stats.status().message(), Catch::Contains("parameter slot 1 handed out for a pull while a computation"));

  // Central jobs keep CPU workers; shards of another model are named.
  Shards central = make_shards(o, train, [&] {
    PsJobShape s = async_shape(1, 1, -1, train);
    s.mode = PsMode::central;
    return s;
  }());
  auto client = local_ps_client(central.views, 0);
  auto fresh = CpuStepDevice::make(o, DataSpec{train.features(), train.classes}, 0, 1, 40);
  REQUIRE(fresh.ok());
  SliceFeed feed(train, o.seed, 40, 0, 1);
  auto r = train_ps_worker_on(**fresh, o, train, test, feed, PsWorker{client.get(), 0, 1});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("a device worker trains async jobs only"));
  CHECK(central.views[0]->all_finished());  // the shards do not wait for a worker that cannot train

  Shards other = make_shards(o, train, async_shape(1, 1, -1, train));
  auto client2 = local_ps_client(other.views, 0);
  TrainOptions wider = o;
  wider.hidden = {8};
  auto narrow = CpuStepDevice::make(wider, DataSpec{train.features(), train.classes}, 0, 1, 40);
  REQUIRE(narrow.ok());
  r = train_ps_worker_on(**narrow, o, train, test, feed, PsWorker{client2.get(), 0, 1});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("were they started with the job's options?"));
}

TEST_CASE("GPU async worker: the options it refuses, and without a usable device the shards go on",
          "[ps][device_worker][gpu_options]") {
  const Dataset train = blobs(200, 4, 6, 1), test = blobs(40, 4, 6, 2);
  TrainOptions o = tiny();
  CHECK(check_gpu_worker_options(o).ok());
  o.model = "cnn";
  CHECK(check_gpu_worker_options(o).ok());
  o.model = "linear";
  CHECK_THAT(check_gpu_worker_options(o).message(), Catch::Contains("GPU workers train the built-in mlp or cnn"));
  o.model = "mlp";
  o.precision = DType::bf16;
  CHECK(check_gpu_worker_options(o).ok());
  o.precision = DType::f16;
  CHECK(check_gpu_worker_options(o).ok());  // sync replicas scale the loss on the device
  o.precision = DType::bf16;
  o.model = "cnn";
  CHECK_THAT(check_gpu_worker_options(o).message(), Catch::Contains("GPU workers train the cnn in f32"));
  o.model = "mlp";
  o.precision = DType::f32;
  o.accumulate = 2;
  CHECK_THAT(check_gpu_worker_options(o).message(), Catch::Contains("--accumulate"));
  o.accumulate = 1;

  // Device 99 exists nowhere: unavailable (or, built without CUDA, saying that), and the shards
  // were told this worker finished, so the others are not held up by it.
  Shards shards = make_shards(o, train, async_shape(1, 1, 0, train));
  auto client = local_ps_client(shards.views, 0);
  SliceFeed feed(train, o.seed, o.batch_size, 0, 1);
  CudaPsWorker gpu;
  gpu.device = 99;
  auto r = train_ps_worker_cuda(o, train, test, feed, PsWorker{client.get(), 0, 1}, gpu);
  REQUIRE_FALSE(r.ok());
  INFO(r.status().to_string());
  CHECK(r.status().code() == Code::unavailable);
  CHECK(shards.views[0]->all_finished());
}
