// Gradient buckets (trainers/sync/grad_buckets.h): the grouping of blocks into buckets, and the comm
// thread's all-reduce of each bucket as its blocks are announced, over an in-process group: averages
// whatever order the blocks become ready in, misuse of ready() named, a peer that dies mid-step
// named without a hang. The training-level tests (bucketed replicas against one process and against
// unbucketed replicas) are in sync_replica_test.cc.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "collectives/inproc_transport.h"
#include "trainers/sync/grad_buckets.h"

using namespace troupe;
using namespace troupe::collectives;

namespace {

// The MLP 784-256-128-10 as the built-in trainer declares it: w0 b0 w1 b1 w2 b2.
ParameterSpace mlp_space() {
  ParameterSpace space;
  const int dims[] = {784, 256, 128, 10};
  for (int l = 0; l < 3; ++l) {
    space.declare("w" + std::to_string(l), {dims[l], dims[l + 1]}, Init::zeros());
    space.declare("b" + std::to_string(l), {dims[l + 1]}, Init::zeros());
  }
  return space;
}

bool contains(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

// Buckets cover the buffer exactly, back to front: bucket 0 ends at the end, each next one ends
// where the previous one starts, and block ranges follow.
void check_tiling(const std::vector<GradBucket>& buckets, const ParameterSpace& space) {
  size_t end = space.size();
  int next_last = static_cast<int>(space.blocks().size()) - 1;
  for (const GradBucket& b : buckets) {
    CHECK(b.offset + b.count == end);
    CHECK(b.last_block == next_last);
    CHECK(b.first_block <= b.last_block);
    CHECK(b.offset == space.blocks()[b.first_block].param.offset);
    end = b.offset;
    next_last = b.first_block - 1;
  }
  CHECK(end == 0);
  CHECK(next_last == -1);
}

// Runs one GradBucketSync per rank on threads; fn(rank, sync) drives it.
template <class Fn>
void run_group(int ranks, const ParameterSpace& space, size_t bucket_bytes, std::chrono::milliseconds timeout,
               Fn&& fn) {
  auto transports = make_inproc_group(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      Communicator comm(std::move(transports[r]));
      GradBucketSync sync(comm, space, GradBucketSync::Options{bucket_bytes, timeout, DType::f32, {}, 0});
      fn(r, comm, sync);
    });
  for (auto& t : threads) t.join();
}

float value(int rank, size_t i) { return static_cast<float>((rank + 1) * ((i % 7) + 1)); }
// The average over `ranks` of value(r, i): (ranks + 1) / 2 * ((i % 7) + 1), exact in f32 here.
float average(int ranks, size_t i) { return (ranks + 1) / 2.0f * static_cast<float>((i % 7) + 1); }

}  // namespace

TEST_CASE("buckets group blocks in reverse declaration order within the bucket size", "[grad_buckets]") {
  const ParameterSpace space = mlp_space();  // w0 802816 B, b0 1024, w1 131072, b1 512, w2 5120, b2 40
  SECTION("256 KiB: everything but w0 in bucket 0, w0 (larger than a bucket) alone") {
    auto buckets = plan_grad_buckets(space.blocks(), 256 * 1024);
    REQUIRE(buckets.size() == 2);
    CHECK(buckets[0].first_block == 1);
    CHECK(buckets[0].last_block == 5);
    CHECK(buckets[0].count == 256 + 32768 + 128 + 1280 + 10);
    CHECK(buckets[1].first_block == 0);
    CHECK(buckets[1].last_block == 0);
    CHECK(buckets[1].count == 200704);
    check_tiling(buckets, space);
  }
  SECTION("64 KiB: b2 w2 b1 | w1 alone | b0 | w0 alone") {
    auto buckets = plan_grad_buckets(space.blocks(), 64 * 1024);
    REQUIRE(buckets.size() == 4);
    CHECK(buckets[0].first_block == 3);
    CHECK(buckets[1].first_block == 2);
    CHECK(buckets[2].first_block == 1);
    CHECK(buckets[3].first_block == 0);
    for (const GradBucket& b : buckets)
      if (b.first_block != b.last_block) CHECK(b.count * sizeof(float) <= 64 * 1024);
    check_tiling(buckets, space);
  }
  SECTION("a bucket smaller than every block: one bucket per block, last block first") {
    auto buckets = plan_grad_buckets(space.blocks(), 4);
    REQUIRE(buckets.size() == 6);
    for (int b = 0; b < 6; ++b) CHECK(buckets[b].first_block == 5 - b);
    check_tiling(buckets, space);
  }
  SECTION("a bucket as large as the model, or 0: one bucket of everything") {
    for (size_t bytes : {space.size() * sizeof(float), size_t{1} << 30, size_t{0}}) {
      auto buckets = plan_grad_buckets(space.blocks(), bytes);
      REQUIRE(buckets.size() == 1);
      CHECK(buckets[0].offset == 0);
      CHECK(buckets[0].count == space.size());
    }
  }
}

