// An async job's manifests (trainers/job/ps_checkpoint.h): each server records the shard file it
// wrote at a version; the server whose record completes the version's set writes the manifest, once,
// listing the shards in order; a version whose set never completes gets none.
#include <catch2/catch.hpp>

#include <filesystem>

#include "gcs/checkpoint_mirror.h"
#include "gcs/in_memory_store.h"
#include "tests/core/temp_dir.h"
#include "trainers/checkpoint/checkpoint_catalog.h"
#include "trainers/job/ps_checkpoint.h"

using namespace troupe;
using namespace troupe::job;

namespace {

checkpoint::WrittenShard shard_file(int s, int64_t version) {
  return {"/ckpt/step-" + std::to_string(version) + "/shard-" + std::to_string(s) + "-of-3.ckpt",
          static_cast<uint64_t>(100 + s), "00000000000000a" + std::to_string(s)};
}

}  // namespace

TEST_CASE("ps checkpoints: the server completing a version's set writes its manifest, once, shards in order",
          "[jobs][checkpoint][ps]") {
  gcs::InMemoryStore store;
  const JobId job = JobId::random();
  JobSpec spec;
  spec.strategy = "async";
  spec.workers = 2;
  spec.ps = 3;
  spec.checkpoint_every = 50;
  troupe::testing::TempDir root;
  spec.checkpoint_dir = root.path();
  std::filesystem::create_directories(checkpoint::step_dir(root.file(job.hex()), 100));
  spec.checkpoint_keep = 5;
  CHECK(async_checkpoint_versions(spec) == 100);  // 50 steps of each of 2 workers

  // Version 100: servers 2 and 0 wrote theirs; no manifest until server 1 did.
  REQUIRE(record_async_shard(store, job, spec, 2, 3, shard_file(2, 100), 100).ok());
  REQUIRE(record_async_shard(store, job, spec, 0, 3, shard_file(0, 100), 100).ok());
  // Version 200: only server 0 so far (server 1 died before it).
  REQUIRE(record_async_shard(store, job, spec, 0, 3, shard_file(0, 200), 200).ok());
  auto none = checkpoint::list_checkpoints(store, job);
  REQUIRE(none.ok());
  CHECK(none->empty());
  REQUIRE(record_async_shard(store, job, spec, 1, 3, shard_file(1, 100), 100).ok());
  auto one = checkpoint::list_checkpoints(store, job);
  REQUIRE(one.ok());
  REQUIRE(one->size() == 1u);
  const checkpoint::Manifest m = checkpoint::from_record(one->front());
  CHECK(m.step == 100);
  CHECK(m.dir == checkpoint::step_dir(root.file(job.hex()), 100));
  // Mirrored on disk first (the manifest alone: an async job keeps no trained ranges).
  auto mirror = gcs::read_checkpoint_mirror(gcs::mirror_path(m.dir));
  REQUIRE(mirror.ok());
  CHECK(mirror->manifest.step == 100);
  CHECK(mirror->manifest.shards.size() == 3u);
  CHECK(mirror->trained.empty());
  REQUIRE(m.shards.size() == 3u);
  for (int s = 0; s < 3; ++s) {
    CHECK(m.shards[static_cast<size_t>(s)].path == shard_file(s, 100).path);
    CHECK(m.shards[static_cast<size_t>(s)].checksum == shard_file(s, 100).checksum);
  }
  // A late record of a committed version (a replacement server's) writes nothing again.
  REQUIRE(record_async_shard(store, job, spec, 2, 3, shard_file(2, 100), 100).ok());
  auto still = checkpoint::list_checkpoints(store, job);
  REQUIRE(still.ok());
  CHECK(still->size() == 1u);
  // A damaged record is named.
  REQUIRE(store.put(kPsCheckpointShardsTable, job.hex() + "/300/0", "not json").ok());
  Status bad = record_async_shard(store, job, spec, 1, 2, shard_file(1, 300), 300);
  CHECK(bad.code() == Code::corrupt_data);
  CHECK(bad.message().find("the record of shard 0 is not {path, bytes, checksum}") != std::string::npos);
}
