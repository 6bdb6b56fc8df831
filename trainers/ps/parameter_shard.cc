#include "trainers/ps/parameter_shard.h"

#include <algorithm>
#include <limits>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "kernels/cpu/ops.h"
#include "trainers/optim/grad_clip.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe::ps {

using Clock = std::chrono::steady_clock;

const char* mode_name(PsMode mode) { return mode == PsMode::central ? "central" : "async"; }

bool parse_ps_mode(const std::string& text, PsMode* out) {
  if (text == "async") *out = PsMode::async;
  else if (text == "central") *out = PsMode::central;
  else return false;
  return true;
}

Expected<ShardOptions> shard_options(const TrainOptions& o, PsMode mode, int workers, int64_t staleness,
                                     int64_t steps_per_epoch) {
  TROUPE_RETURN_IF_ERROR(o.validate());
  ShardOptions so;
  so.mode = mode;
  so.workers = workers;
  so.staleness = staleness;
  so.clip_grad_norm = mode == PsMode::central ? o.clip_grad_norm : 0.0f;
  so.optimizer = optimizer_options(o);
  if (!parse_lr_schedule(o.lr_schedule, &so.schedule))
    return invalid_argument("unknown --lr-schedule '" + o.lr_schedule + "'");
  const int64_t steps = o.max_steps > 0 ? std::min<int64_t>(o.max_steps, steps_per_epoch * o.epochs)
                                        : steps_per_epoch * o.epochs;
  so.total_updates = mode == PsMode::async ? steps * workers : steps;
  so.warmup_steps = o.warmup_steps;
  return so;
}

Expected<std::unique_ptr<ParameterShard>> ParameterShard::create(int index, ShardRange range,
                                                                 std::vector<float> initial,
                                                                 const ShardOptions& o) {
  const std::string what = "parameter shard " + std::to_string(index);
  if (o.workers < 1) return invalid_argument(what + ": " + std::to_string(o.workers) + " workers; at least 1");
  if (o.staleness < -1)
    return invalid_argument(what + ": staleness bound " + std::to_string(o.staleness) +
                            "; use -1 (unbounded), 0 (synchronous) or a positive number of steps");
  if (range.size() == 0 || initial.size() != range.size())
    return invalid_argument(what + ": " + std::to_string(initial.size()) + " initial values for a range of " +
                            std::to_string(range.size()));
  if (o.shards < 1 || index < 0 || index >= o.shards || (o.total_floats && o.total_floats < range.end))
    return invalid_argument(what + " of " + std::to_string(o.shards) + " holding floats [" +
                            std::to_string(range.begin) + ", " + std::to_string(range.end) + ") of " +
                            std::to_string(o.total_floats) + ": the index or range is outside the job");
  if (o.clip_grad_norm > 0 && o.mode != PsMode::central)
    return invalid_argument(what + ": --clip-grad-norm on an async shard: async workers clip their own pushes");
  if (o.clip_grad_norm > 0 && o.shards != 1)
    return invalid_argument(what + ": --clip-grad-norm with " + std::to_string(o.shards) + " central parameter "
                            "servers: the norm of the averaged gradient would span them; use one");
  auto opt = make_optimizer(o.optimizer, range.size());
  if (!opt.ok()) return opt.status().with_context(what);
  return std::unique_ptr<ParameterShard>(new ParameterShard(index, range, std::move(initial), o, std::move(*opt)));
}

ParameterShard::ParameterShard(int index, ShardRange range, std::vector<float> initial, const ShardOptions& o,
                               std::unique_ptr<Optimizer> optimizer)
    : index_(index),
      range_(range),
      options_(o),
      params_(std::move(initial)),
      optimizer_(std::move(optimizer)),
      clocks_(static_cast<size_t>(o.workers), 0),
      states_(static_cast<size_t>(o.workers), WorkerState::live),
      sum_(o.mode == PsMode::central ? range.size() : 0),
      applied_(o.workers),
      history_(o.workers) {}

std::string ParameterShard::describe() const {
  std::string mode = mode_name(options_.mode);
  if (options_.mode == PsMode::async)
    mode += options_.staleness < 0 ? ", unbounded staleness" : ", S=" + std::to_string(options_.staleness);
  return "shard " + std::to_string(index_) + " (" + mode + ") floats [" + std::to_string(range_.begin) + ", " +
         std::to_string(range_.end) + ")";
}

