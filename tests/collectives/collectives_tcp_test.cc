// The collectives over real TCP connections on loopback: 2-4 ranks as threads of this process,
// each with its own listener on a kernel-chosen port.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <mutex>

#include "collectives/tcp_transport.h"
#include "tests/collectives/group.h"

using namespace troupe;
using namespace troupe::collectives;
using namespace troupe::collectives::testing;

namespace {

// Forms a TCP mesh of `size` ranks on 127.0.0.1, then runs fn on each rank's thread.
std::vector<Status> run_tcp(int size, const RankFn& fn) {
  LoopbackListeners mesh(size);
  TcpGroupOptions options;
  options.timeout = std::chrono::seconds(20);
  return run_connected(size, [&](int r) { return mesh.connect(r, options); }, fn);
}

std::vector<float> inputs(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = input_value(rank, i);
  return v;
}

}  // namespace

TEST_CASE("tcp: allreduce sum/avg/max, every dtype and algorithm, in place and not, 2-4 ranks") {
  for (int ranks = 2; ranks <= 4; ++ranks) {
    std::vector<std::string> failures;
    std::mutex mu;
    auto status = run_tcp(ranks, [&](Communicator& comm) -> Status {
      for (const char* algorithm : {"ring", "halving_doubling"})
        for (DType dtype : {DType::f32, DType::f16, DType::bf16})
          for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{13}, size_t{1021}, 4096 / dtype_size(dtype),
                               (size_t{1} << 20) / dtype_size(dtype)})
            for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
              for (bool in_place : {false, true}) {
                std::vector<char> in = to_bytes(inputs(comm.rank(), count), dtype), out(in.size());
                CollectiveOptions options;
                options.algorithm = algorithm;
                options.timeout = std::chrono::seconds(20);
                TROUPE_RETURN_IF_ERROR(comm.allreduce(in.data(), in_place ? in.data() : out.data(), count, dtype, op,
                                                      options));
                std::vector<float> got = to_floats(in_place ? in : out, dtype);
                for (size_t i = 0; i < count; ++i) {
                  double sum = 0;
                  float mx = -1e30f;
                  for (int q = 0; q < ranks; ++q) {
                    sum += input_value(q, i);
                    mx = std::max(mx, input_value(q, i));
                  }
                  double want = op == ReduceOp::max ? stored(mx, dtype)
                                : op == ReduceOp::sum ? stored(static_cast<float>(sum), dtype)
                                                      : sum / ranks;
                  if (std::abs(got[i] - want) > (op == ReduceOp::avg ? 8e-3 * std::max(1.0, std::abs(want)) : 0)) {
                    std::lock_guard<std::mutex> lock(mu);
                    failures.push_back(std::string(algorithm) + " " + dtype_name(dtype) + " " + reduce_op_name(op) +
                                       " count " + std::to_string(count) + " element " + std::to_string(i));
                    break;
                  }
                }
              }
      return {};
    });
    for (auto& s : status) REQUIRE(s.to_string() == "ok");
    INFO((failures.empty() ? std::string() : failures.front()));
    CHECK(failures.empty());
  }
}

