// The parameter-server data plane over real TCP (trainers/ps/ps_server.h, ps_client.h): a client
// assembles the whole vector from every shard and splits its pushes among them; the wrong job,
// shards in the wrong order, a peer that closes mid-frame, a port that refuses and a server that
// stops under a waiting pull are all clear errors in bounded time, and never bring a server down.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "trainers/ps/ps_client.h"
#include "trainers/ps/ps_server.h"
#include "trainers/ps/ps_wire.h"

using namespace troupe;
using namespace troupe::ps;
using namespace std::chrono_literals;

namespace {

// A job of `shards` shards over `floats` parameters 0, 1, 2, ... (SGD, lr 1, no momentum).
struct TinyJob {
  std::vector<std::unique_ptr<PsServer>> servers;
  std::vector<std::string> addresses;
};

TinyJob tiny_job(int shards, size_t floats, PsMode mode, int workers, int64_t staleness = -1,
                 std::chrono::milliseconds wait = 5s) {
  TinyJob job;
  auto ranges = partition_parameters(floats, shards);
  REQUIRE(ranges.ok());
  for (int i = 0; i < shards; ++i) {
    ShardOptions o;
    o.mode = mode;
    o.workers = workers;
    o.staleness = staleness;
    o.optimizer.name = "sgd";
    o.optimizer.lr = 1.0f;
    o.optimizer.momentum = 0;
    o.total_updates = 100;
    o.wait_timeout = wait;
    o.shards = shards;
    o.total_floats = floats;
    const ShardRange r = (*ranges)[static_cast<size_t>(i)];
    std::vector<float> init(r.size());
    for (size_t k = 0; k < r.size(); ++k) init[k] = static_cast<float>(r.begin + k);
    auto shard = ParameterShard::create(i, r, init, o);
    REQUIRE(shard.ok());
    PsServerOptions so;
    so.job = "job-a";
    so.io_timeout = 2s;
    auto server = PsServer::start(std::move(*shard), so);
    REQUIRE(server.ok());
    job.addresses.push_back((*server)->address());
    job.servers.push_back(std::move(*server));
  }
  return job;
}

PsClientOptions client_options(int rank, const std::string& job = "job-a") {
  PsClientOptions o;
  o.job = job;
  o.rank = rank;
  o.connect_timeout = 2s;
  o.timeout = 10s;
  return o;
}

// A raw connection to `address` (for speaking the protocol badly on purpose).
wire::Socket raw_connect(const std::string& address) {
  auto s = wire::dial(address, wire::Clock::now() + 2s);
  REQUIRE(s.ok());
  return std::move(*s);
}

void send_hello(int fd, int rank, const std::string& job) {
  wire::Header h;
  h.op = wire::Op::hello;
  h.worker = rank;
  h.payload = job.size();
  REQUIRE(wire::write_frame(fd, h, job.data(), wire::Clock::now() + 2s).ok());
  wire::Header reply;
  REQUIRE(wire::read_header(fd, &reply, wire::Clock::now() + 2s).ok());
  REQUIRE(reply.op == wire::Op::welcome);
  wire::ShardInfo info;
  REQUIRE(wire::read_exact(fd, &info, sizeof info, wire::Clock::now() + 2s).ok());
}

}  // namespace

TEST_CASE("ps tcp: a client pulls the whole vector from two shards and each shard applies its part of a push",
          "[ps][tcp]") {
  TinyJob job = tiny_job(2, 11, PsMode::async, 1);
  auto client = connect_ps(job.addresses, client_options(0));
  REQUIRE(client.ok());
  CHECK((*client)->parameters() == 11);
  CHECK((*client)->shards() == 2);
  std::vector<float> p(11), g(11);
  auto v = (*client)->pull(0, p.data());
  REQUIRE(v.ok());
  CHECK(*v == Versions{0, 0});
  for (size_t i = 0; i < 11; ++i) {
    CHECK(p[i] == static_cast<float>(i));
    g[i] = static_cast<float>(i) / 2;
  }
  REQUIRE((*client)->push(0, g.data(), *v).ok());
  auto v1 = (*client)->pull(1, p.data());
  REQUIRE(v1.ok());
  CHECK(*v1 == Versions{1, 1});
  for (size_t i = 0; i < 11; ++i) CHECK(p[i] == static_cast<float>(i) / 2);
  auto stale = (*client)->staleness();
  REQUIRE(stale.ok());
  CHECK(stale->stats().count == 2);  // one update per shard
  REQUIRE((*client)->finish().ok());
  REQUIRE((*client)->pull_final(p.data()).ok());
}

