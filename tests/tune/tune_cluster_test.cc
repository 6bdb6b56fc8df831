// Whole searches on a real local cluster through `troupe tune`, as users run them: an ASHA search
// on Fashion-MNIST against the default settings, a node SIGKILLed mid-search, the head killed and
// restarted mid-search, `--resume` after a whole-cluster restart, `troupe tune stop`, and bad input
// refused before anything starts.
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "tests/cluster/cluster_fixture.h"
#include "tests/jobs/job_fault_helpers.h"

using namespace troupe::testing;

namespace {

// (Commands run inside sh -c '...': no single quotes; a value holding commas is double-quoted.)
const char* kSpace = R"x(--search "lr=loguniform(3e-4,1e-2)" --search "hidden=choice(128,256,\"256,128\",\"512,256\")")x";

Json search_of(ClusterFixture& c, const std::string& id) {
  auto r = c.troupe("tune show " + id.substr(0, 8) + " --json", 60);
  if (r.exit_code != 0) return Json();
  return Json::parse(r.out);
}

std::string trial_state(const Json& s, int trial) { return s.at("trials")[trial].at("state").get<std::string>(); }

// Polls the search until `done` holds (or `limit` passes); the last document read.
template <class F>
Json wait_search(ClusterFixture& c, const std::string& id, std::chrono::seconds limit, F done) {
  Json s;
  poll_until([&] {
    s = search_of(c, id);
    return !s.is_null() && done(s);
  }, limit, std::chrono::milliseconds(300));
  return s;
}

bool ended(const Json& s) {
  const std::string st = s.at("state").get<std::string>();
  return st == "SUCCEEDED" || st == "FAILED" || st == "CANCELLED";
}

std::string slurp_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string detach_search(ClusterFixture& c, const std::string& args) {
  auto r = c.troupe("tune " + args + " --detach", 120);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  return r.last_line();
}

}  // namespace

