// An async parameter server restored after its death (trainers/ps/parameter_shard.h, ps_client.h):
// async shards checkpoint at every multiple of their interval in versions (a version a predecessor
// already wrote is kept), a restored shard takes the workers' clocks as they reconnect, and a TCP
// client reconnects to a replaced server at the address it is told, at its clock, while the other
// shard keeps its state; a server that never comes back is named in the error.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "tests/core/temp_dir.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/ps/parameter_shard.h"
#include "trainers/ps/ps_client.h"
#include "trainers/ps/ps_server.h"

using namespace troupe;
using namespace troupe::ps;
using namespace troupe::checkpoint;
using namespace std::chrono_literals;
using troupe::testing::TempDir;

namespace {

ShardOptions async_options(int workers, int shards, size_t floats, int64_t staleness) {
  ShardOptions o;
  o.mode = PsMode::async;
  o.workers = workers;
  o.staleness = staleness;
  o.optimizer.name = "sgd";
  o.optimizer.lr = 1.0f;
  o.optimizer.momentum = 0;
  o.total_updates = 1000;
  o.wait_timeout = 2s;
  o.shards = shards;
  o.total_floats = floats;
  return o;
}

// Shard i of `shards` over floats 0, 1, 2, ... (each float starts at its index).
std::unique_ptr<ParameterShard> make_shard(int i, int shards, size_t floats, int workers, int64_t staleness = -1) {
  auto ranges = partition_parameters(floats, shards);
  REQUIRE(ranges.ok());
  const ShardRange r = (*ranges)[static_cast<size_t>(i)];
  std::vector<float> init(r.size());
  for (size_t k = 0; k < r.size(); ++k) init[k] = static_cast<float>(r.begin + k);
  auto shard = ParameterShard::create(i, r, init, async_options(workers, shards, floats, staleness));
  REQUIRE(shard.ok());
  return std::move(*shard);
}

// Collects the shard files written, by version and shard.
struct Written {
  std::mutex mu;
  std::map<int64_t, std::vector<WrittenShard>> by_version;
  int calls = 0;
  ShardCheckpointing every(int64_t versions, const std::string& dir, int shards) {
    ShardCheckpointing c;
    c.every = versions;
    c.dir = dir;
    c.tag = "job-r";
    c.steps_per_epoch = 100;
    c.written = [this, shards](const WrittenShard& w, int64_t version) {
      std::lock_guard<std::mutex> lock(mu);
      ++calls;
      auto& v = by_version[version];
      v.resize(static_cast<size_t>(shards));
      const std::string name = std::filesystem::path(w.path).filename().string();  // shard-<i>-of-<n>.ckpt
      v[static_cast<size_t>(std::stoi(name.substr(6)))] = w;
      return Status{};
    };
    return c;
  }
  Manifest manifest(int64_t version, const std::string& dir) {
    Manifest m;
    m.tag = "job-r";
    m.step = version;
    m.dir = step_dir(dir, version);
    m.shards = by_version.at(version);
    return m;
  }
};

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A job of two shards over floats 0..9 for one worker on loopback servers, each shard
// checkpointing every `every` versions into dir; clients find each shard where `addresses` says as
// the test replaces servers.
struct RestorableJob {
  TempDir dir;
  Written written;
  std::mutex mu;
  std::vector<std::string> addresses;
  std::vector<std::unique_ptr<PsServer>> servers;
  PsServerOptions so;

  explicit RestorableJob(int64_t every) {
    so.job = "job-r";
    so.io_timeout = 2s;
    for (int i = 0; i < 2; ++i) {
      auto shard = make_shard(i, 2, 10, 1);
      REQUIRE(shard->enable_checkpoints(written.every(every, dir.path(), 2)).ok());
      auto server = PsServer::start(std::move(shard), so);
      REQUIRE(server.ok());
      addresses.push_back((*server)->address());
      servers.push_back(std::move(*server));
    }
  }
  PsClientOptions client_options() {
    PsClientOptions co;
    co.job = "job-r";
    co.rank = 0;
    co.timeout = 5s;
    co.reconnect_timeout = 10s;
    co.resolve = [this](int i) -> Expected<std::string> {
      std::lock_guard<std::mutex> lock(mu);
      return addresses.at(static_cast<size_t>(i));
    };
    return co;
  }
  // Shard 1's server replaced by one restored from `state`, published after `delay`.
  void replace_shard_1(const TrainingState& state, std::chrono::milliseconds delay = 0ms) {
    auto shard = make_shard(1, 2, 10, 1);
    REQUIRE(shard->restore(state).ok());
    auto server = PsServer::start(std::move(shard), so);
    REQUIRE(server.ok());
    std::this_thread::sleep_for(delay);
    std::lock_guard<std::mutex> lock(mu);
    addresses[1] = (*server)->address();
    servers[1] = std::move(*server);
  }
};

}  // namespace

