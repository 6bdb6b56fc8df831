// The shared-memory transport when things go wrong: a forked rank killed mid-allreduce, ranks that
// disagree, an abort, a rank that never arrives or closes, ranks that never attach, a stale segment
// from a crashed run. Every member returns by its deadline with an error naming the rank at fault
// and the call, and nothing is left in /dev/shm.
#include <catch2/catch.hpp>

#include <fcntl.h>

#include "tests/collectives/group.h"
#include "tests/collectives/shm_group.h"

using namespace troupe;
using namespace troupe::collectives;
using namespace troupe::collectives::testing;

namespace {

bool contains(const std::string& s, const std::string& text) { return s.find(text) != std::string::npos; }
bool contains(const Status& s, const std::string& text) { return contains(s.message(), text); }

using Ms = std::chrono::milliseconds;

}  // namespace

// cores 1: every rank confined to one CPU, so the survivors yield-spin and sleep while ranks
// outnumber cores; the kill must still be seen at once.
TEST_CASE("shm: a forked rank killed mid-allreduce fails every other rank at once, naming it and the call",
          "[shm][failure][process]") {
  for (int cores : {0, 1}) {
    INFO("cores " << cores);
    const int ranks = 4, victim = 3;
    const auto timeout = std::chrono::seconds(20);
    ShmGroupOptions options = shm_options(unique_shm_name("kill"), ranks);
    options.shared_buffer_bytes = 4 << 20;
    int64_t killed_ns = 0;
    // Rank 0 creates this file after its second allreduce: the kill comes mid-run however slowly
    // the ranks start on a loaded machine.
    const std::string running = "/tmp/" + options.name + ".running";
    ::unlink(running.c_str());
    auto reports = run_shm_processes(
        options,
        [&](Communicator& comm) -> Status {
          float* grads = static_cast<float*>(comm.shared_buffer(4 << 20));
          CollectiveOptions o;
          o.timeout = timeout;
          for (int done = 1;; ++done) {  // until the victim dies under us
            TROUPE_RETURN_IF_ERROR(comm.allreduce(grads, grads, (4 << 20) / 4, DType::f32, ReduceOp::sum, o));
            if (done == 2 && comm.rank() == 0) ::close(::open(running.c_str(), O_CREAT | O_WRONLY, 0600));
          }
        },
        [&](const std::vector<pid_t>& pids) {
          const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
          while (::access(running.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < limit)
            std::this_thread::sleep_for(Ms(5));
          ::unlink(running.c_str());
          killed_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
          ::kill(pids[victim], SIGKILL);
        },
        cores);
    CHECK(reports[victim].exit_code == 128 + SIGKILL);
    for (int r = 0; r < ranks; ++r) {
      if (r == victim) continue;
      const ForkedRank& rep = reports[r];
      INFO("rank " << r << ": " << rep.message);
      CHECK(rep.exit_code == 1);
      CHECK(rep.code == Code::unavailable);
      CHECK(rep.sequence > 1);  // it did run allreduces before the kill
      // Either it saw the death itself or a peer's abort that names it.
      CHECK(contains(rep.message, "rank 3 (pid " + std::to_string(reports[victim].pid) + ") exited"));
      CHECK(contains(rep.message, "allreduce #" + std::to_string(rep.sequence) + " (shm)"));
      const double after_ms = (rep.returned_ns - killed_ns) / 1e6;
      INFO("returned " << after_ms << " ms after the kill (timeout 20000 ms)");
      CHECK(after_ms < 2000);
    }
    CHECK_FALSE(shm_segment_exists(options.name));
  }
}

TEST_CASE("shm: ranks that disagree on count, dtype or op get invalid_argument naming the rank, on every rank",
          "[shm][failure]") {
  ShmGroupOptions options = shm_options(unique_shm_name("mismatch"), 3);
  auto status = run_shm_threads(options, [](Communicator& comm) {
    std::vector<float> v(1000, 1.0f);
    return comm.allreduce(v.data(), v.data(), comm.rank() == 2 ? 999 : 1000, DType::f32, ReduceOp::sum);
  });
  for (auto& s : status) {
    INFO(s.to_string());
    CHECK(s.code() == Code::invalid_argument);
    CHECK(contains(s, "allreduce #1 (shm): rank 2 called allreduce #1 of 999 f32 (sum) but rank 0 called "
                      "allreduce #1 of 1000 f32 (sum)"));
  }
  status = run_shm_threads(shm_options(unique_shm_name("mismatch"), 2), [](Communicator& comm) -> Status {
    std::vector<float> v(100, 1.0f);
    TROUPE_RETURN_IF_ERROR(comm.barrier());
    if (comm.rank() == 1) return comm.broadcast(v.data(), 50, DType::bf16, 0);
    return comm.allreduce(v.data(), v.data(), 100, DType::f32, ReduceOp::max);
  });
  for (auto& s : status) {
    INFO(s.to_string());
    CHECK(s.code() == Code::invalid_argument);
    CHECK(contains(s, "rank 1 called broadcast #2 of 50 bf16 from root 0 but rank 0 called allreduce #2 of 100 f32"));
  }
}

TEST_CASE("shm: an abort reaches every waiting rank at once, names the aborting rank, and the transport stays failed",
          "[shm][failure]") {
  ShmGroupOptions options = shm_options(unique_shm_name("abort"), 3);
  std::vector<Status> second(3);
  std::vector<std::chrono::steady_clock::duration> took(3);
  auto status = run_shm_threads(options, [&](Communicator& comm) -> Status {
    CollectiveOptions o;
    o.timeout = std::chrono::seconds(20);
    std::vector<float> v(5000, 1.0f);
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(Ms(100));  // the others are waiting by now
      Status failure = unavailable("allreduce #1 (shm): the data loader of rank 1 failed");
      comm.transport().abort(failure);
      return failure;
    }
    auto start = std::chrono::steady_clock::now();
    Status st = comm.allreduce(v.data(), v.data(), v.size(), DType::f32, ReduceOp::sum, o);
    took[comm.rank()] = std::chrono::steady_clock::now() - start;
    second[comm.rank()] = comm.barrier(o);
    return st;
  });
  for (int r : {0, 2}) {
    INFO("rank " << r << ": " << status[r].to_string() << " / " << second[r].to_string());
    CHECK(status[r].code() == Code::unavailable);
    CHECK(contains(status[r], "rank 1 aborted allreduce #1 (shm): the data loader of rank 1 failed"));
    CHECK(took[r] < std::chrono::seconds(2));
    CHECK(second[r].code() == Code::unavailable);  // stays failed: the next call fails at once
    CHECK(contains(second[r], "barrier #2 (shm)"));
    CHECK(contains(second[r], "rank 1 aborted"));
  }
}

