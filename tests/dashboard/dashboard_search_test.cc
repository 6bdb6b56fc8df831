// /api/searches and /api/searches/<id> over HTTP against an InMemoryStore holding two searches
// written with gcs::put_search: an ended ASHA search (a best trial, a trial stopped early) and a
// running one; and the page's search views.
#include <catch2/catch.hpp>

#include "gcs/search_record.h"
#include "tests/dashboard/dashboard_fixture.h"

using namespace troupe;
using namespace troupe::testing;

namespace {

SearchId search_id(const std::string& hex) {
  auto id = SearchId::from_hex(hex);
  REQUIRE(id.ok());
  return *id;
}

gcs::TrialRecord trial(int index, const std::string& lr, const std::string& state, std::vector<double> accuracy,
                       int64_t started_ms) {
  gcs::TrialRecord t;
  t.index = index;
  t.settings = {{"lr", lr}, {"batch-size", "64"}};
  t.job = JobId::random();
  t.state = state;
  for (size_t e = 0; e < accuracy.size(); ++e) {
    gcs::EpochResult r;
    r.epoch = static_cast<int>(e) + 1;
    r.train_loss = 1.0 / (e + 1);
    r.test_accuracy = accuracy[e];
    r.time_ms = started_ms + 1000 * static_cast<int64_t>(e + 1);
    t.epochs.push_back(r);
  }
  t.started_ms = started_ms;
  if (gcs::trial_finished(state)) t.finished_ms = started_ms + 1000 * static_cast<int64_t>(accuracy.size()) + 500;
  t.submission = R"({"secret_submission": true})";
  t.spec = {"--lr", lr};
  t.strategy = "sync";
  t.workers = 1;
  return t;
}

struct SeededSearches {
  gcs::SearchRecord ended, running;
};

// Both ids start "abcd", so "abcd" is an ambiguous prefix and "abcd1" names the ended search.
SeededSearches seed_searches(gcs::Store& store) {
  const int64_t now = gcs::now_ms();
  SeededSearches s;
  gcs::SearchRecord& a = s.ended;
  a.id = search_id("abcd1111" + std::string(24, '0'));
  a.name = "lr-sweep";
  a.state = "SUCCEEDED";
  a.scheduler = "asha";
  a.metric = "test_accuracy";
  a.mode = "max";
  a.epochs = 4;
  a.created_ms = now - 60000;
  a.space = {"lr=0.1,0.01,0.001"};
  a.trials.push_back(trial(0, "0.1", "SUCCEEDED", {0.5, 0.6, 0.7, 0.8}, now - 50000));
  a.trials.push_back(trial(1, "0.01", "CANCELLED", {0.3}, now - 50000));
  a.trials.back().stopped_at = 1;
  a.trials.back().message = "stopped early at rung 1: test_accuracy 0.3 is not in the best 1/3";
  a.trials.push_back(trial(2, "0.001", "SUCCEEDED", {0.55, 0.65, 0.72, 0.75}, now - 50000));
  a.best = 0;
  a.best_value = 0.8;
  a.message = "best: trial 0 (lr=0.1 batch-size=64) test_accuracy 0.8000; 9 trial-epochs of 12";
  a.finished_ms = now - 40000;
  REQUIRE(gcs::put_search(store, a).ok());

  gcs::SearchRecord& b = s.running;
  b.id = search_id("abcd2222" + std::string(24, 'f'));
  b.name = "still-going";
  b.state = "RUNNING";
  b.scheduler = "fifo";
  b.metric = "test_accuracy";
  b.mode = "max";
  b.epochs = 3;
  b.created_ms = now - 1000;
  b.trials.push_back(trial(0, "0.1", "RUNNING", {0.42}, now - 900));
  b.trials.push_back(trial(1, "0.01", "WAITING", {}, 0));
  REQUIRE(gcs::put_search(store, b).ok());
  return s;
}

}  // namespace

