#include "actors/actor_state_writer.h"

#include <spdlog/spdlog.h>

#include "gcs/events.h"
#include "gcs/tables.h"

namespace troupe::actors {
namespace {
constexpr size_t kMaxQueued = 100000;
constexpr size_t kBatch = 256;
}  // namespace

ActorStateWriter::ActorStateWriter() : thread_([this] { run(); }) {}

ActorStateWriter::~ActorStateWriter() {
  flush(std::chrono::milliseconds(2000));
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ActorStateWriter::report(const ActorStateChange& change) {
  // ALIVE after a spawn is recorded by the head, in one batch for all the actors it started; the
  // node records what only it sees: exits, crashes and stops.
  if (change.state == gcs::ActorState::alive) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= kMaxQueued) {
      spdlog::warn("actor state queue full ({} reports): dropping the report for actor {}", queue_.size(),
                   queue_.front().actor_id);
      queue_.pop_front();
    }
    queue_.push_back(change);
  }
  cv_.notify_one();
}

void ActorStateWriter::attach(gcs::Store* store) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    store_ = store;
  }
  cv_.notify_one();
}

bool ActorStateWriter::flush(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return drained_.wait_for(lock, timeout, [this] { return queue_.empty() && !writing_; });
}

Status ActorStateWriter::write(const ActorStateChange& c) {
  auto id = ActorId::from_hex(c.actor_id);
  if (!id.ok()) return id.status();
  gcs::Table<gcs::ActorRecord> actors(*store_);
  // The head wrote the record (PENDING, with its demand) before asking for the spawn; keep what it
  // knows and add what the node knows.
  gcs::ActorRecord r;
  auto existing = actors.get(c.actor_id);
  if (existing.ok()) {
    r = *existing;
  } else if (existing.status().code() != Code::not_found) {
    return existing.status();
  }
  r.id = *id;
  if (r.type_name.empty()) r.type_name = c.type_name;
  if (r.name.empty()) r.name = c.actor_name;
  if (auto node = NodeId::from_hex(c.node_id); node.ok()) r.node = *node;
  r.state = c.state;
  // The devices the node gave it (the head wrote them with ALIVE too): kept on the DEAD record.
  if (!c.gpu_ids.empty()) r.gpu_ids.assign(c.gpu_ids.begin(), c.gpu_ids.end());
  r.pending_reason.clear();
  if (gcs::actor_ended(c.state)) r.death_reason = c.reason;
  r.updated_ms = c.at_ms ? c.at_ms : gcs::now_ms();
  TROUPE_RETURN_IF_ERROR(actors.put(r));
  gcs::Event e;
  e.kind = c.state == gcs::ActorState::alive      ? "actor_started"
           : c.state == gcs::ActorState::finished ? "actor_finished"
           : c.crashed                            ? "actor_crashed"
                                                  : "actor_died";
  e.subject = c.actor_id;
  e.message = c.type_name + " actor " + c.actor_id.substr(0, 8) + " on node " + c.node_id.substr(0, 8) + ": " +
              c.reason;
  return gcs::record_event(*store_, e);
}

void ActorStateWriter::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_ || (store_ && !queue_.empty()); });
    if (stop_) return;
    if (!store_ || queue_.empty()) continue;
    std::vector<ActorStateChange> batch;
    while (!queue_.empty() && batch.size() < kBatch) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    writing_ = true;
    lock.unlock();
    size_t done = 0;
    Status st;
    for (; done < batch.size(); ++done) {
      st = write(batch[done]);
      if (!st.ok()) break;
    }
    lock.lock();
    writing_ = false;
    if (done < batch.size()) {
      // Put the unwritten reports back in front, in order, and wait a little before retrying.
      spdlog::warn("writing actor states to the GCS failed ({}); {} report(s) will be retried", st.to_string(),
                   batch.size() - done);
      queue_.insert(queue_.begin(), batch.begin() + static_cast<std::ptrdiff_t>(done), batch.end());
      cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; });
    }
    if (queue_.empty()) drained_.notify_all();
  }
}

}  // namespace troupe::actors
