#include "trainers/job/live_recovery.h"

#include <algorithm>
#include <thread>

#include <spdlog/spdlog.h>

#include "collectives/group_rendezvous.h"
#include "gcs/data_accounting.h"
#include "gcs/events.h"
#include "gcs/job_recovery.h"
#include "trainers/job/sync_recovery.h"

namespace troupe::job {
namespace {

using Clock = std::chrono::steady_clock;

// Integers travel as f32 pairs: [v >> 20, v & 0xfffff], each part exact (v < 2^44).
void put_int(float* at, int64_t v) {
  at[0] = static_cast<float>(v >> 20);
  at[1] = static_cast<float>(v & 0xfffff);
}
int64_t get_int(const float* at) { return (static_cast<int64_t>(at[0]) << 20) | static_cast<int64_t>(at[1]); }

// The state's shape and position, broadcast before its numbers.
constexpr size_t kNameChars = 8;
struct Header {
  enum : size_t { step = 0, epoch = 2, epoch_step = 4, opt_steps = 6, vectors = 8, params = 10, length = 12,
                  name = 14, size = 14 + kNameChars };
};

void write_header(const checkpoint::TrainingState& s, float* h) {
  put_int(h + Header::step, s.step);
  put_int(h + Header::epoch, s.epoch);
  put_int(h + Header::epoch_step, s.epoch_step);
  put_int(h + Header::opt_steps, s.optimizer.steps);
  put_int(h + Header::vectors, static_cast<int64_t>(s.optimizer.vectors.size()));
  put_int(h + Header::params, static_cast<int64_t>(s.params.size()));
  put_int(h + Header::length, s.optimizer.vectors.empty() ? 0 : static_cast<int64_t>(s.optimizer.vectors[0].size()));
  for (size_t i = 0; i < kNameChars; ++i)
    h[Header::name + i] = i < s.optimizer.name.size() ? static_cast<float>(s.optimizer.name[i]) : 0.0f;
}

void read_header(const float* h, checkpoint::TrainingState* s) {
  s->step = get_int(h + Header::step);
  s->epoch = get_int(h + Header::epoch);
  s->epoch_step = get_int(h + Header::epoch_step);
  s->optimizer.steps = get_int(h + Header::opt_steps);
  s->optimizer.name.clear();
  for (size_t i = 0; i < kNameChars && h[Header::name + i] != 0.0f; ++i)
    s->optimizer.name += static_cast<char>(h[Header::name + i]);
  s->params.resize(static_cast<size_t>(get_int(h + Header::params)));
  s->optimizer.vectors.assign(static_cast<size_t>(get_int(h + Header::vectors)),
                              std::vector<float>(static_cast<size_t>(get_int(h + Header::length))));
  s->extras.clear();
}

// The lowest rank holding the newest step, and how many ranks do not hold it; -1 when none holds one.
int choose_source(const std::vector<float>& held, int* receivers, int64_t* newest) {
  *newest = -1;
  int source = -1;
  const int world = static_cast<int>(held.size() / 2);
  for (int r = 0; r < world; ++r) {
    if (held[2 * r] < 0) continue;
    const int64_t step = get_int(&held[2 * r]);
    if (step > *newest) {
      *newest = step;
      source = r;
    }
  }
  *receivers = 0;
  for (int r = 0; r < world; ++r)
    if (held[2 * r] < 0 || get_int(&held[2 * r]) != *newest) ++*receivers;
  return source;
}

}  // namespace

std::string live_source(const LiveStart& live) {
  if (!live.from.empty()) return live.from;
  if (live.source < 0 && live.from_world > 0)
    return "the buddy mirrors of step " + std::to_string(live.state.step) + " (the shards of " +
           std::to_string(live.from_world) + " ranks, re-cut)";
  if (live.source < 0) return "the buddy mirrors of step " + std::to_string(live.state.step);
  if (live.receivers == 0) return "its workers' own memory (step " + std::to_string(live.state.step) + ")";
  return "the memory of rank " + std::to_string(live.source) + " (step " + std::to_string(live.state.step) + ")";
}

Expected<LiveStart> agree_mirror_step(collectives::Communicator& comm, const MirrorHold* mine,
                                      std::chrono::milliseconds timeout) {
  collectives::CollectiveOptions co;
  co.timeout = timeout;
  const MirrorReport own = mine ? report_of(*mine) : MirrorReport{};
  // older, newest (f32 pairs), whether each was mirrored, the distance, the rank and size of the
  // group that took the rounds
  constexpr size_t kReport = 9;
  float report[kReport];
  put_int(report, own.older);
  put_int(report + 2, own.newest);
  report[4] = own.older_mirrored ? 1.0f : 0.0f;
  report[5] = own.newest_mirrored ? 1.0f : 0.0f;
  report[6] = static_cast<float>(own.distance);
  report[7] = static_cast<float>(own.rank);
  report[8] = static_cast<float>(own.world);
  std::vector<float> all(kReport * static_cast<size_t>(comm.size()));
  TROUPE_RETURN_IF_ERROR(
      comm.allgather(report, all.data(), kReport, DType::f32, co).with_context("telling the mirrored rounds held"));
  std::vector<MirrorReport> ranks(static_cast<size_t>(comm.size()));
  for (size_t r = 0; r < ranks.size(); ++r) {
    const float* at = &all[kReport * r];
    ranks[r] = MirrorReport{get_int(at),           get_int(at + 2),          at[4] != 0.0f,
                            at[5] != 0.0f,         static_cast<int>(at[6]), static_cast<int>(at[7]),
                            static_cast<int>(at[8])};
  }
  LiveStart out;
  const MirrorChoice choice = choose_mirror_round(ranks);
  const int64_t step = choice.step;
  if (step < 0) {
    bool any = false;
    for (const MirrorReport& r : ranks) any = any || r.older >= 0 || r.newest >= 0;
    if (any && comm.rank() == 0)
      spdlog::warn("no round of the buddy mirrors holds every shard of the state (a shard's owner and its buddy "
                   "both lost?): going on from the checkpoint");
    return out;
  }
  out.live = true;
  out.state.step = step;
  if (!choice.same_layout) out.from_world = choice.world;
  for (const MirrorReport& r : ranks) {
    if (!r.holds(step)) ++out.receivers;
    if (r.holds(step)) out.distance = r.distance;  // one group's rounds: one distance
  }
  return out;
}

Expected<int> agree_buddy_distance(collectives::Communicator& comm, const NodeId& node,
                                   std::chrono::milliseconds timeout) {
  collectives::CollectiveOptions co;
  co.timeout = timeout;
  float mine[2];
  put_int(mine, static_cast<int64_t>(std::hash<std::string>{}(node.hex()) & ((int64_t{1} << 40) - 1)));
  std::vector<float> all(2 * static_cast<size_t>(comm.size()));
  TROUPE_RETURN_IF_ERROR(comm.allgather(mine, all.data(), 2, DType::f32, co).with_context("telling the ranks' nodes"));
  std::vector<int64_t> nodes(static_cast<size_t>(comm.size()));
  for (size_t r = 0; r < nodes.size(); ++r) nodes[r] = get_int(&all[2 * r]);
  return choose_buddy_distance(nodes);
}

Expected<LiveStart> share_held_state(collectives::Communicator& comm, const HeldState* mine,
                                     std::chrono::milliseconds timeout) {
  collectives::CollectiveOptions co;
  co.timeout = timeout;
  float own[2] = {-1.0f, 0.0f};
  if (mine && mine->held) put_int(own, mine->state.step);
  std::vector<float> held(2 * static_cast<size_t>(comm.size()));
  TROUPE_RETURN_IF_ERROR(comm.allgather(own, held.data(), 2, DType::f32, co).with_context("telling the steps held"));
  LiveStart out;
  int64_t newest = -1;
  out.source = choose_source(held, &out.receivers, &newest);
  if (out.source < 0) return out;  // nobody holds a state: the checkpoint, or the beginning
  out.live = true;
  if (out.receivers == 0) {  // every rank holds that step (an elastic job shrinking): nothing to send
    out.state = mine->state;
    return out;
  }
  const bool source = comm.rank() == out.source;
  if (source) out.state = mine->state;
  float header[Header::size] = {};
  if (source) write_header(out.state, header);
  const std::string sending = "taking the state of step " + std::to_string(newest) + " from rank " +
                              std::to_string(out.source);
  TROUPE_RETURN_IF_ERROR(comm.broadcast(header, Header::size, DType::f32, out.source, co).with_context(sending));
  if (!source) read_header(header, &out.state);
  TROUPE_RETURN_IF_ERROR(
      comm.broadcast(out.state.params.data(), out.state.params.size(), DType::f32, out.source, co).with_context(sending));
  for (std::vector<float>& v : out.state.optimizer.vectors)
    TROUPE_RETURN_IF_ERROR(comm.broadcast(v.data(), v.size(), DType::f32, out.source, co).with_context(sending));
  const size_t floats = out.state.params.size() + out.state.optimizer.vectors.size() *
                        (out.state.optimizer.vectors.empty() ? 0 : out.state.optimizer.vectors[0].size());
  out.bytes = static_cast<int64_t>(floats * sizeof(float));
  return out;
}

Expected<int64_t> await_replacements(gcs::Store& store, const std::string& group, int64_t failed,
                                     std::chrono::milliseconds wait, const std::atomic<bool>& cancel) {
  const auto deadline = Clock::now() + wait;
  for (;;) {
    if (cancel.load()) return unavailable("stopped while waiting for the replacements of group '" + group + "'");
    auto newest = collectives::newest_generation(store, group);
    if (!newest.ok()) return newest.status();
    if (*newest > failed) return *newest;
    if (Clock::now() >= deadline)
      return Status(Code::timeout, "no replacement joined group '" + group + "' after generation " +
                                       std::to_string(failed) + " failed, within " +
                                       std::to_string(wait.count() / 1000) + " s (no room for one? see troupe status)");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

GenerationWatch::GenerationWatch(gcs::Store& store, std::string group, int64_t gen,
                                 collectives::Transport* transport, std::chrono::milliseconds every)
    : GenerationWatch(store, std::move(group), gen, std::vector<collectives::Transport*>{transport}, every) {}

GenerationWatch::GenerationWatch(gcs::Store& store, std::string group, int64_t gen,
                                 std::vector<collectives::Transport*> transports, std::chrono::milliseconds every)
    : store_(store), group_(std::move(group)), gen_(gen), transports_(std::move(transports)), every_(every) {
  thread_ = std::thread([this] { run(); });
}

GenerationWatch::~GenerationWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void GenerationWatch::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, every_, [this] { return stop_; })) {
    lock.unlock();
    auto newest = collectives::newest_generation(store_, group_);  // a GCS away: try again later
    lock.lock();
    if (!newest.ok() || *newest <= gen_) continue;
    spdlog::warn("group '{}': generation {} registered while this worker trains at {}: a peer was replaced; "
                 "leaving the step", group_, *newest, gen_);
    const Status why = unavailable("group '" + group_ + "' generation " + std::to_string(gen_) +
                                   " was replaced by generation " + std::to_string(*newest) + " (a peer was lost)");
    for (collectives::Transport* t : transports_)
      if (t) t->interrupt(why);
    return;
  }
}