TEST_CASE("ps restore: an async shard checkpoints every K versions, and a restored one takes the workers' clocks",
          "[ps][checkpoint][restore]") {
  TempDir dir;
  Written written;
  auto shard = make_shard(0, 1, 8, 2, 1);
  REQUIRE(shard->enable_checkpoints(written.every(4, dir.path(), 1)).ok());
  const std::vector<float> ones(8, 1.0f);
  std::vector<float> params(8);
  for (int64_t c = 0; c < 4; ++c) {
    for (int w = 0; w < 2; ++w) {
      auto v = shard->pull(w, c, params.data());
      REQUIRE(v.ok());
      REQUIRE(shard->push(w, c, ones.data(), *v).ok());
    }
  }
  CHECK(shard->version() == 8);
  REQUIRE(written.by_version.size() == 2u);  // versions 4 and 8
  const std::string file8 = written.by_version.at(8)[0].path;
  const std::string bytes8 = file_bytes(file8);
  auto state = load_checkpoint(written.manifest(4, dir.path()), 8);
  REQUIRE(state.ok());
  CHECK(state->step == 4);
  CHECK(state->params[3] == Approx(3.0f - 4.0f));

  // A replacement restored from version 4: the workers went on to clock 4 meanwhile.
  auto restored = make_shard(0, 1, 8, 2, 1);
  REQUIRE(restored->restore(*state).ok());
  REQUIRE(restored->enable_checkpoints(written.every(4, dir.path(), 1)).ok());
  CHECK(restored->version() == 4);
  CHECK(restored->pull(0, 4, params.data()).status().code() == Code::invalid_argument);  // not reconnected yet
  CHECK(*restored->rejoin_worker(0, 4) == 4);  // its own clock, not the checkpoint's
  auto pulled = restored->pull(0, 4, params.data());  // worker 1 is not waited for until it is back
  REQUIRE(pulled.ok());
  CHECK(*pulled == 4);
  CHECK(params[3] == Approx(-1.0f));
  CHECK(*restored->rejoin_worker(1, 3) == 3);
  REQUIRE(restored->push(0, 4, ones.data(), 4).ok());
  CHECK(restored->push(0, 3, ones.data(), 4).status().code() == Code::invalid_argument);  // a clock it passed
  for (int64_t c = 3; c < 6; ++c) REQUIRE(restored->push(1, c, ones.data(), restored->version()).ok());
  CHECK(restored->version() == 8);
  // Version 8's file was its predecessor's (maybe in a manifest already): kept as it was.
  CHECK(written.calls == 2);
  CHECK(file_bytes(file8) == bytes8);
  for (int64_t c = 5; c < 9; ++c) REQUIRE(restored->push(0, c, ones.data(), restored->version()).ok());
  CHECK(restored->version() == 12);
  CHECK(written.calls == 3);  // version 12, its own
  auto later = load_checkpoint(written.manifest(12, dir.path()), 8);
  REQUIRE(later.ok());
  CHECK(later->params[3] == Approx(3.0f - 12.0f));
  // A replacement of a worker (a new process, clock 0) goes on at its predecessor's clock.
  restored->remove_worker(1, "killed");
  CHECK(*restored->rejoin_worker(1, 0) == 6);
  // A replacement of worker 0 that never reached this shard (its start clock came from the other
  // shards): its pull for clock 12 raises its clock here, rather than waiting on itself (S = 1).
  restored->remove_worker(0, "killed");
  CHECK(*restored->rejoin_worker(0, 0) == 9);
  REQUIRE(restored->push(1, 6, ones.data(), restored->version()).ok());
  for (int64_t c = 7; c < 11; ++c) REQUIRE(restored->push(1, c, ones.data(), restored->version()).ok());
  CHECK(restored->pull(0, 12, params.data()).ok());
  CHECK(restored->pull(1, 11, params.data()).ok());  // worker 0 is at 12 now, not 9
}

