// The head's search supervisor (actors/search_supervisor.h) against the in-memory GCS and a fake
// job host: trials submitted (max_concurrent at a time), ASHA's stops at rungs with their reasons,
// the best trial named and its model copied, a stop request, a restarted head going on where the
// last one was, and the search record's codec, compare-and-set and disk mirror.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "actors/search_supervisor.h"
#include "gcs/events.h"
#include "gcs/in_memory_store.h"
#include "gcs/job_epochs.h"
#include "gcs/job_table.h"
#include "gcs/search_record.h"
#include "gcs/tables.h"
#include "tests/core/temp_dir.h"

using namespace troupe;
using troupe::testing::TempDir;

namespace {

// Jobs the fake host was asked to start and stop, and their records in the store.
struct FakeJobs {
  explicit FakeJobs(gcs::Store& s) : store(s) {}
  gcs::Store& store;
  std::vector<int> started;                // trial indices, in order
  std::map<std::string, std::string> stopped;  // job hex -> reason
  std::set<JobId> supervised;
  std::vector<Status> refusals;  // returned by the next starts, in order, before any succeeds

  actors::TrialHost host() {
    actors::TrialHost h;
    h.start = [this](const gcs::SearchRecord&, const gcs::TrialRecord& t) -> Status {
      if (!refusals.empty()) {
        Status st = refusals.front();
        refusals.erase(refusals.begin());
        return st;
      }
      gcs::Table<gcs::JobRecord> table(store);
      if (!table.get(t.job.hex()).ok()) {
        gcs::JobRecord j;
        j.id = t.job;
        j.state = gcs::JobState::pending;
        j.message = "submitted";
        TROUPE_RETURN_IF_ERROR(table.put(j));
      }
      started.push_back(t.index);
      supervised.insert(t.job);
      return {};
    };
    h.stop = [this](const JobId& job, const std::string& reason) -> Status {
      stopped[job.hex()] = reason;
      auto r = gcs::update_job(store, job, gcs::finish_job(gcs::JobState::cancelled, reason));
      return r.ok() ? Status{} : r.status();
    };
    h.supervises = [this](const JobId& job) { return supervised.count(job) > 0; };
    return h;
  }
};

gcs::SearchRecord make_search(int trials, int epochs, const std::string& scheduler, int eta, const std::string& dir) {
  gcs::SearchRecord s;
  s.id = SearchId::random();
  s.name = "unit";
  s.scheduler = scheduler;
  s.eta = eta;
  s.grace = 1;
  s.epochs = epochs;
  s.dir = dir;
  for (int i = 0; i < trials; ++i) {
    gcs::TrialRecord t;
    t.index = i;
    t.settings = {{"lr", std::to_string(0.01 * (i + 1))}};
    t.job = JobId::random();
    t.submission = "{}";
    s.trials.push_back(t);
  }
  s.created_ms = gcs::now_ms();
  return s;
}

void set_job(gcs::Store& store, const JobId& id, gcs::JobState state, const std::string& message = "") {
  auto r = gcs::update_job(store, id, [&](gcs::JobRecord& j) -> Status {
    j.state = state;
    if (!message.empty()) j.message = message;
    if (gcs::job_finished(state)) j.finished_ms = gcs::now_ms();
    return {};
  });
  REQUIRE(r.ok());
}

void report(gcs::Store& store, const JobId& id, int epoch, double accuracy, int64_t time_ms) {
  gcs::EpochResult e;
  e.epoch = epoch;
  e.train_loss = 1.0 / epoch;
  e.test_accuracy = accuracy;
  e.test_loss = 1 - accuracy;
  e.time_ms = time_ms;
  REQUIRE(gcs::record_job_epoch(store, id, e).ok());
}

gcs::SearchRecord read(gcs::Store& store, const SearchId& id) {
  auto s = gcs::get_search(store, id);
  REQUIRE(s.ok());
  return *s;
}

}  // namespace

