// A module scripted in Python as users hand it to a cluster: `--model torchscript:FILE`, a path
// relative to the directory they submit from, the file moved away before the job's workers start
// (the nodes of a multi-host cluster do not have it): the workers train the GCS's copy (fetched
// into their cache), and `troupe export JOB` — which fetches it too — writes --save's tensors and
// the same description. An elastic sync job of the module shrinks to the workers that fit when a
// node is killed and completes, each example trained once.
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <string>

#include "data/safetensors.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/core/temp_dir.h"
#include "tests/jobs/job_fault_helpers.h"

using namespace troupe::testing;
namespace fs = std::filesystem;

namespace {

const std::string kFixture = std::string(TROUPE_TORCH_FIXTURE_DIR) + "/fashion_mlp.pt";

// `troupe <args>` run in `dir` against the cluster of `c`.
CommandResult troupe_in(ClusterFixture& c, const std::string& dir, const std::string& args, int timeout_s = 120) {
  return run_command("cd " + dir + " && env TROUPE_HOME=" + c.home() + " " + troupe_binary() + " " + args, timeout_s);
}

// The files under `dir`, recursively, whose name is `name`.
int files_named(const std::string& dir, const std::string& name) {
  int n = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); ++it)
    n += it->path().filename() == name;
  return n;
}

}  // namespace

TEST_CASE("torchscript: a job of --model torchscript:FILE, submitted from another directory, trains the GCS's copy "
          "once the file is moved away, and troupe export JOB writes --save's tensors",
          "[torch][cluster][ship][export]") {
  ClusterFixture c;
  const std::string tmp = c.home() + "/tmp";  // the nodes' temp dir: where they cache fetched files
  fs::create_directories(tmp);
  auto up = c.troupe("up --nodes 1 --cpus 2", 90, "TMPDIR=" + tmp);  // 4 cpus: the head's and the node's
  INFO(up.both());
  REQUIRE(up.exit_code == 0);
  TempDir work(std::string(TROUPE_BINARY_DIR) + "/test-homes");
  fs::copy_file(kFixture, work.file("module.pt"));

  // The cluster kept busy, so the job waits PENDING while the file goes away.
  auto busy = c.troupe("spawn echo --cpus 2 --json");
  INFO(busy.both());
  REQUIRE(busy.exit_code == 0);
  const std::string echo = Json::parse(busy.last_line()).at("actor_ids").at(0).get<std::string>();
  auto submitted = troupe_in(c, work.path(), "submit --model torchscript:module.pt --strategy sync --workers 2 "
                                             "--cpus-per-worker 2 --epochs 1 --max-steps 200 --batch-size 64 "
                                             "--optimizer sgd --lr 0.05 --checkpoint-every 50 --checkpoint-dir ckpt "
                                             "--save saved.safetensors --detach");
  INFO(submitted.both() << c.logs_tail());
  REQUIRE(submitted.exit_code == 0);
  const std::string id = submitted.last_line();
  CHECK(job_of(c.status(), id).at("state") == "PENDING");
  fs::rename(work.file("module.pt"), work.file("moved.pt"));
  REQUIRE(c.troupe("stop " + echo).exit_code == 0);

  Json end = wait_for_end(c, id, std::chrono::seconds(240));
  INFO(c.logs_tail());
  Json j = job_of(end, id);
  INFO(j.dump(1));
  REQUIRE(j.at("state") == "SUCCEEDED");
  CHECK(accuracy_of(end, id) >= 0.7);
  CHECK(files_named(tmp + "/troupe-trainer-files", "module.pt") == 1);  // the GCS's copy, by its checksum

  // export JOB fetches the module too (it is not at its path): --save's tensors and description.
  const std::string exported = c.home() + "/exported.safetensors";
  auto e = c.troupe("export " + id.substr(0, 8) + " --out " + exported + " --json", 120);
  INFO(e.both());
  REQUIRE(e.exit_code == 0);
  auto a = troupe::data::read_safetensors(exported);
  auto b = troupe::data::read_safetensors(work.file("saved.safetensors"));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a->tensors.size() == 4u);
  REQUIRE(a->tensors.size() == b->tensors.size());
  for (size_t i = 0; i < a->tensors.size(); ++i) {
    INFO(a->tensors[i].name);
    CHECK(a->tensors[i].name == b->tensors[i].name);
    CHECK(a->tensors[i].bytes == b->tensors[i].bytes);
  }
  // Both name the file as submitted (made absolute), not a node's cached copy.
  const std::string named = "torchscript " + work.file("module.pt") + " (50890 parameters in 4 tensors)";
  CHECK(a->metadata.at("troupe.description") == named);
  CHECK(b->metadata.at("troupe.description") == named);
  CHECK(b->metadata.at("troupe.trainer_args") == "file=" + work.file("module.pt"));
}

TEST_CASE("torchscript: an elastic sync job goes on with the workers that fit after its node is killed, and completes "
          "with each example trained once", "[torch][cluster][elastic]") {
  ClusterFixture c;
  c.up("--nodes 1 --cpus 2");  // 4 workers on the head and the node; after the node dies room for 2
  const std::string id = submit_detached(c, "--model torchscript:" + kFixture + " --strategy sync --elastic --workers 4 "
                                            "--epochs 2 --batch-size 128 --optimizer sgd --lr 0.05 "
                                            "--checkpoint-every 50 --checkpoint-dir " + c.home() + "/ckpt");
  const auto [victim, pid] = node_hosting(wait_for_step(c, id, 150), id);
  REQUIRE_FALSE(victim.empty());
  REQUIRE(::kill(pid, SIGKILL) == 0);

  Json end = wait_for_end(c, id, std::chrono::seconds(240));
  INFO(c.logs_tail());
  Json j = job_of(end, id);
  INFO(j.dump(1));
  REQUIRE(j.at("state") == "SUCCEEDED");
  CHECK(accuracy_of(end, id) >= 0.75);
  const std::vector<std::string> resized = event_messages(end, "job_resized", id);
  for (const std::string& line : resized) UNSCOPED_INFO(line);
  CHECK(std::any_of(resized.begin(), resized.end(),
                    [](const std::string& l) { return l.find("continues with 2 of 4 workers") != std::string::npos; }));
  CHECK(j.at("result").value("final_workers", 0) == 2);
  accounted_event(c, id);
}
