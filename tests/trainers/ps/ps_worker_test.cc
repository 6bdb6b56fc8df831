// The parameter-server worker loop (trainers/ps/async_worker.h) on small data: in process through
// local_ps_client (central matches one process; async S = 0 trains), a worker that dies mid-job
// over TCP does not stop the others, and options the loop cannot run are refused up front.
#include <catch2/catch.hpp>

#include <cmath>
#include <thread>

#include "tests/trainers/blobs.h"
#include "tests/support/numeric_test_util.h"
#include "tests/trainers/ps/ps_fixture.h"
#include "tests/trainers/ps/ps_recording.h"
#include "trainers/report/step_timeline.h"
#include "trainers/sync/trainer_driver.h"

using namespace troupe;
using namespace troupe::ps;
using troupe::testing::relative_difference;

namespace {

TrainOptions tiny() {
  TrainOptions o;
  o.hidden = {16};
  o.batch_size = 40;
  o.epochs = 4;
  o.seed = 5;
  return o;
}

PsJobShape tiny_shape(PsMode mode, int workers, int shards, int64_t staleness, const Dataset& train) {
  PsJobShape s;
  s.mode = mode;
  s.workers = workers;
  s.shards = shards;
  s.staleness = staleness;
  s.train_examples = train.count;
  s.wait_timeout = std::chrono::seconds(20);
  return s;
}

// Runs `workers` workers on threads over in-process shards.
WorkerRuns run_local(const TrainOptions& o, const Dataset& train, const Dataset& test, const PsJobShape& shape) {
  std::vector<std::unique_ptr<ParameterShard>> shards;
  std::vector<ParameterShard*> views;
  for (int i = 0; i < shape.shards; ++i) {
    auto s = make_job_shard(o, DataSpec{train.features(), train.classes}, shape, i);
    REQUIRE(s.ok());
    views.push_back(s->get());
    shards.push_back(std::move(*s));
  }
  const int n = shape.workers;
  WorkerRuns run{std::vector<Status>(n), std::vector<TrainResult>(n), std::vector<PsWorkerReport>(n),
                 std::vector<std::vector<float>>(n)};
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto client = local_ps_client(views, r);
      SliceFeed feed(train, o.seed, o.batch_size, r, n);
      auto result = train_ps_worker(o, train, test, feed, PsWorker{client.get(), r, n}, {}, &run.reports[r],
                                    &run.params[r]);
      if (result.ok()) run.results[r] = *result;
      else run.status[r] = result.status();
    });
  for (auto& t : threads) t.join();
  return run;
}

}  // namespace

TEST_CASE("ps worker: central mode in process holds one process's parameters, async S = 0 trains blobs",
          "[ps][worker]") {
  const Dataset train = blobs(800, 4, 6, 1), test = blobs(200, 4, 6, 2);
  const TrainOptions o = tiny();
  std::vector<float> want;
  auto single = train_with_trainer(o, train, test, {}, &want);
  REQUIRE(single.ok());
  WorkerRuns central = run_local(o, train, test, tiny_shape(PsMode::central, 2, 3, -1, train));
  for (int r = 0; r < 2; ++r) {
    INFO("worker " << r << ": " << central.status[r].to_string());
    REQUIRE(central.status[r].ok());
    CHECK(central.results[r].steps == 4 * (800 / 40));
  }
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += std::pow(double(central.params[0][i]) - want[i], 2);
    norm += double(want[i]) * want[i];
  }
  CHECK(std::sqrt(diff / norm) <= 1e-5);
  CHECK(central.results[0].test_accuracy == Approx(single->test_accuracy).margin(0.01));
  CHECK(central.results[1].test_accuracy == -1);  // only rank 0 evaluates
  // The test loss too, from the same parameters (it was reported by troupe train and sync only).
  REQUIRE(single->test_loss > 0);
  CHECK(central.results[0].test_loss == Approx(single->test_loss).epsilon(1e-3));
  CHECK(central.results[1].test_loss == -1);

  WorkerRuns async = run_local(o, train, test, tiny_shape(PsMode::async, 2, 2, 0, train));
  for (int r = 0; r < 2; ++r) REQUIRE(async.status[r].ok());
  CHECK(async.results[0].test_accuracy > 0.9);
  CHECK(async.results[0].test_loss > 0);
  CHECK(async.results[0].test_loss < std::log(4.0));  // below a uniform guess over the 4 blobs
  CHECK(async.reports[0].staleness.count == 2 * 2 * 80);
  CHECK(async.reports[0].staleness.max <= 1);  // lockstep: at most the other worker's update of the clock
}