Status ParameterShard::check_worker(int worker, const char* what) const {
  if (!shut_down_.empty()) return unavailable(describe() + " is shut down: " + shut_down_);
  if (worker < 0 || worker >= options_.workers)
    return invalid_argument(std::string(what) + " from worker " + std::to_string(worker) + ", but " + describe() +
                            " serves workers 0.." + std::to_string(options_.workers - 1));
  const WorkerState s = states_[static_cast<size_t>(worker)];
  if (s != WorkerState::live)
    return invalid_argument(std::string(what) + " from worker " + std::to_string(worker) + ", which " +
                            (s == WorkerState::finished ? "already finished"
                             : s == WorkerState::removed ? "was removed"
                                                         : "has not connected since the shard was restored") +
                            " (" + describe() + ")");
  return {};
}

std::string ParameterShard::unfinished() const {
  std::string out;
  for (size_t w = 0; w < states_.size(); ++w) {
    if (states_[w] != WorkerState::live && states_[w] != WorkerState::returning) continue;
    out += (out.empty() ? "" : ", ") + std::to_string(w) +
           (states_[w] == WorkerState::returning ? " (not back since the restore)" : "");
  }
  return out;
}

bool ParameterShard::may_pull(int64_t clock) const {
  if (options_.mode == PsMode::central) return version_ >= clock;
  if (options_.staleness < 0) return true;
  for (size_t w = 0; w < clocks_.size(); ++w)
    if (states_[w] == WorkerState::live && clocks_[w] < clock - options_.staleness) return false;
  return true;
}

std::string ParameterShard::waiting_for(int worker, int64_t clock) const {
  std::string text = "worker " + std::to_string(worker) + "'s pull for clock " + std::to_string(clock) + " waited " +
                     std::to_string(options_.wait_timeout.count()) + " ms on " + describe() + ": ";
  if (options_.mode == PsMode::central) {
    std::string missing;
    for (size_t w = 0; w < clocks_.size(); ++w)
      if (states_[w] == WorkerState::live && clocks_[w] <= version_)
        missing += (missing.empty() ? "" : ", ") + std::to_string(w) + " (at clock " + std::to_string(clocks_[w]) + ")";
    return text + "the update of clock " + std::to_string(version_) + " still lacks the push of worker(s) " + missing +
           "; is it alive?";
  }
  size_t slowest = 0;
  for (size_t w = 0; w < clocks_.size(); ++w)
    if (states_[w] == WorkerState::live && (states_[slowest] != WorkerState::live || clocks_[w] < clocks_[slowest]))
      slowest = w;
  return text + "the slowest worker, " + std::to_string(slowest) + ", is at clock " + std::to_string(clocks_[slowest]) +
         ", more than the staleness bound " + std::to_string(options_.staleness) + " behind; is it alive?";
}

Expected<int64_t> ParameterShard::pull(int worker, int64_t clock, float* out) {
  std::unique_lock<std::mutex> lock(mu_);
  TROUPE_RETURN_IF_ERROR(check_worker(worker, "a pull"));
  if (options_.mode == PsMode::async && clock > clocks_[static_cast<size_t>(worker)]) {
    // A worker pulling clock c has pushed c times: pushes this shard never got (it was restored
    // from a checkpoint meanwhile) are not coming, and its own clock must not hold its pull.
    clocks_[static_cast<size_t>(worker)] = clock;
    changed_.notify_all();
  }
  const auto deadline = Clock::now() + options_.wait_timeout;
  if (!changed_.wait_until(lock, deadline, [&] { return !shut_down_.empty() || !lost_.empty() || may_pull(clock); }))
    return Status(Code::timeout, waiting_for(worker, clock));
  if (!shut_down_.empty()) return unavailable(describe() + " shut down while a pull waited: " + shut_down_);
  if (!lost_.empty()) return unavailable(describe() + ": " + lost_);
  std::copy(params_.begin(), params_.end(), out);
  return version_;
}

Expected<int64_t> ParameterShard::pull_final(float* out) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = Clock::now() + options_.wait_timeout;
  if (!changed_.wait_until(lock, deadline, [&] { return !shut_down_.empty() || !lost_.empty() || unfinished().empty(); })) {
    return Status(Code::timeout, "the final parameters of " + describe() + " waited " +
                                     std::to_string(options_.wait_timeout.count()) + " ms for worker(s) " +
                                     unfinished() + " to finish");
  }
  if (!shut_down_.empty()) return unavailable(describe() + " shut down: " + shut_down_);
  if (!lost_.empty()) return unavailable(describe() + ": " + lost_);
  std::copy(params_.begin(), params_.end(), out);
  return version_;
}

void ParameterShard::apply(const float* grads) {
  optimizer_->set_lr(scheduled_lr(options_.schedule, options_.optimizer.lr, version_, options_.total_updates,
                                  options_.warmup_steps));
  optimizer_->step(params_.data(), grads);
  ++version_;
}

