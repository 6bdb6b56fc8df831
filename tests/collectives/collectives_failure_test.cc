// A member that dies or never shows up: every other member's call returns by its deadline (plus
// generous slack) with an error naming the call's sequence number and the missing rank — directly
// when it talked to that rank, through the abort of a rank that did otherwise. Ranks that disagree
// on a call all fail naming both calls. No timing asserts beyond "returned before timeout + slack".
#include <catch2/catch.hpp>

#include "tests/collectives/group.h"

using namespace troupe;
using namespace troupe::collectives;
using namespace troupe::collectives::testing;

namespace {
const auto kTimeout = std::chrono::milliseconds(500);
const auto kSlack = std::chrono::seconds(10);

bool contains(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }
}  // namespace

TEST_CASE("a rank that closes its transport mid-run fails the next allreduce on every other rank") {
  for (const char* algorithm : {"ring", "halving_doubling"}) {
    INFO(algorithm);
    const int ranks = 4, dead = 2;
    std::vector<std::chrono::steady_clock::duration> took(ranks);
    auto status = run_inproc(ranks, [&](Communicator& comm) -> Status {
      std::vector<float> v(1000, 1.0f);
      CollectiveOptions options;
      options.algorithm = algorithm;
      options.timeout = kTimeout;
      TROUPE_RETURN_IF_ERROR(comm.allreduce(v.data(), v.data(), v.size(), DType::f32, ReduceOp::sum, options));
      if (comm.rank() == dead) {
        dynamic_cast<InprocTransport&>(comm.transport()).close();  // the process "dies" here
        return {};
      }
      auto start = std::chrono::steady_clock::now();
      Status st = comm.allreduce(v.data(), v.data(), v.size(), DType::f32, ReduceOp::sum, options);
      took[comm.rank()] = std::chrono::steady_clock::now() - start;
      return st;
    });
    for (int r = 0; r < ranks; ++r) {
      if (r == dead) continue;
      INFO("rank " << r << ": " << status[r].to_string());
      REQUIRE_FALSE(status[r].ok());
      CHECK(contains(status[r], "allreduce #2 (" + std::string(algorithm) + ")"));
      CHECK(took[r] < kTimeout + kSlack);
      // Every survivor, not only the dead rank's neighbours, names it (through an abort if need be).
      CHECK(contains(status[r], "rank 2 closed its transport"));
      CHECK(status[r].code() == Code::unavailable);
    }
  }
}

TEST_CASE("ranks that call with another count or dtype all fail naming both calls, without waiting") {
  struct Case {
    size_t count;
    DType dtype;
    const char* theirs;
  };
  for (const Case& odd : {Case{1200, DType::f32, "allreduce #1 of 1200 f32 (sum)"},
                          Case{1000, DType::f16, "allreduce #1 of 1000 f16 (sum)"}}) {
    for (const char* algorithm : {"ring", "halving_doubling"}) {
      INFO(algorithm << ", odd rank calls " << odd.theirs);
      auto status = run_inproc(4, [&](Communicator& comm) -> Status {
        const bool is_odd = comm.rank() == 1;
        const size_t count = is_odd ? odd.count : 1000;
        const DType dtype = is_odd ? odd.dtype : DType::f32;
        std::vector<char> buf(count * dtype_size(dtype), 0);
        CollectiveOptions options;
        options.algorithm = algorithm;
        options.timeout = std::chrono::seconds(20);  // never reached: nobody waits for it
        auto start = std::chrono::steady_clock::now();
        Status st = comm.allreduce(buf.data(), buf.data(), count, dtype, ReduceOp::sum, options);
        if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10)) return internal_error("too late");
        return st;
      });
      for (int r = 0; r < 4; ++r) {
        INFO("rank " << r << ": " << status[r].to_string());
        CHECK(status[r].code() == Code::invalid_argument);
        CHECK(contains(status[r], odd.theirs));
        CHECK(contains(status[r], "allreduce #1 of 1000 f32 (sum)"));
        CHECK(contains(status[r], "every rank must issue the same collectives"));
      }
    }
  }
}

TEST_CASE("a rank that never shows up makes the others time out naming it and the sequence number") {
  auto status = run_inproc(2, [&](Communicator& comm) -> Status {
    if (comm.rank() == 1) {  // holds its transport open but never calls
      std::this_thread::sleep_for(kTimeout * 3);
      return {};
    }
    std::vector<uint16_t> v(13, 0);
    CollectiveOptions options;
    options.timeout = kTimeout;
    options.tag = 42;
    auto start = std::chrono::steady_clock::now();
    Status st = comm.allreduce(v.data(), v.data(), v.size(), DType::bf16, ReduceOp::max, options);
    if (std::chrono::steady_clock::now() - start >= kTimeout + kSlack) return internal_error("returned too late");
    return st;
  });
  INFO(status[0].to_string());
  CHECK(status[0].code() == Code::timeout);
  CHECK(contains(status[0], "allreduce #1 (halving_doubling) [tag 42]"));
  CHECK(contains(status[0], "rank 1"));
}

TEST_CASE("a failed transport stays failed: later collectives return the same error at once") {
  auto status = run_inproc(3, [&](Communicator& comm) -> Status {
    if (comm.rank() == 0) {
      dynamic_cast<InprocTransport&>(comm.transport()).close();
      return {};
    }
    CollectiveOptions options;
    options.timeout = kTimeout;
    Status first = comm.barrier(options);
    Status second = comm.barrier(options);
    if (first.ok() || second.ok()) return internal_error("barrier succeeded without rank 0");
    if (!contains(second, "barrier #2")) return internal_error("second error: " + second.to_string());
    return first;
  });
  for (int r = 1; r < 3; ++r) {
    INFO(status[r].to_string());
    CHECK_FALSE(status[r].ok());
    CHECK(status[r].code() != Code::internal);
  }
}
