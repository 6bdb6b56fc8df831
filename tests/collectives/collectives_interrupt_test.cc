// Transport::interrupt: a rank blocked in a collective whose peer is alive but silent (a cut link:
// the process lives on, unreachable) leaves it within moments when another thread interrupts it —
// how a stopped job actor gets out — instead of waiting for the collective's deadline; the peer then
// hears of it like any abort. TCP, shared memory and in-process transports alike.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/collectives/group.h"
#include "tests/collectives/shm_group.h"

using namespace troupe;
using namespace troupe::collectives;
using namespace troupe::collectives::testing;

namespace {

using Clock = std::chrono::steady_clock;

// Rank 0 all-reduces with a 30 s deadline while rank 1 stays silent; 300 ms in, another thread
// interrupts rank 0. Rank 1 calls the all-reduce only once rank 0 returned. Returns both statuses
// and rank 0's time in the call.
struct Outcome {
  std::vector<Status> status;
  double rank0_seconds = 0;
};
template <typename Run>
Outcome silent_peer(Run run) {
  std::atomic<bool> rank0_done{false};
  Outcome out;
  out.status = run([&](Communicator& comm) -> Status {
    std::vector<float> buf(1024, 1.0f);
    CollectiveOptions co;
    co.timeout = std::chrono::seconds(30);
    if (comm.rank() == 1) {
      while (!rank0_done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      co.timeout = std::chrono::seconds(5);
      return comm.allreduce(buf.data(), buf.data(), buf.size(), DType::f32, ReduceOp::sum, co);
    }
    std::thread stopper([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      comm.transport().interrupt(unavailable("stopped by the test"));
    });
    const auto t0 = Clock::now();
    Status st = comm.allreduce(buf.data(), buf.data(), buf.size(), DType::f32, ReduceOp::sum, co);
    out.rank0_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    stopper.join();
    // Later calls fail at once too.
    Status again = comm.barrier(co);
    rank0_done = true;
    if (again.ok()) return internal_error("a call after the interrupt succeeded");
    return st;
  });
  return out;
}

void check(const Outcome& o, const char* transport) {
  INFO(transport << ": rank 0 " << o.status[0].to_string() << " after " << o.rank0_seconds << " s; rank 1 "
                 << o.status[1].to_string());
  CHECK(o.status[0].code() == Code::unavailable);
  CHECK_THAT(o.status[0].message(), Catch::Contains("stopped by the test"));
  CHECK(o.rank0_seconds < 5.0);  // the deadline was 30 s: interrupted, not timed out
  CHECK_FALSE(o.status[1].ok());  // the peer hears of it (an abort naming rank 0) or finds it gone
}

}  // namespace

TEST_CASE("interrupt: a rank blocked on a silent peer leaves its collective at once (tcp)", "[collectives][interrupt]") {
  auto o = silent_peer([](const RankFn& fn) {
    LoopbackListeners mesh(2);
    return run_connected(2, [&](int r) { return mesh.connect(r); }, fn);
  });
  check(o, "tcp");
  CHECK_THAT(o.status[1].message(), Catch::Contains("stopped by the test"));
}

TEST_CASE("interrupt: a rank blocked on a silent peer leaves its collective at once (shm)", "[collectives][interrupt]") {
  auto o = silent_peer([](const RankFn& fn) { return run_shm_threads(shm_options(unique_shm_name("interrupt"), 2), fn); });
  check(o, "shm");
}

TEST_CASE("interrupt: a rank blocked on a silent peer leaves its collective at once (inproc)", "[collectives][interrupt]") {
  auto o = silent_peer([](const RankFn& fn) { return run_inproc(2, fn); });
  check(o, "inproc");
}
