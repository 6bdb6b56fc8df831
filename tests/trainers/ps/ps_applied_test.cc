// What data a parameter shard's updates came from (trainers/ps/applied_data.h): every push's tag
// recorded per (epoch, ledger shard) and per worker; a push that repeats or skips examples counted;
// the tag of a rank's last push told to its replacement over TCP; a push to some shards only; the
// record encoded into checkpoints and taken back by a restored shard, which accepts replays.
#include <catch2/catch.hpp>

#include <future>
#include <map>
#include <thread>

#include "tests/core/temp_dir.h"
#include "trainers/checkpoint/checkpoint.h"

#include "trainers/ps/applied_data.h"
#include "trainers/ps/parameter_shard.h"
#include "trainers/ps/ps_client.h"
#include "trainers/ps/ps_server.h"

using namespace troupe;
using namespace troupe::ps;
using namespace std::chrono_literals;

namespace {

ShardOptions sgd(int workers, int shards = 1) {
  ShardOptions o;
  o.workers = workers;
  o.shards = shards;
  o.optimizer.name = "sgd";
  o.optimizer.lr = 0.5f;
  o.optimizer.momentum = 0;
  o.total_updates = 1000;
  o.wait_timeout = 5s;
  return o;
}

std::unique_ptr<ParameterShard> make_shard(int index, size_t begin, size_t end, const ShardOptions& o) {
  auto s = ParameterShard::create(index, ShardRange{begin, end}, std::vector<float>(end - begin, 1.0f), o);
  REQUIRE(s.ok());
  return std::move(*s);
}

DataSpan span(int epoch, int shard, int64_t offset, int64_t rows) { return DataSpan{epoch, shard, offset, rows}; }

const AppliedShard* find(const std::vector<AppliedShard>& all, int epoch, int shard) {
  for (const AppliedShard& a : all)
    if (a.epoch == epoch && a.shard == shard) return &a;
  return nullptr;
}

}  // namespace

TEST_CASE("ps applied data: every push's tag is recorded per ledger shard and per worker", "[ps][accounting]") {
  auto s = make_shard(0, 0, 4, sgd(2));
  auto w0 = local_ps_client({s.get()}, 0);
  auto w1 = local_ps_client({s.get()}, 1);
  std::vector<float> p(4), g(4, 1.0f);
  // Worker 0 trains shard 3 in batches of 8, across into shard 4; worker 1 trains shard 5.
  const DataTag tags0[] = {{span(1, 3, 0, 8)}, {span(1, 3, 8, 8)}, {span(1, 3, 16, 4), span(1, 4, 0, 4)}};
  for (int64_t c = 0; c < 3; ++c) {
    auto v = w0->pull(c, p.data());
    REQUIRE(v.ok());
    REQUIRE(w0->push(c, g.data(), *v, tags0[c]).ok());
  }
  auto v = w1->pull(0, p.data());
  REQUIRE(v.ok());
  REQUIRE(w1->push(0, g.data(), *v, {span(1, 5, 0, 8)}).ok());

  const std::vector<AppliedShard> applied = s->applied();
  REQUIRE(applied.size() == 3);
  const AppliedShard* s3 = find(applied, 1, 3);
  REQUIRE(s3);
  CHECK(s3->applied == 20);
  CHECK(s3->next == 20);
  CHECK(s3->duplicates == 0);
  CHECK(s3->gaps == 0);
  CHECK(find(applied, 1, 4)->applied == 4);
  CHECK(find(applied, 1, 5)->next == 8);
  // Each rank's position: its clock and its last push's tag.
  CHECK(s->position(0).clock == 3);
  CHECK(s->position(0).last == tags0[2]);
  CHECK(s->position(1).last == DataTag{span(1, 5, 0, 8)});
  CHECK(s->position(7).last.empty());  // no such rank
}

TEST_CASE("ps applied data: a push that repeats or skips examples is counted and named", "[ps][accounting]") {
  AppliedData d(2);
  CHECK(d.record(0, 0, {span(2, 1, 0, 10)}).empty());
  CHECK(d.record(0, 1, {span(2, 1, 10, 10)}).empty());
  // A shard trained again from 0 (what a replacement did before the servers' record existed).
  const std::string again = d.record(1, 0, {span(2, 1, 0, 10)});
  CHECK(again.find("repeats 10 examples") != std::string::npos);
  // A push that starts past the expected offset skips examples.
  const std::string skip = d.record(1, 1, {span(2, 1, 25, 5)});
  CHECK(skip.find("skips examples [20, 25)") != std::string::npos);
  const std::vector<AppliedShard> all = d.shards();
  REQUIRE(all.size() == 1);
  CHECK(all[0].applied == 35);
  CHECK(all[0].duplicates == 10);
  CHECK(all[0].gaps == 5);
  CHECK(all[0].next == 30);
  CHECK(d.record(0, 2, {}).empty());  // an untagged push records no examples, only its clock
  CHECK(d.last(0) == DataTag{span(2, 1, 10, 10)});
  CHECK(d.last_clock(0) == 2);
  CHECK(d.last_clock(1) == 1);
}

