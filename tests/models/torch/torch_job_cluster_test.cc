// A PyTorch module scripted in Python trained by jobs on a real local cluster, with the faults users
// meet: a sync job's worker node killed mid-epoch restarts from its checkpoint, an async job's
// worker node killed is replaced; each ends within half a point of the same job without the fault,
// every example trained exactly once. A module with dropout recovers live from its peers' memory and
// ends byte-identical to the undisturbed job: the replacements draw the masks the lost workers drew. Each worker process loads the torchscript model's library
// itself (lib/troupe/models/); the module file is at the same path for every node (one machine).
#include <catch2/catch.hpp>

#include <csignal>
#include <string>

#include "tests/cluster/cluster_fixture.h"
#include "tests/jobs/job_fault_helpers.h"
#include "tests/jobs/live_recovery_checks.h"

using namespace troupe::testing;

namespace {

const std::string kModule = std::string("--model torchscript --trainer-arg file=") + TROUPE_TORCH_FIXTURE_DIR +
                            "/fashion_mlp.pt --batch-size 64";
const std::string kModel = kModule + " --optimizer sgd --lr 0.05 --momentum 0.9";

}  // namespace

TEST_CASE("torchscript: a sync job whose worker node is killed mid-epoch restarts from its checkpoint and ends within "
          "half a point, each example once", "[torch][cluster][faults]") {
  ClusterFixture c;
  c.up("--nodes 2 --cpus 2");  // 6 cpus on 3 processes: the 2 workers, and room for them after one node dies
  const std::string job_args = "--strategy sync --workers 2 --epochs 3 --checkpoint-every 100 --checkpoint-dir " +
                               c.home() + "/ckpt " + kModel;
  const double baseline = fault_free_accuracy(c, job_args);
  CHECK(baseline >= 0.8);

  const std::string id = submit_detached(c, job_args);
  Json view = wait_for_step(c, id, 1100);  // in epoch 2, past several checkpoints
  const auto [victim, pid] = node_hosting(view, id);
  REQUIRE_FALSE(victim.empty());
  REQUIRE(::kill(pid, SIGKILL) == 0);

  Json end = wait_for_end(c, id, std::chrono::seconds(240));
  INFO(c.logs_tail());
  check_recovered(c, end, id, baseline, true);
  CHECK(event_of(end, "job_restarting", id).at("message").get<std::string>().find("its node " + victim.substr(0, 8) +
                                                                                  " is gone") != std::string::npos);
}

TEST_CASE("torchscript: an async job whose worker node is killed replaces the worker and ends within half a point, "
          "each example once", "[torch][cluster][faults]") {
  ClusterFixture c;
  c.up("--nodes 2 --cpus 2");
  // The server asks for a whole node, so the two workers sit on the other two. Adam (the default) for 6
  // epochs, as the built-in async fault test: SGD with momentum 0.9 on stale pushes parted two runs by
  // up to 0.7 points with or without the fault (2 of 4 runs failed the half-point check).
  const std::string job_args = "--strategy async --workers 2 --ps 1 --cpus-per-ps 2 --epochs 6 " + kModule;
  const double baseline = fault_free_accuracy(c, job_args);

  const std::string id = submit_detached(c, job_args);
  const auto [victim, pid] = worker_node_without_server(wait_for_step(c, id, 3000), id);
  REQUIRE_FALSE(victim.empty());
  REQUIRE(::kill(pid, SIGKILL) == 0);

  Json end = wait_for_end(c, id, std::chrono::seconds(240));
  INFO(c.logs_tail());
  check_recovered(c, end, id, baseline, false);
  CHECK(event_of(end, "job_restarting", id).at("message").get<std::string>().find("replacing it") != std::string::npos);
  accounted_event(c, id);  // the replacement went on where the server's applied data ended
}

TEST_CASE("torchscript: a sync job of a module with dropout loses a node with two of its four workers mid-epoch, "
          "recovers live from the survivors' memory and ends byte-identical to the undisturbed run",
          "[torch][cluster][faults][live]") {
  // Two workers share each node process (one libtorch generator); the replacements start a new one.
  node_killed(std::string(" --model torchscript --trainer-arg file=") + TROUPE_TORCH_FIXTURE_DIR +
                  "/fashion_dropout_mlp.pt --optimizer sgd --lr 0.05 --momentum 0.9",
              0);
}
