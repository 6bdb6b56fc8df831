// Clients that ride out a GCS outage (gcs::riding_out, issue 27): a redis-server stopped and started
// again seconds later, or frozen (SIGSTOP) past the command deadline, costs a patient client's
// command a wait, not an error; a client with a short budget fails, naming the server. Real
// redis-server processes on loopback.
#include <signal.h>

#include <catch2/catch.hpp>

#include <thread>

#include "gcs/redis_client.h"
#include "gcs/redis_server.h"
#include "gcs/redis_store.h"
#include "tests/core/temp_dir.h"

namespace troupe::gcs {

using namespace std::chrono_literals;
using troupe::testing::TempDir;

namespace {

struct Server {
  TempDir dir;
  std::unique_ptr<RedisServer> server;
  Server() {
    RedisServerOptions o;
    o.session_dir = dir.path();
    auto s = RedisServer::start(o);
    INFO(s.status().to_string());
    REQUIRE(s.ok());
    server = std::move(*s);
  }
  // Options whose reconnect budget is short: 2 tries within 300 ms.
  RedisOptions impatient() const {
    RedisOptions o = server->client_options();
    o.command_timeout = 300ms;
    o.reconnect_attempts = 2;
    o.reconnect_deadline = 300ms;
    return o;
  }
  // A client that rides out 30 s of outage and one with the short budget, both connected. The
  // patient one waits `patient_reply` for a reply (the short 300 ms by default).
  std::pair<std::unique_ptr<RedisClient>, std::unique_ptr<RedisClient>> clients(
      std::chrono::milliseconds patient_reply = 300ms) const {
    RedisOptions o = riding_out(impatient(), 30s);
    o.command_timeout = patient_reply;
    auto patient = RedisClient::connect(o);
    auto short_budget = RedisClient::connect(impatient());
    REQUIRE(patient.ok());
    REQUIRE(short_budget.ok());
    return {std::move(*patient), std::move(*short_budget)};
  }
};

}  // namespace

TEST_CASE("riding out: a server down for 2.5 s costs a patient client a wait, an impatient one an error",
          "[gcs][redis][outage]") {
  Server s;
  // What is tested is the outage, not the reply deadline: 2 s for a reply keeps a loaded machine
  // (CI beside other runs) from failing the GET after the restart on 300 ms deadlines (it did once).
  auto [patient, impatient] = s.clients(2s);
  REQUIRE(patient->command({"SET", "k", "before"}).ok());
  REQUIRE(s.server->stop().ok());
  Status restarted;
  std::thread back([&] {  // (no assertions off the test's thread)
    std::this_thread::sleep_for(2500ms);
    restarted = s.server->restart();  // same port and password
  });
  auto lost = impatient->command({"GET", "k"});
  CHECK(lost.status().code() == Code::unavailable);
  CHECK_THAT(lost.status().message(), Catch::Contains("127.0.0.1:" + std::to_string(s.server->port())));
  const auto t0 = std::chrono::steady_clock::now();
  auto set = patient->command({"SET", "k", "after"});
  const auto waited = std::chrono::steady_clock::now() - t0;
  back.join();
  REQUIRE(restarted.ok());
  INFO(set.status().to_string());
  REQUIRE(set.ok());
  CHECK(waited >= 1s);  // it did wait for the server to come back
  auto got = patient->command({"GET", "k"});
  REQUIRE(got.ok());
  CHECK(got->str == "after");
}

TEST_CASE("riding out: a frozen server past the command deadline is waited for, and a command that is not idempotent is sent once",
          "[gcs][redis][outage]") {
  Server s;
  auto [patient, impatient] = s.clients();
  REQUIRE(patient->command({"SET", "k", "v"}).ok());
  const pid_t pid = s.server->pid();
  REQUIRE(::kill(pid, SIGSTOP) == 0);
  std::thread thaw([pid] {
    std::this_thread::sleep_for(2000ms);  // several command deadlines (300 ms) long
    ::kill(pid, SIGCONT);
  });
  auto stuck = impatient->command({"GET", "k"});
  CHECK_FALSE(stuck.ok());  // a timeout, then no server within its short reconnect budget
  auto got = patient->command({"GET", "k"});  // idempotent: retried once the server answers PING
  thaw.join();
  INFO(got.status().to_string());
  REQUIRE(got.ok());
  CHECK(got->str == "v");
  // A command that is not idempotent is never sent twice: after a timeout it says so.
  REQUIRE(::kill(pid, SIGSTOP) == 0);
  std::thread thaw2([pid] {
    std::this_thread::sleep_for(1000ms);
    ::kill(pid, SIGCONT);
  });
  auto incr = patient->command({"INCR", "counter"});
  thaw2.join();
  CHECK(incr.status().code() == Code::timeout);
  // Applied once, when the server woke up (it reads the closed connection's command first).
  std::string counter;
  for (int i = 0; i < 40 && counter.empty(); ++i) {
    auto r = patient->command({"GET", "counter"});
    REQUIRE(r.ok());
    counter = r->str;
    if (counter.empty()) std::this_thread::sleep_for(50ms);
  }
  CHECK(counter == "1");
}

TEST_CASE("riding out: a conditional write whose reply a frozen server did not give is settled once, by reading",
          "[gcs][redis][outage]") {
  Server s;
  RedisStoreOptions o;
  o.redis = riding_out(s.impatient(), 30s);
  o.prefix = "t-settle";
  auto store = RedisStore::connect(o);
  REQUIRE(store.ok());
  REQUIRE((*store)->put("jobs", "j", "v1").ok());
  const pid_t pid = s.server->pid();
  auto frozen_for = [pid](std::chrono::milliseconds d) {
    REQUIRE(::kill(pid, SIGSTOP) == 0);
    return std::thread([pid, d] {
      std::this_thread::sleep_for(d);
      ::kill(pid, SIGCONT);
    });
  };
  // The compare-and-set is sent, the reply does not come within 300 ms; the server applies it when
  // it wakes. The store reads the field: its desired value is there, so it was applied (once).
  std::thread thaw = frozen_for(1000ms);
  auto cas = (*store)->compare_and_set("jobs", "j", "v1", "v2");
  thaw.join();
  INFO(cas.status().to_string());
  REQUIRE(cas.ok());
  CHECK(*cas);
  CHECK(*(*store)->get("jobs", "j") == std::optional<std::string>("v2"));
  // A refusal stays a refusal: the precondition no longer holds.
  thaw = frozen_for(1000ms);
  auto stale = (*store)->compare_and_set("jobs", "j", "v1", "v3");
  thaw.join();
  REQUIRE(stale.ok());
  CHECK_FALSE(*stale);
  CHECK(*(*store)->get("jobs", "j") == std::optional<std::string>("v2"));
  // put_if_absent alike: applied once, true; a second one is false.
  thaw = frozen_for(1000ms);
  auto first = (*store)->put_if_absent("jobs", "k", "mine");
  thaw.join();
  REQUIRE(first.ok());
  CHECK(*first);
  auto second = (*store)->put_if_absent("jobs", "k", "theirs");
  REQUIRE(second.ok());
  CHECK_FALSE(*second);
  CHECK(*(*store)->get("jobs", "k") == std::optional<std::string>("mine"));
}

}  // namespace troupe::gcs
