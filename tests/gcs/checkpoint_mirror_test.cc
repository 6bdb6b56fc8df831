// Checkpoint manifests mirrored on disk (gcs/checkpoint_mirror.h) and written back into a GCS that
// lost its data (gcs/checkpoint_restore.h): what a mirror holds, that it reads back whole, that
// every damage to it (a byte flipped anywhere, a truncation, contents that disagree, another format)
// is refused naming the file, and that a job restored from the newest usable mirror and trained on
// to its end is proven exactly once.
#include <catch2/catch.hpp>

#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "gcs/checkpoint_mirror.h"
#include "gcs/checkpoint_restore.h"
#include "gcs/data_accounting.h"
#include "gcs/in_memory_store.h"
#include "gcs/tables.h"
#include "tests/core/temp_dir.h"

using namespace troupe;
using namespace troupe::gcs;

namespace {

constexpr int64_t kPerEpoch = 10;
constexpr int kShards = 2;

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// The step directory <job_dir>/step-<step> with one 100-byte shard file, and its manifest.
CheckpointRecord checkpoint_files(const std::string& job_dir, const JobId& job, int64_t step) {
  CheckpointRecord c;
  c.job = job;
  c.step = step;
  c.dir = job_dir + "/step-" + std::to_string(step);
  std::filesystem::create_directories(c.dir);
  const std::string shard = c.dir + "/shard-0-of-1.ckpt";
  write_file(shard, std::string(100, 'x'));
  c.shards.push_back({shard, 100, "00000000000000aa"});
  return c;
}

// The ledger of epoch `epoch`: every shard DONE, or ASSIGNED (its worker has not completed it yet).
void ledger_epoch(Store& store, const JobId& job, int epoch, ShardState state) {
  for (int s = 0; s < kShards; ++s) {
    ShardRecord r;
    r.job = job;
    r.epoch = epoch;
    r.shard = s;
    r.state = state;
    r.owner = WorkerId::random();
    r.examples = 320;
    r.progress = state == ShardState::done ? 320 : 64;
    r.claims = 1;
    REQUIRE(Table<ShardRecord>(store).put(r).ok());
  }
}

// A job trained to step 20 (the end of epoch 2), its steps recorded at checkpoints 7 and 20, and
// epoch 3 begun: epoch 1 DONE, epoch 2's shards still ASSIGNED, epoch 3's ASSIGNED.
void job_at_step_20(Store& store, const JobId& job) {
  REQUIRE(record_trained(store, job, 0, 1, 0, 1, 7, kPerEpoch, 7).ok());
  REQUIRE(record_trained(store, job, 0, 1, 7, 2, 10, kPerEpoch, 20).ok());
  ledger_epoch(store, job, 1, ShardState::done);
  ledger_epoch(store, job, 2, ShardState::assigned);
  ledger_epoch(store, job, 3, ShardState::assigned);
}

}  // namespace

TEST_CASE("checkpoint mirror: it holds the manifest, the ranges through its step and the finished epochs' ledger, "
          "and reads back whole", "[gcs][checkpoint][mirror]") {
  troupe::testing::TempDir dir;
  InMemoryStore store;
  const JobId job = JobId::random();
  job_at_step_20(store, job);
  REQUIRE(record_trained(store, JobId::random(), 0, 1, 0, 1, 5, kPerEpoch, 5).ok());  // another job's
  // A range past the checkpoint (recorded by an attempt that went on) is not its.
  REQUIRE(record_trained(store, job, 0, 3, 0, 3, 4, kPerEpoch, 24).ok());

  const CheckpointRecord c = checkpoint_files(dir.path(), job, 20);
  auto m = gather_mirror(store, c, kPerEpoch, 0);
  REQUIRE(m.ok());
  CHECK(m->trained.size() == 3u);  // [0,7) [7,10) of epoch 1, [0,10) of epoch 2
  REQUIRE(m->ledger.size() == 4u);  // epochs 1 and 2; epoch 3 is not finished by step 20
  for (const ShardRecord& s : m->ledger) {
    INFO("epoch " << s.epoch << " shard " << s.shard);
    CHECK(s.epoch <= 2);
    CHECK(s.state == ShardState::done);  // epoch 2's: the checkpoint holds its last step
    CHECK(s.progress == s.examples);
  }
  REQUIRE(write_checkpoint_mirror(*m).ok());
  CHECK(std::filesystem::exists(mirror_path(c.dir)));
  for (const auto& e : std::filesystem::directory_iterator(c.dir))  // no temporary file left
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);

  auto back = read_checkpoint_mirror(mirror_path(c.dir));
  REQUIRE(back.ok());
  CHECK(back->manifest.job == job);
  CHECK(back->manifest.step == 20);
  CHECK(back->manifest.dir == c.dir);
  REQUIRE(back->manifest.shards.size() == 1u);
  CHECK(back->manifest.shards[0].checksum == "00000000000000aa");
  CHECK(back->steps_per_epoch == kPerEpoch);
  CHECK(back->first_step == 0);
  CHECK(back->trained.size() == 3u);
  CHECK(back->ledger.size() == 4u);
  CHECK(encode_mirror(*back) == encode_mirror(*m));

  // An async job's mirror: the manifest alone.
  auto bare = gather_mirror(store, c, 0, 0);
  REQUIRE(bare.ok());
  CHECK(bare->trained.empty());
  CHECK(bare->ledger.empty());
  CheckpointMirror decoded;
  REQUIRE(decode_mirror(encode_mirror(*bare), "x", &decoded).ok());
  CHECK(decoded.manifest.step == 20);
}

