// The cluster view's GPUs: every actor entry has gpu_ids, and the table for people gives each live
// actor on GPUs a line naming its devices ("gpu 0", "gpus 0,1"), at most ten, then a count.
#include <catch2/catch.hpp>

#include "gcs/cluster_view.h"
#include "gcs/in_memory_store.h"
#include "gcs/tables.h"

namespace troupe::gcs {
namespace {

ActorRecord actor(const NodeId& node, ActorState state, std::vector<int> gpus) {
  ActorRecord a;
  a.id = ActorId::random();
  a.type_name = "echo";
  a.node = state == ActorState::pending ? NodeId() : node;
  a.state = state;
  a.resources.gpus = static_cast<double>(gpus.size());
  a.gpu_ids = std::move(gpus);
  if (state == ActorState::pending) a.pending_reason = "needs 1 gpu; largest free on an alive node is 0";
  return a;
}

}  // namespace

TEST_CASE("cluster view: actors carry gpu_ids and live GPU actors get a line with their devices",
          "[gcs][cluster_view][gpus]") {
  InMemoryStore store;
  const NodeId node = NodeId::random();
  const ActorRecord one = actor(node, ActorState::alive, {0});
  const ActorRecord two = actor(node, ActorState::alive, {1, 2});
  const ActorRecord cpu = actor(node, ActorState::alive, {});
  const ActorRecord waiting = actor(node, ActorState::pending, {});
  const ActorRecord ended = actor(node, ActorState::dead, {3});
  REQUIRE(Table<ActorRecord>(store).put_many({one, two, cpu, waiting, ended}).ok());

  auto view = cluster_view(store);
  REQUIRE(view.ok());
  std::map<std::string, nlohmann::json> by_id;
  for (const auto& a : view->at("actors")) by_id[a.at("id")] = a.at("gpu_ids");
  CHECK(by_id.at(one.id.hex()) == nlohmann::json::array({0}));
  CHECK(by_id.at(two.id.hex()) == nlohmann::json::array({1, 2}));
  CHECK(by_id.at(cpu.id.hex()).empty());
  CHECK(by_id.at(ended.id.hex()) == nlohmann::json::array({3}));  // what it held, kept when DEAD

  const std::string text = render_cluster_view(*view);
  INFO(text);
  const std::string on = " echo on " + node.short_hex() + ": ";
  CHECK(text.find("ALIVE   " + one.id.short_hex() + on + "gpu 0\n") != std::string::npos);
  CHECK(text.find("ALIVE   " + two.id.short_hex() + on + "gpus 1,2\n") != std::string::npos);
  CHECK(text.find(cpu.id.short_hex()) == std::string::npos);    // no GPU: counted per node only
  CHECK(text.find(ended.id.short_hex()) == std::string::npos);  // not live
  CHECK(text.find("PENDING " + waiting.id.short_hex()) != std::string::npos);
}

TEST_CASE("cluster view: more than ten live GPU actors are listed ten, then counted", "[gcs][cluster_view][gpus]") {
  InMemoryStore store;
  const NodeId node = NodeId::random();
  std::vector<ActorRecord> many;
  for (int i = 0; i < 13; ++i) many.push_back(actor(node, ActorState::alive, {i}));
  REQUIRE(Table<ActorRecord>(store).put_many(many).ok());
  auto view = cluster_view(store);
  REQUIRE(view.ok());
  const std::string text = render_cluster_view(*view);
  INFO(text);
  size_t lines = 0;
  for (size_t at = text.find("ALIVE   "); at != std::string::npos; at = text.find("ALIVE   ", at + 1)) ++lines;
  CHECK(lines == 10);
  CHECK(text.find("... 3 more live actors on GPUs") != std::string::npos);
}

}  // namespace troupe::gcs
