// The input pipeline of a worker: batches of the in-memory dataset (Fashion-MNIST is decoded once,
// when it loads), gathered ahead of the training loop on K background threads into a bounded queue,
// so that a step finds its batch ready instead of waiting for it.
//
//   IndexSource --(chunks of example indices, in order)--> K producers: gather rows, transform
//        --> reorder buffer (at most `depth` batches built or waiting) --> next(): batch 0, 1, 2 ...
//
// Batches come out in source order whatever thread built them: batch k holds examples
// [k * b, (k+1) * b) of the concatenated chunks. The source is called by one producer at a time,
// in order; producers gather rows concurrently. The time next() spends waiting is the worker's
// data-wait metric (stats(); record_data_wait in data/feed/data_metrics.h sends it to the GCS).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/status.h"
#include "data/readers/fashion_mnist.h"

namespace troupe::data {

// A run of example indices to train in this order, and a tag the pipeline hands back in
// Batch::progress (the shard number, for ShardSource). The pipeline starts at indices[start] (a
// shard resumed where its applied examples end); the ones before count as done already.
struct IndexChunk {
  int64_t tag = -1;
  std::vector<int32_t> indices;
  int64_t start = 0;
};

// Where the indices come from: the shards a worker claims (data/shards/shard_source.h), or a
// fixed list (VectorSource). Called from one pipeline thread at a time, never concurrently.
class IndexSource {
 public:
  virtual ~IndexSource() = default;
  // The next chunk; nullopt when there are no more. An error ends the stream: the consumer gets
  // it after the batches before it. Must return within a deadline of its own: the pipeline's
  // destructor waits for a call in progress.
  virtual Expected<std::optional<IndexChunk>> next() = 0;
};

// The chunks given, then the end.
class VectorSource final : public IndexSource {
 public:
  explicit VectorSource(std::vector<IndexChunk> chunks) : chunks_(std::move(chunks)) {}
  Expected<std::optional<IndexChunk>> next() override;

 private:
  std::vector<IndexChunk> chunks_;
  size_t next_ = 0;
};

// After a batch (or the dropped tail), `done` of the `size` examples of chunk `tag` have been
// delivered. done == size: the chunk is finished. This batch took the chunk's examples
// [first, done).
struct ChunkProgress {
  int64_t tag = -1;
  int64_t done = 0;
  int64_t size = 0;
  int64_t first = 0;
};

struct Batch {
  int64_t sequence = 0;                // 0, 1, 2 ... in source order
  int64_t size = 0;                    // examples (rows)
  std::vector<float> inputs;           // [size, features] row-major, contiguous
  std::vector<int32_t> labels;         // [size, target_width] when the dataset classifies
  std::vector<float> targets;          // [size, target_width] when it holds values
  std::vector<int32_t> indices;        // the dataset index of every row
  std::vector<ChunkProgress> progress; // every chunk this batch took examples from, in order
};

// The last batch of the stream when fewer than batch_size examples are left.
enum class PartialBatch {
  drop,  // never delivered (like `troupe train`): its chunks come back from dropped()
  keep,  // delivered with fewer rows
};

struct InputPipelineOptions {
  int64_t batch_size = 128;
  int threads = 2;   // K producer threads, >= 1
  int depth = 4;     // batches built ahead at most (being built or waiting), >= 1
  PartialBatch partial = PartialBatch::drop;
  std::chrono::milliseconds timeout{30000};  // the most one next() waits for a batch
  // Optional: runs on the producer thread after the rows are gathered (augmentation, decoding
  // more, normalisation); an error ends the stream like a source error.
  std::function<Status(Batch&)> transform;
  // Batches of sequence below this are hollow: their indices and progress as always, size the rows
  // they would hold, but no rows gathered and no transform run (a resumed loop passes over the
  // steps done before it started: nothing read for them).
  int64_t hollow_before = 0;
};

struct InputPipelineStats {
  double wait_ms = 0;       // total time the consumer spent waiting in next()
  int64_t waits = 0;        // calls of next() that found no batch ready
  int64_t batches = 0;      // batches built (delivered or ready)
  int64_t examples = 0;     // examples in those batches
  double seconds = 0;       // since start
  double examples_per_s() const { return seconds > 0 ? static_cast<double>(examples) / seconds : 0; }
};

class InputPipeline {
 public:
  // Starts the producers. `dataset` must outlive the pipeline. invalid_argument for a batch size,
  // thread count or depth below 1.
  static Expected<std::unique_ptr<InputPipeline>> start(const Dataset& dataset, std::unique_ptr<IndexSource> source,
                                                        InputPipelineOptions options);
  // Stops the producers and joins them: never hangs on a consumer that stopped early, only waits
  // for a source call in progress.
  ~InputPipeline();
  InputPipeline(const InputPipeline&) = delete;
  InputPipeline& operator=(const InputPipeline&) = delete;

  // The next batch in order; nullopt after the last one. The error of the source or transform once
  // the batches before it were delivered (and again on every later call); timeout when no batch
  // came within options.timeout, naming the batch waited for.
  Expected<std::optional<Batch>> next();

  // After next() returned nullopt under PartialBatch::drop: the progress of the chunks the dropped
  // tail took examples from (done counts the dropped examples as delivered, so done == size).
  std::vector<ChunkProgress> dropped() const;

  InputPipelineStats stats() const;

 private:
  InputPipeline(const Dataset& dataset, std::unique_ptr<IndexSource> source, InputPipelineOptions options);
  void produce();
  // Fills `batch` (indices, progress) from the source for sequence `seq`; false at the end.
  bool take_indices(int64_t seq, Batch* batch);
  void fail(int64_t seq, Status status);

  const Dataset& dataset_;
  const InputPipelineOptions options_;
  const std::chrono::steady_clock::time_point started_;

  // Source side (source_mu_): the order of batches.
  std::mutex source_mu_;
  std::unique_ptr<IndexSource> source_;
  IndexChunk chunk_;          // the chunk being cut into batches
  size_t chunk_pos_ = 0;
  int64_t next_seq_ = 0;      // the sequence number of the next batch to cut
  bool source_finished_ = false;

  // Queue side (mu_).
  mutable std::mutex mu_;
  std::condition_variable space_;  // a slot was freed, or stop
  std::condition_variable ready_;  // a batch, the end or an error arrived
  bool stop_ = false;
  int in_flight_ = 0;              // batches being built or waiting, <= depth
  std::map<int64_t, Batch> built_; // by sequence
  int64_t consumed_ = 0;           // the sequence next() delivers next
  int64_t end_seq_ = -1;           // batches in the stream, once known
  int64_t error_seq_ = -1;         // the first failed sequence, once known
  Status error_;
  std::vector<ChunkProgress> dropped_;
  InputPipelineStats stats_;

  std::vector<std::thread> threads_;
};

}  // namespace troupe::data
