// Every collective, dtype, in place and not, over sizes 0..1 MiB and 2..8 ranks on the in-process
// transport, against straightforward references; every algorithm forced through options.algorithm.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <random>

#include "collectives/algorithm.h"
#include "tests/collectives/group.h"

using namespace troupe;
using namespace troupe::collectives;
using namespace troupe::collectives::testing;

namespace {

const DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};

// 0, 1, primes, 4 KiB and 1 MiB worth of elements of `dtype`.
std::vector<size_t> sizes_for(DType dtype) {
  size_t e = dtype_size(dtype);
  return {0, 1, 7, 13, 1021, 4096 / e, (1u << 20) / e};
}

// Relative tolerance of an avg: one rounding of the target dtype (1/size is not exact in binary).
double avg_tolerance(DType dtype) { return dtype == DType::f32 ? 1e-6 : dtype == DType::f16 ? 1e-3 : 8e-3; }

void check_allreduce(int ranks, DType dtype, ReduceOp op, const std::string& algorithm, size_t count, bool in_place) {
  INFO("ranks " << ranks << " dtype " << dtype_name(dtype) << " op " << reduce_op_name(op) << " algorithm "
                << algorithm << " count " << count << " in_place " << in_place);
  std::vector<std::vector<char>> results(ranks);
  auto status = run_inproc(ranks, [&](Communicator& comm) {
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = input_value(comm.rank(), i);
    std::vector<char> in = to_bytes(v, dtype), out(in.size());
    CollectiveOptions options;
    options.algorithm = algorithm;
    Status st = in_place ? comm.allreduce(in.data(), in.data(), count, dtype, op, options)
                         : comm.allreduce(in.data(), out.data(), count, dtype, op, options);
    results[comm.rank()] = in_place ? in : out;
    return st;
  });
  for (auto& s : status) REQUIRE(s.to_string() == "ok");
  for (int r = 0; r < ranks; ++r) {
    std::vector<float> got = to_floats(results[r], dtype);
    REQUIRE(got.size() == count);
    for (size_t i = 0; i < count; ++i) {
      double sum = 0;
      float mx = -1e30f;
      for (int q = 0; q < ranks; ++q) {
        sum += input_value(q, i);
        mx = std::max(mx, input_value(q, i));
      }
      if (op == ReduceOp::max) {
        REQUIRE(got[i] == stored(mx, dtype));
      } else if (op == ReduceOp::sum) {
        REQUIRE(got[i] == stored(static_cast<float>(sum), dtype));  // exact: see input_value
      } else {
        double want = sum / ranks;
        REQUIRE(std::abs(got[i] - want) <= avg_tolerance(dtype) * std::max(1.0, std::abs(want)));
      }
    }
  }
}

}  // namespace

TEST_CASE("choose_algorithm: small all-reduces use halving-doubling, large ones the ring, names are checked") {
  CHECK(*choose_algorithm("allreduce", "auto", 1024) == "halving_doubling");
  CHECK(*choose_algorithm("allreduce", "auto", kSmallAllreduceBytes) == "halving_doubling");
  CHECK(*choose_algorithm("allreduce", "auto", kSmallAllreduceBytes + 1) == "ring");
  CHECK(*choose_algorithm("allreduce", "ring", 1) == "ring");
  CHECK(*choose_algorithm("broadcast", "auto", 1) == "tree");
  auto bad = choose_algorithm("allreduce", "bcube", 1);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == Code::invalid_argument);
  CHECK(bad.status().message().find("bcube") != std::string::npos);
}

TEST_CASE("choose_algorithm: a transport's native path is auto's choice and the others stay selectable") {
  CHECK(*choose_algorithm("allreduce", "auto", 1024, "shm") == "shm");
  CHECK(*choose_algorithm("barrier", "auto", 0, "shm") == "shm");
  CHECK(*choose_algorithm("allreduce", "ring", 1 << 20, "shm") == "ring");
  CHECK_FALSE(choose_algorithm("allreduce", "shm", 1).ok());  // no native path: an unknown name
}

TEST_CASE("CallDescriptor::describe names the op, sequence, count, dtype and reduction") {
  CallDescriptor d;
  d.kind = CollectiveKind::allreduce;
  d.sequence = 5;
  d.count = 1000;
  d.dtype = DType::f32;
  d.reduce = static_cast<uint8_t>(ReduceOp::sum);
  CHECK(d.describe() == "allreduce #5 of 1000 f32 (sum)");
  d.wire = DType::bf16;
  CHECK(d.describe() == "allreduce #5 of 1000 f32 (sum, bf16 wire)");
  d.kind = CollectiveKind::broadcast;
  d.root = 2;
  CHECK(d.describe() == "broadcast #5 of 1000 f32 from root 2");
}