TEST_CASE("tcp: broadcast, allgather, reduce_scatter and barrier, 2-8 ranks") {
  for (int ranks : {2, 3, 4, 8}) {
    auto status = run_tcp(ranks, [&](Communicator& comm) -> Status {
      for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{1021}, size_t{1} << 18}) {
        for (int root = 0; root < ranks; ++root) {
          std::vector<float> v = inputs(comm.rank(), count);
          TROUPE_RETURN_IF_ERROR(comm.broadcast(v.data(), count, DType::f32, root));
          if (v != inputs(root, count)) return internal_error("broadcast from " + std::to_string(root));
        }
        std::vector<char> in = to_bytes(inputs(comm.rank(), count), DType::bf16), all(in.size() * ranks);
        TROUPE_RETURN_IF_ERROR(comm.allgather(in.data(), all.data(), count, DType::bf16));
        for (int q = 0; q < ranks; ++q) {
          std::vector<char> want = to_bytes(inputs(q, count), DType::bf16);
          if (!std::equal(want.begin(), want.end(), all.begin() + q * want.size()))
            return internal_error("allgather block " + std::to_string(q));
        }
        std::vector<float> big = inputs(comm.rank(), count * ranks), mine(count);
        TROUPE_RETURN_IF_ERROR(comm.reduce_scatter(big.data(), mine.data(), count, DType::f32, ReduceOp::sum));
        for (size_t i = 0; i < count; ++i) {
          float want = 0;
          for (int q = 0; q < ranks; ++q) want += input_value(q, comm.rank() * count + i);
          if (mine[i] != want) return internal_error("reduce_scatter element " + std::to_string(i));
        }
        TROUPE_RETURN_IF_ERROR(comm.barrier());
      }
      return {};
    });
    for (auto& s : status) REQUIRE(s.to_string() == "ok");
  }
}

TEST_CASE("tcp: a rank whose process dies fails every other rank's allreduce naming it and the sequence number") {
  const int ranks = 4, dead = 1;
  auto status = run_tcp(ranks, [&](Communicator& comm) -> Status {
    CollectiveOptions options;
    options.timeout = std::chrono::milliseconds(1000);
    options.algorithm = "ring";
    std::vector<float> v(10000, 1.0f);
    TROUPE_RETURN_IF_ERROR(comm.allreduce(v.data(), v.data(), v.size(), DType::f32, ReduceOp::sum, options));
    if (comm.rank() == dead) return {};  // returning destroys the communicator: its sockets close
    auto start = std::chrono::steady_clock::now();
    Status st = comm.allreduce(v.data(), v.data(), v.size(), DType::f32, ReduceOp::sum, options);
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(11)) return internal_error("too late");
    return st;
  });
  // Rank 2 receives from rank 1 in the ring and sees the closed connection; ranks 3 and 0 wait on
  // others and learn of it through their abort frames. Every error names rank 1.
  for (int r = 0; r < ranks; ++r) {
    if (r == dead) continue;
    INFO("rank " << r << ": " << status[r].to_string());
    CHECK(status[r].code() == Code::unavailable);
    CHECK(status[r].message().find("allreduce #2 (ring)") != std::string::npos);
    // "rank 1 closed its connection ..." (reading) or "connection to rank 1 closed: ..." (writing)
    const std::string& m = status[r].message();
    CHECK((m.find("rank 1 closed its connection") != std::string::npos ||
           m.find("connection to rank 1 closed") != std::string::npos));
  }
}

TEST_CASE("tcp: ranks that call with another count, dtype or collective all fail naming both calls") {
  struct Case {
    const char* what;
    std::function<Status(Communicator&, std::vector<char>&)> odd;  // what rank 2 calls instead
    const char* theirs;
  };
  const CollectiveOptions options = [] {
    CollectiveOptions o;
    o.timeout = std::chrono::seconds(20);  // never reached: nobody waits for it
    return o;
  }();
  const Case cases[] = {
      {"count", [&](Communicator& c, std::vector<char>& b) {
         return c.allreduce(b.data(), b.data(), 900, DType::f32, ReduceOp::sum, options);
       }, "allreduce #1 of 900 f32 (sum)"},
      {"dtype", [&](Communicator& c, std::vector<char>& b) {
         return c.allreduce(b.data(), b.data(), 1000, DType::bf16, ReduceOp::sum, options);
       }, "allreduce #1 of 1000 bf16 (sum)"},
      {"op", [&](Communicator& c, std::vector<char>& b) {
         return c.allreduce(b.data(), b.data(), 1000, DType::f32, ReduceOp::max, options);
       }, "allreduce #1 of 1000 f32 (max)"},
      {"collective", [&](Communicator& c, std::vector<char>& b) {
         return c.broadcast(b.data(), 1000, DType::f32, 0, options);
       }, "broadcast #1 of 1000 f32 from root 0"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    auto status = run_tcp(4, [&](Communicator& comm) -> Status {
      std::vector<char> buf(4000, 0);
      auto start = std::chrono::steady_clock::now();
      Status st = comm.rank() == 2 ? c.odd(comm, buf)
                                   : comm.allreduce(buf.data(), buf.data(), 1000, DType::f32, ReduceOp::sum, options);
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10)) return internal_error("too late");
      return st;
    });
    for (int r = 0; r < 4; ++r) {
      INFO("rank " << r << ": " << status[r].to_string());
      CHECK(status[r].code() == Code::invalid_argument);
      CHECK(status[r].message().find(c.theirs) != std::string::npos);
      CHECK(status[r].message().find("allreduce #1 of 1000 f32 (sum)") != std::string::npos);
    }
    // A failed transport stays failed: the next call returns the same disagreement at once.
  }
}