TEST_CASE("/api/searches lists searches newest first with trial counts and the best so far", "[dashboard][search]") {
  DashboardFixture f;
  SeededSearches s = seed_searches(f.store());
  f.start();
  Json all = f.ok("/api/searches");
  CHECK(all.at("total") == 2);
  CHECK(all.at("returned") == 2);
  CHECK(all.at("truncated") == false);
  const Json& list = all.at("searches");
  REQUIRE(list.size() == 2);
  CHECK(list.at(0).at("id") == s.running.id.hex());  // newest first
  CHECK(list.at(1).at("id") == s.ended.id.hex());

  const Json& ended = list.at(1);
  CHECK(ended.at("name") == "lr-sweep");
  CHECK(ended.at("state") == "SUCCEEDED");
  CHECK(ended.at("scheduler") == "asha");
  CHECK(ended.at("metric") == "test_accuracy");
  CHECK(ended.at("mode") == "max");
  CHECK(ended.at("epochs") == 4);
  CHECK(ended.at("trial_count") == 3);
  CHECK(ended.at("trials_by_state") == Json{{"SUCCEEDED", 2}, {"CANCELLED", 1}});
  CHECK(ended.at("stopped_early") == 1);
  CHECK(ended.at("best_so_far") == Json{{"trial", 0}, {"value", 0.8}, {"final", true}});
  CHECK(ended.at("created_ms") == s.ended.created_ms);
  CHECK(ended.at("message") == s.ended.message);
  CHECK(all.dump().find("secret_submission") == std::string::npos);

  const Json& running = list.at(0);
  CHECK(running.at("trials_by_state") == Json{{"RUNNING", 1}, {"WAITING", 1}});
  CHECK(running.at("stopped_early") == 0);
  // Not ended: the best last value among the trials so far, not final.
  CHECK(running.at("best_so_far").at("trial") == 0);
  CHECK(running.at("best_so_far").at("value") == Approx(0.42));
  CHECK(running.at("best_so_far").at("final") == false);

  Json one = f.ok("/api/searches?limit=1");
  REQUIRE(one.at("searches").size() == 1);
  CHECK(one.at("searches").at(0).at("id") == s.running.id.hex());
  CHECK(one.at("total") == 2);
  CHECK(one.at("truncated") == true);
  // The next page, by the cursor: the older search, and no cursor after it.
  REQUIRE(one.contains("next"));
  Json second = f.ok("/api/searches?limit=1&after=" + one.at("next").get<std::string>());
  REQUIRE(second.at("searches").size() == 1);
  CHECK(second.at("searches").at(0).at("id") == s.ended.id.hex());
  CHECK(second.at("start") == 1);
  CHECK_FALSE(second.contains("next"));
  CHECK(f.ok("/api/searches?limit=1&offset=1").at("searches") == second.at("searches"));
  CHECK(f.fails("/api/searches?after=" + s.ended.id.hex(), 400).at("parameter") == "after");  // not -<created_ms>.<id>
  Json done = f.ok("/api/searches?state=succeeded");  // case does not matter
  REQUIRE(done.at("searches").size() == 1);
  CHECK(done.at("searches").at(0).at("id") == s.ended.id.hex());

  for (const char* bad : {"abc", "0", "10001", "-1", "1e3", "", "5&limit=6"}) {
    INFO(bad);
    CHECK(f.fails(std::string("/api/searches?limit=") + bad, 400).at("parameter") == "limit");
  }
  CHECK(f.fails("/api/searches?state=LOST", 400).at("parameter") == "state");
  CHECK(f.fails("/api/searches?verbose=1", 400).at("parameter") == "verbose");
}

