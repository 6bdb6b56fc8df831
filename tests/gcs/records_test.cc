// GCS records: every record round trips (empty and filled vectors, extreme values); another schema
// version is version_mismatch naming both versions; truncated, garbage, mistyped, miscounted and
// out-of-range input is corrupt_data naming the field, never an exception, and the output is left
// unchanged.
#include "gcs/records.h"

#include <catch2/catch.hpp>

#include <climits>

#include "core/codec.h"

namespace troupe::gcs {
namespace {

template <class Fn>
std::string raw(Fn&& fn) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  fn(pk);
  return std::string(buf.data(), buf.size());
}

NodeRecord filled_node() {
  NodeRecord r;
  r.id = NodeId::random();
  r.address = "10.0.0.7:4242";
  r.hostname = "gpu-host-\xc3\xa9";
  r.pid = INT_MAX;
  r.is_head = true;
  r.version = "0.1.0";
  r.total = {64, 8, INT64_MAX};
  r.used = {1.5, 0.25, 1 << 20};
  r.gpus = {{0, "NVIDIA H100", 80LL << 30}, {1, "", 0}};
  r.state = NodeState::suspect;
  r.started_ms = 1700000000000;
  r.last_heartbeat_ms = -1;
  r.death_reason = "heartbeat lost";
  return r;
}

template <class R>
R round_trip(const R& r) {
  R back;
  Status st = decode(encode(r), &back);
  INFO(st.to_string());
  REQUIRE(st.ok());
  return back;
}

void check_same(const Resources& a, const Resources& b) {
  CHECK(a.cpus == b.cpus);
  CHECK(a.gpus == b.gpus);
  CHECK(a.memory_bytes == b.memory_bytes);
}

}  // namespace

TEST_CASE("records: a node record round trips with its gpus", "[gcs][records]") {
  NodeRecord r = filled_node();
  NodeRecord b = round_trip(r);
  CHECK(b.id == r.id);
  CHECK(b.address == r.address);
  CHECK(b.hostname == r.hostname);
  CHECK(b.pid == r.pid);
  CHECK(b.is_head);
  CHECK(b.version == r.version);
  check_same(b.total, r.total);
  check_same(b.used, r.used);
  REQUIRE(b.gpus.size() == 2);
  CHECK(b.gpus[0].name == "NVIDIA H100");
  CHECK(b.gpus[0].memory_bytes == (80LL << 30));
  CHECK(b.gpus[1].index == 1);
  CHECK(b.state == NodeState::suspect);
  CHECK(b.started_ms == r.started_ms);
  CHECK(b.last_heartbeat_ms == -1);
  CHECK(b.death_reason == r.death_reason);
  CHECK(record_key(b) == r.id.hex());
}

TEST_CASE("records: default records (empty vectors, nil ids) round trip", "[gcs][records]") {
  NodeRecord n = round_trip(NodeRecord{});
  CHECK(n.id.nil());
  CHECK(n.gpus.empty());
  CHECK_FALSE(n.is_head);
  CHECK(round_trip(ActorRecord{}).node.nil());
  CHECK(round_trip(ActorRecord{}).gpu_ids.empty());
  CHECK(round_trip(JobRecord{}).state == JobState::pending);
  CHECK(round_trip(GroupRecord{}).members.empty());
  CHECK(round_trip(GroupRecord{}).nccl_id.empty());
  CHECK(round_trip(ShardRecord{}).owner.nil());
  CHECK(round_trip(CheckpointRecord{}).shards.empty());
}

