// The cluster's TLS: a CA and member certificates made here, contexts that check them, and the relay
// under a real loopback TCP connection — bytes arrive intact both ways, a certificate of another CA
// is refused on either side with an error saying so, a plain-TCP peer is named as one, a silent peer
// hits the deadline, and closing one end is end-of-stream at the other.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <random>
#include <thread>

#include "tests/core/temp_dir.h"
#include "tls/pki.h"
#include "tls/tls_relay.h"

using namespace troupe;
using namespace troupe::tls;
using troupe::testing::TempDir;

namespace {

// A listening loopback socket and a connected pair (client end, accepted end).
std::pair<int, int> tcp_pair() {
  int l = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(l, 4) == 0);
  socklen_t len = sizeof a;
  ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
  int c = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  int s = ::accept(l, nullptr, nullptr);
  ::close(l);
  return {c, s};
}

std::shared_ptr<const TlsContext> context(const TlsFiles& f) {
  auto c = TlsContext::load(f);
  INFO(c.status().to_string());
  REQUIRE(c.ok());
  return *c;
}

// Both ends wrapped at once; the two results.
std::pair<Expected<int>, Expected<int>> wrap_both(const TlsContext& client, const TlsContext& server,
                                                  std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  auto [c, s] = tcp_pair();
  auto server_end = std::async(std::launch::async, [&, s = s] { return wrap(s, server, Role::server, timeout, "the client"); });
  auto client_end = wrap(c, client, Role::client, timeout, "the server");
  return {std::move(client_end), server_end.get()};
}

void write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t k = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    REQUIRE(k > 0);
    done += static_cast<size_t>(k);
  }
}

std::string read_n(int fd, size_t n) {
  std::string out(n, '\0');
  size_t done = 0;
  while (done < n) {
    ssize_t k = ::recv(fd, &out[done], n - done, 0);
    if (k <= 0) break;
    done += static_cast<size_t>(k);
  }
  out.resize(done);
  return out;
}

struct Pki {
  TempDir dir;
  TlsFiles a, b;  // two members of one cluster
  TlsFiles stranger;  // a member of another cluster
  Pki() {
    REQUIRE(make_ca(dir.path() + "/ca", "test").ok());
    auto x = issue_member(dir.path() + "/ca", dir.path() + "/a", "a", {"127.0.0.1", "localhost"});
    auto y = issue_member(dir.path() + "/ca", dir.path() + "/b", "b", {"10.0.0.2"});
    REQUIRE(make_ca(dir.path() + "/other-ca", "other").ok());
    auto z = issue_member(dir.path() + "/other-ca", dir.path() + "/z", "z", {});
    REQUIRE((x.ok() && y.ok() && z.ok()));
    a = *x;
    b = *y;
    stranger = *z;
  }
};

}  // namespace

TEST_CASE("tls: bytes cross a wrapped connection intact both ways, and a close is end-of-stream", "[tls]") {
  Pki pki;
  auto ca = context(pki.a), cb = context(pki.b);
  auto [c, s] = wrap_both(*ca, *cb);
  REQUIRE(c.ok());
  REQUIRE(s.ok());
  std::mt19937 rng(7);
  std::string big(8 << 20, '\0');
  for (char& ch : big) ch = static_cast<char>(rng());
  auto sent = std::async(std::launch::async, [&] { write_all(*c, big); });
  auto back = std::async(std::launch::async, [&] { write_all(*s, big.substr(0, 1 << 20)); });
  CHECK(read_n(*s, big.size()) == big);
  CHECK(read_n(*c, 1 << 20) == big.substr(0, 1 << 20));
  sent.get();
  back.get();
  ::close(*c);
  char byte;
  CHECK(::recv(*s, &byte, 1, 0) == 0);  // the peer's close arrives as end-of-stream
  ::close(*s);
}

TEST_CASE("tls: a certificate of another CA is refused on both sides, each error saying which", "[tls]") {
  Pki pki;
  auto member = context(pki.a), stranger = context(pki.stranger);
  SECTION("a stranger dials a member") {
    auto [c, s] = wrap_both(*stranger, *member);
    REQUIRE_FALSE(s.ok());
    // TLS 1.3: the client checks the server's certificate first, and refuses it.
    CHECK(s.status().message().find("TLS handshake with the client: it refused this process's certificate") !=
          std::string::npos);
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().message().find("TLS handshake with the server: its certificate was refused here") != std::string::npos);
    CHECK(c.status().message().find("not signed by the cluster CA this process trusts (" + pki.stranger.ca + ")") !=
          std::string::npos);
  }
  SECTION("a member dials a stranger") {
    auto [c, s] = wrap_both(*member, *stranger);
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().message().find("its certificate was refused here") != std::string::npos);
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().message().find("it refused this process's certificate") != std::string::npos);
  }
}

TEST_CASE("tls: a plain-TCP peer and a silent peer give clear errors by the deadline", "[tls]") {
  Pki pki;
  auto member = context(pki.a);
  SECTION("the server speaks plain text") {
    auto [c, s] = tcp_pair();
    write_all(s, "-ERR this is not TLS\r\n");
    auto r = wrap(c, *member, Role::client, std::chrono::seconds(5), "redis at 127.0.0.1");
    ::close(s);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("redis at 127.0.0.1") != std::string::npos);
  }
  SECTION("the server never answers") {
    auto [c, s] = tcp_pair();
    const auto start = std::chrono::steady_clock::now();
    auto r = wrap(c, *member, Role::client, std::chrono::milliseconds(300), "a silent peer");
    const auto took = std::chrono::steady_clock::now() - start;
    ::close(s);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == Code::timeout);
    CHECK(r.status().message().find("did not finish within 300 ms") != std::string::npos);
    CHECK(took < std::chrono::seconds(3));
  }
}

TEST_CASE("tls: loading refuses a certificate of another CA, a key of another certificate and missing files", "[tls]") {
  Pki pki;
  TlsFiles wrong_ca = pki.a;
  wrong_ca.ca = pki.stranger.ca;
  auto r = TlsContext::load(wrong_ca);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("is not valid for the cluster CA") != std::string::npos);
  TlsFiles wrong_key = pki.a;
  wrong_key.key = pki.b.key;
  r = TlsContext::load(wrong_key);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find(pki.b.key) != std::string::npos);
  TlsFiles missing = pki.a;
  missing.cert = pki.dir.path() + "/nope.pem";
  r = TlsContext::load(missing);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("nope.pem") != std::string::npos);
  // The CA is made once: a second make_ca in the same place is refused.
  CHECK_FALSE(make_ca(pki.dir.path() + "/ca", "again").ok());
}