TEST_CASE("ps worker: a worker that dies mid-job over TCP is removed and the others finish", "[ps][worker][tcp]") {
  const Dataset train = blobs(800, 4, 6, 1), test = blobs(200, 4, 6, 2);
  TrainOptions o = tiny();
  o.batch_size = 30;  // 10 rows per worker
  PsJob job = start_ps_job(o, DataSpec{train.features(), train.classes},
                           tiny_shape(PsMode::async, 3, 2, /*staleness=*/0, train));
  std::thread doomed([&] {
    PsClientOptions co;
    co.job = "job-1";
    co.rank = 2;
    auto client = connect_ps(job.addresses, co);
    REQUIRE(client.ok());
    std::vector<float> p((*client)->parameters()), g(p.size(), 0.0f);
    auto v = (*client)->pull(0, p.data());  // with S = 0 it can go no further alone
    REQUIRE(v.ok());
    REQUIRE((*client)->push(0, g.data(), *v).ok());
  });  // the client closes without saying finish: as if the process died
  doomed.join();
  // Workers 0 and 1 train on (their rows of a 3-worker job) while S = 0 would wait for worker 2.
  std::vector<Status> status(2);
  std::vector<TrainResult> results(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      PsClientOptions co;
      co.job = "job-1";
      co.rank = r;
      auto client = connect_ps(job.addresses, co);
      if (!client.ok()) {
        status[r] = client.status();
        return;
      }
      SliceFeed feed(train, o.seed, o.batch_size, r, 3);
      auto result = train_ps_worker(o, train, test, feed, PsWorker{client->get(), r, 3});
      if (result.ok()) results[r] = *result;
      else status[r] = result.status();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    INFO("worker " << r << ": " << status[r].to_string());
    REQUIRE(status[r].ok());
  }
  CHECK(results[0].test_accuracy > 0.9);
}

TEST_CASE("ps worker: options the loop cannot run are refused before any step", "[ps][worker][errors]") {
  const Dataset train = blobs(200, 4, 6, 1), test = blobs(40, 4, 6, 2);
  TrainOptions o = tiny();
  auto shard = make_job_shard(o, DataSpec{train.features(), train.classes},
                              tiny_shape(PsMode::async, 3, 1, -1, train), 0);
  REQUIRE_FALSE(shard.ok());
  CHECK_THAT(shard.status().message(), Catch::Contains("--batch-size 40 (the global batch) does not divide among 3"));

  auto ok_shard = make_job_shard(o, DataSpec{train.features(), train.classes},
                                 tiny_shape(PsMode::async, 2, 1, -1, train), 0);
  REQUIRE(ok_shard.ok());
  auto client = local_ps_client({ok_shard->get()}, 0);
  SliceFeed feed(train, o.seed, o.batch_size, 0, 2);
  SECTION("a trainer with other parameters than the shards") {
    TrainOptions other = o;
    other.hidden = {8};
    auto r = train_ps_worker(other, train, test, feed, PsWorker{client.get(), 0, 2});
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("the parameter servers hold"));
    CHECK_THAT(r.status().message(), Catch::Contains("were they started with the job's options?"));
  }
  SECTION("gradient accumulation whose micro-batches do not divide a worker's rows") {
    TrainOptions acc = o;
    acc.accumulate = 8;  // divides the 40 rows, not a worker's 20
    auto r = train_ps_worker(acc, train, test, feed, PsWorker{client.get(), 0, 2});
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(),
               Catch::Contains("--batch-size 40 (the global batch) does not divide among 2 workers x 8 micro-batches; "
                               "use a multiple of 16"));
    // The shards were told this worker finished: once the other one is done, nobody waits for it.
    REQUIRE(ok_shard->get()->finish_worker(1).ok());
    CHECK(ok_shard->get()->all_finished());
  }
}