TEST_CASE("tune: a 12-trial ASHA search beats the default settings, stops trials at rungs and keeps the best model",
          "[tune][cluster]") {
  ClusterFixture c;
  c.up("--nodes 1 --cpus 4");
  const double baseline = fault_free_accuracy(c, "--epochs 6");
  const std::string dir = c.home() + "/search";
  const std::string best = c.home() + "/best.safetensors";
  auto r = c.troupe(std::string("tune ") + kSpace + " --trials 12 --epochs 6 --scheduler asha --seed 1 --search-dir " +
                        dir + " --save " + best + " --json --no-progress",
                    500);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  const Json s = Json::parse(r.last_line());
  CHECK(s.at("state") == "SUCCEEDED");
  REQUIRE(s.at("trials").size() == 12u);
  const int best_index = s.at("best").get<int>();
  REQUIRE(best_index >= 0);
  const Json& b = s.at("trials")[best_index];
  CHECK(b.at("state") == "SUCCEEDED");
  CHECK(b.at("values").size() == 6u);
  // The best trial's job, as `troupe status` has it, against the default settings' job.
  Json view = c.status(50);
  const double best_accuracy = accuracy_of(view, b.at("job").get<std::string>());
  CHECK(best_accuracy == Approx(s.at("best_value").get<double>()).margin(1e-9));
  WARN("default settings: " << baseline << ", best trial " << best_index << " (" << b.at("settings").dump()
                             << "): " << best_accuracy << "; trial-epochs " << s.at("trial_epochs") << " of "
                             << s.at("trial_epochs_budget"));
  CHECK(best_accuracy >= baseline);
  // The stopped trials ended CANCELLED at a rung (epochs 1 and 3 with eta 3 and 6 epochs), having
  // trained no further than a rung's epoch and the poll after it.
  int stopped = 0;
  for (const Json& t : s.at("trials")) {
    INFO(t.dump());
    const std::string state = t.at("state");
    CHECK((state == "SUCCEEDED" || state == "CANCELLED"));
    if (state != "CANCELLED") continue;
    ++stopped;
    const int rung = t.at("stopped_at").get<int>();
    CHECK((rung == 1 || rung == 3));
    CHECK(t.at("message").get<std::string>().find("stopped early at rung " + std::string(rung == 1 ? "1" : "2") +
                                                  " (epoch " + std::to_string(rung) + ")") != std::string::npos);
    CHECK(t.at("values").size() < 6u);
    Json job = job_of(view, t.at("job").get<std::string>());
    CHECK(job.at("state") == "CANCELLED");
    CHECK(job.at("message").get<std::string>().find("stopped early at rung") != std::string::npos);
  }
  CHECK(stopped >= 1);
  // Every decision follows ASHA's rule (tune/asha.h: a trial goes on when among the best ceil(k/3)
  // of the k that reached the rung so far, itself included), whatever order the head saw the
  // arrivals in: a trial was judged against at least the trials that reached the rung more than a
  // poll before it, and at most those that reached it by a poll after it. (How much a search saves
  // depends on that order — here the larger, slower models arrive later and are better, which
  // keeps more of them; bench/tune_asha.sh measures it: 0.51x fifo's trial-epochs.)
  const int64_t slack_ms = 1500;  // the head polls twice a second; writes in flight
  for (int rung : {1, 3}) {
    struct Arrival {
      int index;
      int64_t when;
      double value;
      bool stopped, passed;
    };
    std::vector<Arrival> arrivals;
    for (const Json& t : s.at("trials")) {
      Arrival a{t.at("index").get<int>(), -1, 0, t.at("stopped_at").get<int>() == rung, false};
      for (const Json& e : t.at("epochs"))
        if (e.at("epoch").get<int>() == rung) a.when = e.at("time_ms").get<int64_t>();
      for (const Json& v : t.at("values"))
        if (v.at(0).get<int>() == rung) a.value = v.at(1).get<double>();
      for (const Json& r : t.at("rungs_passed")) a.passed = a.passed || r.get<int>() == rung;
      if (a.when >= 0) arrivals.push_back(a);
    }
    for (const Arrival& a : arrivals) {
      int sure = 0, better_sure = 0, maybe = 0, not_worse_maybe = 0;
      for (const Arrival& o : arrivals) {
        if (o.index == a.index) continue;
        if (o.when < a.when - slack_ms) {
          ++sure;
          better_sure += o.value > a.value ? 1 : 0;
        }
        if (o.when <= a.when + slack_ms) {
          ++maybe;
          not_worse_maybe += o.value >= a.value ? 1 : 0;
        }
      }
      const auto top = [](int k) { return (k + 2) / 3; };  // ceil(k / 3)
      INFO("rung " << rung << ", trial " << a.index << " (" << a.value << "): " << sure << " arrived surely before it ("
                   << better_sure << " better), " << maybe << " maybe (" << not_worse_maybe << " as good or better)");
      if (a.stopped) CHECK(not_worse_maybe >= top(sure + 1));  // enough were better before it
      if (a.passed) CHECK(better_sure < top(maybe + 1));        // not too many were
    }
  }
  // What was trained past the stops: a stopped trial may finish the epoch it was in when the stop
  // reached it (the head decides twice a second, the trial does not wait for it).
  int decided = 0;
  for (const Json& t : s.at("trials"))
    decided += t.at("state") == "CANCELLED" ? t.at("stopped_at").get<int>()
               : t.at("values").empty()     ? 0
                                            : t.at("values").back().at(0).get<int>();
  const int spent = s.at("trial_epochs").get<int>();
  WARN("trial-epochs by ASHA's decisions: " << decided << ", trained: " << spent << " (" << stopped << " stops)");
  CHECK(decided < 72);  // fewer than every trial to its end
  CHECK(spent <= decided + stopped);
  // The best trial's model, copied where --save said, is the one the trial wrote.
  REQUIRE(std::filesystem::exists(best));
  CHECK(slurp_file(best) == slurp_file(b.at("model_path").get<std::string>()));
  CHECK(std::filesystem::file_size(best) > 100000u);
  auto predicted = c.troupe("model inspect " + best, 60);
  INFO(predicted.both());
  CHECK(predicted.exit_code == 0);
  // The search as the other views show it.
  auto show = c.troupe("tune show " + s.at("id").get<std::string>().substr(0, 6), 60);
  CHECK(show.exit_code == 0);
  CHECK(show.out.find("BEST") != std::string::npos);
  CHECK(show.out.find("trial-epochs: " + std::to_string(s.at("trial_epochs").get<int>()) + " of 72") != std::string::npos);
  auto status = c.troupe("status", 60);
  CHECK(status.out.find("SEARCHES (1)") != std::string::npos);
  REQUIRE(view.at("searches").size() == 1u);
  CHECK(view.at("searches")[0].at("best_so_far").at("trial") == best_index);
  CHECK(view.at("searches")[0].at("best_so_far").at("final") == true);
  auto mirror = Json::parse(slurp_file(dir + "/search.json"));
  CHECK(mirror.at("state") == "SUCCEEDED");
}

