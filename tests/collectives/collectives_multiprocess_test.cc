// Groups of real processes (troupe_collective_rank, one per rank) formed through a real
// redis-server and connected over real TCP on loopback: correct sums, a member SIGKILLed mid-call,
// ranks that disagree on the call, and a member of a stale generation. Ports are all kernel-picked
// and every wait has a deadline; a Ranks object kills whatever it started when it goes away.
#include <signal.h>

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <thread>

#include "core/process.h"
#include "gcs/events.h"
#include "gcs/tables.h"
#include "tests/core/temp_dir.h"
#include "tests/gcs/redis_fixture.h"

using namespace troupe;

namespace {

using Clock = std::chrono::steady_clock;

// The processes of one test, their logs (each one's stdout) and a cleanup that SIGKILLs them all.
class Ranks {
 public:
  explicit Ranks(std::string prefix) : prefix_(std::move(prefix)) {
    server_ = &gcs::testing::shared_redis();
    store_ = gcs::testing::connect_store(*server_, prefix_);  // cleans the prefix
  }
  ~Ranks() {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      (void)wait_process(pid, std::chrono::milliseconds(2000));
    }
  }

  // Starts one rank with `args` (see collective_rank_main.cc); returns its index.
  int start(const std::vector<std::string>& args) {
    SpawnOptions o;
    o.argv = {TROUPE_COLLECTIVE_RANK, "--redis-port", std::to_string(server_->port()), "--password",
              server_->password(), "--prefix", prefix_};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.log_file = dir_.path() + "/rank" + std::to_string(pids_.size()) + ".log";
    o.detach = false;
    auto pid = spawn_process(o);
    REQUIRE(pid.ok());
    pids_.push_back(*pid);
    logs_.push_back(o.log_file);
    return static_cast<int>(pids_.size()) - 1;
  }

  std::string log(int i) const {
    std::ifstream in(logs_[i]);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  bool says(int i, const std::string& text) const { return log(i).find(text) != std::string::npos; }

  // Waits for process i to exit; its exit code, or fails the test after `timeout`.
  int wait(int i, std::chrono::milliseconds timeout = std::chrono::seconds(40)) {
    auto code = wait_process(pids_[i], timeout);
    INFO("rank process " << i << ": " << log(i));
    REQUIRE(code.ok());
    return *code;
  }
  bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!done()) {
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
  void kill(int i) { ::kill(pids_[i], SIGKILL); }
  gcs::Store& store() { return *store_; }

 private:
  std::string prefix_;
  gcs::RedisServer* server_;
  std::unique_ptr<gcs::RedisStore> store_;
  troupe::testing::TempDir dir_;
  std::vector<pid_t> pids_;
  std::vector<std::string> logs_;
};

std::vector<std::string> rank_args(const std::string& group, int64_t generation, int rank, int world) {
  return {"--group", group, "--generation", std::to_string(generation), "--rank", std::to_string(rank),
          "--world", std::to_string(world)};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The line of `log` that starts with `prefix`, or "".
std::string line_of(const std::string& log, const std::string& prefix) {
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    if (line.compare(0, prefix.size(), prefix) == 0) return line;
  return "";
}

}  // namespace

// Where the 4 ranks of a test run: each on its own node (TCP), all on one (shared memory), or two
// nodes of two (hierarchical). form_group picks the transport from the members' node ids.
struct Layout {
  const char* transport;
  std::vector<std::string> nodes;  // --node label per rank; empty: a random node each
};
const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {"tcp", {}}, {"shm", {"n0", "n0", "n0", "n0"}}, {"hierarchical", {"n0", "n0", "n1", "n1"}}};
  return all;
}
std::vector<std::string> node_args(const Layout& layout, int rank) {
  if (layout.nodes.empty()) return {};
  return {"--node", layout.nodes[rank]};
}

TEST_CASE("multiprocess: 4 processes form a group through redis and allreduce correctly") {
  for (const Layout& layout : layouts()) {
    INFO("layout " << layout.transport);
    Ranks ranks(std::string("mp_sum_") + layout.transport);
    for (int r = 0; r < 4; ++r)
      ranks.start(rank_args("sum", 0, r, 4) + node_args(layout, r) +
                  std::vector<std::string>{"--rounds", "3", "--count", "300000"});
    for (int r = 0; r < 4; ++r) {
      INFO("rank " << r << ": " << ranks.log(r));
      CHECK(ranks.wait(r) == 0);
      CHECK(ranks.says(r, "formed 0 " + std::to_string(r) + " 4 " + layout.transport + "\n"));
      CHECK(ranks.says(r, "round 3 ok 10\n"));  // 1 + 2 + 3 + 4
    }
  }
}