TEST_CASE("ps tcp: a worker of another job is refused with the reason", "[ps][tcp][errors]") {
  TinyJob job = tiny_job(2, 10, PsMode::async, 2);
  auto client = connect_ps(job.addresses, client_options(1, "job-b"));
  REQUIRE_FALSE(client.ok());
  CHECK(client.status().code() == Code::invalid_argument);
  CHECK_THAT(client.status().message(), Catch::Contains("connecting to shard 0 at " + job.addresses[0]));
  CHECK_THAT(client.status().message(), Catch::Contains("worker 1 of job 'job-b' reached the parameter server of "
                                                        "job 'job-a'"));
  SECTION("so is a rank outside the job, or one already connected") {
    auto outside = connect_ps(job.addresses, client_options(2));
    REQUIRE_FALSE(outside.ok());
    CHECK_THAT(outside.status().message(), Catch::Contains("worker rank 2 is outside 0..1"));
    auto first = connect_ps(job.addresses, client_options(0));
    REQUIRE(first.ok());
    auto twice = connect_ps(job.addresses, client_options(0));
    REQUIRE_FALSE(twice.ok());
    CHECK_THAT(twice.status().message(), Catch::Contains("worker 0 of job 'job-a' is already connected"));
  }
  SECTION("and shards given in the wrong order") {
    auto swapped = connect_ps({job.addresses[1], job.addresses[0]}, client_options(0));
    REQUIRE_FALSE(swapped.ok());
    CHECK_THAT(swapped.status().message(), Catch::Contains("it is shard 1 of 2"));
    CHECK_THAT(swapped.status().message(), Catch::Contains("in shard order"));
  }
}

TEST_CASE("ps tcp: a later attempt of a rank supersedes the connection its predecessor left open",
          "[ps][tcp][errors]") {
  // Worker 0 of attempt 0 is cut off with its host: the server's end of its connection stays open
  // (no FIN, no RST ever comes; here: a client that simply goes quiet). The supervisor places
  // worker 0 of attempt 1; it must be admitted in the predecessor's place at once, with the
  // predecessor's clock, and the predecessor (should its link come back) is refused by name.
  TinyJob job = tiny_job(2, 10, PsMode::async, 2);
  auto predecessor = connect_ps(job.addresses, client_options(0));
  REQUIRE(predecessor.ok());
  std::vector<float> p(10), g(10, 1.0f);
  auto v = (*predecessor)->pull(0, p.data());
  REQUIRE(v.ok());
  REQUIRE((*predecessor)->push(0, g.data(), *v).ok());
  REQUIRE((*predecessor)->push(1, g.data(), *v).ok());

  PsClientOptions later = client_options(0);
  later.attempt = 1;
  const auto began = std::chrono::steady_clock::now();
  auto replacement = connect_ps(job.addresses, later);
  REQUIRE(replacement.ok());
  CHECK(std::chrono::steady_clock::now() - began < 1s);  // not the keepalive's 5 s
  CHECK((*replacement)->start_clock() == 2);             // where the predecessor's pushes stood
  REQUIRE((*replacement)->pull(2, p.data()).ok());
  REQUIRE((*replacement)->push(2, g.data(), *v).ok());

  // The superseded connection was closed by the server: the predecessor's next request fails.
  auto stale_pull = (*predecessor)->pull(2, p.data());
  CHECK_FALSE(stale_pull.ok());
  auto stale = connect_ps(job.addresses, client_options(0));
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.status().code() == Code::invalid_argument);
  CHECK_THAT(stale.status().message(), Catch::Contains("of attempt 0 was replaced by its attempt 1"));
  // The same attempt twice is still a duplicate, refused.
  auto twice = connect_ps(job.addresses, later);
  REQUIRE_FALSE(twice.ok());
  CHECK_THAT(twice.status().message(), Catch::Contains("is already connected"));
}