TEST_CASE("search supervisor: asha stops the trials below the top 1/eta at a rung, in arrival order", "[tune]") {
  gcs::InMemoryStore store;
  TempDir dir;
  FakeJobs jobs{store};
  actors::SearchSupervisor sup(store, jobs.host());
  auto s = make_search(4, 4, "asha", 2, dir.path());  // rungs at epochs 1 and 2
  REQUIRE(gcs::put_search(store, s).ok());
  CHECK(sup.tick());
  CHECK(jobs.started == std::vector<int>{0, 1, 2, 3});  // max_concurrent 0: all at once
  for (const auto& t : s.trials) set_job(store, t.job, gcs::JobState::running);
  // Epoch 1 arrives: 0.80 first, then 0.60, 0.90, 0.70.
  const double acc[4] = {0.80, 0.60, 0.90, 0.70};
  for (int i = 0; i < 4; ++i) report(store, s.trials[i].job, 1, acc[i], 1000 + i);
  sup.tick();
  auto now = read(store, s.id);
  CHECK(now.trials[0].state == "RUNNING");
  CHECK(now.trials[2].state == "RUNNING");
  CHECK(now.trials[0].rungs_passed == std::vector<int>{1});
  // 0.60 against {0.80}: top 1 of 2 -> stopped; 0.70 against {0.80, 0.60, 0.90}: top 2 of 4 reach 0.80.
  for (int i : {1, 3}) {
    INFO("trial " << i);
    CHECK(now.trials[i].state == "CANCELLED");
    CHECK(now.trials[i].stopped_at == 1);
    CHECK(now.trials[i].message.find("stopped early at rung 1 (epoch 1)") != std::string::npos);
    REQUIRE(jobs.stopped.count(s.trials[i].job.hex()));
    CHECK(jobs.stopped[s.trials[i].job.hex()] == now.trials[i].message);
    auto job = gcs::Table<gcs::JobRecord>(store).get(s.trials[i].job.hex());
    REQUIRE(job.ok());
    CHECK(job->state == gcs::JobState::cancelled);  // the job itself ended CANCELLED with the reason
    CHECK(job->message == now.trials[i].message);
  }
  CHECK(now.trials[3].message.find("the top 1/2 of 4 trials there reach 0.8000") != std::string::npos);
  // Rung 2: trial 2 arrives first (kept), trial 0 below it (stopped).
  report(store, s.trials[2].job, 2, 0.91, 2000);
  report(store, s.trials[0].job, 2, 0.85, 2001);
  sup.tick();
  now = read(store, s.id);
  CHECK(now.trials[2].state == "RUNNING");
  CHECK(now.trials[0].state == "CANCELLED");
  CHECK(now.trials[0].stopped_at == 2);
  // Trial 2 finishes: the search ends with it as the best, at its last epoch's value.
  report(store, s.trials[2].job, 3, 0.92, 3000);
  report(store, s.trials[2].job, 4, 0.93, 4000);
  set_job(store, s.trials[2].job, gcs::JobState::succeeded, "done");
  CHECK(sup.tick());  // still RUNNING when read: this tick ends it
  now = read(store, s.id);
  CHECK(now.state == "SUCCEEDED");
  CHECK(now.best == 2);
  CHECK(now.best_value == Approx(0.93));
  CHECK(gcs::trial_epochs(now) == 1 + 1 + 4 + 2);
  CHECK(now.message.find("8 trial-epochs of 16") != std::string::npos);
  CHECK_FALSE(sup.tick());  // nothing runs any more
  // The disk mirror has the same record.
  auto file = gcs::read_search_file(dir.path());
  REQUIRE(file.ok());
  CHECK(file->state == "SUCCEEDED");
  CHECK(file->best == 2);
}

TEST_CASE("search supervisor: max_concurrent trials at a time, the best model copied, failures kept apart", "[tune]") {
  gcs::InMemoryStore store;
  TempDir dir;
  FakeJobs jobs{store};
  actors::SearchSupervisor sup(store, jobs.host());
  auto s = make_search(3, 2, "fifo", 3, dir.path());
  s.max_concurrent = 2;
  s.save = dir.file("best.safetensors");
  for (auto& t : s.trials) {
    t.model_path = dir.file("trial-" + std::to_string(t.index) + ".safetensors");
    std::ofstream(t.model_path) << "model of trial " << t.index;
  }
  REQUIRE(gcs::put_search(store, s).ok());
  sup.tick();
  CHECK(jobs.started == std::vector<int>{0, 1});
  CHECK(read(store, s.id).trials[2].state == "WAITING");
  // Trial 0 fails; trial 2 takes its place.
  set_job(store, s.trials[0].job, gcs::JobState::failed, "worker-0 failed: boom");
  sup.tick();
  CHECK(jobs.started == std::vector<int>{0, 1, 2});
  auto now = read(store, s.id);
  CHECK(now.trials[0].state == "FAILED");
  CHECK(now.trials[0].message == "worker-0 failed: boom");
  // fifo: nothing stopped whatever the values.
  report(store, s.trials[1].job, 1, 0.5, 10);
  report(store, s.trials[2].job, 1, 0.9, 11);
  sup.tick();
  CHECK(jobs.stopped.empty());
  report(store, s.trials[1].job, 2, 0.88, 20);
  report(store, s.trials[2].job, 2, 0.86, 21);
  set_job(store, s.trials[1].job, gcs::JobState::succeeded);
  set_job(store, s.trials[2].job, gcs::JobState::succeeded);
  sup.tick();
  now = read(store, s.id);
  REQUIRE(now.state == "SUCCEEDED");
  CHECK(now.best == 1);  // by the last epoch: 0.88 > 0.86
  std::ifstream best(s.save);
  std::string text((std::istreambuf_iterator<char>(best)), std::istreambuf_iterator<char>());
  CHECK(text == "model of trial 1");
  CHECK(now.message.find("its model saved to " + s.save) != std::string::npos);
}