TEST_CASE("tune: a node SIGKILLed mid-search: its trials restart under their jobs' policy and the search completes",
          "[tune][cluster][faults]") {
  ClusterFixture c;
  c.up("--nodes 2 --cpus 2");
  const std::string id = detach_search(c, std::string("--search \"lr=grid(0.001,0.002,0.003)\" --search \"hidden=grid(64,128)\" ") +
                                              "--epochs 5 --search-dir " + c.home() + "/search");
  // Once every trial runs and has an epoch behind it, kill a (non-head) node that holds some.
  std::pair<std::string, pid_t> victim;
  std::set<std::string> victims_jobs;
  Json s = wait_search(c, id, std::chrono::seconds(120), [&](const Json& doc) {
    for (const Json& t : doc.at("trials"))
      if (t.at("state") != "RUNNING" || t.at("values").empty()) return false;
    Json view = c.try_status(0);
    if (view.is_null()) return false;
    for (const Json& t : doc.at("trials")) {
      auto host = node_hosting(view, t.at("job").get<std::string>());
      if (host.second == 0) continue;
      if (victim.second == 0) victim = host;
      if (host.first == victim.first) victims_jobs.insert(t.at("job").get<std::string>());
    }
    return victim.second != 0;
  });
  INFO(s.dump() << c.logs_tail());
  REQUIRE(victim.second > 0);
  REQUIRE(::kill(victim.second, SIGKILL) == 0);
  s = wait_search(c, id, std::chrono::seconds(300), ended);
  INFO(s.dump() << c.logs_tail());
  REQUIRE(ended(s));
  CHECK(s.at("state") == "SUCCEEDED");
  // Every trial trained all its epochs (those on the dead node restarted by their jobs), and the
  // best is named as without the fault.
  for (const Json& t : s.at("trials")) {
    CHECK(t.at("state") == "SUCCEEDED");
    CHECK(t.at("values").size() == 5u);
  }
  CHECK(s.at("best").get<int>() >= 0);
  CHECK(s.at("trial_epochs").get<int>() == 30);
  Json view = c.status(2000);
  for (const std::string& job : victims_jobs) {
    CHECK_FALSE(event_of(view, "job_restarting", job).is_null());
  }
}

