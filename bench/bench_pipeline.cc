// Pipeline parallelism on one machine: (1) training samples/s of a K-stage pipeline against K-way
// data parallelism (sync replicas) on the same model, (2) the measured bubble — the idle share of
// a stage's passes — against the GPipe estimate (K-1)/(M+K-1) for M micro-batches per step.
// Stage actors and replicas are threads; the stages talk over the in-process transport, the
// replicas all-reduce over it (the same stage and replica code the cluster's workers run over shm
// or TCP). Every run's parameters are checked finite and the pipeline's against one process.
//
//   build/bin/bench_pipeline --runs 3 --steps 60
//
// Part 2 uses a balanced model (four equal 1024x1024 layers on synthetic data, 64 rows per
// micro-batch) so that the passes of all stages take the same time, as the estimate assumes.
#include <cstdio>
#include <memory>
#include <random>
#include <thread>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "bench/bench_common.h"
#include "collectives/inproc_transport.h"
#include "kernels/cpu/blas_info.h"
#include "kernels/cpu/ops.h"
#include "trainers/pipeline/local_pipeline.h"
#include "trainers/pipeline/partition.h"
#include "trainers/pipeline/schedule.h"
#include "trainers/sync/trainer_driver.h"

using namespace troupe;
using namespace troupe::bench;

namespace {

// `count` examples of side x side features and `classes` classes, uniform noise (speed only).
Dataset synthetic(int64_t count, int side, int classes, uint64_t seed) {
  Dataset d;
  d.count = count;
  d.rows = d.cols = side;
  d.classes = classes;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  d.images.resize(static_cast<size_t>(count) * side * side);
  for (float& x : d.images) x = unit(rng);
  for (int64_t i = 0; i < count; ++i) d.labels.push_back(static_cast<int32_t>(i % classes));
  return d;
}

// Samples/s of `replicas` sync replicas (threads, in-process all-reduce) over `steps` steps.
Expected<double> data_parallel(const TrainOptions& o, int replicas, const Dataset& train, const Dataset& test) {
  auto group = collectives::make_inproc_group(replicas);
  std::vector<Expected<TrainResult>> results(replicas, Expected<TrainResult>(internal_error("not run")));
  std::vector<std::thread> threads;
  for (int r = 0; r < replicas; ++r)
    threads.emplace_back([&, r] {
      collectives::Communicator comm(std::move(group[r]));
      Replica rep;
      rep.comm = &comm;
      rep.bucket_bytes = 0;  // one all-reduce per step: the jobs' choice on 2 cores per worker or fewer
      results[r] = train_replica(o, train, test, rep);
    });
  for (auto& t : threads) t.join();
  for (auto& r : results)
    if (!r.ok()) return r.status();
  return results[0]->samples_per_second;
}

}  // namespace

