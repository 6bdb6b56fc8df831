// The cluster CA's member certificates as another host receives them: a bundle (CA certificate,
// the host's certificate, its key) unpacked into a directory loads as a working context, with the
// key private; anything else is refused naming what is missing.
#include <catch2/catch.hpp>

#include <filesystem>

#include "tests/core/temp_dir.h"
#include "tls/pki.h"
#include "tls/tls_context.h"

using namespace troupe;
using namespace troupe::tls;
using troupe::testing::TempDir;

TEST_CASE("tls: a member's bundle unpacks on the other host into files that load, the key private", "[tls]") {
  TempDir dir;
  REQUIRE(make_ca(dir.path() + "/ca", "test").ok());
  auto issued = issue_member(dir.path() + "/ca", dir.path() + "/issued", "host-b", {"10.0.0.2", "host-b.example"});
  REQUIRE(issued.ok());
  auto bundle = bundle_of(*issued);
  REQUIRE(bundle.ok());
  auto unpacked = unpack_bundle(*bundle, dir.path() + "/received");
  REQUIRE(unpacked.ok());
  auto loaded = TlsContext::load(*unpacked);
  INFO(loaded.status().to_string());
  CHECK(loaded.ok());
  namespace fs = std::filesystem;
  CHECK((fs::status(unpacked->key).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
  CHECK((fs::status(dir.path() + "/received").permissions() & fs::perms::others_all) == fs::perms::none);
}

TEST_CASE("tls: a bundle without a key, or with one certificate, is refused naming what it found", "[tls]") {
  TempDir dir;
  REQUIRE(make_ca(dir.path() + "/ca", "test").ok());
  auto issued = issue_member(dir.path() + "/ca", dir.path() + "/issued", "b", {});
  REQUIRE(issued.ok());
  auto bundle = bundle_of(*issued);
  REQUIRE(bundle.ok());
  const std::string no_key = bundle->substr(0, bundle->find("-----BEGIN PRIVATE KEY-----"));
  auto r = unpack_bundle(no_key, dir.path() + "/x");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("found 2 certificate(s) and no key") != std::string::npos);
  r = unpack_bundle("not a bundle", dir.path() + "/y");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("found 0 certificate(s)") != std::string::npos);
  r = unpack_bundle("-----BEGIN CERTIFICATE-----\nabc\n", dir.path() + "/z");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("has no end") != std::string::npos);
}