TEST_CASE("tune: the head killed mid-search and restarted goes on with the search where it was",
          "[tune][cluster][faults]") {
  ClusterFixture c;
  c.up("--nodes 1 --cpus 2");
  const std::string id = detach_search(c, std::string("--search \"lr=grid(0.001,0.002,0.003,0.004)\" --epochs 4 ") +
                                              "--max-concurrent 2 --search-dir " + c.home() + "/search");
  Json s = wait_search(c, id, std::chrono::seconds(120), [](const Json& doc) {
    return trial_state(doc, 0) == "RUNNING" && trial_state(doc, 3) == "WAITING";
  });
  REQUIRE(trial_state(s, 3) == "WAITING");
  std::vector<std::string> jobs;
  for (const Json& t : s.at("trials")) jobs.push_back(t.at("job"));
  c.kill_and_restart_head("--cpus 2");
  s = wait_search(c, id, std::chrono::seconds(300), ended);
  INFO(s.dump() << c.logs_tail());
  CHECK(s.at("state") == "SUCCEEDED");
  // Every trial ran once, as the job it was given when the search was made.
  Json view = c.status(2000);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(s.at("trials")[i].at("state") == "SUCCEEDED");
    CHECK(s.at("trials")[i].at("job") == jobs[i]);
    CHECK(job_of(view, jobs[i]).at("state") == "SUCCEEDED");
  }
}

TEST_CASE("tune: --resume after a whole-cluster restart runs the unfinished trials and keeps the finished ones",
          "[tune][cluster][faults]") {
  ClusterFixture c;
  c.up("--cpus 2");
  const std::string dir = c.home() + "/search";
  const std::string id = detach_search(c, "--search \"lr=grid(0.001,0.002,0.003)\" --epochs 3 --max-concurrent 1 "
                                          "--search-dir " + dir);
  Json s = wait_search(c, id, std::chrono::seconds(120), [](const Json& doc) {
    return trial_state(doc, 0) == "SUCCEEDED" && trial_state(doc, 1) == "RUNNING";
  });
  REQUIRE(trial_state(s, 0) == "SUCCEEDED");
  const std::string first_job = s.at("trials")[0].at("job");
  const std::string second_job = s.at("trials")[1].at("job");
  auto down = c.troupe("down", 60);
  INFO(down.both());
  REQUIRE(down.exit_code == 0);
  // `down` paused the search before it cancelled the trials' jobs: the running trial is not counted
  // as ended and no other was started in its place.
  CHECK(down.out.find("search " + id.substr(0, 8) + " paused") != std::string::npos);
  const Json mirror = Json::parse(slurp_file(dir + "/search.json"));
  CHECK(mirror.at("paused") == true);
  CHECK(mirror.at("state") == "RUNNING");
  CHECK(mirror.at("trials")[0].at("state") == "SUCCEEDED");
  CHECK(mirror.at("trials")[1].at("state") == "RUNNING");
  CHECK(mirror.at("trials")[2].at("state") == "WAITING");
  c.up("--cpus 2");
  // The new cluster's GCS knows nothing of it; its directory does.
  auto unknown = c.troupe("tune show " + id.substr(0, 8));
  CHECK(unknown.exit_code != 0);
  auto r = c.troupe("tune --resume " + dir + " --json --no-progress", 300);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  s = Json::parse(r.last_line());
  CHECK(s.at("id") == id);
  CHECK(s.at("state") == "SUCCEEDED");
  CHECK(s.at("trials")[0].at("job") == first_job);  // not run again
  CHECK(s.at("trials")[1].at("job") != second_job);  // started over as a new job
  for (const Json& t : s.at("trials")) {
    CHECK(t.at("state") == "SUCCEEDED");
    CHECK(t.at("values").size() == 3u);
  }
  // A search that ended cannot be resumed again.
  auto again = c.troupe("tune --resume " + dir);
  CHECK(again.exit_code != 0);
  CHECK(again.err.find("already ended") != std::string::npos);
}