void ParameterShard::apply_central_if_complete() {
  if (contributions_ == 0 || !lost_.empty()) return;
  for (size_t w = 0; w < clocks_.size(); ++w)
    if (states_[w] == WorkerState::live && clocks_[w] <= version_) return;  // a live worker has not pushed yet
  if (contributions_ > 1) kernels::cpu::scale(sum_.data(), sum_.size(), 1.0f / static_cast<float>(contributions_));
  clip_grad_norm(sum_.data(), sum_.size(), options_.clip_grad_norm, options_.optimizer.state_ranges);  // the global batch's, as sync clips it
  apply(sum_.data());
  contributions_ = 0;
  checkpoint_if_due();
  changed_.notify_all();
}

Status ParameterShard::enable_checkpoints(ShardCheckpointing c) {
  std::lock_guard<std::mutex> lock(mu_);
  if (c.every < 1 || c.dir.empty()) return invalid_argument(describe() + ": checkpoints need every >= 1 and a directory");
  // Two checkpoint intervals of pushes per rank, and some: a restored shard is at most that far
  // behind the newest complete checkpoint (a damaged newest one: the one before it).
  if (options_.mode == PsMode::async) history_.set_keep(static_cast<size_t>(2 * c.every + 64));
  checkpointing_ = std::move(c);
  return {};
}

Status ParameterShard::restore(const checkpoint::TrainingState& state) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string what = describe() + ": restoring the checkpoint of step " + std::to_string(state.step);
  if (state.params.size() < range_.end || (options_.total_floats && state.params.size() != options_.total_floats)) {
    return invalid_argument(what + ": it holds " + std::to_string(state.params.size()) + " parameters; the job has " +
                            std::to_string(options_.total_floats ? options_.total_floats : range_.end));
  }
  if (state.optimizer.steps != state.step) {
    return invalid_argument(what + ": its optimizer took " + std::to_string(state.optimizer.steps) + " steps");
  }
  OptimizerState slice;
  slice.name = state.optimizer.name;
  slice.steps = state.optimizer.steps;
  for (const std::vector<float>& v : state.optimizer.vectors)
    slice.vectors.emplace_back(v.begin() + static_cast<std::ptrdiff_t>(range_.begin),
                               v.begin() + static_cast<std::ptrdiff_t>(range_.end));
  TROUPE_RETURN_IF_ERROR(optimizer_->load_state(slice, 0).with_context(what));
  std::copy(state.params.begin() + static_cast<std::ptrdiff_t>(range_.begin),
            state.params.begin() + static_cast<std::ptrdiff_t>(range_.end), params_.begin());
  if (options_.mode == PsMode::async) {  // what the restored parameters were computed from
    const size_t i = static_cast<size_t>(index_);
    if (state.extras.size() == static_cast<size_t>(options_.shards) && !state.extras[i].empty()) {
      auto record = AppliedData::decode(state.extras[i], options_.workers);
      if (!record.ok()) return record.status().with_context(what);
      applied_ = std::move(*record);
      restored_record_ = true;
    } else {
      spdlog::warn("{}: the checkpoint holds no applied-data record for this shard (written by an older troupe, or "
                   "loaded in part): the job's data accounting will say it cannot prove this shard's data", what);
    }
  }
  version_ = state.step;
  restored_step_ = state.step;
  if (options_.mode == PsMode::central) {
    std::fill(clocks_.begin(), clocks_.end(), state.step);
  } else {  // the workers went on meanwhile: each says its clock when it connects again
    std::fill(clocks_.begin(), clocks_.end(), 0);
    std::fill(states_.begin(), states_.end(), WorkerState::returning);
    // Its history starts after the record's last push of each rank (nothing before is known).
    for (int w = 0; w < options_.workers; ++w)
      history_.known_from(w, restored_record_ ? applied_.last_clock(w) : std::numeric_limits<int64_t>::max());
  }
  return {};
}

