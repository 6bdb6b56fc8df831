// GPU workers of async parameter-server jobs (trainers/cuda/cuda_ps_worker.h, what an async job's worker
// with --gpus-per-worker runs): one worker has the conversation with the shards that the CPU
// device loop has (the same clocks, tags and replays) and ends with its parameters to rounding;
// two workers sharing a GPU, their parameter servers in this process over TCP, train synthetic
// data and Fashion-MNIST to >= 0.85 test accuracy.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "gpu_test_util.h"
#include "model_eval.h"
#include "tests/trainers/ps/ps_fixture.h"
#include "tests/trainers/ps/ps_recording.h"
#include "trainers/cuda/cuda_ps_worker.h"
#include "trainers/ps/cpu_step_device.h"
#include "trainers/ps/device_worker.h"

namespace troupe {
namespace {

using troupe::testing::relative_difference;
using namespace troupe::ps;

PsJobShape async_shape(int workers, int shards, int64_t staleness, const Dataset& train) {
  PsJobShape s;
  s.mode = PsMode::async;
  s.workers = workers;
  s.shards = shards;
  s.staleness = staleness;
  s.train_examples = train.count;
  s.wait_timeout = std::chrono::seconds(60);
  return s;
}

struct OneRun {
  Expected<TrainResult> result = internal_error("not run");
  std::vector<float> params;
  std::vector<RecordingClient::Call> calls;
  std::vector<std::vector<float>> replays;
};

// One worker on fresh in-process shards, on GPU 0 or on the CPU StepDevice.
OneRun run_one(bool gpu, const TrainOptions& o, const Dataset& train, const Dataset& test) {
  std::vector<std::unique_ptr<ParameterShard>> owned;
  std::vector<ParameterShard*> views;
  for (int i = 0; i < 2; ++i) {
    auto shard = make_job_shard(o, DataSpec{train.features(), train.classes}, async_shape(1, 2, 0, train), i);
    REQUIRE(shard.ok());
    views.push_back(shard->get());
    owned.push_back(std::move(*shard));
  }
  RecordingClient client(local_ps_client(views, 0));
  client.replay_at = {{5, 2}, {40, 39}};
  TaggedFeed feed(train, o, 0, 1);
  OneRun run;
  const PsWorker w{&client, 0, 1};
  if (gpu) {
    CudaPsWorker on;
    on.device = 0;
    run.result = train_ps_worker_cuda(o, train, test, feed, w, on, {}, nullptr, &run.params);
  } else {
    auto d = CpuStepDevice::make(o, DataSpec{train.features(), train.classes}, 0, 1, o.batch_size);
    REQUIRE(d.ok());
    run.result = train_ps_worker_on(**d, o, train, test, feed, w, {}, nullptr, &run.params);
  }
  run.calls = client.calls;
  run.replays = client.replays;
  return run;
}

// `n` GPU workers sharing GPU 0, over TCP to `shards` parameter servers in this process.
std::vector<Expected<TrainResult>> run_gpu_workers(int n, int shards, int64_t staleness, const TrainOptions& o,
                                                   const Dataset& train, const Dataset& test) {
  PsJob job = start_ps_job(o, DataSpec{train.features(), train.classes}, async_shape(n, shards, staleness, train));
  std::vector<Expected<TrainResult>> results(n, Expected<TrainResult>(internal_error("not run")));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      PsClientOptions co;
      co.job = "job-1";
      co.rank = r;
      co.timeout = std::chrono::seconds(300);
      auto client = connect_ps(job.addresses, co);
      if (!client.ok()) {
        results[r] = client.status();
        return;
      }
      SliceFeed feed(train, o.seed, o.batch_size, r, n);
      CudaPsWorker on;
      on.device = 0;
      results[r] = train_ps_worker_cuda(o, train, test, feed, PsWorker{client->get(), r, n}, on);
    });
  for (auto& t : threads) t.join();
  return results;
}

