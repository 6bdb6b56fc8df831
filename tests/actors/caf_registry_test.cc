// Registry: types by name, unknown-type errors, and the built-in echo and counter actors.
#include "actors/node_manager_client.h"
#include "caf/actor_system.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"
#include "tests/actors/caf_test_util.h"

using namespace troupe;
using namespace troupe::actors;

TEST_CASE("the registry knows its types and refuses duplicates", "[actors]") {
  Registry reg = Registry::with_builtins();
  CHECK(reg.type_names() == std::vector<std::string>{"counter", "echo"});
  Status dup = reg.add("echo", [](caf::actor_system&, const std::vector<std::string>&)
                                   -> Expected<caf::actor> { return caf::actor{}; });
  CHECK(dup.code() == Code::invalid_argument);
  CHECK_THAT(dup.message(), Catch::Contains("already registered"));
  CHECK(reg.add("", nullptr).code() == Code::invalid_argument);
}

TEST_CASE("spawning an unknown type lists the known types", "[actors]") {
  auto sys = test::start_head();
  Registry reg = Registry::with_builtins();
  auto a = reg.spawn(sys->system(), "trainer", {});
  REQUIRE(!a.ok());
  CHECK(a.status().code() == Code::not_found);
  CHECK_THAT(a.status().message(),
             Catch::Contains("unknown actor type 'trainer'") && Catch::Contains("counter, echo"));
}

TEST_CASE("echo answers calls and batches with its input", "[actors]") {
  auto sys = test::start_head();
  auto echo = Registry::with_builtins().spawn(sys->system(), "echo", {});
  REQUIRE(echo.ok());
  sys->track(*echo);
  auto r = call(sys->system(), *echo, Call{"echo", "hello"}, std::chrono::seconds(5));
  REQUIRE(r.ok());
  CHECK(r->payload == "hello");

  caf::scoped_actor self{sys->system()};
  std::vector<std::string> got;
  self->request(*echo, std::chrono::seconds(5), CallBatch{{Call{"echo", "a"}, Call{"echo", "b"}}})
      .receive([&](const CallBatchReply& reply) {
                 for (const auto& item : reply.items) got.push_back(item.payload);
               },
               [&](caf::error&) {});
  CHECK(got == std::vector<std::string>{"a", "b"});
}

TEST_CASE("counter keeps state across casts and calls and refuses bad input", "[actors]") {
  auto sys = test::start_head();
  Registry reg = Registry::with_builtins();
  auto counter = reg.spawn(sys->system(), "counter", {"10"});
  REQUIRE(counter.ok());
  sys->track(*counter);
  caf::anon_send(*counter, Cast{"add", "5"});
  caf::anon_send(*counter, CastBatch{{Cast{"add", ""}, Cast{"add", "2"}}});
  auto got = call(sys->system(), *counter, Call{"get", ""}, std::chrono::seconds(5));
  REQUIRE(got.ok());
  CHECK(got->payload == "18");  // 10 + 5 + 1 + 2, in send order

  auto bad = call(sys->system(), *counter, Call{"multiply", "3"}, std::chrono::seconds(5));
  REQUIRE(!bad.ok());
  CHECK(bad.status().code() == Code::invalid_argument);
  CHECK_THAT(bad.status().message(), Catch::Contains("unknown method 'multiply'"));

  auto bad_init = reg.spawn(sys->system(), "counter", {"ten"});
  REQUIRE(!bad_init.ok());
  CHECK_THAT(bad_init.status().message(), Catch::Contains("'ten'"));
}
