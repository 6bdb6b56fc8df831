// The input pipeline: batches in source order whatever thread built them, the partial-batch
// policies, early stop, errors of the source and of the transform, the wait metric and deadline;
// and the whole data path of a worker (plan, ledger, ShardSource, pipeline, ShardProgress).
#include "data/feed/input_pipeline.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <numeric>
#include <set>
#include <thread>

#include "gcs/events.h"
#include "gcs/in_memory_store.h"
#include "data/feed/data_metrics.h"
#include "data/shards/shard_source.h"

namespace troupe::data {
namespace {

using namespace std::chrono_literals;

// n examples of 3 features; example i has pixels (i, i + 0.25, i + 0.5) and label i % 10.
Dataset counting_dataset(int64_t n) {
  Dataset d;
  d.count = n;
  d.rows = 1;
  d.cols = 3;
  for (int64_t i = 0; i < n; ++i) {
    d.images.insert(d.images.end(), {float(i), float(i) + 0.25f, float(i) + 0.5f});
    d.labels.push_back(static_cast<int32_t>(i % 10));
  }
  return d;
}

std::vector<int32_t> range(int32_t begin, int32_t end) {
  std::vector<int32_t> v(static_cast<size_t>(end - begin));
  std::iota(v.begin(), v.end(), begin);
  return v;
}

std::unique_ptr<InputPipeline> start(const Dataset& d, std::unique_ptr<IndexSource> source, InputPipelineOptions o) {
  auto p = InputPipeline::start(d, std::move(source), std::move(o));
  INFO(p.status().to_string());
  REQUIRE(p.ok());
  return std::move(p.value());
}

// Yields `chunks` chunks of `size` indices each, sleeping `delay` before each; then an error if
// `fail` is set, else the end.
class SlowSource final : public IndexSource {
 public:
  SlowSource(int chunks, int size, std::chrono::milliseconds delay, bool fail = false)
      : chunks_(chunks), size_(size), delay_(delay), fail_(fail) {}
  Expected<std::optional<IndexChunk>> next() override {
    std::this_thread::sleep_for(delay_);
    if (given_ == chunks_) {
      if (fail_) return unavailable("test source: the shard server went away");
      return std::optional<IndexChunk>{};
    }
    const int first = given_++ * size_;
    return std::optional<IndexChunk>(IndexChunk{given_ - 1, range(first, first + size_)});
  }