TEST_CASE("tcp: a rank of another group or generation is refused at the handshake, on both sides") {
  struct Case {
    std::string group;
    int64_t generation;
    const char* dialler_says;
    const char* acceptor_says;
  };
  for (const Case& c : {Case{"dp", 3, "a rank of group 'dp' generation 3 connected to group 'dp' generation 4: stale member",
                             "refused: a rank of group 'dp' generation 3"},
                        Case{"pp", 4, "a rank of group 'pp' generation 4 connected to group 'dp' generation 4: another group",
                             "refused: a rank of group 'pp' generation 4"}}) {
    INFO(c.group << " generation " << c.generation);
    LoopbackListeners mesh(2);
    Status acceptor;
    std::thread rank0([&] {
      TcpGroupOptions o;
      o.group = "dp";
      o.generation = 4;
      o.timeout = std::chrono::milliseconds(1500);
      auto t = mesh.connect(0, o);
      acceptor = t.ok() ? Status() : t.status();
    });
    TcpGroupOptions o;
    o.group = c.group;
    o.generation = c.generation;
    o.timeout = std::chrono::seconds(10);
    auto start = std::chrono::steady_clock::now();
    auto dialler = mesh.connect(1, o);
    const auto took = std::chrono::steady_clock::now() - start;
    rank0.join();
    INFO("dialler: " << dialler.status().to_string());
    INFO("acceptor: " << acceptor.to_string());
    REQUIRE_FALSE(dialler.ok());
    CHECK(dialler.status().code() == Code::invalid_argument);
    CHECK(dialler.status().message().find(c.dialler_says) != std::string::npos);
    CHECK(took < std::chrono::seconds(5));  // refused at once, not left to time out
    CHECK(acceptor.code() == Code::timeout);  // the right rank 1 never came
    CHECK(acceptor.message().find(c.acceptor_says) != std::string::npos);
  }
}

TEST_CASE("tcp: a rank that never connects makes the group's formation time out naming it") {
  LoopbackListeners mesh(2);
  TcpGroupOptions options;
  options.timeout = std::chrono::milliseconds(300);
  auto t = mesh.connect(0, options);
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().code() == Code::timeout);
  CHECK(t.status().message().find("rank(s) 1") != std::string::npos);
}

TEST_CASE("tcp: allreduce over 5 and 8 ranks, both algorithms, small and prime sizes") {
  for (int ranks : {5, 8}) {
    auto status = run_tcp(ranks, [&](Communicator& comm) -> Status {
      for (const char* algorithm : {"ring", "halving_doubling"})
        for (DType dtype : {DType::f32, DType::bf16})
          for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1021}, 4096 / dtype_size(dtype)}) {
            std::vector<char> buf = to_bytes(inputs(comm.rank(), count), dtype);
            CollectiveOptions options;
            options.algorithm = algorithm;
            TROUPE_RETURN_IF_ERROR(comm.allreduce(buf.data(), buf.data(), count, dtype, ReduceOp::sum, options));
            std::vector<float> got = to_floats(buf, dtype);
            for (size_t i = 0; i < count; ++i) {
              float want = 0;
              for (int q = 0; q < ranks; ++q) want += input_value(q, i);
              if (got[i] != stored(want, dtype))
                return internal_error(std::string(algorithm) + " " + dtype_name(dtype) + " count " +
                                      std::to_string(count) + " element " + std::to_string(i));
            }
          }
      return {};
    });
    for (auto& s : status) REQUIRE(s.to_string() == "ok");
  }
}