Status rewind_live(gcs::Store& store, const JobId& job, int shards, int64_t steps_per_epoch, int64_t generation,
                   const LiveStart& live) {
  const int64_t step = live.state.step;
  StartPoint at;
  at.state = checkpoint::TrainingState{};
  at.state->step = step;
  at.own = true;
  at.source = live_source(live);
  TROUPE_RETURN_IF_ERROR(rewind_to(store, job, shards, steps_per_epoch, at));
  // The steps up to `step` are kept: in every replica's memory now. Recorded from the newest range.
  auto ranges = gcs::trained_ranges(store, job);
  if (!ranges.ok()) return ranges.status().with_context("reading the trained ranges");
  int64_t recorded = 0;
  for (const gcs::TrainedRange& r : *ranges) recorded = std::max(recorded, r.global_end_step);
  // (kept by the generation before this one, which trained them)
  TrainedLog kept(store, job, static_cast<int>(std::max<int64_t>(0, generation - 1)), steps_per_epoch, recorded);
  TROUPE_RETURN_IF_ERROR(kept.durable_through(step).with_context("recording the steps kept in memory"));
  // (A mirror's round may be older than the last completed step: the summary counts the steps lost.)
  const bool mirrored = live.source < 0 && live.from.empty();
  // A sync replica's newest step is the job's last completed one; a pipeline's stages may go back a
  // step, or to a mirror round: the steps lost from what the failed attempt's workers said.
  std::string lost = ", no completed step lost";
  if (!live.from.empty()) {
    auto rec = gcs::job_recovery(store, job);
    const int64_t failed = rec.ok() && rec->has_value() ? std::max((*rec)->failed_step, (*rec)->pending_failed_step) : -1;
    lost = failed < 0 ? "" : ", " + std::to_string(std::max<int64_t>(0, failed - step)) + " completed step(s) lost";
  }
  const std::string sent = mirrored && live.from_world > 0 ? "every rank takes its new shard from the old shards' holders"
                           : mirrored ? std::to_string(live.receivers) + " rank(s) take their shard from a buddy"
                           : live.receivers == 0 ? "every rank held that step (nothing sent)" + lost
                                                 : std::to_string(live.bytes) + " bytes of state sent to " +
                                                       std::to_string(live.receivers) + " rank(s)" + lost;
  const std::string message = "job " + job.short_hex() + " goes on live at generation " + std::to_string(generation) +
                              " from " + at.source + ": " + sent;
  spdlog::info("{}", message);
  gcs::Event e;
  e.kind = "job_recovered_live";
  e.subject = job.hex();
  e.message = message;
  Status st = gcs::record_event(store, e);
  if (!st.ok()) spdlog::warn("job {}: recording job_recovered_live: {}", job.short_hex(), st.to_string());
  st = gcs::note_recovery_mode(store, job, static_cast<int>(generation), "live", step, live.source, live.bytes);
  if (!st.ok()) spdlog::warn("job {}: recording the live recovery: {}", job.short_hex(), st.to_string());
  return {};
}

}  // namespace troupe::job
