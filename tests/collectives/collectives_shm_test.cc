// The shared-memory transport's native collectives against straightforward references: every op,
// dtype, in place and not, sizes 0..64 MiB, 2..8 ranks (threads of this process, and forked
// processes, also with more ranks than cores), results bitwise identical on every rank; a late
// rank's arrival wakes the sleepers at once; the zero-copy arena; the generic
// point-to-point algorithms run over its send/recv. Failures are in collectives_shm_failure_test.cc.
#include <catch2/catch.hpp>

#include <algorithm>
#include <mutex>

#include "tests/collectives/group.h"
#include "tests/collectives/shm_group.h"

using namespace troupe;
using namespace troupe::collectives;
using namespace troupe::collectives::testing;

namespace {

const DType kDtypes[] = {DType::f32, DType::f16, DType::bf16};
const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max};

std::vector<size_t> sizes_for(DType dtype) { return {0, 1, 7, 1021, 4096 / dtype_size(dtype), 65537}; }

// Relative tolerance of an avg: one rounding of the target dtype (1/size is not exact in binary).
double avg_tolerance(DType dtype) { return dtype == DType::f32 ? 1e-6 : dtype == DType::f16 ? 1e-3 : 8e-3; }

// Value `i` of op over ranks of input_value(q, offset + i), as the reference computes it.
bool matches(ReduceOp op, DType dtype, int ranks, size_t offset, size_t i, float got) {
  double sum = 0;
  float mx = -1e30f;
  for (int q = 0; q < ranks; ++q) {
    sum += input_value(q, offset + i);
    mx = std::max(mx, input_value(q, offset + i));
  }
  if (op == ReduceOp::max) return got == stored(mx, dtype);
  if (op == ReduceOp::sum) return got == stored(static_cast<float>(sum), dtype);  // exact: see input_value
  const double want = sum / ranks;
  return std::abs(got - want) <= avg_tolerance(dtype) * std::max(1.0, std::abs(want));
}

std::vector<char> inputs(int rank, size_t count, DType dtype, size_t offset = 0) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = input_value(rank, offset + i);
  return to_bytes(v, dtype);
}

std::string what(const char* op, DType dtype, ReduceOp rop, size_t count, bool in_place) {
  return std::string(op) + " " + dtype_name(dtype) + " " + reduce_op_name(rop) + " count " + std::to_string(count) +
         (in_place ? " in place" : "");
}

// Every native collective on one group: checks each result against the reference and records its
// bytes so the caller can compare ranks bitwise. Returns the first mismatch as an error.
Status exercise_all(Communicator& comm, std::vector<std::vector<char>>& results) {
  const int n = comm.size(), r = comm.rank();
  for (DType dtype : kDtypes)
    for (size_t count : sizes_for(dtype))
      for (bool in_place : {false, true}) {
        for (ReduceOp op : kOps) {
          std::vector<char> in = inputs(r, count, dtype), out(in.size());
          char* dst = in_place ? in.data() : out.data();
          TROUPE_RETURN_IF_ERROR(comm.allreduce(in.data(), dst, count, dtype, op));
          std::vector<float> got = to_floats(in_place ? in : out, dtype);
          for (size_t i = 0; i < count; ++i)
            if (!matches(op, dtype, n, 0, i, got[i]))
              return internal_error(what("allreduce", dtype, op, count, in_place) + ": element " + std::to_string(i) +
                                    " is " + std::to_string(got[i]));
          results.push_back(in_place ? in : out);

          // reduce_scatter: block r of every rank's count * n inputs.
          std::vector<char> all = inputs(r, count * n, dtype), mine(count * dtype_size(dtype));
          char* rs_out = in_place ? all.data() + r * mine.size() : mine.data();
          TROUPE_RETURN_IF_ERROR(comm.reduce_scatter(all.data(), rs_out, count, dtype, op));
          std::vector<float> block = to_floats(std::vector<char>(rs_out, rs_out + mine.size()), dtype);
          for (size_t i = 0; i < count; ++i)
            if (!matches(op, dtype, n, r * count, i, block[i]))
              return internal_error(what("reduce_scatter", dtype, op, count, in_place) + ": element " +
                                    std::to_string(i) + " is " + std::to_string(block[i]));
        }
        // allgather: block q of the result is rank q's input.
        std::vector<char> gathered(count * dtype_size(dtype) * n);
        std::vector<char> own = inputs(r, count, dtype);
        const char* src = own.data();
        if (in_place) {
          std::copy(own.begin(), own.end(), gathered.begin() + r * own.size());
          src = gathered.data() + r * own.size();
        }
        TROUPE_RETURN_IF_ERROR(comm.allgather(src, gathered.data(), count, dtype));
        for (int q = 0; q < n; ++q)
          if (!std::equal(gathered.begin() + q * own.size(), gathered.begin() + (q + 1) * own.size(),
                          inputs(q, count, dtype).begin()))
            return internal_error(what("allgather", dtype, ReduceOp::sum, count, in_place) + ": block " +
                                  std::to_string(q) + " differs");
        // broadcast from a root that moves with the size.
        const int root = static_cast<int>(count % n);
        std::vector<char> buf = inputs(r, count, dtype);
        TROUPE_RETURN_IF_ERROR(comm.broadcast(buf.data(), count, dtype, root));
        if (buf != inputs(root, count, dtype))
          return internal_error(what("broadcast", dtype, ReduceOp::sum, count, false) + " differs from root's");
        TROUPE_RETURN_IF_ERROR(comm.barrier());
      }
  return {};
}