TEST_CASE("checkpoint mirror: a missing, damaged, truncated, inconsistent or newer-format mirror is refused naming "
          "the file", "[gcs][checkpoint][mirror]") {
  troupe::testing::TempDir dir;
  InMemoryStore store;
  const JobId job = JobId::random();
  job_at_step_20(store, job);
  const CheckpointRecord c = checkpoint_files(dir.path(), job, 20);
  const std::string path = mirror_path(c.dir);

  auto missing = read_checkpoint_mirror(path);
  CHECK(missing.status().code() == Code::not_found);
  CHECK(missing.status().message().find(path) != std::string::npos);

  auto m = gather_mirror(store, c, kPerEpoch, 0);
  REQUIRE(m.ok());
  const std::string good = encode_mirror(*m);
  // Every byte flipped, one at a time; every truncation.
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    write_file(path, bad);
    auto r = read_checkpoint_mirror(path);
    INFO("byte " << i << " of " << good.size() << ": " << r.status().to_string());
    REQUIRE(r.status().code() == Code::corrupt_data);
    CHECK(r.status().message().find(path) != std::string::npos);
  }
  for (size_t n = 0; n < good.size(); n += 7) {
    write_file(path, good.substr(0, n));
    auto r = read_checkpoint_mirror(path);
    INFO("truncated to " << n << " bytes");
    REQUIRE(r.status().code() == Code::corrupt_data);
  }

  // Whole and checksummed, but its contents disagree: a gap in the ranges (the GCS had lost some
  // when it was written), a range of another job, a ledger record of an unfinished epoch.
  CheckpointMirror gap = *m;
  gap.trained.erase(gap.trained.begin());
  CheckpointMirror other = *m;
  other.trained[0].job = JobId::random();
  CheckpointMirror early = *m;
  early.ledger[0].epoch = 3;
  CheckpointMirror empty = *m;
  empty.manifest.shards.clear();
  for (const auto& [what, mirror] : {std::pair<const char*, CheckpointMirror*>{"no trained range", &gap},
                                     {"a trained range of job", &other},
                                     {"is not a DONE shard of an epoch finished by step 20", &early},
                                     {"lists no shards", &empty}}) {
    write_file(path, encode_mirror(*mirror));
    auto r = read_checkpoint_mirror(path);
    INFO(r.status().to_string());
    CHECK(r.status().code() == Code::corrupt_data);
    CHECK(r.status().message().find(what) != std::string::npos);
    CHECK(r.status().message().find(path) != std::string::npos);
  }

  // Another format version (checksum recomputed: a well-formed file of a newer troupe).
  std::string newer = good.substr(0, good.size() - 8);
  REQUIRE(static_cast<unsigned char>(newer[9]) == kMirrorFormatVersion);  // after the magic and the array header
  newer[9] = static_cast<char>(kMirrorFormatVersion + 1);
  const uint64_t sum = XXH64(newer.data(), newer.size(), 0);
  for (int i = 0; i < 8; ++i) newer.push_back(static_cast<char>((sum >> (8 * i)) & 0xff));
  write_file(path, newer);
  auto r = read_checkpoint_mirror(path);
  CHECK(r.status().code() == Code::version_mismatch);
  CHECK(r.status().message().find("format 2") != std::string::npos);
  CHECK(r.status().message().find(path) != std::string::npos);
}

