// What data a parameter shard's updates came from (trainers/ps/applied_data.h): every push's tag
// recorded per (epoch, ledger shard) and per worker; a push that repeats or skips examples counted;
// the tag of a rank's last push told to its replacement over TCP; a push to some shards only.
#include <catch2/catch.hpp>

#include <thread>

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
  CHECK(d.record(0, {span(2, 1, 0, 10)}).empty());
  CHECK(d.record(0, {span(2, 1, 10, 10)}).empty());
  // A shard trained again from 0 (what a replacement did before the servers' record existed).
  const std::string again = d.record(1, {span(2, 1, 0, 10)});
  CHECK(again.find("repeats 10 examples") != std::string::npos);
  // A push that starts past the expected offset skips examples.
  const std::string skip = d.record(1, {span(2, 1, 25, 5)});
  CHECK(skip.find("skips examples [20, 25)") != std::string::npos);
  const std::vector<AppliedShard> all = d.shards();
  REQUIRE(all.size() == 1);
  CHECK(all[0].applied == 35);
  CHECK(all[0].duplicates == 10);
  CHECK(all[0].gaps == 5);
  CHECK(all[0].next == 30);
  CHECK(d.record(0, {}).empty());  // an untagged push records nothing
  CHECK(d.last(0) == DataTag{span(2, 1, 10, 10)});
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