TEST_CASE("shm: a rank that never arrives times out naming it, one that closes is named at once",
          "[shm][failure]") {
  auto status = run_shm_threads(shm_options(unique_shm_name("late"), 3), [](Communicator& comm) -> Status {
    if (comm.rank() == 2) {
      std::this_thread::sleep_for(Ms(900));  // holds its transport open, never calls
      return {};
    }
    CollectiveOptions o;
    o.timeout = Ms(300);
    o.tag = 7;
    std::vector<uint16_t> v(13, 0);
    auto start = std::chrono::steady_clock::now();
    Status st = comm.allreduce(v.data(), v.data(), v.size(), DType::f16, ReduceOp::max, o);
    if (std::chrono::steady_clock::now() - start > Ms(300) + std::chrono::seconds(2))
      return internal_error("returned too late");
    return st;
  });
  for (int r : {0, 1}) {
    INFO(status[r].to_string());
    CHECK(status[r].code() == Code::timeout);
    CHECK(contains(status[r], "allreduce #1 (shm) [tag 7]: rank(s) 2 did not arrive before the deadline"));
  }

  std::vector<std::chrono::steady_clock::duration> took(3);
  status = run_shm_threads(shm_options(unique_shm_name("closed"), 3), [&](Communicator& comm) -> Status {
    if (comm.rank() == 0) return {};  // leaves: its Communicator and transport are destroyed
    CollectiveOptions o;
    o.timeout = std::chrono::seconds(20);
    auto start = std::chrono::steady_clock::now();
    Status st = comm.barrier(o);
    took[comm.rank()] = std::chrono::steady_clock::now() - start;
    return st;
  });
  for (int r : {1, 2}) {
    INFO(status[r].to_string());
    CHECK(status[r].code() == Code::unavailable);
    CHECK(contains(status[r], "barrier #1 (shm): rank 0 closed its transport"));
    CHECK(took[r] < std::chrono::seconds(2));
  }
}

TEST_CASE("shm: ranks that do not attach are named when the group forms and nothing is left in /dev/shm",
          "[shm][failure]") {
  ShmGroupOptions options = shm_options(unique_shm_name("attach"), 3);
  options.timeout = Ms(300);
  std::vector<Status> status(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)  // rank 2 never comes
    threads.emplace_back([&, r] {
      ShmGroupOptions mine = options;
      mine.rank = r;
      status[r] = connect_shm_group(mine).status();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    INFO(status[r].to_string());
    CHECK(status[r].code() == Code::timeout);
    CHECK(contains(status[r], "rank(s) 2 did not attach before the deadline"));
  }
  CHECK_FALSE(shm_segment_exists(options.name));

  ShmGroupOptions lonely = options;
  lonely.name = unique_shm_name("attach");
  lonely.rank = 1;
  Status st = connect_shm_group(lonely).status();
  INFO(st.to_string());
  CHECK(st.code() == Code::timeout);
  CHECK(contains(st, "rank 0 did not create /dev/shm/troupe." + lonely.name));
}

TEST_CASE("shm: a segment left by a crashed run under the same name does not wedge a new group",
          "[shm][failure]") {
  const std::string name = unique_shm_name("stale");
  // What a crash leaves: a file of the right name (here of a wrong size and a dead creator).
  int fd = ::open(("/dev/shm/troupe." + name).c_str(), O_CREAT | O_RDWR, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 1 << 16) == 0);
  ::close(fd);
  auto status = run_shm_threads(shm_options(name, 4), [](Communicator& comm) {
    float x = 1.0f;
    return comm.allreduce(&x, &x, 1, DType::f32, ReduceOp::sum);
  });
  for (auto& s : status) CHECK(s.to_string() == "ok");
  CHECK_FALSE(shm_segment_exists(name));
}

TEST_CASE("shm: a bad name or rank is invalid_argument before touching /dev/shm", "[shm][failure]") {
  ShmGroupOptions o = shm_options("bad/name", 2);
  CHECK(connect_shm_group(o).status().code() == Code::invalid_argument);
  o = shm_options(unique_shm_name("rank"), 2);
  o.rank = 2;
  CHECK(connect_shm_group(o).status().code() == Code::invalid_argument);
}