TEST_CASE("ps restore: a client reconnects to a replaced server at its clock while the other shard keeps its state",
          "[ps][tcp][restore]") {
  RestorableJob job(1);
  auto& [dir, written, mu, addresses, servers, so] = job;
  PsClientOptions co = job.client_options();
  auto client = connect_ps(addresses, co);
  REQUIRE(client.ok());
  PsClient& c = **client;
  std::vector<float> params(10), ones(10, 1.0f);
  for (int64_t clock = 0; clock < 2; ++clock) {
    auto v = c.pull(clock, params.data());
    REQUIRE(v.ok());
    REQUIRE(c.push(clock, ones.data(), *v).ok());
  }
  auto state = load_checkpoint(written.manifest(1, dir.path()), 10);
  REQUIRE(state.ok());

  // Server 1 dies; its replacement, restored from version 1, publishes a new address 300 ms later
  // (until then the client dials the dead one's and is refused).
  servers[1]->stop();
  auto replace = [&] { job.replace_shard_1(*state, 300ms); };
  std::thread replacer(replace);
  auto v = c.pull(2, params.data());
  replacer.join();
  INFO(v.status().to_string());
  REQUIRE(v.ok());
  CHECK((*v)[0] == 2);  // the other shard kept its state
  CHECK((*v)[1] == 1);  // the restored one lost the update after its checkpoint
  CHECK(params[0] == Approx(0.0f - 2.0f));
  CHECK(params[9] == Approx(9.0f - 1.0f));
  REQUIRE(c.push(2, ones.data(), *v).ok());
  CHECK(servers[0]->shard().version() == 3);
  CHECK(servers[1]->shard().version() == 2);

  // Once finished, a reconnecting worker says so again: the final pull does not wait for it.
  REQUIRE(c.finish().ok());
  servers[1]->stop();
  replace();
  auto final_v = c.pull_final(params.data());
  REQUIRE(final_v.ok());
  CHECK((*final_v)[1] == 1);

  // A server that never comes back is named, after the reconnection deadline.
  PsClientOptions quick = co;
  quick.rank = 0;
  quick.reconnect_timeout = 300ms;
  servers[0]->stop();
  servers[1]->stop();
  auto s0 = make_shard(0, 2, 10, 1), s1 = make_shard(1, 2, 10, 1);
  auto a = PsServer::start(std::move(s0), so), b = PsServer::start(std::move(s1), so);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    addresses = {(*a)->address(), (*b)->address()};
  }
  auto second = connect_ps(addresses, quick);
  REQUIRE(second.ok());
  const std::string dead = (*b)->address();
  (*b)->stop();
  const auto t0 = std::chrono::steady_clock::now();
  auto failed = (*second)->pull(0, params.data());
  REQUIRE_FALSE(failed.ok());
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  INFO(failed.status().to_string());
  CHECK(failed.status().code() == Code::unavailable);
  CHECK(failed.status().message().find("parameter server 1 (last at " + dead + ") did not come back within 0.3 s") !=
        std::string::npos);
}