TEST_CASE("allreduce with an unknown algorithm returns invalid_argument naming the call") {
  auto status = run_inproc(2, [](Communicator& comm) {
    float x = 1;
    CollectiveOptions options;
    options.algorithm = "nope";
    return comm.allreduce(&x, &x, 1, DType::f32, ReduceOp::sum, options);
  });
  for (auto& s : status) {
    CHECK(s.code() == Code::invalid_argument);
    CHECK(s.message().find("allreduce #1") != std::string::npos);
  }
}

TEST_CASE("allreduce sum/avg/max: every dtype, size, rank count and algorithm, in place and not") {
  for (const char* algorithm : {"ring", "halving_doubling", "auto"})
    for (int ranks = 2; ranks <= 8; ++ranks)
      for (DType dtype : kDtypes)
        for (size_t count : sizes_for(dtype)) {
          if (count > 4096 && ranks != 2 && ranks != 3 && ranks != 8) continue;  // 1 MiB: a few group shapes
          for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
            for (bool in_place : {false, true}) {
              if (count > 4096 && !(op == ReduceOp::sum || in_place)) continue;
              check_allreduce(ranks, dtype, op, algorithm, count, in_place);
            }
        }
}

TEST_CASE("allreduce: 64 MiB of f32 over 2 ranks") {
  check_allreduce(2, DType::f32, ReduceOp::sum, "auto", (64u << 20) / 4, true);
}

TEST_CASE("allreduce: f32 buffers compressed to f16/bf16 on the wire stay within the rounding bound") {
  for (DType wire : {DType::f16, DType::bf16})
    for (const char* algorithm : {"ring", "halving_doubling"})
      for (int ranks : {2, 3, 5, 8})
        for (size_t count : {size_t{1}, size_t{13}, size_t{1021}, size_t{100000}}) {
          INFO("wire " << dtype_name(wire) << " " << algorithm << " ranks " << ranks << " count " << count);
          std::vector<std::vector<float>> inputs(ranks, std::vector<float>(count)), results(ranks);
          std::mt19937 rng(ranks * 1000 + count);
          std::uniform_real_distribution<float> dist(-1, 1);
          for (auto& v : inputs)
            for (auto& x : v) x = dist(rng);
          auto status = run_inproc(ranks, [&](Communicator& comm) {
            results[comm.rank()] = inputs[comm.rank()];
            CollectiveOptions options;
            options.algorithm = algorithm;
            options.wire = wire;
            return comm.allreduce(results[comm.rank()].data(), results[comm.rank()].data(), count, DType::f32,
                                  ReduceOp::sum, options);
          });
          for (auto& s : status) REQUIRE(s.to_string() == "ok");
          // Each partial sum is rounded to the wire at most once per hop: ranks+1 roundings of at most
          // 2^-(mantissa bits + 1) relative, each of a partial sum bounded by the sum of |x|.
          const double ulp = wire == DType::f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
          for (size_t i = 0; i < count; ++i) {
            double sum = 0, abs_sum = 0;
            for (int q = 0; q < ranks; ++q) {
              sum += inputs[q][i];
              abs_sum += std::abs(inputs[q][i]);
            }
            REQUIRE(std::abs(results[0][i] - sum) <= (ranks + 1) * ulp * abs_sum + 1e-6);
            for (int r = 1; r < ranks; ++r) REQUIRE(results[r][i] == results[0][i]);  // all ranks agree bitwise
          }
        }
}

TEST_CASE("broadcast: every dtype, size, root and rank count, with the binomial tree") {
  for (int ranks = 2; ranks <= 8; ++ranks)
    for (DType dtype : kDtypes)
      for (size_t count : sizes_for(dtype))
        for (int root = 0; root < ranks; root += (count > 4096 ? ranks - 1 : 1)) {
          INFO("ranks " << ranks << " dtype " << dtype_name(dtype) << " count " << count << " root " << root);
          std::vector<std::vector<char>> results(ranks);
          auto status = run_inproc(ranks, [&](Communicator& comm) {
            std::vector<float> v(count);
            for (size_t i = 0; i < count; ++i) v[i] = input_value(comm.rank(), i);
            results[comm.rank()] = to_bytes(v, dtype);
            CollectiveOptions options;
            options.algorithm = "tree";
            return comm.broadcast(results[comm.rank()].data(), count, dtype, root, options);
          });
          for (auto& s : status) REQUIRE(s.to_string() == "ok");
          std::vector<float> want(count);
          for (size_t i = 0; i < count; ++i) want[i] = input_value(root, i);
          std::vector<char> want_bytes = to_bytes(want, dtype);
          for (int r = 0; r < ranks; ++r) REQUIRE(results[r] == want_bytes);
        }
}