TEST_CASE("ps applied data: a push to some shards only, and a replacement told its rank's last push over TCP",
          "[ps][accounting][tcp]") {
  ShardOptions o = sgd(1, 2);
  o.total_floats = 6;
  std::vector<std::unique_ptr<PsServer>> servers;
  std::vector<std::string> addresses;
  for (int i = 0; i < 2; ++i) {
    auto server = PsServer::start(make_shard(i, i * 3, i * 3 + 3, o), PsServerOptions{"job-a"});
    REQUIRE(server.ok());
    addresses.push_back((*server)->address());
    servers.push_back(std::move(*server));
  }
  PsClientOptions co;
  co.job = "job-a";
  co.rank = 0;
  std::vector<float> p(6), g(6, 1.0f);
  {
    auto client = connect_ps(addresses, co);
    INFO(client.status().to_string());
    REQUIRE(client.ok());
    for (const ps::WorkerPosition& at : (*client)->positions()) CHECK(at.last.empty());
    auto v = (*client)->pull(0, p.data());
    REQUIRE(v.ok());
    REQUIRE((*client)->push(0, g.data(), *v, {span(1, 2, 0, 4)}).ok());
    v = (*client)->pull(1, p.data());
    REQUIRE(v.ok());
    // The worker "dies" with its next push on server 0 only.
    REQUIRE((*client)->push_to({0}, 1, g.data(), *v, {span(1, 2, 4, 4), span(1, 3, 0, 2)}).ok());
    CHECK((*client)->push_to({2}, 2, g.data(), *v, {}).code() == Code::invalid_argument);
  }  // its connections close: the servers remove rank 0
  CHECK(servers[0]->shard().version() == 2);
  CHECK(servers[1]->shard().version() == 1);
  // The replacement learns where each server has the rank.
  std::unique_ptr<PsClient> replacement;
  for (int tries = 0; tries < 100 && !replacement; ++tries) {  // until the servers saw the close
    auto c = connect_ps(addresses, co);
    if (c.ok()) replacement = std::move(*c);
    else std::this_thread::sleep_for(20ms);
  }
  REQUIRE(replacement);
  const std::vector<WorkerPosition> at = replacement->positions();
  REQUIRE(at.size() == 2);
  CHECK(at[0].clock == 2);
  CHECK(at[0].last == DataTag{span(1, 2, 4, 4), span(1, 3, 0, 2)});
  CHECK(at[1].clock == 1);
  CHECK(at[1].last == DataTag{span(1, 2, 0, 4)});
  CHECK(replacement->start_clock() == 2);
}

TEST_CASE("ps applied data: the record encodes and decodes whole, and malformed bytes are named",
          "[ps][accounting]") {
  AppliedData d(3);
  REQUIRE(d.record(0, 0, {span(1, 2, 0, 8)}).empty());
  REQUIRE(d.record(0, 1, {span(1, 2, 8, 4), span(1, 3, 0, 4)}).empty());
  (void)d.record(2, 5, {span(1, 2, 4, 4)});  // a duplicate, counted
  const std::string bytes = d.encode();
  auto back = AppliedData::decode(bytes, 3);
  INFO(back.status().to_string());
  REQUIRE(back.ok());
  CHECK(back->encode() == bytes);
  CHECK(back->last(0) == DataTag{span(1, 2, 8, 4), span(1, 3, 0, 4)});
  CHECK(back->last_clock(0) == 1);
  CHECK(back->last_clock(1) == -1);
  CHECK(back->last_clock(2) == 5);
  const std::vector<AppliedShard> a = d.shards(), b = back->shards();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].applied == b[i].applied);
    CHECK(a[i].next == b[i].next);
    CHECK(a[i].duplicates == b[i].duplicates);
  }
  CHECK(AppliedData::decode(bytes, 2).status().code() == Code::invalid_argument);  // another job's workers
  int missed = 0;
  for (size_t len = 0; len < bytes.size(); ++len)
    if (AppliedData::decode(bytes.substr(0, len), 3).status().code() != Code::corrupt_data) ++missed;
  CHECK(missed == 0);
  CHECK(AppliedData::decode("\x93\x07\x90\x90", 0).status().message().find("format 7") != std::string::npos);
}