 private:
  int chunks_, size_;
  std::chrono::milliseconds delay_;
  bool fail_;
  int given_ = 0;
};

}  // namespace

TEST_CASE("input pipeline: batches hold exactly the source's examples, in order, from any thread", "[data][pipeline]") {
  const Dataset d = counting_dataset(200);
  // Chunks of odd sizes, an empty one among them, in a scrambled order of indices.
  std::vector<IndexChunk> chunks{{0, range(150, 157)}, {1, {}}, {2, range(0, 30)}, {3, range(100, 113)},
                                 {4, range(30, 80)}};
  std::vector<int32_t> expected;
  for (const auto& c : chunks) expected.insert(expected.end(), c.indices.begin(), c.indices.end());  // 100

  for (PartialBatch partial : {PartialBatch::drop, PartialBatch::keep}) {
    InputPipelineOptions o;
    o.batch_size = 8;
    o.threads = 3;
    o.depth = 2;
    o.partial = partial;
    auto p = start(d, std::make_unique<VectorSource>(chunks), o);
    std::vector<int32_t> seen;
    std::map<int64_t, int64_t> progress;  // chunk -> done, as the batches report it
    int64_t batches = 0;
    while (true) {
      auto b = p->next();
      REQUIRE(b.ok());
      if (!b->has_value()) break;
      const Batch& batch = **b;
      CHECK(batch.sequence == batches++);
      REQUIRE(batch.inputs.size() == static_cast<size_t>(batch.size * 3));
      for (int64_t r = 0; r < batch.size; ++r) {
        const int32_t idx = batch.indices[static_cast<size_t>(r)];
        CHECK(batch.inputs[static_cast<size_t>(r * 3 + 2)] == float(idx) + 0.5f);
        CHECK(batch.labels[static_cast<size_t>(r)] == idx % 10);
      }
      seen.insert(seen.end(), batch.indices.begin(), batch.indices.end());
      for (const auto& pr : batch.progress) {
        CHECK(pr.done >= progress[pr.tag]);
        progress[pr.tag] = pr.done;
      }
    }
    CHECK(p->next()->has_value() == false);  // the end stays the end
    if (partial == PartialBatch::keep) {
      CHECK(batches == 13);  // 12 full batches and one of 4
      CHECK(seen == expected);
      CHECK(p->dropped().empty());
    } else {
      CHECK(batches == 12);
      CHECK(seen == std::vector<int32_t>(expected.begin(), expected.begin() + 96));
      REQUIRE(p->dropped().size() == 1);
      CHECK(p->dropped()[0].tag == 4);
      CHECK(p->dropped()[0].done == 50);
    }
    // Every chunk but the one in the dropped tail reached its size, the empty one included.
    CHECK(progress[0] == 7);
    CHECK(progress.count(1) == 1);
    CHECK(progress[3] == 13);
    CHECK(progress[4] == (partial == PartialBatch::keep ? 50 : 46));
    CHECK(p->stats().batches == batches);
  }
}

TEST_CASE("input pipeline: batches before hollow_before carry their indices and progress but no rows, and the rest "
          "are as without it", "[data][pipeline]") {
  const Dataset d = counting_dataset(100);
  const std::vector<IndexChunk> chunks{{0, range(40, 60)}, {1, range(0, 30)}, {2, range(70, 90)}};  // 70
  auto run = [&](int64_t hollow, std::atomic<int>* transformed) {
    InputPipelineOptions o;
    o.batch_size = 8;
    o.threads = 3;
    o.hollow_before = hollow;
    o.transform = [transformed](Batch& b) -> Status {
      *transformed += static_cast<int>(b.size);
      return {};
    };
    auto p = start(d, std::make_unique<VectorSource>(chunks), o);
    std::vector<Batch> out;
    for (auto b = p->next(); b.ok() && b->has_value(); b = p->next()) out.push_back(std::move(**b));
    return out;
  };
  std::atomic<int> whole{0}, hollowed{0};
  const std::vector<Batch> plain = run(0, &whole), passed = run(4, &hollowed);
  REQUIRE(plain.size() == 8u);  // 70 examples in batches of 8, the last 6 dropped
  REQUIRE(passed.size() == plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    INFO("batch " << i);
    CHECK(passed[i].size == plain[i].size);
    CHECK(passed[i].indices == plain[i].indices);
    CHECK(passed[i].progress.size() == plain[i].progress.size());
    CHECK(passed[i].progress.back().done == plain[i].progress.back().done);
    CHECK(passed[i].inputs.empty() == (i < 4));
    if (i >= 4) CHECK(passed[i].inputs == plain[i].inputs);
  }
  CHECK(whole == 64);
  CHECK(hollowed == 32);  // the 4 batches after the hollow 4
}

TEST_CASE("input pipeline: a consumer that stops early, or never starts, does not hang the destructor", "[data][pipeline]") {
  const Dataset d = counting_dataset(1000);
  InputPipelineOptions o;
  o.batch_size = 10;
  o.threads = 4;
  o.depth = 3;
  const auto t0 = std::chrono::steady_clock::now();
  {
    auto p = start(d, std::make_unique<SlowSource>(100, 10, 0ms), o);
    REQUIRE(p->next()->has_value());
    REQUIRE(p->next()->has_value());
  }
  { auto p = start(d, std::make_unique<SlowSource>(100, 10, 1ms), o); }
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
}

TEST_CASE("input pipeline: a source error reaches the consumer after the batches before it", "[data][pipeline]") {
  const Dataset d = counting_dataset(100);
  InputPipelineOptions o;
  o.batch_size = 5;
  o.threads = 2;
  auto p = start(d, std::make_unique<SlowSource>(3, 5, 0ms, /*fail=*/true), o);
  for (int i = 0; i < 3; ++i) {
    auto b = p->next();
    REQUIRE(b.ok());
    REQUIRE(b->has_value());
    CHECK((*b)->indices.front() == 5 * i);
  }
  auto err = p->next();
  CHECK(err.status().code() == Code::unavailable);
  CHECK_THAT(err.status().message(), Catch::Contains("the shard server went away"));
  CHECK_THAT(err.status().message(), Catch::Contains("batch 3"));
  CHECK(p->next().status().code() == Code::unavailable);  // and again
}

TEST_CASE("input pipeline: a transform error and an index outside the dataset end the stream", "[data][pipeline]") {
  const Dataset d = counting_dataset(100);
  InputPipelineOptions o;
  o.batch_size = 4;
  o.transform = [](Batch& b) -> Status {
    if (b.sequence == 2) return numeric_error("test transform: NaN pixel");
    for (float& x : b.inputs) x *= 2;
    return {};
  };
  auto p = start(d, std::make_unique<SlowSource>(10, 4, 0ms), o);
  auto b0 = p->next();
  REQUIRE(b0->has_value());
  CHECK((*b0)->inputs[3] == 2.0f);  // example 1's first pixel, doubled
  REQUIRE(p->next()->has_value());
  Status st = p->next().status();
  CHECK(st.code() == Code::numeric_error);
  CHECK_THAT(st.message(), Catch::Contains("transform of batch 2"));

  InputPipelineOptions four;
  four.batch_size = 4;
  auto bad = start(d, std::make_unique<VectorSource>(std::vector<IndexChunk>{{0, {1, 2, 100, 3}}}), four);
  st = bad->next().status();
  CHECK(st.code() == Code::invalid_argument);
  CHECK_THAT(st.message(), Catch::Contains("example 100 of a dataset of 100"));

  CHECK(InputPipeline::start(d, std::make_unique<VectorSource>(std::vector<IndexChunk>{}), [] {
          InputPipelineOptions bad_o;
          bad_o.depth = 0;
          return bad_o;
        }()).status().code() == Code::invalid_argument);
}

TEST_CASE("input pipeline: a consumer faster than a slow source waits, and the wait is measured", "[data][pipeline]") {
  const Dataset d = counting_dataset(100);
  InputPipelineOptions o;
  o.batch_size = 5;
  auto p = start(d, std::make_unique<SlowSource>(5, 5, 20ms), o);
  int batches = 0;
  while (p->next()->has_value()) ++batches;
  CHECK(batches == 5);
  const InputPipelineStats s = p->stats();
  CHECK(s.waits >= 4);
  CHECK(s.wait_ms > 50);  // about 5 x 20 ms
  CHECK(s.examples == 25);
  CHECK(s.examples_per_s() > 0);

  // A source slower than the deadline is a timeout naming the batch.
  InputPipelineOptions fast = o;
  fast.timeout = 30ms;
  auto stuck = start(d, std::make_unique<SlowSource>(1, 5, 300ms), fast);
  Status st = stuck->next().status();
  CHECK(st.code() == Code::timeout);
  CHECK_THAT(st.message(), Catch::Contains("batch 0 not ready within 30 ms"));

  // And the metric goes to the GCS stream.
  gcs::InMemoryStore store;
  const JobId job = JobId::random();
  const WorkerId worker = WorkerId::random();
  REQUIRE(record_data_wait(store, job, worker, s).ok());
  auto metrics = gcs::recent_metrics(store, 10);
  REQUIRE(metrics.ok());
  REQUIRE(metrics->size() == 2);
  CHECK((*metrics)[0].name == "job/" + job.hex() + "/worker/" + worker.hex() + "/data_wait_ms");
  CHECK((*metrics)[0].value == s.wait_ms);
  CHECK((*metrics)[1].name == worker_metric_name(job, worker, "data_examples_per_s"));
}

TEST_CASE("data path: two workers claim, batch and complete every shard of an epoch, each example once", "[data][pipeline][ledger]") {
  const Dataset d = counting_dataset(1000);
  gcs::InMemoryStore store;
  const JobId job = JobId::random();
  ShardPlanOptions po;
  po.shards = 12;
  po.policy = ShardPolicy::stratified;
  po.seed = 3;
  auto plan = plan_epoch(d.count, d.labels, 10, po, 1);
  REQUIRE(plan.ok());
  ShardLedgerOptions lo;
  lo.shards = 12;
  ShardLedger supervisor(store, job, lo);
  REQUIRE(supervisor.create_epoch(1, plan->shard_sizes()).ok());

  std::mutex mu;
  std::multiset<int32_t> trained;
  std::vector<Status> results(2);
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&, w] {
      ShardLedger ledger(store, job, lo);
      const WorkerId me = WorkerId::random();
      InputPipelineOptions o;
      o.batch_size = 32;
      o.partial = PartialBatch::drop;
      auto p = InputPipeline::start(d, std::make_unique<ShardSource>(ledger, *plan, me), o);
      if (!p.ok()) {
        results[static_cast<size_t>(w)] = p.status();
        return;
      }
      ShardProgress progress(ledger, 1, me, 2);
      while (true) {
        auto b = (*p)->next();
        if (!b.ok()) {
          results[static_cast<size_t>(w)] = b.status();
          return;
        }
        if (!b->has_value()) break;
        {
          std::lock_guard<std::mutex> lock(mu);
          trained.insert((*b)->indices.begin(), (*b)->indices.end());
        }
        Status st = progress.on_batch(**b);
        if (!st.ok()) {
          results[static_cast<size_t>(w)] = st;
          return;
        }
      }
      results[static_cast<size_t>(w)] = progress.on_end((*p)->dropped());
    });
  }
  for (auto& t : workers) t.join();
  for (const Status& st : results) CHECK(st.ok());
  CHECK(*supervisor.epoch_done(1));
  // Each worker drops at most one partial batch; no example is trained twice.
  CHECK(trained.size() > 1000 - 2 * 32);
  CHECK(std::set<int32_t>(trained.begin(), trained.end()).size() == trained.size());
}

}  // namespace troupe::data