TEST_CASE("ps worker: with --accumulate K every push and replay is the batch's mean gradient, and central holds one "
          "process's parameters",
          "[ps][worker][accumulate]") {
  const Dataset train = blobs(800, 4, 6, 1), test = blobs(200, 4, 6, 2);
  const TrainOptions o = tiny();
  TrainOptions acc = o;
  acc.accumulate = 4;

  // Central, 2 workers of 20 rows in 4 micro-batches of 5: one process on the global batch of 40.
  std::vector<float> want;
  REQUIRE(train_with_trainer(o, train, test, {}, &want).ok());
  WorkerRuns central = run_local(acc, train, test, tiny_shape(PsMode::central, 2, 3, -1, train));
  for (int r = 0; r < 2; ++r) {
    INFO("worker " << r << ": " << central.status[r].to_string());
    REQUIRE(central.status[r].ok());
    CHECK(central.results[r].steps == 4 * (800 / 40));
  }
  CHECK(relative_difference(central.params[0], want) <= 1e-5);

  // One async worker, with and without accumulation, the client asking for two replays: every push
  // and replay the same gradient to rounding (a sum of the parts, or one part, would be far off).
  struct Run {
    std::unique_ptr<ParameterShard> shard;
    std::unique_ptr<RecordingClient> client;
    double accuracy = -1;
  };
  auto run_one = [&](const TrainOptions& opts) {
    Run run;
    auto shard = make_job_shard(opts, DataSpec{train.features(), train.classes},
                                tiny_shape(PsMode::async, 1, 1, 0, train), 0);
    REQUIRE(shard.ok());
    run.shard = std::move(*shard);
    run.client = std::make_unique<RecordingClient>(local_ps_client({run.shard.get()}, 0));
    run.client->replay_at = {{5, 2}, {30, 29}};
    TaggedFeed feed(train, opts, 0, 1);
    auto result = train_ps_worker(opts, train, test, feed, PsWorker{run.client.get(), 0, 1});
    INFO(result.status().to_string());
    REQUIRE(result.ok());
    run.accuracy = result->test_accuracy;
    return run;
  };
  const Run whole = run_one(o), pieces = run_one(acc);
  const RecordingClient *plain = whole.client.get(), *parts = pieces.client.get();
  REQUIRE(parts->calls.size() == plain->calls.size());
  int64_t pushes = 0;
  for (size_t i = 0; i < parts->calls.size(); ++i) {
    if (parts->calls[i].kind != 'P') continue;
    INFO("push " << pushes);
    REQUIRE(plain->calls[i].kind == 'P');
    CHECK(relative_difference(parts->calls[i].grads, plain->calls[i].grads) <= 1e-4);
    ++pushes;
  }
  CHECK(pushes == 4 * (800 / 40));
  REQUIRE(parts->replays.size() == 2u);
  REQUIRE(plain->replays.size() == 2u);
  for (size_t k = 0; k < 2; ++k) CHECK(relative_difference(parts->replays[k], plain->replays[k]) <= 1e-4);
  CHECK(pieces.accuracy == Approx(whole.accuracy).margin(0.01));
}

TEST_CASE("ps worker: the step timeline records every step's data wait, pull, forward/backward and push",
          "[ps][worker][timeline]") {
  const Dataset train = blobs(800, 4, 6, 1), test = blobs(200, 4, 6, 2);
  const TrainOptions o = tiny();
  auto shard = make_job_shard(o, DataSpec{train.features(), train.classes}, tiny_shape(PsMode::async, 1, 1, 0, train), 0);
  REQUIRE(shard.ok());
  auto client = local_ps_client({shard->get()}, 0);
  SliceFeed feed(train, o.seed, o.batch_size, 0, 1);
  StepRecorder recorder;
  PsWorker w{client.get(), 0, 1};
  w.steps = &recorder;
  auto result = train_ps_worker(o, train, test, feed, w);
  INFO(result.status().to_string());
  REQUIRE(result.ok());
  int64_t dropped = -1;
  const std::vector<gcs::StepSample> steps = recorder.drain(&dropped);
  CHECK(dropped == 0);
  REQUIRE(steps.size() == static_cast<size_t>(4 * (800 / 40)));
  int64_t compute = 0, last_end = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const gcs::StepSample& s = steps[i];
    INFO("step " << i + 1);
    CHECK(s.step == static_cast<int64_t>(i) + 1);
    CHECK(s.epoch == static_cast<int>(i / 20) + 1);
    CHECK(s.samples == 40);
    CHECK(s.start_us >= last_end);  // one after the other
    CHECK(s.comm_busy_us == 0);
    CHECK(std::isfinite(s.loss));
    compute += s.compute_us;
    last_end = s.end_us();
  }
  CHECK(compute > 0);
  CHECK(steps.back().loss < steps.front().loss);
  // The feed's end began no step: the worker is idle (evaluating, finishing), not waiting for data.
  CHECK(recorder.now().phase == StepPhase::idle);
}