TEST_CASE("checkpoint restore: the usable mirrors are written back, the damaged and uncommitted skipped by name, and "
          "the job trained on is proven exactly once", "[gcs][checkpoint][mirror]") {
  troupe::testing::TempDir dir;
  const JobId job = JobId::random();
  const std::string job_dir = dir.path() + "/" + job.hex();
  {  // The GCS the job ran on: checkpoints at steps 7, 20 and 24 mirrored, then lost with its data.
    InMemoryStore lost;
    job_at_step_20(lost, job);
    for (int64_t step : {7, 20}) {
      auto m = gather_mirror(lost, checkpoint_files(job_dir, job, step), kPerEpoch, 0);
      REQUIRE(m.ok());
      REQUIRE(write_checkpoint_mirror(*m).ok());
    }
    REQUIRE(record_trained(lost, job, 0, 3, 0, 3, 4, kPerEpoch, 24).ok());
    auto m24 = gather_mirror(lost, checkpoint_files(job_dir, job, 24), kPerEpoch, 0);
    REQUIRE(m24.ok());
    REQUIRE(write_checkpoint_mirror(*m24).ok());
  }
  // The newest (24) lost a shard file; step 30 was written but never committed (no mirror).
  std::filesystem::remove(job_dir + "/step-24/shard-0-of-1.ckpt");
  checkpoint_files(job_dir, job, 30);

  InMemoryStore store;  // the GCS back, empty
  auto restored = restore_checkpoint_mirrors(store, job, job_dir);
  REQUIRE(restored.ok());
  CHECK(restored->step == 20);
  CHECK(restored->checkpoints == 2);
  CHECK(restored->ranges == 3u);
  CHECK(restored->ledger_records == 4u);
  CHECK(restored->scan.damaged == 1);
  REQUIRE(restored->scan.skipped.size() == 2u);
  std::string skipped = restored->scan.skipped[0] + " | " + restored->scan.skipped[1];
  CHECK(skipped.find(job_dir + "/step-24/shard-0-of-1.ckpt") != std::string::npos);
  CHECK(skipped.find(job_dir + "/step-30 has no manifest") != std::string::npos);
  auto manifests = Table<CheckpointRecord>(store).list();
  REQUIRE(manifests.ok());
  CHECK(manifests->size() == 2u);

  // The restarted attempt goes on from step 20 to the end of epoch 4: every step and shard once.
  REQUIRE(discard_ranges_after(store, job, 20).ok());
  REQUIRE(record_trained(store, job, 1, 3, 0, 4, 10, kPerEpoch, 40).ok());
  ledger_epoch(store, job, 3, ShardState::done);
  ledger_epoch(store, job, 4, ShardState::done);
  auto report = account_sync_job(store, job, 40, kPerEpoch, kShards);
  REQUIRE(report.ok());
  INFO(report->summary());
  CHECK(report->exactly_once);
  CHECK(report->attempts == 2);
}

TEST_CASE("checkpoint restore: nothing usable is not_found naming the directory and why", "[gcs][checkpoint][mirror]") {
  troupe::testing::TempDir dir;
  const JobId job = JobId::random();
  InMemoryStore store;
  auto none = restore_checkpoint_mirrors(store, job, dir.file("absent"));
  CHECK(none.status().code() == Code::not_found);
  CHECK(none.status().message().find(dir.file("absent")) != std::string::npos);

  // Another job's mirror copied into this job's directory, and a damaged one.
  const std::string job_dir = dir.file(job.hex());
  InMemoryStore old;
  job_at_step_20(old, job);
  auto theirs = gather_mirror(old, checkpoint_files(job_dir, JobId::random(), 20), kPerEpoch, 0);
  REQUIRE(theirs.ok());
  theirs->trained.clear();
  theirs->ledger.clear();
  theirs->steps_per_epoch = 0;
  REQUIRE(write_checkpoint_mirror(*theirs).ok());
  checkpoint_files(job_dir, job, 7);
  write_file(mirror_path(job_dir + "/step-7"), "garbage");
  auto unusable = restore_checkpoint_mirrors(store, job, job_dir);
  REQUIRE(unusable.status().code() == Code::not_found);
  const std::string why = unusable.status().message();
  CHECK(why.find("no usable checkpoint manifest under " + job_dir) != std::string::npos);
  CHECK(why.find("not " + job.short_hex() + "'s") != std::string::npos);
  CHECK(why.find(mirror_path(job_dir + "/step-7")) != std::string::npos);
  auto manifests = Table<CheckpointRecord>(store).list();
  REQUIRE(manifests.ok());
  CHECK(manifests->empty());
}