TEST_CASE("tcp: 64 MiB of f32 over 2 ranks, exact and with a bf16 wire") {
  const size_t count = (size_t{64} << 20) / 4;
  auto status = run_tcp(2, [&](Communicator& comm) -> Status {
    for (DType wire : {DType::f32, DType::bf16}) {
      std::vector<float> buf = inputs(comm.rank(), count);
      CollectiveOptions options;
      options.wire = wire;
      TROUPE_RETURN_IF_ERROR(comm.allreduce(buf.data(), buf.data(), count, DType::f32, ReduceOp::sum, options));
      for (size_t i = 0; i < count; ++i)  // inputs are exact in bf16, so are their sums of two
        if (buf[i] != input_value(0, i) + input_value(1, i))
          return internal_error(std::string(dtype_name(wire)) + " wire: element " + std::to_string(i));
    }
    return {};
  });
  for (auto& s : status) REQUIRE(s.to_string() == "ok");
}

TEST_CASE("tcp: shift moves every rank's buffer to rank + distance, and a dead neighbour fails it naming the rank") {
  for (int ranks : {2, 3, 5}) {
    auto status = run_tcp(ranks, [&](Communicator& comm) -> Status {
      const int r = comm.rank();
      for (size_t count : {size_t{0}, size_t{1}, size_t{1021}, (size_t{1} << 18) + 7}) {
        for (int distance : {1, -1, 2}) {
          std::vector<float> in = inputs(r, count), out(count, -9.0f);
          TROUPE_RETURN_IF_ERROR(comm.shift(in.data(), out.data(), count, DType::f32, distance));
          const int from = ((r - distance) % ranks + ranks) % ranks;
          if (out != inputs(from, count))
            return internal_error("shift by " + std::to_string(distance) + " of " + std::to_string(count) +
                                  ": not rank " + std::to_string(from) + "'s buffer");
        }
      }
      return {};
    });
    for (auto& s : status) REQUIRE(s.to_string() == "ok");
  }
  // Rank 2 of 3 leaves: rank 0, receiving from it, fails naming it. (Rank 1's send to it may
  // already sit in the socket's buffer and succeed: what a mirror counts is what its receiver got.)
  auto status = run_tcp(3, [&](Communicator& comm) -> Status {
    if (comm.rank() == 2) return {};
    CollectiveOptions options;
    options.timeout = std::chrono::milliseconds(3000);
    std::vector<float> in(100000, 1.0f), out(in.size());
    return comm.shift(in.data(), out.data(), in.size(), DType::f32, 1, options);
  });
  INFO("rank 0: " << status[0].to_string());
  CHECK_FALSE(status[0].ok());
  CHECK(status[0].message().find("shift #1 (pairs)") != std::string::npos);
  CHECK(status[0].message().find("rank 2") != std::string::npos);
}

TEST_CASE("tcp: a shift's overlapping buffers are refused before anything is sent") {
  auto status = run_tcp(2, [&](Communicator& comm) -> Status {
    std::vector<float> v(64);
    Status st = comm.shift(v.data(), v.data() + 8, 32, DType::f32, 1);
    if (st.code() != Code::invalid_argument || st.message().find("overlap") == std::string::npos)
      return internal_error("overlap not refused: " + st.to_string());
    std::vector<float> in(4, 2.0f), out(4);
    return comm.shift(in.data(), out.data(), 4, DType::f32, 1);  // the group still works
  });
  for (auto& s : status) REQUIRE(s.to_string() == "ok");
}
