#include "trainers/job/job_worker.h"

#include <filesystem>

#include <spdlog/spdlog.h>

#include "collectives/group_rendezvous.h"
#include "gcs/job_table.h"
#include "gcs/redis_store.h"
#include "gcs/tables.h"
#include "trainers/fashion_mnist.h"
#include "trainers/job/job_report.h"
#include "trainers/job/job_spec.h"
#include "trainers/job/ledger_feed.h"
#include "trainers/trainer_driver.h"
#include "trainers/trainer_library.h"
#include "trainers/trainer_library_store.h"

namespace troupe::job {
namespace {

// What every actor of a job needs before it trains.
struct JobSetup {
  std::unique_ptr<gcs::RedisStore> store;
  JobSpec spec;
  Dataset train, test;
};

Expected<JobSetup> prepare(const actors::NodeEnvironment& env, const JobId& job) {
  JobSetup s;
  auto store = gcs::RedisStore::connect(env.gcs);
  if (!store.ok()) return store.status().with_context("connecting to the GCS");
  s.store = std::move(*store);
  auto record = gcs::Table<gcs::JobRecord>(*s.store).get(job.hex());
  if (!record.ok()) return record.status();
  auto spec = from_settings(record->spec);
  if (!spec.ok()) return spec.status().with_context("the job's spec");
  s.spec = std::move(*spec);
  if (!s.spec.library.empty()) {
    const std::string cache = (std::filesystem::temp_directory_path() / "troupe-trainer-libs").string();
    auto path = fetch_trainer_library(*s.store, s.spec.library, cache);
    if (!path.ok()) return path.status().with_context("fetching the job's trainer library");
    auto lib = load_trainer_library(*path);
    if (!lib.ok()) return lib.status().with_context("loading the job's trainer library");
  }
  if (s.spec.train.dataset_dir.empty()) s.spec.train.dataset_dir = env.config.dataset_dir;
  s.spec.train.cpu_threads = static_cast<int>(env.config.cpu_threads);
  TROUPE_RETURN_IF_ERROR(validate(s.spec));
  auto train = load_fashion_mnist(s.spec.train.dataset_dir, Split::train);
  if (!train.ok()) return train.status().with_context("loading the training set on node " + env.node.short_hex());
  auto test = load_fashion_mnist(s.spec.train.dataset_dir, Split::test);
  if (!test.ok()) return test.status().with_context("loading the test set on node " + env.node.short_hex());
  s.train = std::move(*train);
  s.test = std::move(*test);
  return s;
}

Status run_sync(const actors::NodeEnvironment& env, const MemberArgs& a, JobSetup& s, const std::atomic<bool>& cancel) {
  const JobSpec& spec = s.spec;
  const int world = spec.workers;
  collectives::GroupOptions go;
  go.name = "job-" + a.job.hex();
  go.rank = a.index;
  go.world_size = world;
  go.host = env.bind;
  go.node = env.node;
  go.actor = a.actor;
  go.transport = spec.transport;
  auto comm = collectives::form_group(*s.store, go);
  if (!comm.ok()) return comm.status().with_context("forming the job's collective group");

  LedgerFeedOptions fo;
  fo.plan.shards = world;
  fo.plan.policy = data::ShardPolicy::interleaved;
  fo.plan.seed = spec.train.seed;
  fo.plan.block = spec.train.batch_size / world;
  fo.batch_size = spec.train.batch_size / world;
  fo.one_shard_per_epoch = true;
  LedgerFeed feed(s.train, *s.store, a.job, WorkerId::random(), fo);

  Replica replica;
  replica.comm = comm->get();
  replica.feed = &feed;
  replica.checksum_every = spec.checksum_every;
  replica.timeout = std::chrono::milliseconds(spec.collective_timeout_ms);
  replica.cancel = &cancel;
  ProgressReporter reporter(*s.store, a.job);
  ProgressFn progress;
  if (a.index == 0) progress = [&reporter](const TrainProgress& p) { reporter.on_progress(p); };
  auto result = train_replica(spec.train, s.train, s.test, replica, progress);
  if (!result.ok()) {
    if (result.status().code() != Code::unavailable || !cancel.load()) {
      Status st = collectives::record_group_failure(*s.store, go.name, go.generation, result.status());
      (void)st;
    }
    return result.status();
  }
  // Every worker's own throughput, gathered to all (rank 0 puts it in the summary).
  const float mine = static_cast<float>(result->samples_per_second / world);
  std::vector<float> rates(static_cast<size_t>(world));
  collectives::CollectiveOptions co;
  co.timeout = replica.timeout;
  TROUPE_RETURN_IF_ERROR((*comm)->allgather(&mine, rates.data(), 1, DType::f32, co).with_context("gathering worker rates"));
  record_job_metric(*s.store, a.job, a.index, "samples_per_second", mine);
  record_job_metric(*s.store, a.job, a.index, "data_wait_ms", feed.data_wait_ms());
  if (a.index != 0) return {};
  nlohmann::json summary = train_result_json(*result);
  summary["strategy"] = spec.strategy;
  summary["workers"] = world;
  summary["job_id"] = a.job.hex();
  summary["worker_samples_per_second"] = rates;
  return record_success(*s.store, a.job, summary, result->test_accuracy);
}

}  // namespace

Expected<MemberArgs> parse_member_args(const std::vector<std::string>& args) {
  if (args.size() != 3) {
    return invalid_argument("a job actor takes 3 arguments (job id, index, actor id), got " +
                            std::to_string(args.size()));
  }
  MemberArgs m;
  auto job = JobId::from_hex(args[0]);
  if (!job.ok()) return job.status().with_context("job id");
  m.job = *job;
  char* end = nullptr;
  const long index = std::strtol(args[1].c_str(), &end, 10);
  if (args[1].empty() || *end != '\0' || index < 0 || index > 1 << 20) {
    return invalid_argument("job actor index '" + args[1] + "' is not a number >= 0");
  }
  m.index = static_cast<int>(index);
  auto actor = ActorId::from_hex(args[2]);
  if (!actor.ok()) return actor.status().with_context("actor id");
  m.actor = *actor;
  return m;
}

Status run_worker(const actors::NodeEnvironment& env, const MemberArgs& a, const std::atomic<bool>& cancel) {
  const std::string who = "job " + a.job.short_hex() + " worker " + std::to_string(a.index);
  auto setup = prepare(env, a.job);
  if (!setup.ok()) return setup.status().with_context(who);
  spdlog::info("{}: {} training {} on node {}", who, setup->spec.strategy, setup->spec.train.model, env.node.short_hex());
  Status st;
  if (setup->spec.strategy == "sync") {
    st = run_sync(env, a, *setup, cancel);
  } else {
    st = unavailable("strategy '" + setup->spec.strategy + "' is not available yet in this build");
  }
  return st.with_context(who);
}

}  // namespace troupe::job
