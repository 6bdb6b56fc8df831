// Ids: random 128-bit values, hex text round trips and rejection of malformed text.
#include "core/ids.h"

#include <catch2/catch.hpp>

#include <set>
#include <unordered_set>

namespace troupe {

TEST_CASE("ids: default is nil, random ids are unique and not nil", "[core][ids]") {
  CHECK(JobId().nil());
  CHECK(JobId().hex() == std::string(32, '0'));
  std::unordered_set<JobId> seen;
  std::set<std::string> prefixes;
  for (int i = 0; i < 10000; ++i) {
    JobId id = JobId::random();
    CHECK_FALSE(id.nil());
    CHECK(seen.insert(id).second);
    prefixes.insert(id.short_hex());
  }
  CHECK(seen.size() == 10000);
  CHECK(prefixes.size() > 9900);  // 32 random bits: collisions among 10^4 are rare
}

TEST_CASE("ids: hex is 32 lowercase digits and round trips", "[core][ids]") {
  for (int i = 0; i < 100; ++i) {
    NodeId id = NodeId::random();
    std::string hex = id.hex();
    REQUIRE(hex.size() == 32);
    for (char c : hex) CHECK(((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')));
    CHECK(id.short_hex() == hex.substr(0, 8));
    auto back = NodeId::from_hex(hex);
    REQUIRE(back.ok());
    CHECK(*back == id);
    CHECK(NodeId::from_bytes(id.bytes()) == id);
  }
  auto known = ActorId::from_hex("00112233445566778899AABBCCDDEEFF");  // upper case accepted
  REQUIRE(known.ok());
  CHECK(known->bytes()[0] == 0x00);
  CHECK(known->bytes()[1] == 0x11);
  CHECK(known->bytes()[15] == 0xff);
  CHECK(known->hex() == "00112233445566778899aabbccddeeff");
}

TEST_CASE("ids: malformed hex is invalid_argument naming the text and kind", "[core][ids]") {
  for (const std::string& bad : {std::string(""), std::string(31, 'a'), std::string(33, 'a'),
                                 std::string("g") + std::string(31, '0'), std::string(30, '0') + " 1",
                                 std::string(31, '0') + "-"}) {
    auto id = JobId::from_hex(bad);
    INFO("'" << bad << "'");
    REQUIRE_FALSE(id.ok());
    CHECK(id.status().code() == Code::invalid_argument);
    CHECK_THAT(id.status().message(), Catch::Contains("'" + bad + "'"));
    CHECK_THAT(id.status().message(), Catch::StartsWith("job id"));
  }
  CHECK_THAT(WorkerId::from_hex("x").status().message(), Catch::StartsWith("worker id"));
}

TEST_CASE("ids: comparison and ordering", "[core][ids]") {
  std::array<uint8_t, 16> a{}, b{};
  b[15] = 1;
  JobId x = JobId::from_bytes(a), y = JobId::from_bytes(b);
  CHECK(x != y);
  CHECK(x < y);
  CHECK_FALSE(y < x);
  CHECK(x == JobId());
  CHECK(std::hash<JobId>()(x) != std::hash<JobId>()(y));
}

}  // namespace troupe