TEST_CASE("records: actor, job, group, shard and checkpoint records round trip", "[gcs][records]") {
  ActorRecord a;
  a.id = ActorId::random();
  a.type_name = "trainer";
  a.name = "worker-3";
  a.job = JobId::random();
  a.node = NodeId::random();
  a.state = ActorState::restarting;
  a.restarts = 2;
  a.resources = {1, 0.5, 123};
  a.pending_reason = "no node has 2 GPUs";
  a.death_reason = "node died";
  a.updated_ms = 42;
  a.gpu_ids = {0, 3, INT_MAX};
  ActorRecord ab = round_trip(a);
  CHECK(ab.id == a.id);
  CHECK(ab.type_name == a.type_name);
  CHECK(ab.name == a.name);
  CHECK(ab.job == a.job);
  CHECK(ab.node == a.node);
  CHECK(ab.state == ActorState::restarting);
  CHECK(ab.restarts == 2);
  check_same(ab.resources, a.resources);
  CHECK(ab.pending_reason == a.pending_reason);
  CHECK(ab.death_reason == a.death_reason);
  CHECK(ab.updated_ms == 42);
  CHECK(ab.gpu_ids == std::vector<int>{0, 3, INT_MAX});

  JobRecord j;
  j.id = JobId::random();
  j.name = "mnist";
  j.strategy = "sync";
  j.state = JobState::cancelled;
  j.workers = 4;
  j.submitted_ms = 1;
  j.finished_ms = 2;
  j.progress = 0.75;
  j.message = "cancelled by user";
  j.ps = 2;
  j.spec = {"workers=4", "epochs=3"};
  j.actors = {"00ff", "11ee"};
  j.epoch = 2;
  j.epochs = 3;
  j.step = 700;
  j.steps = 1404;
  j.loss = 0.25;
  j.samples_per_second = 1234.5;
  j.eta_seconds = 9.5;
  j.test_accuracy = 0.875;
  j.result = "{\"test_accuracy\":0.875}";
  j.updated_ms = 3;
  JobRecord jb = round_trip(j);
  CHECK(jb.ps == 2);
  CHECK(jb.spec == j.spec);
  CHECK(jb.actors == j.actors);
  CHECK(jb.epoch == 2);
  CHECK(jb.epochs == 3);
  CHECK(jb.step == 700);
  CHECK(jb.steps == 1404);
  CHECK(jb.loss == 0.25);
  CHECK(jb.samples_per_second == 1234.5);
  CHECK(jb.eta_seconds == 9.5);
  CHECK(jb.test_accuracy == 0.875);
  CHECK(jb.result == j.result);
  CHECK(jb.updated_ms == 3);
  CHECK(jb.id == j.id);
  CHECK(jb.name == j.name);
  CHECK(jb.strategy == j.strategy);
  CHECK(jb.state == JobState::cancelled);
  CHECK(jb.workers == 4);
  CHECK(jb.submitted_ms == 1);
  CHECK(jb.finished_ms == 2);
  CHECK(jb.progress == 0.75);
  CHECK(jb.message == j.message);

  GroupRecord g;
  g.name = "dp";
  g.generation = 9;
  g.world_size = 2;
  g.members = {{0, NodeId::random(), ActorId::random(), "h:1"}, {1, NodeId::random(), ActorId::random(), "h:2"}};
  g.nccl_id = std::string("\0\x01\xff", 3);
  GroupRecord gb = round_trip(g);
  CHECK(gb.name == "dp");
  CHECK(gb.generation == 9);
  CHECK(gb.world_size == 2);
  REQUIRE(gb.members.size() == 2);
  CHECK(gb.members[1].rank == 1);
  CHECK(gb.members[1].node == g.members[1].node);
  CHECK(gb.members[1].actor == g.members[1].actor);
  CHECK(gb.members[1].address == "h:2");
  CHECK(gb.nccl_id == g.nccl_id);
  CHECK(record_key(gb) == "dp");

  ShardRecord s;
  s.job = JobId::random();
  s.epoch = 3;
  s.shard = 17;
  s.state = ShardState::done;
  s.owner = WorkerId::random();
  s.examples = 3750;
  s.progress = 1280;
  s.claims = 2;
  s.updated_ms = 5;
  s.resume_at = 640;
  ShardRecord sb = round_trip(s);
  CHECK(sb.job == s.job);
  CHECK(sb.epoch == 3);
  CHECK(sb.shard == 17);
  CHECK(sb.state == ShardState::done);
  CHECK(sb.owner == s.owner);
  CHECK(sb.examples == 3750);
  CHECK(sb.progress == 1280);
  CHECK(sb.claims == 2);
  CHECK(sb.updated_ms == 5);
  CHECK(sb.resume_at == 640);
  CHECK(record_key(sb) == s.job.hex() + "/3/17");

  CheckpointRecord c;
  c.job = JobId::random();
  c.step = 1000;
  c.dir = "/ckpt/1000";
  c.shards = {{"a.bin", UINT64_MAX, "0123456789abcdef"}, {"b.bin", 0, ""}};
  c.written_ms = 7;
  CheckpointRecord cb = round_trip(c);
  CHECK(cb.job == c.job);
  CHECK(cb.step == 1000);
  CHECK(cb.dir == c.dir);
  REQUIRE(cb.shards.size() == 2);
  CHECK(cb.shards[0].bytes == UINT64_MAX);
  CHECK(cb.shards[0].checksum == "0123456789abcdef");
  CHECK(cb.shards[1].path == "b.bin");
  CHECK(cb.written_ms == 7);
  CHECK(record_key(cb) == c.job.hex() + "/1000");
}

