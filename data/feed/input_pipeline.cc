#include "data/feed/input_pipeline.h"

#include <algorithm>
#include <cstring>

namespace troupe::data {

using Clock = std::chrono::steady_clock;

Expected<std::optional<IndexChunk>> VectorSource::next() {
  if (next_ == chunks_.size()) return std::optional<IndexChunk>{};
  return std::optional<IndexChunk>(std::move(chunks_[next_++]));
}

Expected<std::unique_ptr<InputPipeline>> InputPipeline::start(const Dataset& dataset,
                                                              std::unique_ptr<IndexSource> source,
                                                              InputPipelineOptions options) {
  if (options.batch_size < 1 || options.threads < 1 || options.depth < 1) {
    return invalid_argument("input pipeline: batch size " + std::to_string(options.batch_size) + ", " +
                            std::to_string(options.threads) + " threads and depth " + std::to_string(options.depth) +
                            "; each must be >= 1");
  }
  if (!source) return invalid_argument("input pipeline: no index source");
  std::unique_ptr<InputPipeline> p(new InputPipeline(dataset, std::move(source), std::move(options)));
  for (int t = 0; t < p->options_.threads; ++t) p->threads_.emplace_back([raw = p.get()] { raw->produce(); });
  return p;
}

InputPipeline::InputPipeline(const Dataset& dataset, std::unique_ptr<IndexSource> source,
                             InputPipelineOptions options)
    : dataset_(dataset), options_(std::move(options)), started_(Clock::now()), source_(std::move(source)) {}

InputPipeline::~InputPipeline() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  space_.notify_all();
  for (auto& t : threads_) t.join();
}

void InputPipeline::fail(int64_t seq, Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_seq_ < 0 || seq < error_seq_) {
    error_seq_ = seq;
    error_ = std::move(status);
  }
  ready_.notify_all();
}

// Called with source_mu_ held. Cuts the next batch_size indices off the chunks, asking the source
// for more as chunks run out. Decides the end of the stream and what happens to a partial batch.
bool InputPipeline::take_indices(int64_t seq, Batch* b) {
  const size_t want = static_cast<size_t>(options_.batch_size);
  while (b->indices.size() < want) {
    if (chunk_pos_ == chunk_.indices.size()) {
      auto next = source_->next();
      if (!next.ok()) {
        source_finished_ = true;
        fail(seq, next.status().with_context("input pipeline: index source, batch " + std::to_string(seq)));
        return false;
      }
      if (!next->has_value()) {
        source_finished_ = true;
        break;
      }
      chunk_ = std::move(**next);
      chunk_pos_ = static_cast<size_t>(std::clamp<int64_t>(chunk_.start, 0, static_cast<int64_t>(chunk_.indices.size())));
      if (chunk_pos_ == chunk_.indices.size()) {  // nothing left (empty, or resumed at its end): finished now
        const auto size = static_cast<int64_t>(chunk_.indices.size());
        b->progress.push_back({chunk_.tag, size, size, size});
        continue;
      }
    }
    const int64_t first = static_cast<int64_t>(chunk_pos_);
    const size_t take = std::min(want - b->indices.size(), chunk_.indices.size() - chunk_pos_);
    b->indices.insert(b->indices.end(), chunk_.indices.begin() + static_cast<std::ptrdiff_t>(chunk_pos_),
                      chunk_.indices.begin() + static_cast<std::ptrdiff_t>(chunk_pos_ + take));
    chunk_pos_ += take;
    b->progress.push_back(
        {chunk_.tag, static_cast<int64_t>(chunk_pos_), static_cast<int64_t>(chunk_.indices.size()), first});
  }
  if (b->indices.size() == want) return true;
  // The source ended before this batch was full.
  const bool deliver = !b->indices.empty() && options_.partial == PartialBatch::keep;
  std::lock_guard<std::mutex> lock(mu_);
  end_seq_ = deliver ? seq + 1 : seq;
  if (!deliver) dropped_ = b->progress;
  ready_.notify_all();
  return deliver;
}