int main(int argc, char** argv) {
  kernels::cpu::reexec_for_blas(argv);
  int runs = 3, stages = 4;
  int64_t steps = 60;
  std::vector<int> micro{1, 4, 8, 16}, bubble_stages{2, 4};
  std::string hidden = "1024,1024,512,256";
  CLI::App app{"Pipeline parallelism: samples/s vs data parallelism, bubble vs the GPipe estimate"};
  app.add_option("--runs", runs, "Timed runs per configuration (medians)")->check(CLI::Range(1, 100))->capture_default_str();
  app.add_option("--steps", steps, "Steps per run")->check(CLI::Range(2, 100000))->capture_default_str();
  app.add_option("--stages", stages, "Stages (and data-parallel replicas) of part 1")->capture_default_str();
  app.add_option("--hidden", hidden, "Hidden layers of part 1's MLP (Fashion-MNIST shaped)")->capture_default_str();
  app.add_option("--micro", micro, "Micro-batch counts of part 2")->delimiter(',')->capture_default_str();
  app.add_option("--bubble-stages", bubble_stages, "Stage counts of part 2")->delimiter(',')->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  std::printf("# %s\n# %s, %u hardware threads; %s\n", command_line(argc, argv).c_str(), cpu_model().c_str(),
              std::thread::hardware_concurrency(), blas_description().c_str());

  // ---- part 1: samples/s, K-stage pipeline vs K replicas, same model, batch 128 ----
  TrainOptions o;
  o.epochs = 1;
  o.batch_size = 128;
  o.max_steps = steps;
  o.evaluate_each_epoch = false;
  auto sizes = pipeline::parse_stage_layers(hidden);  // a list of positive numbers, as --stage-layers
  if (!sizes.ok()) return std::fprintf(stderr, "error: --hidden: %s\n", sizes.status().to_string().c_str()), 2;
  o.hidden = *sizes;
  const Dataset train = synthetic(o.batch_size * (steps + 1), 28, 10, 1), test = synthetic(500, 28, 10, 2);
  std::printf("\n## samples/s: MLP 784-%s-10, adam, global batch %d, %lld steps, %d runs (median)\n", hidden.c_str(),
              o.batch_size, static_cast<long long>(steps), runs);
  std::printf("%-28s %12s %8s\n", "strategy", "samples/s", "ratio");
  std::vector<double> dp;
  for (int i = 0; i < runs; ++i) {
    auto r = data_parallel(o, stages, train, test);
    if (!r.ok()) return std::fprintf(stderr, "error: data parallel: %s\n", r.status().to_string().c_str()), 1;
    dp.push_back(*r);
  }
  const double dp_rate = median(dp);
  std::printf("%-28s %12.0f %8.2f\n", ("sync, " + std::to_string(stages) + " replicas").c_str(), dp_rate, 1.0);
  for (const char* schedule : {"gpipe", "1f1b"})
    for (int m : {4, 8}) {
      pipeline::PipelineOptions po;
      po.stages = stages;
      po.microbatches = m;
      po.schedule = schedule;
      std::vector<double> rates;
      for (int i = 0; i < runs; ++i) {
        auto r = pipeline::train_local_pipeline(o, po, train, test);
        if (!r.ok()) return std::fprintf(stderr, "error: pipeline: %s\n", r.status().to_string().c_str()), 1;
        if (!kernels::cpu::all_finite(r->params.data(), r->params.size()))
          return std::fprintf(stderr, "error: pipeline parameters not finite\n"), 1;
        rates.push_back(r->train.samples_per_second);
      }
      char name[64];
      std::snprintf(name, sizeof name, "pipeline %d stages, %s M=%d", stages, schedule, m);
      std::printf("%-28s %12.0f %8.2f\n", name, median(rates), median(rates) / dp_rate);
    }

  // ---- part 2: measured bubble vs (K-1)/(M+K-1), balanced model, 64 rows per micro-batch ----
  std::printf("\n## bubble: MLP 1024-1024-1024-1024-1024 (4 equal layers), gpipe, 64 rows per micro-batch, %lld steps, "
              "%d runs (median of the stages' mean)\n", static_cast<long long>(steps), runs);
  std::printf("%6s %4s %10s %10s %10s %10s\n", "stages", "M", "estimate", "measured", "max stage", "samples/s");
  // 8 steps of the largest batch; runs of more steps go through several epochs of it.
  const Dataset wide = synthetic(64 * 16 * 8, 32, 1024, 3), wide_test = synthetic(256, 32, 1024, 4);
  for (int k : bubble_stages)
    for (int m : micro) {
      TrainOptions b = o;
      b.hidden = {1024, 1024, 1024};
      b.batch_size = 64 * m;
      b.epochs = 1000;  // max_steps ends the run
      pipeline::PipelineOptions po;
      po.stages = k;
      po.microbatches = m;
      po.schedule = "gpipe";
      std::vector<double> mean, worst, rates;
      for (int i = 0; i < runs; ++i) {
        auto r = pipeline::train_local_pipeline(b, po, wide, wide_test);
        if (!r.ok()) return std::fprintf(stderr, "error: pipeline: %s\n", r.status().to_string().c_str()), 1;
        double sum = 0, most = 0;
        for (const auto& s : r->stages) {
          sum += s.bubble_fraction;
          most = std::max(most, s.bubble_fraction);
        }
        mean.push_back(sum / r->stages.size());
        worst.push_back(most);
        rates.push_back(r->train.samples_per_second);
      }
      std::printf("%6d %4d %10.3f %10.3f %10.3f %10.0f\n", k, m, pipeline::gpipe_bubble_estimate(k, m), median(mean),
                  median(worst), median(rates));
    }
  return 0;
}