TEST_CASE("ps applied data: a checkpoint carries the record, and the restored shard takes replays between its "
          "record and the worker's clock",
          "[ps][accounting][restore]") {
  troupe::testing::TempDir dir;
  std::map<int64_t, checkpoint::WrittenShard> files;
  ShardCheckpointing c;
  c.every = 2;
  c.dir = dir.path();
  c.tag = "job-a";
  c.steps_per_epoch = 100;
  c.written = [&](const checkpoint::WrittenShard& w, int64_t version) {
    files[version] = w;
    return Status{};
  };
  auto s = make_shard(0, 0, 4, sgd(2));
  REQUIRE(s->enable_checkpoints(c).ok());
  std::vector<float> p(4), g(4, 1.0f);
  for (int64_t clock = 0; clock < 3; ++clock) {  // versions 1..5: clocks 0 and 1 of both workers, 2 of worker 0
    for (int w = 0; w < 2 && (clock < 2 || w == 0); ++w) {
      REQUIRE(s->pull(w, clock, p.data()).ok());
      REQUIRE(s->push(w, clock, g.data(), s->version(), {span(1, w, 8 * clock, 8)}).ok());
    }
  }
  // The checkpoint of version 4 holds clocks 0 and 1 of both workers.
  checkpoint::Manifest m;
  m.step = 4;
  m.shards = {files.at(4)};
  auto state = checkpoint::load_checkpoint(m, 4);
  REQUIRE(state.ok());
  auto restored = make_shard(0, 0, 4, sgd(2));
  REQUIRE(restored->restore(*state).ok());
  CHECK(restored->restored_record());
  CHECK(restored->position(0).last_clock == 1);
  CHECK(restored->position(1).last_clock == 1);
  CHECK(restored->position(0).last == DataTag{span(1, 0, 8, 8)});
  // Worker 0 (at clock 3 now) reconnects; its push of clock 2 was lost with the old shard.
  CHECK(restored->replay(0, 2, g.data(), {span(1, 0, 16, 8)}).status().code() == Code::invalid_argument);  // not back
  REQUIRE(*restored->rejoin_worker(0, 3) == 3);
  CHECK(restored->replay(0, 1, g.data(), {span(1, 0, 8, 8)}).status().code() == Code::invalid_argument);  // applied
  CHECK(restored->replay(0, 3, g.data(), {span(1, 0, 24, 8)}).status().code() == Code::invalid_argument);  // not pushed
  auto v = restored->replay(0, 2, g.data(), {span(1, 0, 16, 8)});
  REQUIRE(v.ok());
  CHECK(*v == 5);
  CHECK(restored->replayed() == 1);
  CHECK(restored->position(0).clock == 3);  // a replay moves no clock
  const std::vector<AppliedShard> applied = restored->applied();
  const AppliedShard* s0 = find(applied, 1, 0);
  REQUIRE(s0);
  CHECK(s0->applied == 24);
  CHECK(s0->duplicates == 0);
  CHECK(s0->gaps == 0);
  CHECK(restored->parameters() == s->parameters());  // the same updates (SGD, equal gradients)
  // Its final pull waits for worker 1 too, which was training when the shard's predecessor died and
  // has not come back yet (it would bring replays); then for it to finish.
  REQUIRE(restored->finish_worker(0).ok());
  auto final_pull = std::async(std::launch::async, [&] { return restored->pull_final(p.data()); });
  CHECK(final_pull.wait_for(300ms) == std::future_status::timeout);
  REQUIRE(*restored->rejoin_worker(1, 2) == 2);
  CHECK(final_pull.wait_for(300ms) == std::future_status::timeout);
  REQUIRE(restored->finish_worker(1).ok());
  REQUIRE(final_pull.wait_for(5s) == std::future_status::ready);
  CHECK(final_pull.get().ok());
  // A checkpoint without a record (an older troupe's): restored, and the shard says so.
  state->extras.clear();
  auto bare = make_shard(0, 0, 4, sgd(2));
  REQUIRE(bare->restore(*state).ok());
  CHECK_FALSE(bare->restored_record());
  CHECK(bare->applied().empty());
}
