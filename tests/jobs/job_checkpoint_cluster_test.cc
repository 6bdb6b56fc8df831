// Checkpoints of sync, central and async jobs on a real local cluster and `troupe submit --resume` after a
// whole-cluster restart. The GCS must survive the restart (the embedded redis starts empty on
// `troupe up`), so the test runs its own redis-server and passes it to `troupe up --redis`.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gcs/redis_store.h"
#include "gcs/tables.h"
#include "tests/cluster/cluster_fixture.h"

using namespace troupe::testing;
namespace fs = std::filesystem;

namespace {

// The step directories under `dir`, oldest first ("step-000000000100", ...); not JOB.json beside
// them (trainers/job/job_file.h), which made a half-written fourth checkpoint count as a fifth.
std::vector<std::string> step_dirs(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind("step-", 0) == 0) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// "<job_dir>/step-000000000300" for step 300.
std::string checkpoint_dir_of(const std::string& job_dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%012lld", static_cast<long long>(step));
  return job_dir + "/" + name;
}

// The step of job `job`'s newest checkpoint manifest in the GCS at 127.0.0.1:port (0: none).
int64_t newest_manifest_step(int port, const std::string& password, const std::string& job) {
  troupe::gcs::RedisStoreOptions o;
  o.redis.host = "127.0.0.1";
  o.redis.port = port;
  o.redis.password = password;
  auto store = troupe::gcs::RedisStore::connect(o);
  REQUIRE(store.ok());
  auto all = troupe::gcs::Table<troupe::gcs::CheckpointRecord>(**store).list();
  REQUIRE(all.ok());
  int64_t newest = 0;
  for (const auto& r : *all)
    if (r.job.hex() == job) newest = std::max(newest, r.step);
  return newest;
}

}  // namespace