TEST_CASE("tune: troupe tune stop cancels the running trials and the search", "[tune][cluster]") {
  ClusterFixture c;
  c.up("--cpus 2");
  const std::string id = detach_search(c, "--search \"lr=grid(0.001,0.002,0.003)\" --epochs 50 --max-concurrent 2 "
                                          "--search-dir " + c.home() + "/search");
  Json s = wait_search(c, id, std::chrono::seconds(60), [](const Json& doc) { return trial_state(doc, 0) == "RUNNING"; });
  REQUIRE(trial_state(s, 0) == "RUNNING");
  auto stop = c.troupe("tune stop " + id.substr(0, 8));
  INFO(stop.both());
  REQUIRE(stop.exit_code == 0);
  s = wait_search(c, id, std::chrono::seconds(30), ended);
  CHECK(s.at("state") == "CANCELLED");
  Json view = c.status();
  for (const Json& t : s.at("trials")) {
    CHECK(t.at("state") == "CANCELLED");
    if (t.at("started_ms").get<int64_t>() == 0) continue;
    Json job = job_of(view, t.at("job").get<std::string>());
    CHECK(job.at("state") == "CANCELLED");
    CHECK(job.at("message") == "the search was stopped");
  }
  CHECK(s.at("trials")[2].at("message").get<std::string>().find("never started") != std::string::npos);
}

TEST_CASE("tune: bad input is refused with a clear error before anything starts", "[tune][cluster]") {
  ClusterFixture c;
  c.up("--cpus 2");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--search \"learning-rate=choice(1,2)\" --trials 2", "troupe submit has no flag --learning-rate"},
      {"--search \"lr=choice()\" --trials 2", "an empty choice"},
      {"--search \"lr=uniform(0.1,0.01)\" --trials 2", "low (0.1) must be below high (0.01)"},
      {"--search \"lr=loguniform(0,1)\" --trials 2", "loguniform needs low > 0"},
      {"--search \"lr=choice(0.1)\" --trials 2 --metric val_f1", "--metric val_f1: no trial reports it"},
      {"--search \"lr=choice(0.1)\" --trials 2 --loss mse", "--metric test_accuracy: no trial reports it"},
      {"--search \"lr=choice(0.1,0.2)\"", "--trials N"},
      {"--search \"epochs=choice(1,2)\" --trials 2", "--search epochs: cannot be searched"},
      {"--search \"batch-size=grid(64,0)\"", "the value '0' is not one --batch-size takes"},
      {"--search \"lr=choice(0.1)\" --trials 1 --scheduler asha --epochs 1", "no rung below"},
      {"--search \"lr=choice(0.1)\" --trials 2 --workers 40", "does not divide among 40 workers"},
      {"--trials 2", "give at least one --search"},
  };
  for (const auto& [args, message] : cases) {
    auto r = c.troupe("tune " + args + " --search-dir " + c.home() + "/bad");
    INFO(args << "\n" << r.both());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(message) != std::string::npos);
  }
  Json view = c.status();
  CHECK(view.at("searches").empty());
  CHECK(view.at("jobs").empty());
  CHECK_FALSE(std::filesystem::exists(c.home() + "/bad"));
}

TEST_CASE("tune: a trial may itself be a multi-worker job (async, 2 workers and a parameter server)", "[tune][cluster]") {
  ClusterFixture c;
  c.up("--nodes 1 --cpus 4");
  auto r = c.troupe("tune --search \"lr=grid(0.001,0.003)\" --strategy async --workers 2 --ps 1 --epochs 2 "
                    "--scheduler fifo --search-dir " + c.home() + "/search --json --no-progress",
                    300);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  Json s = Json::parse(r.last_line());
  CHECK(s.at("state") == "SUCCEEDED");
  Json view = c.status();
  for (const Json& t : s.at("trials")) {
    CHECK(t.at("state") == "SUCCEEDED");
    CHECK(t.at("values").size() == 2u);
    Json job = job_of(view, t.at("job").get<std::string>());
    CHECK(job.at("strategy") == "async");
    CHECK(job.at("workers") == 2);
    CHECK(job.at("ps") == 1);
    CHECK(job.at("actors").size() == 3u);
  }
}