void check_group(int ranks, size_t staging_bytes) {
  INFO("ranks " << ranks << " staging " << staging_bytes);
  ShmGroupOptions options = shm_options(unique_shm_name("all"), ranks);
  options.staging_bytes = staging_bytes;
  std::vector<std::vector<std::vector<char>>> results(ranks);
  auto status = run_shm_threads(options, [&](Communicator& comm) {
    if (comm.transport().kind() != "shm") return internal_error("transport is " + comm.transport().kind());
    return exercise_all(comm, results[comm.rank()]);
  });
  for (auto& s : status) REQUIRE(s.to_string() == "ok");
  for (int r = 1; r < ranks; ++r) CHECK(results[r] == results[0]);  // bitwise, avg included
  CHECK_FALSE(shm_segment_exists(options.name));
}

}  // namespace

TEST_CASE("shm: every collective, dtype, size and rank count matches the reference, bitwise equal on all ranks",
          "[shm][collectives]") {
  // Small staging makes 65537 elements take many rounds; the default takes one.
  for (int ranks = 2; ranks <= 8; ++ranks) check_group(ranks, ranks % 2 ? 8 << 10 : 64 << 10);
  check_group(3, ShmGroupOptions{}.staging_bytes);
}

TEST_CASE("shm: 64 MiB f32 allreduce, staged and zero-copy from the shared arena", "[shm][collectives][large]") {
  const size_t count = (64u << 20) / 4;
  for (int ranks : {2, 4}) {
    INFO("ranks " << ranks);
    ShmGroupOptions options = shm_options(unique_shm_name("big"), ranks);
    options.shared_buffer_bytes = count * 4;
    auto status = run_shm_threads(options, [&](Communicator& comm) -> Status {
      float* arena = static_cast<float*>(comm.shared_buffer(count * 4));
      if (arena == nullptr) return internal_error("no shared buffer of 64 MiB");
      if (comm.shared_buffer(count * 4 + 1) != nullptr) return internal_error("shared buffer larger than the arena");
      std::vector<float> staged(count);
      for (size_t i = 0; i < count; ++i) arena[i] = staged[i] = input_value(comm.rank(), i);
      TROUPE_RETURN_IF_ERROR(comm.allreduce(arena, arena, count, DType::f32, ReduceOp::sum));
      TROUPE_RETURN_IF_ERROR(comm.allreduce(staged.data(), staged.data(), count, DType::f32, ReduceOp::sum));
      for (size_t i = 0; i < count; ++i)
        if (!matches(ReduceOp::sum, DType::f32, comm.size(), 0, i, arena[i]) || staged[i] != arena[i])
          return internal_error("element " + std::to_string(i) + ": arena " + std::to_string(arena[i]) +
                                ", staged " + std::to_string(staged[i]));
      return {};
    });
    for (auto& s : status) REQUIRE(s.to_string() == "ok");
  }
}