// `strategy` (sync: 2 workers; central: 2 workers and its parameter server; async: 2 workers, 2
// servers) checkpoints every 100 steps (async: every 100 pushes of each worker, versions 200, 400,
// ...); the cluster goes down once the third checkpoint's files exist; the newest checkpoint is
// damaged; the whole cluster comes up again on the same GCS and `submit --resume` completes the job.
static void checkpoint_restart_resume(const std::string& strategy) {
  const bool async = strategy == "async";
  ClusterFixture c;
  const int port = free_loopback_port();
  const std::string redis_dir = c.home() + "/external-redis";
  fs::create_directories(redis_dir);
  auto started = run_command("redis-server --port " + std::to_string(port) +
                             " --bind 127.0.0.1 --requirepass ckpt-secret --daemonize yes --dir " + redis_dir +
                             " --pidfile " + redis_dir + "/redis.pid --save '' --logfile " + redis_dir + "/redis.log");
  REQUIRE(started.exit_code == 0);
  REQUIRE(poll_until([&] { return fs::exists(redis_dir + "/redis.pid") && loopback_port_accepts(port); },
                     std::chrono::seconds(10)));
  const pid_t redis_pid = std::stoi(slurp(redis_dir + "/redis.pid"));
  c.track(redis_pid);
  struct StopRedis {  // after the cluster (which needs its GCS to go down cleanly)
    ClusterFixture& c;
    pid_t pid;
    ~StopRedis() {
      c.troupe("down", 60);
      ::kill(pid, SIGTERM);
    }
  } stop_redis{c, redis_pid};
  const std::string up_args = "--nodes 1 --cpus 4 --redis 127.0.0.1:" + std::to_string(port) +
                              " --redis-password ckpt-secret";
  const std::string ckpt = c.home() + "/checkpoints";

  // 3 epochs of 468 steps, a checkpoint every 100; the cluster goes down once step 300's shards exist.
  c.up(up_args);
  auto submitted = c.troupe("submit --strategy " + strategy + " --workers 2 " + (async ? "--ps 2 " : "") +
                            "--epochs 3 --batch-size 128 --checkpoint-every 100 --checkpoint-dir " + ckpt +
                            " --detach --json");
  INFO(submitted.both());
  REQUIRE(submitted.exit_code == 0);
  const std::string job = Json::parse(submitted.last_line()).at("job_id").get<std::string>();
  const std::string job_dir = ckpt + "/" + job;
  const int64_t third = async ? 600 : 300;
  REQUIRE(poll_until([&] { return fs::exists(checkpoint_dir_of(job_dir, third)); }, std::chrono::seconds(150),
                     std::chrono::milliseconds(20)));
  // `down` ends the running job (CANCELLED, with the command that continues it), so the cluster
  // brought up again does not take it over.
  auto down = c.troupe("down");
  INFO(down.both());
  REQUIRE(down.exit_code == 0);
  CHECK(down.out.find("job " + job.substr(0, 8) + " cancelled; continue it with `troupe submit --resume") !=
        std::string::npos);

  // At most 3 checkpoints are kept (4 step directories: a newer one may be half-written, without a
  // manifest). Damage the first shard of the newest checkpoint whose manifest is in the GCS: the
  // resume must skip it and say so.
  std::vector<std::string> dirs = step_dirs(job_dir);
  std::string listed;
  for (const std::string& d : dirs) listed += " " + fs::path(d).filename().string();
  INFO("checkpoint directories:" << listed);
  REQUIRE(dirs.size() >= 2);
  CHECK(dirs.size() <= 4);
  const int64_t newest = newest_manifest_step(port, "ckpt-secret", job);
  REQUIRE(newest >= (async ? 400 : 300));
  const std::string victim = checkpoint_dir_of(job_dir, newest) + (strategy == "central" ? "/shard-0-of-1.ckpt"
                                                                                         : "/shard-0-of-2.ckpt");
  REQUIRE(fs::exists(victim));
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }

  // The whole cluster again, on the same GCS: the old job stays CANCELLED; it resumes as a new job.
  // (The resumed job's wait stays under ctest's 600 s, so a hang fails here with the logs.)
  c.up(up_args);
  const Json after = c.status();  // (a range-for over a temporary's member would dangle)
  bool seen = false;
  for (const Json& j : after.at("jobs")) {
    if (j.at("id") != job) continue;
    seen = true;
    CHECK(j.at("state") == "CANCELLED");
    CHECK(j.at("message").get<std::string>().find("troupe down") != std::string::npos);
  }
  CHECK(seen);
  auto resumed = c.troupe("submit --resume " + job.substr(0, 8) + " --json --no-progress", 360);
  INFO(resumed.both() << c.logs_tail());
  REQUIRE(resumed.exit_code == 0);
  Json summary = Json::parse(resumed.last_line());
  CHECK(summary.at("job_id").get<std::string>() != job);
  const int64_t from = summary.at("resumed_from").at("step").get<int64_t>();
  CHECK(summary.at("resumed_from").at("job_id") == job);
  CHECK(from >= 200);
  CHECK(from < newest);  // the damaged newest one (or one without a manifest) was not used
  CHECK(from % (async ? 200 : 100) == 0);
  CHECK(summary.at("test_accuracy").get<double>() >= 0.85);  // an uninterrupted 3-epoch run: ~0.87
  CHECK(resumed.err.find("is not usable") != std::string::npos);
  const std::string id = summary.at("job_id").get<std::string>();
  if (async) {
    // Every example of the 3 epochs applied once on both servers, across the two jobs: the servers
    // restored the old job's records from the checkpoint and caught each other up, the ledger
    // went on where the training stopped (trainers/job/ps_resume.h).
    Json accounted;
    poll_until([&] {
      const Json view = c.status(200);  // (a range-for over a temporary's member would dangle)
      for (const Json& e : view.at("events"))
        if (e.value("subject", "") == id &&
            (e.at("kind") == "data_accounted" || e.at("kind") == "data_accounting_failed"))
          accounted = e;
      return !accounted.is_null();
    }, std::chrono::seconds(30), std::chrono::milliseconds(200));
    INFO(accounted.dump());
    REQUIRE_FALSE(accounted.is_null());
    CHECK(accounted.at("kind") == "data_accounted");
    WARN("async resumed from version " << from << ": " << accounted.at("message").get<std::string>());
  } else {
    CHECK(summary.at("steps") == 3 * (60000 / 128));
    CHECK(summary.at("last_checkpoint_step").get<int64_t>() == 1400);  // the resumed job checkpoints too
  }

  // The GCS recorded the checkpoints as events.
  Json view = c.status(200);
  int written = 0;
  for (const Json& e : view.at("events")) written += e.at("kind") == "checkpoint_written";
  CHECK(written > 0);
}

TEST_CASE("submit --checkpoint-every, a whole-cluster restart, submit --resume: a sync job completes from its "
          "newest intact checkpoint", "[jobs][cluster][checkpoint][sync]") {
  checkpoint_restart_resume("sync");
}

TEST_CASE("submit --checkpoint-every, a whole-cluster restart, submit --resume: a central job completes from its "
          "newest intact checkpoint", "[jobs][cluster][checkpoint][central]") {
  checkpoint_restart_resume("central");
}

TEST_CASE("submit --checkpoint-every, a whole-cluster restart, submit --resume: an async job completes from its "
          "newest intact checkpoint, exactly once", "[jobs][cluster][checkpoint][async]") {
  checkpoint_restart_resume("async");
}
