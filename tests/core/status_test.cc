// Status and Expected<T>: codes, messages, context prefixes and early returns.
#include "core/status.h"

#include <catch2/catch.hpp>

#include <set>
#include <string>

namespace troupe {
namespace {

Status fails_at(int step, int bad) {
  return step == bad ? io_error("step " + std::to_string(step) + " failed") : Status{};
}

// Runs steps 0..4 and stops at the first failure; `*done` counts the steps that succeeded.
Status run_steps(int bad, int* done) {
  for (int i = 0; i < 5; ++i) {
    TROUPE_RETURN_IF_ERROR(fails_at(i, bad));
    ++*done;
  }
  return {};
}

Expected<int> parse_digit(char c) {
  if (c < '0' || c > '9') return invalid_argument(std::string("'") + c + "' is not a digit");
  return c - '0';
}

}  // namespace

TEST_CASE("status: default is ok", "[core][status]") {
  Status s;
  CHECK(s.ok());
  CHECK(static_cast<bool>(s));
  CHECK(s.code() == Code::ok);
  CHECK(s.message().empty());
  CHECK(s.to_string() == "ok");
  CHECK(Status::ok_status().ok());
}

TEST_CASE("status: every code has its own name", "[core][status]") {
  std::set<std::string> names;
  for (int c = 0; c <= static_cast<int>(Code::internal); ++c) {
    std::string name = code_name(static_cast<Code>(c));
    CHECK(name != "unknown");
    names.insert(name);
  }
  CHECK(names.size() == static_cast<size_t>(Code::internal) + 1);
  CHECK(std::string(code_name(Code::corrupt_data)) == "corrupt_data");
  CHECK(std::string(code_name(Code::version_mismatch)) == "version_mismatch");
}

TEST_CASE("status: helpers set code and message", "[core][status]") {
  CHECK(invalid_argument("m").code() == Code::invalid_argument);
  CHECK(not_found("m").code() == Code::not_found);
  CHECK(io_error("m").code() == Code::io_error);
  CHECK(corrupt_data("m").code() == Code::corrupt_data);
  CHECK(numeric_error("m").code() == Code::numeric_error);
  CHECK(unavailable("m").code() == Code::unavailable);
  CHECK(internal_error("m").code() == Code::internal);
  Status s = not_found("train-images-idx3-ubyte.gz: no such file");
  CHECK_FALSE(s.ok());
  CHECK_FALSE(static_cast<bool>(s));
  CHECK(s.message() == "train-images-idx3-ubyte.gz: no such file");
  CHECK(s.to_string() == "not_found: train-images-idx3-ubyte.gz: no such file");
}

TEST_CASE("status: with_context prefixes the message and keeps the code", "[core][status]") {
  Status s = corrupt_data("bad magic");
  Status c = s.with_context("loading dataset");
  CHECK(c.code() == Code::corrupt_data);
  CHECK(c.message() == "loading dataset: bad magic");
  CHECK(s.message() == "bad magic");  // the original is unchanged
  CHECK(c.with_context("job 7").message() == "job 7: loading dataset: bad magic");
  Status ok;
  CHECK(ok.with_context("anything").ok());
  CHECK(ok.with_context("anything").message().empty());
}

TEST_CASE("status: TROUPE_RETURN_IF_ERROR stops at the first failure", "[core][status]") {
  int done = 0;
  Status s = run_steps(2, &done);
  CHECK(s.code() == Code::io_error);
  CHECK(s.message() == "step 2 failed");
  CHECK(done == 2);
  done = 0;
  CHECK(run_steps(-1, &done).ok());
  CHECK(done == 5);
}

TEST_CASE("status: Expected holds a value or an error", "[core][status]") {
  auto v = parse_digit('7');
  REQUIRE(v.ok());
  CHECK(static_cast<bool>(v));
  CHECK(*v == 7);
  CHECK(v.value() == 7);
  CHECK(v.status().ok());

  auto e = parse_digit('x');
  REQUIRE_FALSE(e.ok());
  CHECK(e.status().code() == Code::invalid_argument);
  CHECK(e.status().message() == "'x' is not a digit");

  Expected<std::string> s = std::string("payload");
  CHECK(s->size() == 7);
  std::string moved = std::move(s).value();
  CHECK(moved == "payload");
}

}  // namespace troupe