TEST_CASE("ps tcp: a peer that closes mid-frame or sends garbage loses its connection, not the server",
          "[ps][tcp][errors]") {
  TinyJob job = tiny_job(1, 8, PsMode::async, 3, /*staleness=*/0);
  {
    wire::Socket s = raw_connect(job.addresses[0]);
    send_hello(s.fd(), 2, "job-a");
    wire::Header push;
    push.op = wire::Op::push;
    push.worker = 2;
    push.payload = 8 * sizeof(float);
    REQUIRE(::send(s.fd(), &push, sizeof push, MSG_NOSIGNAL) == sizeof push);
    const float half[4] = {1, 2, 3, 4};
    REQUIRE(::send(s.fd(), half, sizeof half, MSG_NOSIGNAL) == sizeof half);
  }  // closed half way through the push's floats
  {
    wire::Socket s = raw_connect(job.addresses[0]);
    send_hello(s.fd(), 1, "job-a");
    const char junk[40] = "GET / HTTP/1.1\r\n\r\n";
    REQUIRE(::send(s.fd(), junk, sizeof junk, MSG_NOSIGNAL) == sizeof junk);
    char byte;
    pollfd p{s.fd(), POLLIN, 0};
    REQUIRE(::poll(&p, 1, 2000) == 1);
    CHECK(::recv(s.fd(), &byte, 1, 0) == 0);  // the server closed it
  }
  // The server still serves, and the two workers that vanished were removed: with S = 0 worker 0
  // would otherwise wait for them forever.
  auto client = connect_ps(job.addresses, client_options(0));
  REQUIRE(client.ok());
  std::vector<float> p(8), g(8, 1.0f);
  for (int64_t clock = 0; clock < 3; ++clock) {
    auto v = (*client)->pull(clock, p.data());
    INFO(v.status().to_string());
    REQUIRE(v.ok());
    REQUIRE((*client)->push(clock, g.data(), *v).ok());
  }
}

TEST_CASE("ps tcp: a server that closes mid-frame is named by the client", "[ps][tcp][errors]") {
  int port = 0;
  auto listener = wire::listen_on("127.0.0.1", 0, &port);
  REQUIRE(listener.ok());
  const std::string address = "127.0.0.1:" + std::to_string(port);
  std::thread fake([&] {
    pollfd p{listener->fd(), POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) return;
    wire::Socket s(::accept(listener->fd(), nullptr, nullptr));
    wire::Header hello;
    std::string job(5, '\0');
    (void)wire::read_exact(s.fd(), &hello, sizeof hello, wire::Clock::now() + 2s);
    (void)wire::read_exact(s.fd(), job.data(), hello.payload, wire::Clock::now() + 2s);
    wire::Header welcome;
    welcome.op = wire::Op::welcome;
    welcome.payload = sizeof(wire::ShardInfo);
    (void)::send(s.fd(), &welcome, sizeof welcome, MSG_NOSIGNAL);
    (void)::send(s.fd(), "abc", 3, MSG_NOSIGNAL);  // then hang up
  });
  auto client = connect_ps({address}, client_options(0));
  fake.join();
  REQUIRE_FALSE(client.ok());
  CHECK(client.status().code() == Code::unavailable);
  CHECK_THAT(client.status().message(), Catch::Contains("shard 0 at " + address));
  CHECK_THAT(client.status().message(), Catch::Contains("closed the connection in the middle of a frame"));
}

TEST_CASE("ps tcp: an address that refuses connections is an error within the connect timeout", "[ps][tcp][errors]") {
  int port = 0;
  {
    auto listener = wire::listen_on("127.0.0.1", 0, &port);
    REQUIRE(listener.ok());
  }  // closed: nothing listens there now
  const std::string address = "127.0.0.1:" + std::to_string(port);
  PsClientOptions o = client_options(0);
  o.connect_timeout = 300ms;
  const auto t0 = std::chrono::steady_clock::now();
  auto client = connect_ps({address}, o);
  const auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(client.ok());
  CHECK(client.status().code() == Code::unavailable);
  CHECK_THAT(client.status().message(), Catch::Contains("could not connect to " + address + ": Connection refused"));
  CHECK(took < 2s);
}

TEST_CASE("ps tcp: stopping a server fails a waiting pull at once and joins every thread", "[ps][tcp][errors]") {
  TinyJob job = tiny_job(1, 4, PsMode::async, 2, /*staleness=*/0, /*wait=*/30s);
  auto client = connect_ps(job.addresses, client_options(0));
  REQUIRE(client.ok());
  std::vector<float> p(4), g(4, 1.0f);
  auto v = (*client)->pull(0, p.data());
  REQUIRE(v.ok());
  REQUIRE((*client)->push(0, g.data(), *v).ok());
  auto waiting = std::async(std::launch::async, [&] { return (*client)->pull(1, p.data()); });
  REQUIRE(waiting.wait_for(200ms) == std::future_status::timeout);  // worker 1 never pushes
  const auto t0 = std::chrono::steady_clock::now();
  job.servers[0]->stop();
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  REQUIRE(waiting.wait_for(2s) == std::future_status::ready);
  auto failed = waiting.get();
  REQUIRE_FALSE(failed.ok());
  CHECK_THAT(failed.status().message(), Catch::Contains("pull for clock 1: shard 0 at " + job.addresses[0]));
  CHECK_THAT(failed.status().message(), Catch::Contains("stopped"));
}
