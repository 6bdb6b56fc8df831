// The collectives over real TCP connections on loopback: 2-4 ranks as threads of this process,
// each with its own listener on a kernel-chosen port.
#include <catch2/catch.hpp>

#include <algorithm>
#include <mutex>

#include "collectives/tcp_transport.h"
#include "tests/collectives/group.h"

using namespace troupe;
using namespace troupe::collectives;
using namespace troupe::collectives::testing;

namespace {

// Forms a TCP mesh of `size` ranks on 127.0.0.1, then runs fn on each rank's thread.
std::vector<Status> run_tcp(int size, const RankFn& fn) {
  std::vector<TcpListener> listeners;
  std::vector<std::string> addresses;
  for (int r = 0; r < size; ++r) {
    auto l = TcpListener::open("127.0.0.1");
    REQUIRE(l.ok());
    addresses.push_back("127.0.0.1:" + std::to_string(l->port()));
    listeners.push_back(std::move(*l));
  }
  std::vector<Status> status(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      TcpGroupOptions options;
      options.timeout = std::chrono::seconds(20);
      auto transport = connect_tcp_group(r, std::move(listeners[r]), addresses, options);
      if (!transport) {
        status[r] = transport.status();
        return;
      }
      Communicator comm(std::move(*transport));
      status[r] = fn(comm);
    });
  for (auto& t : threads) t.join();
  return status;
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

TEST_CASE("tcp: broadcast, allgather, reduce_scatter and barrier, 2-4 ranks") {
  for (int ranks = 2; ranks <= 4; ++ranks) {
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

TEST_CASE("tcp: a rank whose process dies fails its neighbours' allreduce naming it and the sequence number") {
  const int ranks = 3, dead = 1;
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
  // Rank 2 receives from rank 1 in the ring: it sees the closed connection.
  INFO(status[2].to_string());
  CHECK(status[2].code() == Code::unavailable);
  CHECK(status[2].message().find("allreduce #2 (ring)") != std::string::npos);
  CHECK(status[2].message().find("rank 1") != std::string::npos);
  INFO(status[0].to_string());
  CHECK_FALSE(status[0].ok());
  CHECK(status[0].message().find("allreduce #2 (ring)") != std::string::npos);
}

TEST_CASE("tcp: a rank that never connects makes the group's formation time out naming it") {
  auto l0 = TcpListener::open("127.0.0.1");
  auto l1 = TcpListener::open("127.0.0.1");
  REQUIRE(l0.ok());
  REQUIRE(l1.ok());
  std::vector<std::string> addresses = {"127.0.0.1:" + std::to_string(l0->port()),
                                        "127.0.0.1:" + std::to_string(l1->port())};
  TcpGroupOptions options;
  options.timeout = std::chrono::milliseconds(300);
  auto t = connect_tcp_group(0, std::move(*l0), addresses, options);
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().code() == Code::timeout);
  CHECK(t.status().message().find("rank(s) 1") != std::string::npos);
}