TEST_CASE("search supervisor: a GCS that does not answer delays a trial's start, a refused submission fails it",
          "[tune]") {
  gcs::InMemoryStore store;
  FakeJobs jobs(store);
  actors::SearchSupervisor sup(store, jobs.host());
  auto s = make_search(2, 2, "fifo", 3, "");
  REQUIRE(gcs::put_search(store, s).ok());
  jobs.refusals = {Status(Code::unavailable, "redis down"), invalid_argument("no such actor type")};
  sup.tick();  // trial 0: the GCS away -> still WAITING, trial 1 not tried before it
  auto now = read(store, s.id);
  CHECK(now.trials[0].state == "WAITING");
  CHECK(now.trials[1].state == "WAITING");
  CHECK(jobs.started.empty());
  sup.tick();  // trial 0 refused for good -> FAILED naming why; trial 1 starts
  now = read(store, s.id);
  CHECK(now.trials[0].state == "FAILED");
  CHECK(now.trials[0].message.find("no such actor type") != std::string::npos);
  CHECK(now.trials[1].state == "PENDING");
  CHECK(jobs.started == std::vector<int>{1});
}

TEST_CASE("search supervisor: min mode, a search with no successful trial fails saying so", "[tune]") {
  gcs::InMemoryStore store;
  FakeJobs jobs{store};
  actors::SearchSupervisor sup(store, jobs.host());
  auto s = make_search(2, 3, "fifo", 3, "");
  s.metric = "test_loss";
  s.mode = "min";
  REQUIRE(gcs::put_search(store, s).ok());
  sup.tick();
  set_job(store, s.trials[0].job, gcs::JobState::failed, "boom");
  set_job(store, s.trials[1].job, gcs::JobState::cancelled, "stopped by the user");
  sup.tick();
  auto now = read(store, s.id);
  CHECK(now.state == "FAILED");
  CHECK(now.message.find("no trial succeeded") != std::string::npos);

  auto m = make_search(2, 1, "fifo", 3, "");
  m.metric = "test_loss";
  m.mode = "min";
  REQUIRE(gcs::put_search(store, m).ok());
  sup.tick();
  report(store, m.trials[0].job, 1, 0.7, 1);  // loss 0.3
  report(store, m.trials[1].job, 1, 0.9, 2);  // loss 0.1
  for (const auto& t : m.trials) set_job(store, t.job, gcs::JobState::succeeded);
  sup.tick();
  now = read(store, m.id);
  CHECK(now.state == "SUCCEEDED");
  CHECK(now.best == 1);
  CHECK(now.best_value == Approx(0.1));
}

TEST_CASE("search supervisor: a stop request cancels running trials and never starts waiting ones", "[tune]") {
  gcs::InMemoryStore store;
  FakeJobs jobs{store};
  actors::SearchSupervisor sup(store, jobs.host());
  auto s = make_search(3, 5, "asha", 3, "");
  s.max_concurrent = 1;
  REQUIRE(gcs::put_search(store, s).ok());
  sup.tick();
  set_job(store, s.trials[0].job, gcs::JobState::running);
  // `troupe tune stop` writes stop_requested with compare-and-set.
  REQUIRE(gcs::update_search(store, s.id, [](gcs::SearchRecord& r) -> Status {
            r.stop_requested = true;
            return {};
          }).ok());
  sup.tick();
  auto now = read(store, s.id);
  CHECK(now.state == "CANCELLED");
  CHECK(now.trials[0].state == "CANCELLED");
  CHECK(jobs.stopped.count(s.trials[0].job.hex()) == 1);
  CHECK(now.trials[1].state == "CANCELLED");
  CHECK(now.trials[1].message.find("never started") != std::string::npos);
  CHECK(jobs.started == std::vector<int>{0});
}