TEST_CASE("records: state names", "[gcs][records]") {
  CHECK(std::string(node_state_name(NodeState::alive)) == "ALIVE");
  CHECK(std::string(node_state_name(NodeState::dead)) == "DEAD");
  CHECK(std::string(actor_state_name(ActorState::restarting)) == "RESTARTING");
  CHECK(std::string(job_state_name(JobState::succeeded)) == "SUCCEEDED");
  CHECK(std::string(shard_state_name(ShardState::assigned)) == "ASSIGNED");
}

TEST_CASE("records: another schema version is refused naming both versions", "[gcs][records]") {
  std::string bytes = encode(filled_node());
  REQUIRE(static_cast<uint8_t>(bytes[1]) == kRecordSchemaVersion);  // fixarray, then fixint version
  bytes[1] = 7;
  NodeRecord out;
  out.hostname = "untouched";
  Status st = decode(bytes, &out);
  CHECK(st.code() == Code::version_mismatch);
  CHECK_THAT(st.message(), Catch::Contains("schema version 7"));
  CHECK_THAT(st.message(), Catch::Contains("reads schema version " + std::to_string(kRecordSchemaVersion)));
  CHECK(out.hostname == "untouched");
}

TEST_CASE("records: every truncation of a record is corrupt_data", "[gcs][records]") {
  const std::string full = encode(filled_node());
  for (size_t n = 0; n < full.size(); ++n) {
    NodeRecord out;
    out.hostname = "untouched";
    Status st = decode(full.substr(0, n), &out);
    INFO("length " << n << ": " << st.to_string());
    CHECK(st.code() == Code::corrupt_data);
    CHECK(out.hostname == "untouched");
  }
  NodeRecord out;
  CHECK(decode(full + "x", &out).code() == Code::corrupt_data);  // trailing bytes
}

TEST_CASE("records: garbage and mistyped records are corrupt_data naming what is wrong", "[gcs][records]") {
  JobRecord out;
  CHECK(decode(std::string("\xc1\xc1\xc1", 3), &out).code() == Code::corrupt_data);
  CHECK(decode(std::string("hello, world"), &out).code() == Code::corrupt_data);

  Status st = decode(raw([](Packer& pk) { pk.pack_map(0); }), &out);
  CHECK(st.code() == Code::corrupt_data);
  CHECK_THAT(st.message(), Catch::Contains("job record"));

  // Wrong field count.
  st = decode(raw([](Packer& pk) {
                pk.pack_array(2);
                pk.pack_uint32(kRecordSchemaVersion);
                pk.pack_nil();
              }),
              &out);
  CHECK(st.code() == Code::corrupt_data);
  CHECK_THAT(st.message(), Catch::Contains("expected 22 fields"));

  // A string where the worker count belongs.
  JobRecord j;
  std::string good = encode(j);
  st = decode(raw([&](Packer& pk) {
                pk.pack_array(23);
                pk.pack_uint32(kRecordSchemaVersion);
                pack_id(pk, j.id);
                pk.pack_str(1), pk.pack_str_body("n", 1);
                pk.pack_str(1), pk.pack_str_body("s", 1);
                pk.pack_uint8(0);
                pk.pack_str(3), pk.pack_str_body("two", 3);
                pk.pack_int64(0), pk.pack_int64(0), pk.pack_double(0);
                pk.pack_str(0), pk.pack_str_body("", 0);
                pk.pack_int64(0), pk.pack_array(0), pk.pack_array(0);
                for (int i = 0; i < 4; ++i) pk.pack_int64(0);
                for (int i = 0; i < 4; ++i) pk.pack_double(0);
                pk.pack_str(0), pk.pack_str_body("", 0);
                pk.pack_int64(0);
              }),
              &out);
  CHECK(st.code() == Code::corrupt_data);
  CHECK_THAT(st.message(), Catch::Contains("field 'workers'"));
  CHECK_THAT(st.message(), Catch::Contains("found a string"));
}