void ParameterShard::checkpoint_if_due() {
  const ShardCheckpointing& c = checkpointing_;
  if (c.every < 1 || version_ % c.every != 0) return;
  checkpoint::ShardData d;
  d.header.tag = c.tag;
  d.header.step = version_;
  const int64_t spe = std::max<int64_t>(c.steps_per_epoch, 1);
  d.header.epoch = (version_ - 1) / spe + 1;
  d.header.epoch_step = version_ - (d.header.epoch - 1) * spe;
  d.header.shard = index_;
  d.header.shards = options_.shards;
  d.header.total_floats = options_.total_floats ? options_.total_floats : range_.end;
  d.header.begin = range_.begin;
  d.header.end = range_.end;
  d.params = params_;
  d.optimizer = optimizer_->save_state(0, range_.size());
  if (options_.mode == PsMode::async) d.extra = applied_.encode();
  const std::string dir = checkpoint::step_dir(c.dir, version_);
  const std::string path = checkpoint::shard_path(dir, index_, options_.shards);
  std::error_code ec;
  if (options_.mode == PsMode::async && std::filesystem::exists(path, ec)) {
    // A failed predecessor of this shard wrote this version: its file may be in a manifest already.
    spdlog::info("{}: the shard file of version {} exists (a predecessor's); kept", describe(), version_);
    return;
  }
  std::filesystem::create_directories(dir, ec);
  Status st = ec ? io_error("cannot create checkpoint directory " + dir + ": " + ec.message()) : Status{};
  if (st.ok()) {
    auto written = checkpoint::write_shard_file(path, d);
    st = written.ok() ? (c.written ? c.written(*written, version_) : Status{}) : written.status();
  }
  if (!st.ok()) {
    spdlog::error("{}: checkpoint of version {} failed: {}", describe(), version_, st.to_string());
    if (shut_down_.empty()) shut_down_ = "the checkpoint of version " + std::to_string(version_) + " failed: " + st.message();
  }
}

Expected<int64_t> ParameterShard::push(int worker, int64_t clock, const float* grads, int64_t version_pulled,
                                       const DataTag& tag) {
  std::lock_guard<std::mutex> lock(mu_);
  TROUPE_RETURN_IF_ERROR(check_worker(worker, "a push"));
  int64_t& mine = clocks_[static_cast<size_t>(worker)];
  const std::string who = "worker " + std::to_string(worker) + " pushed clock " + std::to_string(clock);
  if (clock < mine)
    return invalid_argument(who + " again: its clock is " + std::to_string(mine) + " on " + describe());
  if (version_pulled < 0 || version_pulled > version_)
    return invalid_argument(who + " computed from version " + std::to_string(version_pulled) + ", but " + describe() +
                            " is at version " + std::to_string(version_));
  if (options_.mode == PsMode::central && clock != version_)
    return invalid_argument(who + " while " + describe() + " gathers clock " + std::to_string(version_) +
                            ": central mode takes every worker's pushes clock by clock");
  staleness_.add(version_ - version_pulled);
  mine = clock + 1;
  // Central mode applies it within the clock's average; either way its rows count once here.
  const std::string problem = applied_.record(worker, clock, tag);
  if (!problem.empty()) spdlog::warn("{}: {}'s data: {}", describe(), who, problem);
  history_.add(worker, clock, tag);
  if (options_.mode == PsMode::async) {
    apply(grads);
    checkpoint_if_due();
    changed_.notify_all();
    return version_;
  }
  if (contributions_++ == 0) std::copy(grads, grads + sum_.size(), sum_.begin());
  else kernels::cpu::sum_into(sum_.data(), grads, sum_.size());
  apply_central_if_complete();
  return version_;
}

Expected<int64_t> ParameterShard::replay(int worker, int64_t clock, const float* grads, const DataTag& tag) {
  std::lock_guard<std::mutex> lock(mu_);
  TROUPE_RETURN_IF_ERROR(check_worker(worker, "a replay"));
  const std::string who = "worker " + std::to_string(worker) + " replayed its push of clock " + std::to_string(clock);
  if (options_.mode != PsMode::async)
    return invalid_argument(who + " to " + describe() + ": only async shards take replays (central restarts whole)");
  const int64_t last = applied_.last_clock(worker), mine = clocks_[static_cast<size_t>(worker)];
  if (clock <= last || clock >= mine)
    return invalid_argument(who + " to " + describe() + ", which applied its pushes up to clock " +
                            std::to_string(last) + " and has it at clock " + std::to_string(mine) +
                            ": a replay must lie between");
  const std::string problem = applied_.record(worker, clock, tag);
  if (!problem.empty()) spdlog::warn("{}: {}'s data: {}", describe(), who, problem);
  ++replayed_;
  history_.add(worker, clock, tag);
  apply(grads);
  checkpoint_if_due();
  changed_.notify_all();
  return version_;
}

void ParameterShard::forget_workers() {
  std::lock_guard<std::mutex> lock(mu_);
  applied_.forget_workers();
}