TEST_CASE("search supervisor: a search paused by troupe down is left as it is, its trials' cancellations unseen", "[tune]") {
  gcs::InMemoryStore store;
  FakeJobs jobs(store);
  actors::SearchSupervisor sup(store, jobs.host());
  auto s = make_search(2, 3, "fifo", 3, "");
  s.max_concurrent = 1;
  REQUIRE(gcs::put_search(store, s).ok());
  sup.tick();
  set_job(store, s.trials[0].job, gcs::JobState::running);
  sup.tick();
  REQUIRE(gcs::update_search(store, s.id, [](gcs::SearchRecord& r) -> Status {
            r.paused = true;
            return {};
          }).ok());
  set_job(store, s.trials[0].job, gcs::JobState::cancelled, "the cluster was shut down (troupe down)");
  sup.tick();
  auto now = read(store, s.id);
  CHECK(now.trials[0].state == "RUNNING");  // not counted as ended
  CHECK(now.trials[1].state == "WAITING");  // and nothing started in its place
  CHECK(jobs.started == std::vector<int>{0});
}

TEST_CASE("search supervisor: a restarted head goes on where the last one stopped", "[tune]") {
  gcs::InMemoryStore store;
  FakeJobs first{store};
  auto s = make_search(3, 2, "fifo", 3, "");
  s.max_concurrent = 2;
  REQUIRE(gcs::put_search(store, s).ok());
  {
    actors::SearchSupervisor sup(store, first.host());
    sup.tick();
  }
  set_job(store, s.trials[0].job, gcs::JobState::succeeded);
  report(store, s.trials[0].job, 2, 0.8, 5);
  // The new head: trial 1's job was recorded but (say) never reached the old head's job supervisor;
  // its job supervisor knows none of them.
  FakeJobs second{store};
  actors::SearchSupervisor sup(store, second.host());
  sup.tick();
  auto now = read(store, s.id);
  CHECK(now.trials[0].state == "SUCCEEDED");           // done stays done
  CHECK(now.trials[0].epochs.size() == 1u);
  // trial 1 (PENDING, unknown to this head) submitted again; trial 2 started in trial 0's place.
  CHECK(second.started == std::vector<int>{1, 2});
  // A trial whose job record vanished (the GCS lost it) is submitted again too.
  REQUIRE(store.remove("jobs", s.trials[2].job.hex()).ok());
  second.supervised.erase(s.trials[2].job);
  sup.tick();
  sup.tick();
  CHECK(second.started == std::vector<int>{1, 2, 2});
  CHECK(gcs::Table<gcs::JobRecord>(store).get(s.trials[2].job.hex()).ok());
}

TEST_CASE("search record: round trip, corrupt bytes, prefixes and the disk file", "[tune][gcs]") {
  gcs::InMemoryStore store;
  TempDir dir;
  auto s = make_search(2, 3, "asha", 3, dir.path());
  s.trials[0].epochs.push_back({1, 0.5, 0.8, 0.81, 0.6, 1.5, 123});
  s.trials[0].rungs_passed = {1};
  s.trials[1].stopped_at = 1;
  s.space = {"lr=choice(0.1,0.2)"};
  gcs::SearchRecord back;
  REQUIRE(gcs::decode(gcs::encode(s), &back).ok());
  CHECK(gcs::encode(back) == gcs::encode(s));
  CHECK(gcs::decode("{\"id\": 3}", &back).code() == Code::corrupt_data);
  CHECK(gcs::decode("not json", &back).code() == Code::corrupt_data);
  REQUIRE(gcs::put_search(store, s).ok());
  auto found = gcs::find_search(store, s.id.hex().substr(0, 6));
  REQUIRE(found.ok());
  CHECK(*found == s.id);
  CHECK(gcs::find_search(store, "ab").status().code() == Code::invalid_argument);
  CHECK(gcs::find_search(store, "zzzzzz").status().code() == Code::not_found);
  // The summary users see leaves the submissions out and gives each trial's values by epoch.
  auto j = gcs::search_summary_json(s);
  CHECK_FALSE(j["trials"][0].contains("submission"));
  CHECK(j["trials"][0]["values"] == nlohmann::json::array({nlohmann::json::array({1, 0.81})}));
  CHECK(j["trials"][0]["settings"]["lr"] == "0.010000");
  REQUIRE(gcs::write_search_file(s).ok());
  auto file = gcs::read_search_file(dir.file("search.json"));
  REQUIRE(file.ok());
  CHECK(gcs::encode(*file) == gcs::encode(s));
  std::ofstream(dir.file("search.json")) << "{broken";
  CHECK(gcs::read_search_file(dir.path()).status().code() == Code::corrupt_data);
  CHECK(gcs::read_search_file(dir.file("nothing")).status().code() == Code::not_found);
}