TEST_CASE("allgather: every dtype, size and rank count, in place and not") {
  for (int ranks = 2; ranks <= 8; ++ranks)
    for (DType dtype : kDtypes)
      for (size_t count : sizes_for(dtype))
        for (bool in_place : {false, true}) {
          INFO("ranks " << ranks << " dtype " << dtype_name(dtype) << " count " << count << " in_place " << in_place);
          std::vector<std::vector<char>> results(ranks);
          auto status = run_inproc(ranks, [&](Communicator& comm) {
            std::vector<float> v(count);
            for (size_t i = 0; i < count; ++i) v[i] = input_value(comm.rank(), i);
            std::vector<char> in = to_bytes(v, dtype);
            std::vector<char>& out = results[comm.rank()];
            out.assign(in.size() * ranks, 0);
            CollectiveOptions options;
            options.algorithm = "ring";
            if (!in_place) return comm.allgather(in.data(), out.data(), count, dtype, options);
            std::copy(in.begin(), in.end(), out.begin() + comm.rank() * in.size());
            return comm.allgather(out.data() + comm.rank() * in.size(), out.data(), count, dtype, options);
          });
          for (auto& s : status) REQUIRE(s.to_string() == "ok");
          std::vector<char> want;
          for (int q = 0; q < ranks; ++q) {
            std::vector<float> v(count);
            for (size_t i = 0; i < count; ++i) v[i] = input_value(q, i);
            auto b = to_bytes(v, dtype);
            want.insert(want.end(), b.begin(), b.end());
          }
          for (int r = 0; r < ranks; ++r) REQUIRE(results[r] == want);
        }
}

TEST_CASE("reduce_scatter sum/avg/max: every dtype, size and rank count, in place and not") {
  for (int ranks = 2; ranks <= 8; ++ranks)
    for (DType dtype : kDtypes)
      for (size_t count : sizes_for(dtype)) {
        if (count > 4096 && ranks > 4) continue;  // 1 MiB blocks: ranks x 1 MiB per rank
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
          for (bool in_place : {false, true}) {
            INFO("ranks " << ranks << " dtype " << dtype_name(dtype) << " op " << reduce_op_name(op) << " count "
                          << count << " in_place " << in_place);
            std::vector<std::vector<float>> results(ranks);
            auto status = run_inproc(ranks, [&](Communicator& comm) {
              std::vector<float> v(count * ranks);
              for (size_t i = 0; i < v.size(); ++i) v[i] = input_value(comm.rank(), i);
              std::vector<char> in = to_bytes(v, dtype), out(count * dtype_size(dtype));
              CollectiveOptions options;
              options.algorithm = "ring";
              Status st = in_place ? comm.reduce_scatter(in.data(), in.data(), count, dtype, op, options)
                                   : comm.reduce_scatter(in.data(), out.data(), count, dtype, op, options);
              if (in_place) in.resize(out.size());
              results[comm.rank()] = to_floats(in_place ? in : out, dtype);
              return st;
            });
            for (auto& s : status) REQUIRE(s.to_string() == "ok");
            for (int r = 0; r < ranks; ++r) {
              for (size_t i = 0; i < count; ++i) {
                size_t at = r * count + i;
                double sum = 0;
                float mx = -1e30f;
                for (int q = 0; q < ranks; ++q) {
                  sum += input_value(q, at);
                  mx = std::max(mx, input_value(q, at));
                }
                float got = results[r][i];
                if (op == ReduceOp::max) REQUIRE(got == stored(mx, dtype));
                if (op == ReduceOp::sum) REQUIRE(got == stored(static_cast<float>(sum), dtype));
                if (op == ReduceOp::avg)
                  REQUIRE(std::abs(got - sum / ranks) <= avg_tolerance(dtype) * std::max(1.0, std::abs(sum / ranks)));
              }
            }
          }
      }
}

TEST_CASE("barrier: no rank leaves before every rank arrived, and the sequence numbers count calls") {
  for (int ranks = 1; ranks <= 8; ++ranks) {
    std::atomic<int> arrived{0};
    std::atomic<bool> early{false};
    auto status = run_inproc(ranks, [&](Communicator& comm) {
      std::this_thread::sleep_for(std::chrono::milliseconds(comm.rank() * 3));
      arrived++;
      Status st = comm.barrier();
      if (arrived.load() != ranks) early = true;
      if (comm.sequence() != 1) return internal_error("sequence " + std::to_string(comm.sequence()));
      return st;
    });
    for (auto& s : status) REQUIRE(s.to_string() == "ok");
    CHECK_FALSE(early.load());
  }
}