TEST_CASE("shm: zero-copy allreduce of f16/bf16 in the arena, mixed with ranks that stage", "[shm][collectives]") {
  const size_t count = 100003;  // several rounds of a 64 KiB staging slot
  ShmGroupOptions options = shm_options(unique_shm_name("mixed"), 3);
  options.staging_bytes = 64 << 10;
  options.shared_buffer_bytes = count * 4;
  auto status = run_shm_threads(options, [&](Communicator& comm) -> Status {
    for (DType dtype : kDtypes)
      for (ReduceOp op : kOps) {
        std::vector<char> bytes = inputs(comm.rank(), count, dtype), own(bytes.size());
        // Rank 1 stages from its own memory; the others work in place in their arena.
        char* buf = comm.rank() == 1 ? own.data() : static_cast<char*>(comm.shared_buffer(bytes.size()));
        std::copy(bytes.begin(), bytes.end(), buf);
        TROUPE_RETURN_IF_ERROR(comm.allreduce(buf, buf, count, dtype, op));
        std::vector<float> got = to_floats(std::vector<char>(buf, buf + bytes.size()), dtype);
        for (size_t i = 0; i < count; ++i)
          if (!matches(op, dtype, comm.size(), 0, i, got[i]))
            return internal_error(what("allreduce", dtype, op, count, true) + ": element " + std::to_string(i));
      }
    return {};
  });
  for (auto& s : status) REQUIRE(s.to_string() == "ok");
}

TEST_CASE("shm: Communicator::shared_buffer is nullptr without an arena", "[shm][collectives]") {
  auto status = run_shm_threads(shm_options(unique_shm_name("noarena"), 2), [](Communicator& comm) -> Status {
    return comm.shared_buffer(1) == nullptr ? Status{} : internal_error("a shared buffer without an arena");
  });
  for (auto& s : status) CHECK(s.to_string() == "ok");
  run_inproc(2, [](Communicator& comm) {
    CHECK(comm.shared_buffer(1) == nullptr);
    return Status{};
  });
}

// cores 1: every rank confined to one CPU, so ranks outnumber cores (waiters yield-spin, then sleep).
TEST_CASE("shm: ranks in separate forked processes, staged and zero-copy", "[shm][collectives][process]") {
  for (auto [ranks, cores] : {std::pair{2, 0}, std::pair{4, 0}, std::pair{4, 1}, std::pair{8, 1}}) {
    ShmGroupOptions options = shm_options(unique_shm_name("fork"), ranks);
    options.staging_bytes = 64 << 10;
    options.shared_buffer_bytes = 1 << 20;
    auto reports = run_shm_processes(options, [](Communicator& comm) -> Status {
      for (DType dtype : kDtypes)
        for (size_t count : {size_t{1}, size_t{1021}, size_t{65537}}) {
          std::vector<char> bytes = inputs(comm.rank(), count, dtype);
          char* arena = static_cast<char*>(comm.shared_buffer(bytes.size()));
          std::copy(bytes.begin(), bytes.end(), arena);
          TROUPE_RETURN_IF_ERROR(comm.allreduce(bytes.data(), bytes.data(), count, dtype, ReduceOp::sum));
          TROUPE_RETURN_IF_ERROR(comm.allreduce(arena, arena, count, dtype, ReduceOp::max));
          std::vector<float> sum = to_floats(bytes, dtype);
          std::vector<float> mx = to_floats(std::vector<char>(arena, arena + bytes.size()), dtype);
          for (size_t i = 0; i < count; ++i)
            if (!matches(ReduceOp::sum, dtype, comm.size(), 0, i, sum[i]) ||
                !matches(ReduceOp::max, dtype, comm.size(), 0, i, mx[i]))
              return internal_error(what("allreduce", dtype, ReduceOp::sum, count, true) + ": element " +
                                    std::to_string(i));
        }
      // Many one-shot calls back to back: consecutive barriers and slot parities, checked each time.
      for (int it = 0; it < 200; ++it) {
        std::vector<char> bytes = inputs(comm.rank(), 1024, DType::f32, it);
        TROUPE_RETURN_IF_ERROR(comm.allreduce(bytes.data(), bytes.data(), 1024, DType::f32, ReduceOp::sum));
        std::vector<float> sum = to_floats(bytes, DType::f32);
        for (size_t i = 0; i < 1024; ++i)
          if (!matches(ReduceOp::sum, DType::f32, comm.size(), it, i, sum[i]))
            return internal_error("4 KiB allreduce " + std::to_string(it) + ": element " + std::to_string(i));
      }
      return comm.barrier();
    }, {}, cores);
    for (auto& rep : reports) {
      INFO("ranks " << ranks << ", cores " << cores << ": " << rep.message);
      CHECK(rep.exit_code == 0);
    }
    CHECK_FALSE(shm_segment_exists(options.name));
  }
}