TEST_CASE("records: unknown enum values and out-of-range integers are corrupt_data", "[gcs][records]") {
  ShardRecord s;
  auto shard_with = [&](auto&& state, auto&& epoch) {
    return raw([&](Packer& pk) {
      pk.pack_array(11);
      pk.pack_uint32(kRecordSchemaVersion);
      pack_id(pk, s.job);
      epoch(pk);
      pk.pack_int64(0);
      state(pk);
      pack_id(pk, s.owner);
      pk.pack_int64(0), pk.pack_int64(0), pk.pack_int64(0);  // examples, progress, claims
      pk.pack_int64(0), pk.pack_int64(0);                    // updated_ms, resume_at
    });
  };
  ShardRecord out;
  Status st = decode(shard_with([](Packer& pk) { pk.pack_uint8(3); }, [](Packer& pk) { pk.pack_int64(1); }), &out);
  CHECK(st.code() == Code::corrupt_data);
  CHECK_THAT(st.message(), Catch::Contains("field 'state'"));
  CHECK_THAT(st.message(), Catch::Contains("unknown value 3"));

  st = decode(shard_with([](Packer& pk) { pk.pack_uint8(0); }, [](Packer& pk) { pk.pack_int64(1LL << 40); }), &out);
  CHECK(st.code() == Code::corrupt_data);
  CHECK_THAT(st.message(), Catch::Contains("field 'epoch'"));
  CHECK_THAT(st.message(), Catch::Contains("out of range"));

  // A short id inside a nested list element names the element.
  GroupRecord g;
  st = decode(raw([&](Packer& pk) {
                pk.pack_array(6);
                pk.pack_uint32(kRecordSchemaVersion);
                pk.pack_str(1), pk.pack_str_body("g", 1);
                pk.pack_int64(0), pk.pack_int64(1);
                pk.pack_array(1);
                pk.pack_array(4);
                pk.pack_int64(0);
                pk.pack_bin(3), pk.pack_bin_body("abc", 3);
                pack_id(pk, ActorId{});
                pk.pack_str(0), pk.pack_str_body("", 0);
                pk.pack_bin(0), pk.pack_bin_body("", 0);
              }),
              &g);
  CHECK(st.code() == Code::corrupt_data);
  CHECK_THAT(st.message(), Catch::Contains("members[0]"));
  CHECK_THAT(st.message(), Catch::Contains("node"));
}

TEST_CASE("records: an actor's gpu_ids out of range or mistyped are corrupt_data naming the element",
          "[gcs][records]") {
  ActorRecord a;
  a.id = ActorId::random();
  auto actor_with = [&](auto&& gpu_ids) {
    return raw([&](Packer& pk) {
      pk.pack_array(13);
      pk.pack_uint32(kRecordSchemaVersion);
      pack_id(pk, a.id);
      pk.pack_str(0), pk.pack_str_body("", 0);  // type_name
      pk.pack_str(0), pk.pack_str_body("", 0);  // name
      pack_id(pk, a.job), pack_id(pk, a.node);
      pk.pack_uint8(1), pk.pack_int64(0);        // state, restarts
      pk.pack_array(3), pk.pack_double(0), pk.pack_double(1), pk.pack_int64(0);
      pk.pack_str(0), pk.pack_str_body("", 0);  // pending_reason
      pk.pack_str(0), pk.pack_str_body("", 0);  // death_reason
      pk.pack_int64(0);                          // updated_ms
      gpu_ids(pk);
    });
  };
  ActorRecord out;
  REQUIRE(decode(actor_with([](Packer& pk) { pk.pack_array(2), pk.pack_int64(0), pk.pack_int64(1); }), &out).ok());
  CHECK(out.gpu_ids == std::vector<int>{0, 1});

  out.name = "untouched";
  Status st =
      decode(actor_with([](Packer& pk) { pk.pack_array(2), pk.pack_int64(0), pk.pack_int64(1LL << 40); }), &out);
  CHECK(st.code() == Code::corrupt_data);
  CHECK_THAT(st.message(), Catch::Contains("actor record") && Catch::Contains("field 'gpu_ids[1]'") &&
                               Catch::Contains("out of range"));
  st = decode(actor_with([](Packer& pk) { pk.pack_str(1), pk.pack_str_body("0", 1); }), &out);
  CHECK(st.code() == Code::corrupt_data);
  CHECK_THAT(st.message(), Catch::Contains("field 'gpu_ids'") && Catch::Contains("expected an array"));
  CHECK(out.name == "untouched");

  // A record of schema 5 (before gpu_ids) is refused naming both versions, not misread.
  std::string old = encode(a);
  old[1] = 5;
  st = decode(old, &out);
  CHECK(st.code() == Code::version_mismatch);
  CHECK_THAT(st.message(), Catch::Contains("schema version 5") && Catch::Contains("reads schema version 6"));
}

}  // namespace troupe::gcs
