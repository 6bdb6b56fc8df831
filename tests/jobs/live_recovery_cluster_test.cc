// Live recovery (issue 44): a sync job that loses a worker mid-epoch goes on from the survivors'
// memory — only the lost worker is replaced, it takes the state from a peer over the data plane,
// and the step in flight is trained again on the same examples — so the job ends with exactly the
// parameters of the same job run without the fault (same seed), byte for byte, its data accounted
// exactly once. On a real local cluster, faults as users meet them: a worker's exception with the
// workers packed on one node, and a node process killed with two workers on it; nothing is restarted
// by the test. The same with --shard optimizer and --shard parameters, whose lost shards come back
// from the buddy mirrors (trainers/sharded/buddy_mirror.h). (--transport tcp: the sums add in the
// same order wherever the replacement lands.)
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/cluster/cluster_fixture.h"
#include "tests/jobs/job_fault_helpers.h"
#include "tests/jobs/live_recovery_checks.h"
#include "tests/support/run_command.h"

using namespace troupe::testing;
namespace fs = std::filesystem;

namespace {

const std::string kSyncFlaky = "--trainer flaky --strategy sync --workers 4";
const std::string kRank2AtStep150 = " --trainer-arg throw_at=150 --trainer-arg throw_rank=2";

// A flaky worker's exception (`fault`: by default rank 2's at its step 150 of 468 in epoch 1), the
// four workers of `job` packed on the head alone (the replacement in the same process); `extra`
// adds to the job's arguments.
void exception_packed(const std::string& extra, int64_t max_lost, const std::string& job = kSyncFlaky,
                      const std::string& fault = kRank2AtStep150) {
  ClusterFixture c;
  c.up("--nodes 0 --cpus 4");
  const std::string args = "--lib " + std::string(TROUPE_FLAKY_TRAINER) + " " + job +
                           " --epochs 2 --batch-size 128 --seed 7 --transport tcp --restart-backoff 0" + extra;
  // The worker throws unless the marker file exists. The undisturbed run has the same arguments
  // (they are in the saved model's metadata) and the marker.
  const std::string marker = c.home() + "/thrown";
  const std::string faulty = args + " --trainer-arg marker=" + marker + fault;
  std::ofstream(marker) << "not this time\n";
  const std::string baseline = c.home() + "/undisturbed.safetensors";
  run_saving(c, faulty, baseline);
  fs::remove(marker);
  const std::string file = c.home() + "/recovered.safetensors";
  const std::string id = run_saving(c, faulty, file);
  CHECK(fs::exists(marker));  // it did throw
  INFO("the exception came at" << fault);
  check_live(c, id, file, baseline, max_lost);
}

}  // namespace

TEST_CASE("live recovery: a worker's exception mid-epoch, the workers packed on one node: only it is replaced, "
          "from a peer's memory, and the job ends byte-identical to the undisturbed run",
          "[jobs][cluster][faults][live]") {
  exception_packed("", 0);
}

TEST_CASE("live recovery: a node with two of the job's four workers killed mid-epoch: both replaced from the "
          "survivors' memory, the job ends byte-identical to the undisturbed run",
          "[jobs][cluster][faults][live]") {
  node_killed("", 0);
}

TEST_CASE("live recovery, --shard optimizer: a worker's exception mid-epoch, its shard of the optimizer state "
          "comes back from its buddy's mirror (sent beside the steps) and the job ends byte-identical to the "
          "undisturbed run",
          "[jobs][cluster][faults][live][sharded]") {
  exception_packed(" --shard optimizer --mirror-overlap on", 1);
}

TEST_CASE("live recovery, --shard parameters --mirror-every 1: a node with two of four workers killed, their "
          "shards come back from buddies on other nodes (sent after each step) and the job ends byte-identical to "
          "the undisturbed run",
          "[jobs][cluster][faults][live][sharded]") {
  node_killed(" --shard parameters --mirror-every 1 --mirror-overlap off", 1);
}

TEST_CASE("live recovery, a 2x2 pipeline: stage 0 of replica 1 throws at step 150 mid-epoch, the workers packed "
          "on one node: only it is replaced, its layers' state from stage 0 of replica 0, and the job ends "
          "byte-identical to the undisturbed run",
          "[jobs][cluster][faults][live][pipeline]") {
  // Replica 1's layer 0 (stage 0) throws at its 300th training forward: micro-batch 2 of step 150.
  exception_packed("", 0, "--trainer flaky_layers --strategy pipeline --stages 2 --workers 4 --microbatches 2",
                   " --trainer-arg throw_at=300 --trainer-arg throw_rank=1 --trainer-arg throw_layer=0");
}

TEST_CASE("live recovery, a pipeline of one replica: stage 1 throws at step 150 mid-epoch: only it is replaced, "
          "its layers' state from the copy stage 0 keeps (the buddy mirror), and the job ends byte-identical to "
          "the undisturbed run",
          "[jobs][cluster][faults][live][pipeline]") {
  // Layer 1 (stage 1) throws at its 300th training forward: micro-batch 2 of step 150.
  exception_packed("", 0, "--trainer flaky_layers --strategy pipeline --stages 2 --workers 2 --microbatches 2",
                   " --trainer-arg throw_at=300 --trainer-arg throw_rank=0 --trainer-arg throw_layer=1");
}

TEST_CASE("live recovery, a pipeline of one replica mirroring every 7 steps: stage 1 throws at step 150, the job "
          "goes back to the newest whole round (147) in memory, and ends byte-identical to the undisturbed run",
          "[jobs][cluster][faults][live][pipeline]") {
  // Rounds at steps 140 and 147 when layer 1 throws in step 150: at most 6 completed steps lost.
  exception_packed(" --mirror-every 7", 6, "--trainer flaky_layers --strategy pipeline --stages 2 --workers 2 --microbatches 2",
                   " --trainer-arg throw_at=300 --trainer-arg throw_rank=0 --trainer-arg throw_layer=1");
}