Expected<int64_t> ParameterShard::catch_up(const float* grads, const DataTag& tag) {
  std::lock_guard<std::mutex> lock(mu_);
  if (options_.mode != PsMode::async) return invalid_argument(describe() + ": only async shards catch up");
  const std::string problem = applied_.record_examples(tag);
  if (!problem.empty()) spdlog::warn("{}: catching up {}: {}", describe(), troupe::describe(tag), problem);
  apply(grads);
  checkpoint_if_due();
  changed_.notify_all();
  return version_;
}

Status ParameterShard::finish_worker(int worker) {
  std::lock_guard<std::mutex> lock(mu_);
  if (worker >= 0 && worker < options_.workers && states_[static_cast<size_t>(worker)] == WorkerState::finished)
    return {};  // said again after a reconnection
  TROUPE_RETURN_IF_ERROR(check_worker(worker, "finish"));
  states_[static_cast<size_t>(worker)] = WorkerState::finished;
  if (options_.mode == PsMode::central) apply_central_if_complete();
  if (on_all_finished_ &&
      std::all_of(states_.begin(), states_.end(), [](WorkerState w) { return w == WorkerState::finished; })) {
    auto f = std::move(on_all_finished_);
    on_all_finished_ = nullptr;
    f(version_);
  }
  changed_.notify_all();
  return {};
}

void ParameterShard::on_all_finished(std::function<void(int64_t version)> f) {
  std::lock_guard<std::mutex> lock(mu_);
  on_all_finished_ = std::move(f);
}

void ParameterShard::remove_worker(int worker, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (worker < 0 || worker >= options_.workers || states_[static_cast<size_t>(worker)] != WorkerState::live) return;
  spdlog::warn("{}: worker {} removed at clock {}: {}", describe(), worker, clocks_[static_cast<size_t>(worker)], why);
  states_[static_cast<size_t>(worker)] = WorkerState::removed;
  if (options_.mode == PsMode::central && lost_.empty())
    lost_ = "worker " + std::to_string(worker) + " was lost at clock " +
            std::to_string(clocks_[static_cast<size_t>(worker)]) + " (" + why +
            "); a central job goes on only whole: it restarts from its last checkpoint";
  changed_.notify_all();
}

Expected<int64_t> ParameterShard::rejoin_worker(int worker, int64_t reported_clock) {
  std::lock_guard<std::mutex> lock(mu_);
  if (worker < 0 || worker >= options_.workers)
    return invalid_argument("worker " + std::to_string(worker) + " is outside 0.." + std::to_string(options_.workers - 1));
  WorkerState& s = states_[static_cast<size_t>(worker)];
  int64_t& clock = clocks_[static_cast<size_t>(worker)];
  if (s == WorkerState::finished) return clock;  // it waits for the others (see above)
  if (s == WorkerState::removed || s == WorkerState::returning) {
    if (options_.mode != PsMode::async)
      return invalid_argument("worker " + std::to_string(worker) + " was removed and " + describe() +
                              " is central: the job restarts whole");
    s = WorkerState::live;
    clock = std::max(clock, reported_clock);
    spdlog::info("{}: worker {} rejoined at clock {}", describe(), worker, clock);
    changed_.notify_all();
  } else if (options_.mode == PsMode::async) {
    clock = std::max(clock, reported_clock);
  }
  return clock;
}

void ParameterShard::shut_down(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_.empty()) shut_down_ = why.empty() ? "shut down" : why;
  changed_.notify_all();
}

int64_t ParameterShard::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

StalenessHistogram ParameterShard::staleness() const {
  std::lock_guard<std::mutex> lock(mu_);
  return staleness_;
}

PushesAfter ParameterShard::pushes_after(int worker, int64_t after) const {
  std::lock_guard<std::mutex> lock(mu_);
  return history_.after(worker, after);
}

WorkerPosition ParameterShard::position(int worker) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (worker < 0 || worker >= options_.workers) return {};
  return WorkerPosition{clocks_[static_cast<size_t>(worker)], applied_.last(worker), applied_.last_clock(worker)};
}

std::vector<AppliedShard> ParameterShard::applied() const {
  std::lock_guard<std::mutex> lock(mu_);
  return applied_.shards();
}

int64_t ParameterShard::restored_step() const {
  std::lock_guard<std::mutex> lock(mu_);
  return restored_step_;
}

bool ParameterShard::restored_record() const {
  std::lock_guard<std::mutex> lock(mu_);
  return restored_record_;
}

int64_t ParameterShard::replayed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return replayed_;
}

bool ParameterShard::all_finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::all_of(states_.begin(), states_.end(), [](WorkerState s) { return s == WorkerState::finished; });
}

std::vector<float> ParameterShard::parameters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return params_;
}

}  // namespace troupe::ps