void InputPipeline::produce() {
  const int64_t features = dataset_.features();
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      space_.wait(lock, [&] { return stop_ || in_flight_ < options_.depth; });
      if (stop_) return;
      ++in_flight_;
    }
    Batch b;
    bool got = false;
    {
      std::lock_guard<std::mutex> lock(source_mu_);
      if (!source_finished_) {
        b.sequence = next_seq_++;
        got = take_indices(b.sequence, &b);
      }
    }
    Status st;
    if (got && b.sequence < options_.hollow_before) {
      b.size = static_cast<int64_t>(b.indices.size());  // passed over: no rows
    } else if (got) {
      // Gather the rows: the work the background threads take off the training loop.
      b.size = static_cast<int64_t>(b.indices.size());
      const int64_t w = dataset_.target_width;
      b.inputs.resize(static_cast<size_t>(b.size * features));
      if (dataset_.classifies()) b.labels.resize(static_cast<size_t>(b.size * w));
      else b.targets.resize(static_cast<size_t>(b.size * w));
      for (int64_t r = 0; r < b.size; ++r) {
        const int64_t idx = b.indices[static_cast<size_t>(r)];
        if (idx < 0 || idx >= dataset_.count) {
          st = invalid_argument("input pipeline: batch " + std::to_string(b.sequence) + " asks for example " +
                                std::to_string(idx) + " of a dataset of " + std::to_string(dataset_.count) +
                                " (a plan made for another dataset?)");
          break;
        }
        copy_example(dataset_, idx, b.inputs.data() + r * features, b.labels.data() + r * w, b.targets.data() + r * w);
      }
      if (st.ok() && options_.transform) {
        st = options_.transform(b);
        if (!st.ok()) st = st.with_context("input pipeline: transform of batch " + std::to_string(b.sequence));
      }
      if (!st.ok()) fail(b.sequence, st);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!got || !st.ok()) {
      --in_flight_;
      space_.notify_all();
      if (!got) return;  // the source is finished (or failed): nothing more to cut
      continue;
    }
    ++stats_.batches;
    stats_.examples += b.size;
    built_.emplace(b.sequence, std::move(b));
    ready_.notify_all();
  }
}

Expected<std::optional<Batch>> InputPipeline::next() {
  std::unique_lock<std::mutex> lock(mu_);
  auto settled = [&] {
    return built_.count(consumed_) > 0 || (error_seq_ >= 0 && consumed_ >= error_seq_) ||
           (end_seq_ >= 0 && consumed_ >= end_seq_);
  };
  if (!settled()) {
    ++stats_.waits;
    const auto t0 = Clock::now();
    const bool arrived = ready_.wait_for(lock, options_.timeout, settled);
    stats_.wait_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (!arrived) {
      return Status(Code::timeout, "input pipeline: batch " + std::to_string(consumed_) + " not ready within " +
                                       std::to_string(options_.timeout.count()) + " ms (" +
                                       std::to_string(built_.size()) + " later batches built, " +
                                       std::to_string(options_.threads) +
                                       " producer threads): the index source or the transform is stuck");
    }
  }
  auto it = built_.find(consumed_);
  if (it != built_.end()) {
    Batch b = std::move(it->second);
    built_.erase(it);
    ++consumed_;
    --in_flight_;
    space_.notify_all();
    return std::optional<Batch>(std::move(b));
  }
  if (error_seq_ >= 0 && consumed_ >= error_seq_) return error_;
  return std::optional<Batch>{};
}

std::vector<ChunkProgress> InputPipeline::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;  // the tail ran to the end of every chunk it touched: done == size in each
}

InputPipelineStats InputPipeline::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  InputPipelineStats s = stats_;
  s.seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  return s;
}

}  // namespace troupe::data
