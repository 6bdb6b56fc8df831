// Rank 0's checkpoint commit (trainers/job/sync_recovery.h, commit_trained_checkpoint) against a
// process killed at every point of it: whatever the GCS holds when it dies, the restart (newest
// recorded checkpoint, trained ranges past it dropped) leaves every step before the checkpoint
// recorded exactly once. CI caught the other order: a rank 0 killed after the manifest but before
// its steps' ranges left a gap ("data_accounting_failed" after a worker node was SIGKILLed).
// And at every such point, every manifest in the GCS has its mirror on disk, and a GCS that then
// loses its data gets them back (gcs/checkpoint_restore.h) with the same guarantee.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "gcs/checkpoint_mirror.h"
#include "gcs/checkpoint_restore.h"
#include "gcs/data_accounting.h"
#include "gcs/in_memory_store.h"
#include "tests/core/temp_dir.h"
#include "trainers/checkpoint/checkpoint_catalog.h"
#include "trainers/job/sync_recovery.h"

using namespace troupe;

namespace {

// An InMemoryStore whose process "dies" after `writes_left` more writes: every later write fails
// (reads still answer, as the GCS itself lives on). put_many is the base class's, row by row, so a
// batch can be cut half-way.
class DyingStore final : public gcs::Store {
 public:
  int writes_left = 1 << 30;

  Status put(const std::string& t, const std::string& k, const std::string& v) override {
    TROUPE_RETURN_IF_ERROR(write());
    return mem.put(t, k, v);
  }
  Expected<bool> put_if_absent(const std::string& t, const std::string& k, const std::string& v) override {
    TROUPE_RETURN_IF_ERROR(write());
    return mem.put_if_absent(t, k, v);
  }
  Expected<bool> compare_and_set(const std::string& t, const std::string& k, const std::string& e,
                                 const std::string& d) override {
    TROUPE_RETURN_IF_ERROR(write());
    return mem.compare_and_set(t, k, e, d);
  }
  Expected<std::optional<std::string>> get(const std::string& t, const std::string& k) override { return mem.get(t, k); }
  Status remove(const std::string& t, const std::string& k) override {
    TROUPE_RETURN_IF_ERROR(write());
    return mem.remove(t, k);
  }
  Expected<std::vector<std::pair<std::string, std::string>>> get_all(const std::string& t) override {
    return mem.get_all(t);
  }
  Expected<std::string> append(const std::string& s, const std::string& v, size_t max_len) override {
    TROUPE_RETURN_IF_ERROR(write());
    return mem.append(s, v, max_len);
  }
  Expected<std::vector<gcs::StreamEntry>> read_recent(const std::string& s, size_t n) override {
    return mem.read_recent(s, n);
  }
  Expected<std::vector<gcs::StreamEntry>> read_after(const std::string& s, const std::string& after,
                                                     size_t n) override {
    return mem.read_after(s, after, n);
  }
  Status publish(const std::string& c, const std::string& m) override {
    TROUPE_RETURN_IF_ERROR(write());
    return mem.publish(c, m);
  }
  Expected<std::unique_ptr<gcs::Subscription>> subscribe(const std::vector<std::string>& c) override {
    return mem.subscribe(c);
  }
  Status ping() override { return {}; }
  std::string describe() const override { return "dying memory"; }

  gcs::InMemoryStore mem;

 private:
  Status write() {
    if (writes_left <= 0) return unavailable("the process was killed");
    --writes_left;
    return {};
  }
};

// The step directory <job_dir>/step-<step> with one shard file, and its manifest.
checkpoint::Manifest manifest_at(const std::string& job_dir, const JobId& job, int64_t step) {
  checkpoint::Manifest m;
  m.tag = job.hex();
  m.step = step;
  m.dir = job_dir + "/step-" + std::to_string(step);
  std::filesystem::create_directories(m.dir);
  const std::string shard = m.dir + "/shard-0-of-1.ckpt";
  std::ofstream(shard, std::ios::binary) << std::string(64, 's');
  m.shards.push_back({shard, 64, "00000000000000ab"});
  return m;
}

// Every step up to `from` recorded exactly once; then attempt 1 goes on to the end of epoch 3 and
// every step is still recorded once.
void check_restart_from(gcs::Store& store, const JobId& job, int64_t from, int64_t per_epoch) {
  REQUIRE(gcs::discard_ranges_after(store, job, from).ok());
  auto report = gcs::account_sync_job(store, job, from, per_epoch, 0);
  REQUIRE(report.ok());
  INFO(report->summary());
  CHECK(report->exactly_once);
  job::TrainedLog again(store, job, 1, per_epoch, from);
  REQUIRE(again.durable_through(30).ok());
  auto end = gcs::account_sync_job(store, job, 30, per_epoch, 0);
  REQUIRE(end.ok());
  INFO(end->summary());
  CHECK(end->exactly_once);
}

}  // namespace

TEST_CASE("sync commit: a rank 0 killed anywhere in a checkpoint commit leaves the restart every step once",
          "[jobs][accounting]") {
  const int64_t per_epoch = 10;
  job::JobSpec spec;
  spec.checkpoint_keep = 3;
  troupe::testing::TempDir dir;
  spec.checkpoint_dir = dir.path();
  int cuts = 0;
  for (int writes = 0;; ++writes) {
    DyingStore store;
    const JobId job = JobId::random();
    const std::string job_dir = dir.file(job.hex());
    job::TrainedLog trained(store, job, 0, per_epoch, 0);
    REQUIRE(job::commit_trained_checkpoint(store, job, spec, trained, manifest_at(job_dir, job, 4)).ok());
    // The next checkpoint (step 14, in epoch 2), killed after `writes` writes of its commit.
    store.writes_left = writes;
    const bool whole = job::commit_trained_checkpoint(store, job, spec, trained, manifest_at(job_dir, job, 14)).ok();
    store.writes_left = 1 << 30;

    // The restart: the newest recorded checkpoint, and the ranges past it dropped.
    auto checkpoints = checkpoint::list_checkpoints(store, job);
    REQUIRE(checkpoints.ok());
    REQUIRE_FALSE(checkpoints->empty());
    const int64_t from = checkpoints->front().step;
    INFO("killed after " << writes << " writes of the commit; the restart starts from step " << from);
    if (whole) CHECK(from == 14);
    // Every manifest in the GCS has its mirror on disk, naming the same step.
    for (const gcs::CheckpointRecord& c : *checkpoints) {
      auto mirror = gcs::read_checkpoint_mirror(gcs::mirror_path(c.dir));
      INFO("step " << c.step << ": " << mirror.status().to_string());
      REQUIRE(mirror.ok());
      CHECK(mirror->manifest.step == c.step);
    }
    // The GCS loses its data here: the mirrors give back a start at least as new, every step once.
    gcs::InMemoryStore fresh;
    auto restored = gcs::restore_checkpoint_mirrors(fresh, job, job_dir);
    REQUIRE(restored.ok());
    CHECK(restored->step >= from);
    check_restart_from(fresh, job, restored->step, per_epoch);
    // The GCS lives on: the restart as always.
    check_restart_from(store, job, from, per_epoch);
    ++cuts;
    if (whole) break;
  }
  CHECK(cuts >= 3);  // the commit's writes: the ranges, the manifest, its event
}