TEST_CASE("/api/searches/<id or prefix> is the search's summary: values per trial, the best, no submissions",
          "[dashboard][search]") {
  DashboardFixture f;
  SeededSearches s = seed_searches(f.store());
  f.start();
  Json a = f.ok("/api/searches/abcd1");
  CHECK(a == gcs::search_summary_json(s.ended));  // every trial ended: nothing depends on the clock
  CHECK(f.ok("/api/searches/" + s.ended.id.hex()) == a);
  CHECK(a.at("id") == s.ended.id.hex());
  CHECK(a.at("best") == 0);
  CHECK(a.at("best_value") == 0.8);
  CHECK(a.at("state") == "SUCCEEDED");
  CHECK(a.at("trial_epochs") == 9);
  CHECK(a.at("trial_epochs_budget") == 12);
  const Json& trials = a.at("trials");
  REQUIRE(trials.size() == 3);
  CHECK(trials.at(0).at("values") == Json::parse("[[1,0.5],[2,0.6],[3,0.7],[4,0.8]]"));
  CHECK(trials.at(0).at("settings") == Json{{"lr", "0.1"}, {"batch-size", "64"}});
  CHECK(trials.at(0).at("wall_seconds") == Approx(4.5));
  CHECK(trials.at(0).at("job") == s.ended.trials[0].job.hex());
  CHECK(trials.at(1).at("state") == "CANCELLED");
  CHECK(trials.at(1).at("stopped_at") == 1);
  CHECK(trials.at(1).at("values") == Json::parse("[[1,0.3]]"));
  CHECK(trials.at(1).at("message").get<std::string>().find("stopped early") != std::string::npos);
  CHECK(trials.at(2).at("values").size() == 4);
  for (const Json& t : trials) {
    CHECK(!t.contains("submission"));
    CHECK(!t.contains("spec"));
  }
  CHECK(a.dump().find("secret_submission") == std::string::npos);

  Json b = f.ok("/api/searches/abcd2222");
  CHECK(b.at("best") == -1);
  CHECK(b.at("trials").at(0).at("values") == Json::parse("[[1,0.42]]"));
  CHECK(b.at("trials").at(1).at("values").empty());
  CHECK(b.at("trials").at(1).at("state") == "WAITING");

  // Unknown: a whole id or a prefix no search has.
  Json missing = f.fails("/api/searches/" + SearchId::random().hex(), 404);
  CHECK(missing.at("error").get<std::string>().find("no search") != std::string::npos);
  f.fails("/api/searches/0123456", 404);
  // Malformed, too short, ambiguous, or more path: 400 naming the id.
  CHECK(f.fails("/api/searches/not-an-id", 400).at("parameter") == "id");
  CHECK(f.fails("/api/searches/abc", 400).at("parameter") == "id");
  CHECK(f.fails("/api/searches/ABCD1111", 400).at("parameter") == "id");
  CHECK(f.fails("/api/searches/" + s.ended.id.hex() + "0", 400).at("parameter") == "id");
  CHECK(f.fails("/api/searches/" + s.ended.id.hex() + "/trials", 400).at("parameter") == "id");
  Json ambiguous = f.fails("/api/searches/abcd", 400);
  CHECK(ambiguous.at("parameter") == "id");
  CHECK(ambiguous.at("error").get<std::string>().find("ambiguous") != std::string::npos);
  CHECK(f.fails("/api/searches/abcd1?verbose=1", 400).at("parameter") == "verbose");
}

TEST_CASE("search endpoints: no searches is an empty list, a GCS that is down is 503", "[dashboard][search]") {
  DashboardFixture f;
  seed_cluster(f.store());
  f.start();
  Json none = f.ok("/api/searches");
  CHECK(none.at("searches").empty());
  CHECK(none.at("total") == 0);
  CHECK(none.at("truncated") == false);
  f.fails("/api/searches/abcd1234", 404);

  seed_searches(f.store());
  f.store().set_down(true);
  for (const char* path : {"/api/searches", "/api/searches/abcd1", "/api/searches/" "abcd1111000000000000000000000000"}) {
    INFO(path);
    CHECK(f.fails(path, 503).at("error").get<std::string>().find("GCS") != std::string::npos);
  }
  f.fails("/api/searches?limit=x", 400);  // parameters are checked before the GCS is read
  f.fails("/api/searches/xyz!", 400);
  f.store().set_down(false);
  CHECK(f.ok("/api/searches").at("total") == 2);
}

TEST_CASE("the page has the searches views and reads the search endpoints", "[dashboard][search]") {
  DashboardFixture f;
  f.start();
  auto res = f.client()->Get("/");
  REQUIRE(res);
  CHECK(res->status == 200);
  const std::string& page = res->body;
  for (const char* part : {"id=\"nav-searches\"", "id=\"view-searches\"", "id=\"view-search\"", "id=\"chart-search\"",
                           "id=\"search-trials\"", "\"#/search/\"", "pagedTable(\"searches\", \"/api/searches\"", "\"/api/searches/\"",
                           "refreshSearches", "refreshSearch(arg)"}) {
    INFO(part);
    CHECK(page.find(part) != std::string::npos);
  }
  CHECK(page.find("innerHTML") == std::string::npos);
}