TEST_CASE("search supervisor: a diverged trial (NaN) ranks last and is never the best, and survives the record", "[tune]") {
  gcs::InMemoryStore store;
  FakeJobs jobs{store};
  actors::SearchSupervisor sup(store, jobs.host());
  auto s = make_search(3, 3, "asha", 2, "");
  REQUIRE(gcs::put_search(store, s).ok());
  sup.tick();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  report(store, s.trials[0].job, 1, 0.6, 1);
  report(store, s.trials[1].job, 1, nan, 2);  // NaN accuracy: judged the worst, stopped
  sup.tick();
  auto now = read(store, s.id);
  CHECK(now.trials[1].state == "CANCELLED");
  CHECK(now.trials[1].stopped_at == 1);
  REQUIRE(now.trials[1].epochs.size() == 1u);
  CHECK(std::isnan(now.trials[1].epochs[0].test_accuracy));  // kept as NaN through JSON (null)
  // Trial 2 is first at rung 1 after both: 0.5 against {0.6, NaN} -> top 2 of 3 -> kept.
  report(store, s.trials[2].job, 1, 0.5, 3);
  sup.tick();
  now = read(store, s.id);
  CHECK(now.trials[2].state == "PENDING");
  // Trial 2 ends NaN, trial 0 ends 0.7: trial 0 is the best.
  report(store, s.trials[2].job, 2, nan, 4);
  report(store, s.trials[0].job, 2, 0.5, 5);
  report(store, s.trials[0].job, 3, 0.7, 6);
  report(store, s.trials[2].job, 3, nan, 7);
  set_job(store, s.trials[0].job, gcs::JobState::succeeded);
  set_job(store, s.trials[2].job, gcs::JobState::succeeded);
  sup.tick();
  now = read(store, s.id);
  REQUIRE(now.state == "SUCCEEDED");
  CHECK(now.best == 0);
}

TEST_CASE("search supervisor: a job history that restarts later keeps the trial's earlier epochs, from scratch replaces them",
          "[tune]") {
  gcs::InMemoryStore store;
  FakeJobs jobs{store};
  actors::SearchSupervisor sup(store, jobs.host());
  auto s = make_search(1, 6, "fifo", 3, "");
  REQUIRE(gcs::put_search(store, s).ok());
  sup.tick();
  const JobId job = s.trials[0].job;
  for (int e = 1; e <= 3; ++e) report(store, job, e, 0.5 + 0.1 * e, e);
  sup.tick();
  CHECK(read(store, s.id).trials[0].epochs.size() == 3u);
  // The GCS lost the history; the job resumed from its checkpoint of epoch 2 and wrote epoch 3 again.
  REQUIRE(store.remove(gcs::kJobEpochsTable, job.hex()).ok());
  sup.tick();
  CHECK(read(store, s.id).trials[0].epochs.size() == 3u);  // an empty history changes nothing
  report(store, job, 3, 0.77, 10);
  sup.tick();
  auto now = read(store, s.id);
  REQUIRE(now.trials[0].epochs.size() == 3u);
  CHECK(now.trials[0].epochs[0].test_accuracy == Approx(0.6));
  CHECK(now.trials[0].epochs[2].test_accuracy == Approx(0.77));
  // Restarted from scratch: epoch 1 again replaces everything.
  report(store, job, 1, 0.4, 20);
  sup.tick();
  now = read(store, s.id);
  REQUIRE(now.trials[0].epochs.size() == 1u);
  CHECK(now.trials[0].epochs[0].test_accuracy == Approx(0.4));
}