TEST_CASE("multiprocess: a member SIGKILLed mid-allreduce fails every survivor naming it, and they re-form") {
  for (const Layout& layout : layouts()) {
  INFO("layout " << layout.transport);
  Ranks ranks(std::string("mp_kill_") + layout.transport);
  const int world = 4, victim = 2;
  const auto timeout = std::chrono::milliseconds(8000);
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> extra = {"--rounds", "100000", "--count", std::to_string(1 << 21), "--timeout-ms",
                                      std::to_string(timeout.count())};
    if (r != victim) extra = extra + std::vector<std::string>{"--reform-rank", std::to_string(r < victim ? r : r - 1),
                                                              "--reform-world", std::to_string(world - 1)};
    ranks.start(rank_args("dp", 7, r, world) + node_args(layout, r) + extra);
  }
  // Kill the victim while the group is busy with large allreduces (most of its time is inside one).
  REQUIRE(ranks.wait_for([&] { return ranks.says(victim, "round 2 ok"); }, std::chrono::seconds(30)));
  ranks.kill(victim);
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    INFO("rank " << r << ": " << ranks.log(r));
    CHECK(ranks.wait(r) == 0);
    const std::string log = ranks.log(r);
    std::string error;
    for (std::istringstream in(log); std::getline(in, error);)
      if (error.find(" error ") != std::string::npos) break;
    INFO("the failed round: " << error);
    CHECK(error.find("rank " + std::to_string(victim)) != std::string::npos);
    // "round <k> error <ms> ...": the call named by its sequence number k, returned within the deadline.
    std::istringstream fields(error);
    std::string word, status;
    int k = 0;
    long ms = -1;
    fields >> word >> k >> status >> ms;
    CHECK(status == "error");
    CHECK(error.find("allreduce #" + std::to_string(k) + " ") != std::string::npos);
    CHECK(ms >= 0);
    CHECK(ms < timeout.count());
    CHECK(ranks.says(r, "reformed 8 "));
    CHECK(ranks.says(r, "final ok 7\n"));  // 1 + 2 + 4: the survivors' values
  }
  // The failure is in the GCS, and the group record moved to the new generation without the victim.
  auto events = gcs::recent_events(ranks.store(), 100);
  REQUIRE(events.ok());
  bool recorded = false;
  for (const auto& e : *events)
    if (e.kind == "group_failed" && e.subject == "dp" && e.message.find("generation 7") != std::string::npos &&
        e.message.find("rank " + std::to_string(victim)) != std::string::npos)
      recorded = true;
  CHECK(recorded);
  auto group = gcs::Table<gcs::GroupRecord>(ranks.store()).get("dp");
  REQUIRE(group.ok());
  CHECK(group->generation == 8);
  CHECK(group->world_size == world - 1);

  // A member that comes back at the old generation is refused at once, not left waiting.
  const int stale = ranks.start(rank_args("dp", 7, 1, world) + node_args(layout, 1));
  CHECK(ranks.wait(stale, std::chrono::seconds(15)) != 0);
  INFO(ranks.log(stale));
  CHECK(ranks.says(stale, "form error invalid_argument: group 'dp' generation 7 is stale: generation 8"));
  }
}

TEST_CASE("multiprocess: ranks that disagree on count or dtype all fail with an error naming both calls") {
  struct Case {
    const char* name;
    std::vector<std::string> odd;  // what rank 3 passes differently
    const char* theirs;
  };
  for (const Case& c : {Case{"count", {"--count", "1200"}, "allreduce #1 of 1200 f32 (sum)"},
                        Case{"dtype", {"--dtype", "bf16"}, "allreduce #1 of 1000 bf16 (sum)"}}) {
    INFO(c.name);
    Ranks ranks(std::string("mp_mismatch_") + c.name);
    for (int r = 0; r < 4; ++r)
      ranks.start(rank_args(std::string("mm_") + c.name, 0, r, 4) +
                  std::vector<std::string>{"--timeout-ms", "20000"} + (r == 3 ? c.odd : std::vector<std::string>{}));
    for (int r = 0; r < 4; ++r) {
      // Well before the 20 s deadline: nobody waits for it.
      CHECK(ranks.wait(r, std::chrono::seconds(30)) != 0);
      const std::string error = line_of(ranks.log(r), "round 1 error");
      INFO("rank " << r << ": " << ranks.log(r));
      CHECK(error.find("invalid_argument") != std::string::npos);
      CHECK(error.find(c.theirs) != std::string::npos);
      CHECK(error.find("allreduce #1 of 1000 f32 (sum)") != std::string::npos);
      CHECK(error.find("every rank must issue the same collectives") != std::string::npos);
      long ms = -1;
      std::istringstream(error.substr(std::string("round 1 error ").size())) >> ms;
      CHECK(ms < 10000);
    }
  }
}