TEST_CASE("ps restore: a push the server applied before the connection broke is not sent again after reconnecting",
          "[ps][tcp][restore]") {
  TempDir dir;
  // The shard's checkpoint of version 2 (inside the push of clock 1, after it is applied) takes
  // longer than the client waits for the reply: the client gives up on that connection and dials
  // the same server again, which by then has applied the push.
  auto shard = make_shard(0, 1, 4, 1);
  ShardCheckpointing slow;
  slow.every = 2;
  slow.dir = dir.path();
  slow.tag = "job-r";
  slow.steps_per_epoch = 100;
  slow.written = [](const WrittenShard&, int64_t) {
    std::this_thread::sleep_for(1500ms);
    return Status{};
  };
  REQUIRE(shard->enable_checkpoints(slow).ok());
  PsServerOptions so;
  so.job = "job-r";
  auto server = PsServer::start(std::move(shard), so);
  REQUIRE(server.ok());
  PsClientOptions co;
  co.job = "job-r";
  co.timeout = 500ms;
  co.reconnect_timeout = 10s;
  const std::string address = (*server)->address();
  co.resolve = [&](int) -> Expected<std::string> { return address; };
  auto client = connect_ps({address}, co);
  REQUIRE(client.ok());
  std::vector<float> params(4), ones(4, 1.0f);
  for (int64_t clock = 0; clock < 3; ++clock) {
    auto v = (*client)->pull(clock, params.data());
    REQUIRE(v.ok());
    Status pushed = (*client)->push(clock, ones.data(), *v, {DataSpan{1, 0, 8 * clock, 8}});
    INFO(pushed.to_string());
    REQUIRE(pushed.ok());  // clock 1's reply was lost; it is not pushed twice (which the shard refuses)
  }
  const ParameterShard& s = (*server)->shard();
  CHECK(s.version() == 3);
  const std::vector<AppliedShard> applied = s.applied();
  REQUIRE(applied.size() == 1);
  CHECK(applied[0].applied == 24);
  CHECK(applied[0].duplicates == 0);
  CHECK(s.replayed() == 0);
}

TEST_CASE("ps restore: each lost push is recomputed on the restored shard's parameters as the replays before it left "
          "them", "[ps][tcp][restore]") {
  // One worker, two shards, SGD with rate 1, checkpoints every 2 versions. The worker pushes clocks
  // 0..4; shard 1 dies and comes back restored from version 2 (clocks 0 and 1 applied). The client
  // replays clocks 2, 3 and 4 to it: before each, the replay function must be handed shard 1's
  // parameters as they stand then (initial - 2, - 3, - 4), not the worker's stale copy (initial - 5)
  // for all three: gradients from one stale point cost real jobs 1-3 points of accuracy.
  RestorableJob job(2);
  PsClientOptions co = job.client_options();
  co.checkpoint_versions = 2;
  auto client = connect_ps(job.addresses, co);
  REQUIRE(client.ok());
  PsClient& c = **client;
  std::vector<float> params(10), ones(10, 1.0f);
  std::vector<std::vector<float>> handed;  // what each replay was handed, in order
  std::vector<ShardRange> ranges;
  c.set_replay([&](const DataTag& tag, const PsClient::Fresh& fresh, float* grads) -> Status {
    REQUIRE(fresh.values);
    REQUIRE(tag.size() == 1);
    handed.emplace_back(fresh.values, fresh.values + fresh.range.size());
    ranges.push_back(fresh.range);
    std::fill(grads, grads + 10, 1.0f);
    return {};
  });
  for (int64_t clock = 0; clock < 5; ++clock) {
    auto v = c.pull(clock, params.data());
    REQUIRE(v.ok());
    REQUIRE(c.push(clock, ones.data(), *v, {DataSpan{1, 0, 8 * clock, 8}}).ok());
  }
  auto state = load_checkpoint(job.written.manifest(2, job.dir.path()), 10);
  REQUIRE(state.ok());
  job.servers[1]->stop();
  job.replace_shard_1(*state);
  auto v = c.pull(5, params.data());
  INFO(v.status().to_string());
  REQUIRE(v.ok());
  CHECK(c.replayed() == 3);
  REQUIRE(handed.size() == 3);
  for (size_t r = 0; r < 3; ++r) {
    CHECK(ranges[r].begin == 5);
    CHECK(ranges[r].end == 10);
    for (size_t k = 0; k < 5; ++k) CHECK(handed[r][k] == Approx(static_cast<float>(5 + k) - 2.0f - r));
  }
  // Every push applied once on both shards: the same parameters, version 5 each.
  CHECK((*v)[0] == 5);
  CHECK((*v)[1] == 5);
  for (size_t k = 0; k < 10; ++k) CHECK(params[k] == Approx(static_cast<float>(k) - 5.0f));
}