TEST_CASE("the comm thread averages every bucket and the slots, whatever order blocks become ready in",
          "[grad_buckets]") {
  const ParameterSpace space = mlp_space();
  const int ranks = 4;
  std::vector<Status> status(ranks);
  std::vector<GradBucketStats> stats(ranks);
  run_group(ranks, space, 64 * 1024, std::chrono::seconds(20), [&](int r, Communicator&, GradBucketSync& sync) {
    std::vector<float> grads(space.size() + 2);
    std::mt19937 rng(r);
    for (int step = 1; step <= 3 && status[r].ok(); ++step) {
      for (size_t i = 0; i < grads.size(); ++i) grads[i] = value(r, i);
      sync.begin_step(grads.data(), 1, step);
      Gradients view(grads.data(), space.size(), &sync);
      std::vector<int> order(space.blocks().size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(order.size() - 1 - i);
      if (step == 2) std::shuffle(order.begin(), order.end(), rng);  // out of order: still in bucket order
      if (step == 3) order.resize(2);                                  // the rest left to finish_step
      for (int b : order) {
        view.ready(space.blocks()[b].param);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // "computing" the next block
      }
      status[r] = sync.finish_step(&grads[space.size()]);
      for (size_t i = 0; i < grads.size(); ++i)
        if (grads[i] != average(ranks, i)) {
          status[r] = internal_error("step " + std::to_string(step) + " element " + std::to_string(i) + ": " +
                                     std::to_string(grads[i]) + " != " + std::to_string(average(ranks, i)));
          break;
        }
    }
    stats[r] = sync.stats();
  });
  for (int r = 0; r < ranks; ++r) {
    INFO("rank " << r << ": " << status[r].to_string());
    CHECK(status[r].ok());
    CHECK(stats[r].steps == 3);
    CHECK(stats[r].buckets == 4);
    CHECK(stats[r].comm_seconds > 0);
  }
}

TEST_CASE("ready() twice or for an unknown Param fails the step naming it, and the buckets still run",
          "[grad_buckets][errors]") {
  const ParameterSpace space = mlp_space();
  const int ranks = 2;
  std::vector<Status> status(ranks);
  std::vector<float> last(ranks);
  run_group(ranks, space, 64 * 1024, std::chrono::seconds(20), [&](int r, Communicator&, GradBucketSync& sync) {
    std::vector<float> grads(space.size() + 2);
    for (size_t i = 0; i < grads.size(); ++i) grads[i] = value(r, i);
    sync.begin_step(grads.data(), 1, 1);
    Gradients view(grads.data(), space.size(), &sync);
    if (r == 0) {
      view.ready(space.blocks()[5].param);
      view.ready(space.blocks()[5].param);
    } else {
      view.ready(Param{});
    }
    status[r] = sync.finish_step(&grads[space.size()]);
    last[r] = grads[0];
  });
  CHECK(status[0].code() == Code::invalid_argument);
  CHECK(contains(status[0], "grads.ready() was called twice for block 'b2'"));
  CHECK(status[1].code() == Code::invalid_argument);
  CHECK(contains(status[1], "a Param that setup() did not declare"));
  for (int r = 0; r < ranks; ++r) CHECK(last[r] == average(ranks, 0));  // the other rank was not left waiting
}

TEST_CASE("a peer that dies mid-step fails the next bucket on every other rank, naming it, without a hang",
          "[grad_buckets][errors]") {
  const ParameterSpace space = mlp_space();
  const int ranks = 3, dead = 2;
  const auto timeout = std::chrono::milliseconds(1000);
  std::vector<Status> status(ranks);
  std::vector<std::chrono::steady_clock::duration> took(ranks);
  run_group(ranks, space, 64 * 1024, timeout, [&](int r, Communicator&, GradBucketSync& sync) {
    std::vector<float> grads(space.size() + 2, 1.0f);
    Gradients view(grads.data(), space.size(), &sync);
    sync.begin_step(grads.data(), 1, 1);
    status[r] = sync.finish_step(&grads[space.size()]);  // step 1: everyone
    if (!status[r].ok()) return;
    sync.begin_step(grads.data(), 1, 2);
    const auto start = std::chrono::steady_clock::now();
    for (int b = 5; b >= 3; --b) view.ready(space.blocks()[b].param);  // bucket 1 of 4 can go
    if (r == dead) {
      // Bucket 1 goes through with the others, then this rank "dies" before announcing the rest:
      // its GradBucketSync is destroyed with a step in flight (the destructor must still join the
      // comm thread), then its Communicator, which closes its transport.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return;
    }
    status[r] = sync.finish_step(&grads[space.size()]);
    took[r] = std::chrono::steady_clock::now() - start;
  });
  for (int r = 0; r < ranks; ++r) {
    if (r == dead) continue;
    INFO("rank " << r << ": " << status[r].to_string());
    REQUIRE_FALSE(status[r].ok());
    CHECK(contains(status[r], "gradient bucket 2 of 4 (blocks w1, 131072 bytes)"));
    CHECK(contains(status[r], "rank 2"));
    CHECK(took[r] < timeout + std::chrono::seconds(10));
  }
}
