// Same seed, same bits: a sync job's saved model is a function of its seed and its shape. The same
// job submitted twice on a real cluster ends byte-identical, over TCP between nodes and shared memory
// on one node, with gradient buckets (all-reduced while backward runs, whenever each is ready) and
// without; each run's data accounted exactly once. (Which worker claims which shard is fixed by name,
// and each reduction adds in an order fixed by the group's shape, not by timing.)
#include <catch2/catch.hpp>

#include <string>

#include "tests/cluster/cluster_fixture.h"
#include "tests/jobs/job_fault_helpers.h"
#include "tests/support/run_command.h"

using namespace troupe;
using namespace troupe::testing;

namespace {

// `args` submitted twice, each run saving its model: both files' bytes must be equal.
void twice_byte_identical(ClusterFixture& c, const std::string& args, const std::string& name) {
  std::string saved[2];
  for (int run = 0; run < 2; ++run) {
    const std::string file = c.home() + "/" + name + "-" + std::to_string(run) + ".safetensors";
    auto r = c.troupe("submit " + args + " --save " + file + " --json --no-progress", 300);
    INFO(name << " run " << run << ": " << r.both() << c.logs_tail());
    REQUIRE(r.exit_code == 0);
    const Json result = Json::parse(r.last_line());
    accounted_event(c, result.at("job_id").get<std::string>());
    saved[run] = slurp(file);
    REQUIRE(saved[run].size() > 1000);
  }
  INFO(name << ": the two runs' saved models differ");
  CHECK(saved[0] == saved[1]);
}

const char* kJob = "--strategy sync --workers 4 --epochs 1 --seed 7 --batch-size 128";

}  // namespace

TEST_CASE("determinism: a sync job over TCP between nodes, with and without buckets, ends byte-identical twice",
          "[jobs][cluster][determinism]") {
  ClusterFixture c;
  c.up("--nodes 3 --cpus 2");  // the 4 workers spread over the nodes
  twice_byte_identical(c, std::string(kJob) + " --transport tcp --bucket-bytes 65536", "tcp-buckets");
  twice_byte_identical(c, std::string(kJob) + " --transport tcp --bucket-bytes 0", "tcp-whole");
}

TEST_CASE("determinism: a sync job over shared memory on one node, with and without buckets, ends byte-identical "
          "twice", "[jobs][cluster][determinism]") {
  ClusterFixture c;
  c.up("--nodes 0 --cpus 4");  // the head alone: every worker on one node
  twice_byte_identical(c, std::string(kJob) + " --transport shm --bucket-bytes 65536", "shm-buckets");
  twice_byte_identical(c, std::string(kJob) + " --transport shm --bucket-bytes 0", "shm-whole");
}
