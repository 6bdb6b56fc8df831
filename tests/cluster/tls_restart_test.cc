// A --tls cluster whose head is killed and started again (`troupe up --restart-head`): the new head
// takes the session's TLS files (from cluster.json), the node registers with it again over TLS, and
// a job's TCP mesh trains under TLS as before.
#include <catch2/catch.hpp>

#include "tests/cluster/cluster_fixture.h"

using namespace troupe::testing;

TEST_CASE("tls: a head restarted with --restart-head takes its node back over TLS, and a job trains",
          "[cluster][tls]") {
  ClusterFixture c;
  c.up("--tls --nodes 1 --cpus 2");
  c.kill_and_restart_head("--cpus 2");
  // The node registers again (over the relay: nothing else reaches the head's port).
  REQUIRE(poll_until([&] { return nodes_in_state(c.status(), "ALIVE").size() == 2; }, std::chrono::seconds(30)));
  auto job = c.troupe("submit --strategy sync --workers 2 --transport tcp --epochs 1 --json --no-progress", 180);
  INFO(job.both() << c.logs_tail());
  REQUIRE(job.exit_code == 0);
  CHECK(Json::parse(job.last_line()).at("test_accuracy").get<double>() >= 0.80);
  // Still TLS only: the GCS answers no plain client.
  const Json info = c.cluster_file();
  auto plain = run_command("redis-cli -p " + std::to_string(info.at("redis_port").get<int>()) + " -a " +
                               info.at("redis_password").get<std::string>() + " --no-auth-warning ping",
                           10);
  CHECK(plain.out.find("PONG") == std::string::npos);
}