TEST_CASE("shm: a late rank's arrival wakes the ranks asleep in the barrier at once, not at their next slice",
          "[shm][collectives]") {
  // Rank 0 arrives 30 ms late, long after the others stopped spinning and slept on the barrier
  // bell; they must leave within ~1 ms of its arrival (a missed ring would cost up to the 10 ms
  // sleep slice). Median over rounds, so one descheduling on a busy machine does not fail it.
  const int ranks = 4, rounds = 15;
  std::vector<std::vector<double>> late_ms(ranks);
  std::vector<Clock::time_point> arrival(rounds);
  auto status = run_shm_threads(shm_options(unique_shm_name("wake"), ranks), [&](Communicator& comm) -> Status {
    for (int k = 0; k < rounds; ++k) {
      TROUPE_RETURN_IF_ERROR(comm.barrier());
      if (comm.rank() == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        arrival[k] = Clock::now();
      }
      TROUPE_RETURN_IF_ERROR(comm.barrier());
      const auto left = Clock::now();
      TROUPE_RETURN_IF_ERROR(comm.barrier());  // arrival[k] is written before anyone passes this
      late_ms[comm.rank()].push_back(std::chrono::duration<double, std::milli>(left - arrival[k]).count());
    }
    return Status{};
  });
  for (auto& s : status) REQUIRE(s.to_string() == "ok");
  for (int r = 1; r < ranks; ++r) {
    std::vector<double> v = late_ms[r];
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    INFO("rank " << r << " left a median " << v[v.size() / 2] << " ms after rank 0 arrived");
    CHECK(v[v.size() / 2] < 3.0);
  }
}

TEST_CASE("shm: the point-to-point algorithms and the shift run over shm send/recv", "[shm][collectives]") {
  for (int ranks : {3, 4}) {
    ShmGroupOptions options = shm_options(unique_shm_name("p2p"), ranks);
    options.mailbox_bytes = 16 << 10;  // smaller than the messages: rings wrap and fill
    auto status = run_shm_threads(options, [](Communicator& comm) -> Status {
      const int n = comm.size(), r = comm.rank();
      for (size_t count : {size_t{1}, size_t{1021}, size_t{300000}}) {
        for (const char* algorithm : {"ring", "halving_doubling"}) {
          CollectiveOptions o;
          o.algorithm = algorithm;
          std::vector<char> v = inputs(r, count, DType::f32);
          TROUPE_RETURN_IF_ERROR(comm.allreduce(v.data(), v.data(), count, DType::f32, ReduceOp::sum, o));
          std::vector<float> got = to_floats(v, DType::f32);
          for (size_t i = 0; i < count; ++i)
            if (!matches(ReduceOp::sum, DType::f32, n, 0, i, got[i]))
              return internal_error(std::string(algorithm) + " count " + std::to_string(count) + ": element " +
                                    std::to_string(i));
        }
        CollectiveOptions tree, ring, dissemination;
        tree.algorithm = "tree";
        ring.algorithm = "ring";
        dissemination.algorithm = "dissemination";
        std::vector<char> buf = inputs(r, count, DType::bf16);
        TROUPE_RETURN_IF_ERROR(comm.broadcast(buf.data(), count, DType::bf16, n - 1, tree));
        if (buf != inputs(n - 1, count, DType::bf16)) return internal_error("tree broadcast differs from root's");
        std::vector<char> own = inputs(r, count, DType::f16), all(own.size() * n);
        TROUPE_RETURN_IF_ERROR(comm.allgather(own.data(), all.data(), count, DType::f16, ring));
        for (int q = 0; q < n; ++q)
          if (!std::equal(all.begin() + q * own.size(), all.begin() + (q + 1) * own.size(),
                          inputs(q, count, DType::f16).begin()))
            return internal_error("ring allgather block " + std::to_string(q) + " differs");
        TROUPE_RETURN_IF_ERROR(comm.barrier(dissemination));
        // A shift always goes point to point (the shm path does not handle it).
        std::vector<char> next(own.size());
        TROUPE_RETURN_IF_ERROR(comm.shift(own.data(), next.data(), count, DType::f16, 1));
        if (next != inputs((r + n - 1) % n, count, DType::f16)) return internal_error("shift: not rank r-1's buffer");
      }
      return {};
    });
    for (auto& s : status) REQUIRE(s.to_string() == "ok");
  }
}
