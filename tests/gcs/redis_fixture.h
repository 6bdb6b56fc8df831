// Test helper: one real redis-server per test process (CTest runs each case in its own process),
// started with RedisServer on a free loopback port in a fresh temp session directory, and stopped
// (then the directory removed) when the process exits. Each test uses its own key prefix.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "gcs/redis_server.h"
#include "gcs/redis_store.h"
#include "tests/core/temp_dir.h"

namespace troupe::gcs::testing {

struct SharedRedis {
  troupe::testing::TempDir dir;        // destroyed last
  std::unique_ptr<RedisServer> server;  // stopped first
};

inline RedisServer& shared_redis() {
  static SharedRedis* shared = [] {
    auto s = std::make_unique<SharedRedis>();
    RedisServerOptions o;
    o.session_dir = s->dir.path();
    auto server = RedisServer::start(o);
    if (!server.ok()) FAIL("cannot start redis-server for the tests: " << server.status().to_string());
    s->server = std::move(server.value());
    return s.release();
  }();
  static struct Cleanup {
    ~Cleanup() { delete shared; }
  } cleanup;
  return *shared->server;
}

// A store on `server` whose keys live under `prefix`; fails the test when it cannot connect.
inline std::unique_ptr<RedisStore> connect_store(const RedisServer& server, const std::string& prefix) {
  RedisStoreOptions o;
  o.redis = server.client_options();
  o.redis.command_timeout = std::chrono::milliseconds(3000);
  o.prefix = prefix;
  auto store = RedisStore::connect(o);
  INFO(store.status().to_string());
  REQUIRE(store.ok());
  // Start clean even when the binary is run by hand (all cases share one server then).
  auto keys = store.value()->client().command({"KEYS", prefix + ":*"});
  REQUIRE(keys.ok());
  for (const Reply& k : keys->elements) REQUIRE(store.value()->client().command({"DEL", k.str}).ok());
  return std::move(store.value());
}

}  // namespace troupe::gcs::testing