TEST_CASE("GPU async worker: one worker talks to the shards as the CPU device loop does and ends with its "
          "parameters, to rounding",
          "[gpu][ps]") {
  const Dataset train = test::synthetic(2048, 6, 5, 3), test = test::synthetic(300, 6, 5, 4);
  TrainOptions o;
  o.hidden = {32, 16};
  o.epochs = 2;
  o.batch_size = 64;
  o.seed = 7;
  OneRun gpu = run_one(true, o, train, test), cpu = run_one(false, o, train, test);
  INFO(gpu.result.status().to_string());
  REQUIRE(gpu.result.ok());
  REQUIRE(cpu.result.ok());
  CHECK(gpu.result->device.rfind("cuda:0", 0) == 0);
  CHECK(gpu.result->steps == cpu.result->steps);
  REQUIRE(gpu.calls.size() == cpu.calls.size());
  for (size_t i = 0; i < gpu.calls.size(); ++i) {
    INFO("call " << i);
    CHECK(gpu.calls[i].kind == cpu.calls[i].kind);
    CHECK(gpu.calls[i].clock == cpu.calls[i].clock);
    CHECK(gpu.calls[i].tag == cpu.calls[i].tag);
  }
  // The first push is computed from the initial parameters on both: the same gradient to f32
  // summation order (a wrong slot, batch or stale download is off entirely).
  REQUIRE(gpu.calls.at(1).kind == 'P');
  CHECK(relative_difference(gpu.calls[1].grads, cpu.calls[1].grads) < 1e-4);
  REQUIRE(gpu.replays.size() == 2u);
  REQUIRE(cpu.replays.size() == 2u);
  for (int i = 0; i < 2; ++i) CHECK(relative_difference(gpu.replays[i], cpu.replays[i]) < 1e-2);
  CHECK(relative_difference(gpu.params, cpu.params) < 1e-2);
  CHECK(gpu.result->test_accuracy == Approx(cpu.result->test_accuracy).margin(0.02));
}

TEST_CASE("GPU async workers (two sharing a GPU, two parameter servers over TCP) train synthetic data",
          "[gpu][ps]") {
  const Dataset train = test::synthetic(4096, 6, 5, 3), test = test::synthetic(500, 6, 5, 4);
  TrainOptions o;
  o.hidden = {32, 16};
  o.epochs = 3;
  o.batch_size = 64;
  o.seed = 7;
  auto results = run_gpu_workers(2, 2, 1, o, train, test);
  for (int r = 0; r < 2; ++r) {
    INFO("worker " << r << ": " << results[r].status().to_string());
    REQUIRE(results[r].ok());
    CHECK(results[r]->steps == 3 * (4096 / 64));
  }
  CHECK(results[0]->test_accuracy >= 0.85);
}

TEST_CASE("GPU async workers: the servers start from --init-from and worker 0 --saves what it evaluated last",
          "[gpu][ps][model]") {
  const Dataset train = test::synthetic(4096, 6, 5, 3), test = test::synthetic(500, 6, 5, 4);
  TrainOptions cpu;
  cpu.hidden = {32, 16};
  cpu.epochs = 3;
  cpu.batch_size = 64;
  cpu.seed = 7;
  const test::TrainedFile file = test::cpu_trained_file(cpu, train, test, "async-init.safetensors");
  const double in_file = file.accuracy;
  // An epoch at a negligible rate: the model stays what the file holds.
  TrainOptions o = test::negligible_steps_from(cpu, file.path);
  o.save_path = test::model_path("async-saved.safetensors");
  std::filesystem::remove(o.save_path);
  o.epochs = 1;
  auto results = run_gpu_workers(2, 2, 1, o, train, test);
  for (int r = 0; r < 2; ++r) {
    INFO("worker " << r << ": " << results[r].status().to_string());
    REQUIRE(results[r].ok());
  }
  CHECK(results[0]->test_accuracy == Approx(in_file).margin(2.5 / 500));
  REQUIRE(std::filesystem::exists(o.save_path));
  CHECK(test::cpu_accuracy(o.save_path, o, test) == Approx(results[0]->test_accuracy).margin(2.5 / 500));
}

TEST_CASE("GPU async workers (two sharing a GPU) reach >= 0.85 on Fashion-MNIST", "[gpu][ps][e2e]") {
  auto fashion = test::fashion_mnist();
  auto& train = fashion.train;
  auto& test = fashion.test;
  TrainOptions o;  // MLP 784-256-128-10, 10 epochs, global batch 128
  auto results = run_gpu_workers(2, 2, 2, o, *train, *test);
  for (int r = 0; r < 2; ++r) {
    INFO("worker " << r << ": " << results[r].status().to_string());
    REQUIRE(results[r].ok());
  }
  CHECK(results[0]->test_accuracy >= 0.85);
  WARN("2 async GPU workers: test accuracy " << results[0]->test_accuracy << ", "
                                             << results[0]->samples_per_second << " samples/s (worker 0)");
}

}  // namespace
}  // namespace troupe
