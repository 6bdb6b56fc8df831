#include "trainers/job/ps_member.h"

#include <memory>
#include <thread>

#include <spdlog/spdlog.h>

#include "gcs/events.h"
#include "trainers/cuda/cuda_ps_worker.h"
#include "data/shards/shard_ledger.h"
#include "trainers/job/job_checkpoint.h"
#include "trainers/job/gpu_worker.h"
#include "trainers/job/job_report.h"
#include "trainers/job/ledger_feed.h"
#include "trainers/job/ps_applied.h"
#include "trainers/job/ps_checkpoint.h"
#include "trainers/job/ps_resume.h"
#include "trainers/job/ps_takeover.h"
#include "trainers/job/step_timeline_publisher.h"
#include "trainers/job/sync_recovery.h"
#include "trainers/ps/async_worker.h"
#include "trainers/ps/ps_client.h"
#include "trainers/ps/ps_job.h"
#include "trainers/ps/ps_server.h"

namespace troupe::job {
namespace {

constexpr auto kServerWait = std::chrono::seconds(60);
// How long an async worker keeps dialling a parameter server whose connection failed: the
// supervisor's backoff, placing the replacement, its setup (dataset, checkpoint) and its address.
constexpr auto kServerReturnWait = std::chrono::seconds(180);

// Servers publish under their attempt: a central job restarted whole has new servers, which its new
// workers must not confuse with the dead ones. An async server's replacement publishes under its
// predecessor's key (attempt 0), where the running workers look for it again.
std::string server_key(const JobId& job, int index, int attempt) {
  return job.hex() + "/" + std::to_string(index) + (attempt > 0 ? "@" + std::to_string(attempt) : "");
}
// The step a central job's server restored (0: a fresh start), published beside its address.
std::string start_key(const JobId& job, int attempt) { return job.hex() + "/start@" + std::to_string(attempt); }
int server_attempt(const JobSpec& spec, int attempt) { return spec.strategy == "central" ? attempt : 0; }

// A worker's ledger identity: the same for every attempt of a rank, so a replacement can give back
// what its dead predecessor held (async: trained again by whoever claims it).
WorkerId worker_identity(const JobId& job, int index) {
  std::array<uint8_t, 16> b = job.bytes();
  for (int i = 0; i < 4; ++i) b[12 + i] ^= static_cast<uint8_t>((static_cast<uint32_t>(index) + 1) >> (8 * i));
  b[0] ^= 0x5a;
  return WorkerId::from_bytes(b);
}

ps::PsJobShape job_shape(const JobSpec& spec, int64_t train_examples) {
  ps::PsJobShape shape;
  shape.mode = spec.strategy == "central" ? ps::PsMode::central : ps::PsMode::async;
  shape.workers = spec.workers;
  shape.shards = server_count(spec);
  shape.staleness = spec.strategy == "central" ? 0 : spec.staleness;
  shape.train_examples = train_examples;
  shape.wait_timeout = std::chrono::milliseconds(spec.collective_timeout_ms / 2);
  return shape;
}

// The data feed of worker `worker` of `spec` (an async or central job) training `train`; the
// ledger's plan comes from it (the same for every worker of an async job, and for its servers).
Expected<LedgerFeedOptions> ps_feed_options(const JobSpec& spec, const Dataset& train, int worker) {
  // Central workers step in lockstep, like sync: worker i trains interleaved shard i of each epoch.
  if (spec.strategy == "central")
    return sync_feed_options(spec.train.seed, spec.train.batch_size, spec.workers, worker, spec.workers);
  LedgerFeedOptions fo;
  fo.batch_size = spec.train.batch_size / spec.workers;
  fo.plan.seed = spec.train.seed;
  // Taken as workers get to them: a fast worker trains more of the epoch.
  fo.plan.shards = 4 * spec.workers;
  // auto: every class in every shard when each example has one class, else interleaved blocks
  // (token windows, values: nothing to stratify by).
  const std::string named = spec.shard_policy != "auto" ? spec.shard_policy
                            : train.one_class_per_example() ? "stratified" : "interleaved";
  auto policy = data::parse_shard_policy(named);
  if (!policy.ok()) return policy.status();
  if (*policy == data::ShardPolicy::stratified && !train.one_class_per_example())
    return invalid_argument("--shard-policy stratified deals each class into every shard, but this data's examples " +
                            std::string(train.classifies() ? "have " + std::to_string(train.target_width) + " classes each"
                                                           : "hold values") +
                            "; use interleaved or contiguous (or leave it out)");
  fo.plan.policy = *policy;
  fo.plan.block = fo.batch_size;
  fo.keep_partial = true;  // every example applied exactly once (gcs/async_accounting.h)
  return fo;
}

// The servers' addresses in shard order, once all of them published one (bounded wait).
Expected<std::vector<std::string>> server_addresses(gcs::Store& store, const JobId& job, int servers, int attempt,
                                                    const std::atomic<bool>& cancel) {
  const auto deadline = std::chrono::steady_clock::now() + kServerWait;
  std::vector<std::string> out(static_cast<size_t>(servers));
  while (true) {
    int missing = -1;
    for (int s = 0; s < servers; ++s) {
      if (!out[static_cast<size_t>(s)].empty()) continue;
      auto v = store.get(kJobServersTable, server_key(job, s, attempt));
      if (!v.ok()) return v.status();
      if (v->has_value()) out[static_cast<size_t>(s)] = **v;
      else if (missing < 0) missing = s;
    }
    if (missing < 0) return out;
    if (cancel.load()) return unavailable("stopped while waiting for the parameter servers");
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status(Code::timeout, "parameter server " + std::to_string(missing) + " did not publish its address within " +
                                       std::to_string(kServerWait.count()) + " s (see its node's log)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Every worker's samples/s as it recorded them on the metrics stream (null for one that has not
// yet: rank 0 ends after all workers finished training, but their metric writes may trail it).
nlohmann::json worker_rates(gcs::Store& store, const JobId& job, int workers) {
  nlohmann::json rates = nlohmann::json::array();
  for (int r = 0; r < workers; ++r) rates.push_back(nullptr);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (true) {
    auto metrics = gcs::recent_metrics(store, 2000);
    int found = 0;
    if (metrics.ok()) {
      for (int r = 0; r < workers; ++r) {
        const std::string name = "job/" + job.hex() + "/worker/" + std::to_string(r) + "/samples_per_second";
        for (const gcs::Metric& m : *metrics) {
          if (m.name == name) rates[static_cast<size_t>(r)] = m.value;
        }
        if (!rates[static_cast<size_t>(r)].is_null()) ++found;
      }
    }
    if (found == workers || std::chrono::steady_clock::now() >= deadline) return rates;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// The step a central job's server of `attempt` restored (bounded wait for it to say).
Expected<int64_t> central_start_step(gcs::Store& store, const JobId& job, int attempt) {
  auto v = store.get(kJobServersTable, start_key(job, attempt));
  if (!v.ok()) return v.status();
  if (!v->has_value()) return not_found("the parameter server published its address but not its start step");
  return std::strtoll((*v)->c_str(), nullptr, 10);
}

// A replacement async server's start: the job's newest intact checkpoint (its range of it), else
// (none written yet) the initial parameters. Recorded as an event "server_restored".
Expected<StartPoint> async_server_start(gcs::Store& store, const JobSpec& spec, const MemberArgs& a,
                                        const std::string& who) {
  auto start = find_start_point(store, spec, a.job);
  if (!start.ok()) return start.status();
  gcs::Event e;
  e.kind = "server_restored";
  e.subject = a.job.hex();
  e.message = who + " (attempt " + std::to_string(a.attempt) + ") replaces a failed one: " +
              (start->state ? "its shard restored from the checkpoint of " + start->source + " (version " +
                                  std::to_string(start->state->step) + ")"
                            : std::string("no checkpoint yet, its shard starts again from the initial parameters")) +
              "; the other shards keep their state, the workers reconnect at their clocks and replay to it the pushes "
              "it lost";
  spdlog::warn("{}", e.message);
  Status st = gcs::record_event(store, e);
  if (!st.ok()) spdlog::warn("{}: recording server_restored: {}", who, st.to_string());
  return start;
}

// How server `index` checkpoints. Central: the one server holds every parameter, so its shard file
// is the whole checkpoint and it writes the manifest itself, inside the update (no pull sees the
// version before). Async: every K x workers versions, the manifest by whichever server completes
// the set (ps_checkpoint.h).
ps::ShardCheckpointing server_checkpointing(gcs::Store& store, const JobSpec& spec, const JobId& job, int index,
                                            int64_t train_examples, const std::shared_ptr<TrainedLog>& trained) {
  ps::ShardCheckpointing c;
  c.dir = checkpoint_dir(spec, job);
  c.tag = job.hex();
  c.steps_per_epoch = train_examples / spec.train.batch_size;
  if (spec.strategy == "async") {
    c.every = async_checkpoint_versions(spec);
    c.steps_per_epoch *= spec.workers;
    c.written = [&store, job, spec, index](const checkpoint::WrittenShard& w, int64_t version) {
      return record_async_shard(store, job, spec, index, spec.ps, w, version);
    };
    return c;
  }
  c.every = spec.checkpoint_every;
  // The steps up to it recorded as trained first, then the manifest (commit_trained_checkpoint).
  c.written = [&store, job, spec, trained](const checkpoint::WrittenShard& w, int64_t version) {
    checkpoint::Manifest m;
    m.tag = job.hex();
    m.step = version;
    m.dir = checkpoint::step_dir(checkpoint_dir(spec, job), version);
    m.shards = {w};
    return commit_trained_checkpoint(store, job, spec, *trained, m);
  };
  return c;
}

// Steps 1-3 of ps_resume.h for a server of an async job resumed from another job's checkpoint.
Status resume_async_server(gcs::Store& store, const JobSpec& spec, const MemberArgs& a, ps::ParameterShard& shard,
                           const checkpoint::TrainingState& state, const Dataset& train) {
  auto fo = ps_feed_options(spec, train, 0);  // an async job's plan, whichever worker asks
  if (!fo.ok()) return fo.status();
  auto resumed = resumed_data(state, spec.ps, spec.workers);
  if (!resumed.ok()) return resumed.status();
  auto caught_up = catch_up_shard(shard, a.index, state, *resumed, spec.train, train, fo->plan, spec.workers,
                                  fo->batch_size);
  if (!caught_up.ok()) return caught_up.status();
  if (a.index == 0) TROUPE_RETURN_IF_ERROR(seed_ledger(store, a.job, *resumed, train, fo->plan));
  return {};
}

}  // namespace

int server_count(const JobSpec& spec) {
  if (spec.strategy == "async") return spec.ps;
  return spec.strategy == "central" ? 1 : 0;
}

Status run_server(const actors::NodeEnvironment& env, const MemberArgs& a, const std::atomic<bool>& cancel) {
  const std::string who = "job " + a.job.short_hex() + " parameter server " + std::to_string(a.index);
  auto setup = prepare(env, a.job);
  if (!setup.ok()) return setup.status().with_context(who);
  const JobSpec& spec = setup->spec;
  auto shard = ps::make_job_shard(spec.train, setup->train().spec(),
                                  job_shape(spec, setup->train().count), a.index);
  if (!shard.ok()) return shard.status().with_context(who);
  // Where the shard starts. Central: the job's own newest intact checkpoint after a restart, else
  // the resumed job's, else none; the one server decides alone, and after a restart it rewinds the
  // ledger before it publishes its address (the workers wait for that, so nobody claims before).
  // Async: a replacement of a failed server (attempt > 0) restores its range from the job's newest
  // intact checkpoint while the other servers keep theirs (async_server_start below).
  // A resumed async job (attempt 0) starts from the resumed job's checkpoint (ps_resume.h).
  Expected<StartPoint> start = StartPoint{};
  if (spec.strategy == "central") start = find_start_point(*setup->store, spec, a.job);
  if (spec.strategy == "async" && a.attempt > 0) start = async_server_start(*setup->store, spec, a, who);
  if (spec.strategy == "async" && a.attempt == 0 && !spec.resume_job.empty())
    start = find_start_point(*setup->store, spec, a.job);
  if (!start.ok()) return start.status().with_context(who);
  // A central job's steps are the server's versions (whole global batches).
  const int64_t steps_per_epoch = setup->train().count / spec.train.batch_size;
  if (spec.strategy == "central" && a.attempt > 0) {
    TROUPE_RETURN_IF_ERROR(rewind_to(*setup->store, a.job, spec.workers, steps_per_epoch, *start).with_context(who));
  }
  if (start->state) {
    TROUPE_RETURN_IF_ERROR((*shard)->restore(*start->state).with_context(who));
    spdlog::info("{} starts from {}", who, start->source);
  }
  if (spec.strategy == "async" && start->state && !start->own) {
    TROUPE_RETURN_IF_ERROR(resume_async_server(*setup->store, spec, a, **shard, *start->state, setup->train())
                               .with_context(who + ": resuming job " + spec.resume_job.substr(0, 8)));
  }
  const int64_t start_step = start->state ? start->state->step : 0;
  // A central server records its versions as trained steps (gcs/data_accounting.h) at each
  // checkpoint and when every worker finished, as rank 0 of a sync job does, so the supervisor
  // proves the job's data exactly once.
  auto trained = std::make_shared<TrainedLog>(*setup->store, a.job, a.attempt, steps_per_epoch, start_step);
  if (spec.strategy == "central") {
    (*shard)->on_all_finished([trained, who](int64_t version) {
      Status st = trained->durable_through(version);
      if (!st.ok()) spdlog::warn("{}: recording the trained steps: {}", who, st.to_string());
    });
  }
  if (server_count(spec) == 1 && spec.strategy == "central") {
    TROUPE_RETURN_IF_ERROR(setup->store->put(kJobServersTable, start_key(a.job, a.attempt), std::to_string(start_step))
                               .with_context(who + ": publishing its start step"));
  }
  if (spec.checkpoint_every > 0) {
    TROUPE_RETURN_IF_ERROR((*shard)->enable_checkpoints(server_checkpointing(*setup->store, spec, a.job, a.index,
                                                                             setup->train().count, trained))
                               .with_context(who));
  }
  ps::PsServerOptions so;
  so.job = a.job.hex();
  so.host = env.bind;
  auto tls = data_plane_tls(spec);
  if (!tls.ok()) return tls.status().with_context(who);
  so.tls = *tls;
  auto server = ps::PsServer::start(std::move(*shard), so);
  if (!server.ok()) return server.status().with_context(who);
  TROUPE_RETURN_IF_ERROR(setup->store->put(kJobServersTable, server_key(a.job, a.index, server_attempt(spec, a.attempt)),
                                           (*server)->address())
                             .with_context(who + ": publishing its address"));
  spdlog::info("{} serving on {}", who, (*server)->address());
  bool published = spec.strategy != "async";  // the async accounting's record, once every worker finished
  while (!cancel.load()) {
    if (!published && (*server)->shard().all_finished()) {
      Status st = publish_applied(*setup->store, a.job, a.index, a.attempt, (*server)->shard());
      if (!st.ok()) spdlog::warn("{}: {}", who, st.to_string());
      published = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const ps::StalenessStats st = (*server)->shard().staleness().stats();
  spdlog::info("{}: {} updates applied, staleness mean {:.2f} max {}", who, st.count, st.mean, st.max);
  (*server)->stop();
  return {};
}

namespace {

// Worker a.index's connection to the job's parameter servers, once they published their
// addresses. An async job's worker dials a failed server again where it comes back (restored)
// under its key.
Expected<std::unique_ptr<ps::PsClient>> connect_worker(const MemberArgs& a, JobSetup& s, int servers,
                                                       const std::atomic<bool>& cancel) {
  const JobSpec& spec = s.spec;
  auto addresses = server_addresses(*s.store, a.job, servers, server_attempt(spec, a.attempt), cancel);
  if (!addresses.ok()) return addresses.status();
  ps::PsClientOptions co;
  co.job = a.job.hex();
  co.rank = a.index;
  co.attempt = a.attempt;  // supersedes a connection its predecessor left open (ps_server.h)
  co.timeout = std::chrono::milliseconds(spec.collective_timeout_ms);
  auto tls = data_plane_tls(spec);
  if (!tls.ok()) return tls.status();
  co.tls = *tls;
  if (spec.strategy == "async") {  // a failed server comes back (restored) under its key
    co.reconnect_timeout = kServerReturnWait;
    co.cancel = &cancel;  // the job failed or was stopped: stop waiting for a server
    // Pushes kept for replays to a server restored from a checkpoint (ps_client.h).
    if (spec.checkpoint_every > 0) co.checkpoint_versions = async_checkpoint_versions(spec);
    co.resolve = [store = s.store.get(), job = a.job](int shard) -> Expected<std::string> {
      auto v = store->get(kJobServersTable, server_key(job, shard, 0));
      if (!v.ok()) return v.status();
      return v->value_or("");
    };
  }
  auto client = ps::connect_ps(*addresses, co);
  if (!client.ok()) return client.status().with_context("connecting to the parameter servers");
  return client;
}

// A replacement worker of an async job: its predecessor's last push completed on every server, and
// what it held back to the ledger where the servers' applied data ends (ps_takeover.h). The clock
// where the rank goes on (every server restored).
Expected<int64_t> take_over_rank(ps::PsClient& client, const MemberArgs& a, JobSetup& s, const LedgerFeedOptions& fo,
                                 WorkerId me) {
  const JobSpec& spec = s.spec;
  data::ShardLedger ledger(*s.store, a.job, data::ShardLedgerOptions{fo.plan.shards});
  auto taken = take_over(client, spec.train, s.train(), fo.plan, ledger, me, a.index, spec.workers);
  if (!taken.ok()) return taken.status().with_context("taking over from the failed worker");
  spdlog::info("job {} {}", a.job.short_hex(), taken->summary);
  const int64_t takeover_clock = taken->start_clock;
  // Recorded whether or not the predecessor held shards: the takeover itself is what users look for.
  gcs::Event e;
  e.kind = "shards_moved";
  e.subject = a.job.hex();
  e.message = "job " + a.job.short_hex() + " " + taken->summary;
  Status st = gcs::record_event(*s.store, e);
  if (!st.ok()) spdlog::warn("{}: recording shards_moved: {}", e.message, st.to_string());
  return takeover_clock;
}

// Rank 0 reports the job's progress. After a restart, its first step is when the job trains again
// (/metrics: troupe_job_resume_seconds): any replacement of an async job (only the lost members are
// replaced), rank 0 of a central one.
ProgressFn worker_progress(ProgressReporter& reporter, JobSetup& s, const MemberArgs& a) {
  const JobSpec& spec = s.spec;
  ProgressFn progress;
  if (a.index == 0) progress = [&reporter](const TrainProgress& p) { reporter.on_progress(p); };
  if (a.attempt > 0 && (spec.strategy == "async" || a.index == 0)) {
    const std::string source = spec.strategy == "async" ? "the parameter servers' state (a replacement worker)"
                                                        : "the servers' restored state";
    progress = [&reporter, &s, &a, index = a.index, source, noted = false](const TrainProgress& p) mutable {
      if (index == 0) reporter.on_progress(p);
      if (noted) return;
      noted = true;
      note_resumed(*s.store, a.job, a.attempt, source, p.step);
    };
  }
  return progress;
}

// Where the worker starts: an async worker's clock (its client's, or a takeover's), the first epoch
// a resumed async job has left, a central job's step its server restored.
Status plan_start(ps::PsWorker& worker, ps::PsClient& client, const MemberArgs& a, JobSetup& s,
                  const LedgerFeedOptions& fo, int64_t takeover_clock) {
  const JobSpec& spec = s.spec;
  worker.whole_global_batches = spec.strategy == "central";
  if (spec.strategy == "async") worker.start_clock = std::max(client.start_clock(), takeover_clock);
  worker.wait_for_all = spec.strategy == "async" && spec.checkpoint_every > 0;
  if (spec.strategy == "async" && !spec.resume_job.empty()) {  // epochs the resumed job trained are done
    auto first = first_open_epoch(*s.store, a.job, fo.plan.shards, spec.train.epochs);
    if (!first.ok()) return first.status().with_context("reading the resumed job's ledger");
    worker.first_epoch = *first;
  }
  if (spec.strategy == "central") {  // the step the server restored
    auto step = central_start_step(*s.store, a.job, a.attempt);
    if (!step.ok()) return step.status();
    worker.start_step = *step;
  }
  return {};
}

// The job's summary, written by rank 0 once it trained (an async job's waits for the servers'
// records of the data they applied first).
nlohmann::json ps_summary(const MemberArgs& a, JobSetup& s, const TrainResult& result, const ps::PsWorker& worker,
                          const ps::PsWorkerReport& report, const LedgerFeedOptions& fo, int servers) {
  const JobSpec& spec = s.spec;
  nlohmann::json summary = train_result_json(result);
  summary["strategy"] = spec.strategy;
  summary["workers"] = spec.workers;
  summary["accumulate"] = spec.train.accumulate;  // micro-batches per step
  summary["parameter_servers"] = servers;
  if (spec.gpus_per_worker > 0) summary["gpus_per_worker"] = spec.gpus_per_worker;
  summary["job_id"] = a.job.hex();
  summary["staleness"] = {{"updates", report.staleness.count}, {"mean", report.staleness.mean},
                          {"max", report.staleness.max}, {"p50", report.staleness.p50},
                          {"p99", report.staleness.p99}};
  summary["communication_ms"] = report.pull_ms + report.push_ms;
  if (worker.start_step > 0) summary["resumed_from"] = {{"step", worker.start_step}, {"attempt", a.attempt}};
  if (!spec.resume_job.empty()) summary["resumed_from"]["job_id"] = spec.resume_job;
  if (!spec.resume_job.empty() && spec.strategy == "async") summary["resumed_from"]["step"] = spec.resume_step;
  if (spec.checkpoint_every > 0) {
    summary["checkpoint_every"] = spec.checkpoint_every;
    if (spec.strategy == "central")  // async: each server's own version, in the manifests
      summary["last_checkpoint_step"] = (report.steps + worker.start_step) / spec.checkpoint_every * spec.checkpoint_every;
    summary["checkpoint_dir"] = checkpoint_dir(spec, a.job);
  }
  if (spec.strategy == "central") {  // the server recorded the trained steps (run_server)
    summary["trained_ranges"] = spec.resume_job.empty() && spec.train.max_steps == 0;
    summary["trained_steps"] = worker.start_step + report.steps;
    summary["steps_per_epoch"] = s.train().count / spec.train.batch_size;
    summary["ledger_shards"] = fo.plan.shards;
  }
  if (spec.strategy == "async" && spec.train.max_steps == 0) {
    // Every epoch ran to its end: the supervisor proves the data accounting (gcs/async_accounting.h)
    // from the servers' records, written as every worker finished.
    Status st = wait_for_applied(*s.store, a.job, servers, std::chrono::seconds(10));
    if (!st.ok()) spdlog::warn("job {}: {}", a.job.short_hex(), st.to_string());
    summary["data_accounting"] = {{"epochs", spec.train.epochs}, {"ledger_shards", fo.plan.shards},
                                  {"servers", servers}};
  }
  summary["worker_samples_per_second"] = worker_rates(*s.store, a.job, spec.workers);
  // The job's throughput is every worker's together (each trains its own batches).
  double total = 0;
  for (const auto& r : summary["worker_samples_per_second"]) total += r.is_null() ? 0.0 : r.get<double>();
  if (total > 0) summary["samples_per_second"] = total;
  return summary;
}

}  // namespace

Status run_ps_worker(const actors::NodeEnvironment& env, const MemberArgs& a, JobSetup& s,
                     const std::atomic<bool>& cancel) {
  const JobSpec& spec = s.spec;
  const int servers = server_count(spec);
  int gpu = -1;  // an async job's GPU worker: its device, known before it connects
  if (spec.gpus_per_worker > 0) {
    auto device = worker_gpu(env, a, spec);
    if (!device.ok()) return device.status();
    gpu = *device;
  }
  auto client = connect_worker(a, s, servers, cancel);
  if (!client.ok()) return client.status();

  auto feed_options = ps_feed_options(spec, s.train(), a.index);
  if (!feed_options.ok()) return feed_options.status();
  LedgerFeedOptions fo = *feed_options;
  const WorkerId me = worker_identity(a.job, a.index);
  int64_t takeover_clock = 0;  // every server restored: where the rank goes on
  if (a.attempt > 0 && spec.strategy == "async") {
    auto taken = take_over_rank(**client, a, s, fo, me);
    if (!taken.ok()) return taken.status();
    takeover_clock = *taken;
  }
  LedgerFeed feed(s.train(), *s.store, a.job, me, fo);
  ProgressReporter reporter(*s.store, a.job);
  const ProgressFn progress = worker_progress(reporter, s, a);
  ps::PsWorkerReport report;
  TrainOptions options = spec.train;
  ps::PsWorker worker{client->get(), a.index, spec.workers};
  TROUPE_RETURN_IF_ERROR(plan_start(worker, **client, a, s, fo, takeover_clock));
  if (worker.start_step > 0) reporter.start_at(worker.start_step);
  StepRecorder step_recorder;  // the step timeline: recorded by the worker loop, published to the GCS
  StepTimelinePublisher timeline(*s.store, a.job, a.index, step_recorder);
  worker.steps = &step_recorder;
  Expected<TrainResult> result = internal_error("not trained");
  if (spec.gpus_per_worker > 0) {  // an async job's GPU worker (the spec refuses central ones)
    CudaPsWorker on;
    on.device = gpu;
    on.timeout = std::chrono::milliseconds(spec.collective_timeout_ms);
    result = train_ps_worker_cuda(options, s.train(), s.test(), feed, worker, on, progress, &report);
  } else {
    result = ps::train_ps_worker(options, s.train(), s.test(), feed, worker, progress, &report);
  }
  timeline.stop(result.ok());
  if (!result.ok()) return result.status();
  // (A stopped job ends through its servers: stopping them fails the workers' next pull at once.)
  const double rate = report.steps > 0 ? result->samples_per_second : 0;
  record_job_metric(*s.store, a.job, a.index, "samples_per_second", rate);
  record_job_metric(*s.store, a.job, a.index, "data_wait_ms", feed.data_wait_ms());
  record_job_metric(*s.store, a.job, a.index, "communication_ms", report.pull_ms + report.push_ms);
  record_job_metric(*s.store, a.job, a.index, "compute_ms", report.compute_ms);
  if (a.index != 0) return {};
  return record_success(*s.store, a.job, ps_summary(a, s, *result, worker, report, fo, servers),
                        result->test_accuracy);
}

}  // namespace troupe::job
