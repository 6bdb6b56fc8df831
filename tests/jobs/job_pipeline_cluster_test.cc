// Pipeline-parallel jobs on a real local cluster (embedded redis-server, a head and a node
// process), through `troupe submit --strategy pipeline` as a user runs them: stage actors in
// separate processes exchanging activations over shared memory and TCP, the deep Fashion-MNIST
// MLP trained to the accuracy target on 4 stages, 2D (2 stages x 2 replicas), bad input refused
// before anything runs. (A stage's node killed mid-job: tests/jobs/job_fault_cluster_test.cc.)
#include <catch2/catch.hpp>

#include <csignal>
#include <string>

#include "tests/cluster/cluster_fixture.h"

using namespace troupe::testing;

TEST_CASE("submit: a 4-stage pipeline trains the deep MLP on Fashion-MNIST to >= 0.885 and reports memory and "
          "bubble per stage",
          "[jobs][cluster][pipeline]") {
  ClusterFixture c;
  c.up("--nodes 1 --cpus 4");  // 8 cpus on 2 nodes: the stages span both (shm within, TCP between)
  auto r = c.troupe("submit --strategy pipeline --stages 4 --microbatches 4 --schedule 1f1b "
                    "--hidden 1024,1024,512,256 --epochs 6 --batch-size 128 --json --no-progress",
                    600);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  Json summary = Json::parse(r.last_line());
  CHECK(summary.at("strategy") == "pipeline");
  CHECK(summary.at("stages") == 4);
  CHECK(summary.at("replicas") == 1);
  CHECK(summary.at("steps") == 6 * (60000 / 128));
  CHECK(summary.at("test_accuracy").get<double>() >= 0.885);
  // Each stage holds its layers' parameters, gradients and Adam state only: together the model's,
  // each about its share (the 1024x1024 layer alone is 0.42 of this model).
  const Json& stages = summary.at("stage_reports");
  REQUIRE(stages.size() == 4u);
  double memory = 0;
  for (const Json& s : stages) {
    memory += s.at("memory_fraction").get<double>();
    CHECK(s.at("memory_fraction").get<double>() < 0.45);
    CHECK(s.at("bubble_fraction").get<double>() >= 0);
    CHECK(s.at("bubble_fraction").get<double>() < 1);
  }
  CHECK(memory == Approx(1.0).margin(0.01));
  CHECK(summary.at("bubble_estimate_gpipe").get<double>() == Approx(3.0 / 7));
}

TEST_CASE("submit: a 2-stage x 2-replica pipeline job trains, and bad pipeline jobs are refused clearly",
          "[jobs][cluster][pipeline][errors]") {
  ClusterFixture c;
  c.up("--nodes 1 --cpus 4");
  auto two_d = c.troupe("submit --strategy pipeline --stages 2 --workers 4 --microbatches 2 --schedule gpipe "
                        "--hidden 128,64 --epochs 1 --batch-size 128 --json --no-progress",
                        300);
  INFO(two_d.both() << c.logs_tail());
  REQUIRE(two_d.exit_code == 0);
  Json summary = Json::parse(two_d.last_line());
  CHECK(summary.at("replicas") == 2);
  CHECK(summary.at("workers") == 4);
  CHECK(summary.at("test_accuracy").get<double>() > 0.8);

  auto layers = c.troupe("submit --strategy pipeline --stages 4 --hidden 256 --no-progress");
  CHECK(layers.exit_code == 2);
  CHECK(layers.err.find("--stages 4 is more stages than the model has layers (2)") != std::string::npos);

  auto micro = c.troupe("submit --strategy pipeline --stages 2 --microbatches 3 --batch-size 128 --no-progress");
  CHECK(micro.exit_code == 2);
  CHECK(micro.err.find("--batch-size 128 (the global batch) does not divide into 1 replica(s) x 3 micro-batches") !=
        std::string::npos);

  auto workers = c.troupe("submit --strategy pipeline --stages 2 --workers 3 --no-progress");
  CHECK(workers.exit_code == 2);
  CHECK(workers.err.find("--workers 3 is not a multiple of --stages 2") != std::string::npos);

  auto unplaceable = c.troupe("submit --strategy pipeline --stages 3 --cpus-per-worker 3 --no-progress");
  CHECK(unplaceable.exit_code == 2);
  CHECK(unplaceable.err.find("3 stage actors (3 stages x 1 replicas) need 9 cpus; the cluster has 8") !=
        std::string::npos);

  auto no_stages = c.troupe("submit --strategy pipeline --no-progress");
  CHECK(no_stages.exit_code == 2);
  CHECK(no_stages.err.find("--strategy pipeline needs --stages K") != std::string::npos);
}
