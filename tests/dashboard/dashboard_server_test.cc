// The server around the API: the embedded page, the token policy (loopback needs none; elsewhere
// header or query token, else 401), the live stream (a document at once, every interval, and at
// once on an event; bounded in number) and a prompt stop with streams open.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "dashboard/api_params.h"
#include "dashboard/auth.h"
#include "dashboard/dashboard_address.h"
#include "tests/dashboard/dashboard_fixture.h"

using namespace troupe;
using namespace troupe::testing;
using Clock = std::chrono::steady_clock;

namespace {

// Reads /api/stream on a thread of its own and collects the SSE messages it gets.
class StreamReader {
 public:
  explicit StreamReader(int port, std::string path = "/api/stream")
      : client_("127.0.0.1", port), path_(std::move(path)) {
    client_.set_read_timeout(10, 0);
    thread_ = std::thread([this] { run(); });
  }
  ~StreamReader() {
    quit_ = true;
    client_.stop();  // closes the connection the reader thread waits on
    if (thread_.joinable()) thread_.join();
  }

  // Waits until `count` cluster documents arrived; returns them all.
  std::vector<Json> wait_for(size_t count, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return docs_.size() >= count || finished_; });
    return docs_;
  }
  int status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  bool finished() {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_;
  }
  void wait_finished(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return finished_; });
  }

 private:
  void run() {
    std::string buffer;
    auto res = client_.Get(
        path_.c_str(),
        [&](const httplib::Response& r) {
          std::lock_guard<std::mutex> lock(mu_);
          status_ = r.status;
          return true;
        },
        [&](const char* data, size_t len) {
          buffer.append(data, len);
          for (size_t end; (end = buffer.find("\n\n")) != std::string::npos; buffer.erase(0, end + 2)) {
            const std::string msg = buffer.substr(0, end);
            if (msg.find("event: cluster\n") == std::string::npos) continue;
            const size_t data_at = msg.find("data: ");
            std::lock_guard<std::mutex> lock(mu_);
            docs_.push_back(Json::parse(msg.substr(data_at + 6)));
            cv_.notify_all();
          }
          return !quit_.load();
        });
    std::lock_guard<std::mutex> lock(mu_);
    if (res && status_ == 0) status_ = res->status;
    finished_ = true;
    cv_.notify_all();
  }

  httplib::Client client_;
  std::string path_;
  std::atomic<bool> quit_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Json> docs_;
  int status_ = 0;
  bool finished_ = false;
  std::thread thread_;
};

std::string node_state(const Json& view, const std::string& id) {
  for (const Json& n : view.at("nodes")) {
    if (n.at("id") == id) return n.at("state");
  }
  return "";
}

}  // namespace

TEST_CASE("the page is served at / with nothing from other origins", "[dashboard]") {
  DashboardFixture f;
  f.start();
  auto res = f.client()->Get("/");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(res->get_header_value("Content-Type").find("text/html") == 0);
  CHECK(res->get_header_value("Content-Security-Policy").find("default-src 'none'") != std::string::npos);
  const std::string& page = res->body;
  CHECK(page.find("<table") != std::string::npos);
  CHECK(page.find("/api/stream") != std::string::npos);
  CHECK(page.find("/api/cluster") != std::string::npos);
  // The views beyond the overview, and the endpoints they read.
  for (const char* part : {"id=\"view-job\"", "id=\"view-events\"", "id=\"view-logs\"", "id=\"chart-loss\"",
                           "id=\"chart-timeline\"", "/api/logs?", "/timeline?", "/api/events?", "getContext(\"2d\")",
                           // The long lists, read a page at a time with next and previous.
                           "pagedTable(\"actors\", \"/api/actors\"", "pagedTable(\"nodes\", \"/api/nodes\"",
                           "pagedTable(\"jobs\", \"/api/jobs\"", "id=\"actors-next\"", "id=\"actors-prev\"",
                           "id=\"nodes-next\"", "id=\"jobs-next\"", "id=\"searches-next\""}) {
    INFO(part);
    CHECK(page.find(part) != std::string::npos);
  }
  // No external assets: no URL with a scheme, no src= attribute at all.
  CHECK(page.find("http://") == std::string::npos);
  CHECK(page.find("https://") == std::string::npos);
  CHECK(page.find("src=") == std::string::npos);
  CHECK(page.find("innerHTML") == std::string::npos);  // cluster text goes in as text only
}

TEST_CASE("loopback addresses need no token, every other address does", "[dashboard]") {
  using dashboard::is_loopback_address;
  CHECK(is_loopback_address("127.0.0.1"));
  CHECK(is_loopback_address("127.0.0.2"));
  CHECK(is_loopback_address("127.255.1.9"));
  CHECK(is_loopback_address("localhost"));
  CHECK(is_loopback_address("::1"));
  CHECK(is_loopback_address("[::1]"));
  CHECK_FALSE(is_loopback_address("0.0.0.0"));
  CHECK_FALSE(is_loopback_address("::"));
  CHECK_FALSE(is_loopback_address("10.0.0.5"));
  CHECK_FALSE(is_loopback_address("128.0.0.1"));
  CHECK_FALSE(is_loopback_address("example.org"));
  CHECK_FALSE(is_loopback_address(""));

  using dashboard::AuthResult;
  using dashboard::check_token;
  CHECK(check_token("Bearer s3cret", "", "s3cret") == AuthResult::ok);
  CHECK(check_token("", "s3cret", "s3cret") == AuthResult::ok);
  CHECK(check_token("Bearer wrong", "s3cret", "s3cret") == AuthResult::ok);  // either one is enough
  CHECK(check_token("", "", "s3cret") == AuthResult::missing);
  CHECK(check_token("Basic s3cret", "", "s3cret") == AuthResult::missing);
  CHECK(check_token("Bearer s3cre", "", "s3cret") == AuthResult::wrong);
  CHECK(check_token("", "s3cret!", "s3cret") == AuthResult::wrong);
  CHECK(check_token("Bearer ", "", "") == AuthResult::wrong);  // never against an empty token
}

TEST_CASE("a dashboard that requires the token answers 401 without it and serves with it", "[dashboard]") {
  DashboardFixture f;
  seed_cluster(f.store());
  f.start([](dashboard::DashboardOptions& o) { o.auth = dashboard::DashboardOptions::Auth::always; });
  CHECK(f.server().token_required());
  int status = 0;
  Json j = f.get("/api/cluster", &status);
  CHECK(status == 401);
  CHECK(j.at("error").get<std::string>().find("token") != std::string::npos);
  f.get("/api/cluster?token=wrong", &status);
  CHECK(status == 401);
  f.get("/api/cluster", &status, {{"Authorization", "Bearer nope"}});
  CHECK(status == 401);
  for (const char* path : {"/", "/api/nodes", "/api/stream", "/api/nothing"}) {
    auto res = f.client()->Get(path);
    REQUIRE(res);
    INFO(path);
    CHECK(res->status == 401);
  }
  CHECK(f.ok("/api/cluster?token=secret-token").at("nodes").size() == 3);
  f.get("/api/nodes", &status, {{"Authorization", "Bearer secret-token"}});
  CHECK(status == 200);
  auto page = f.client()->Get("/?token=secret-token");
  REQUIRE(page);
  CHECK(page->status == 200);
}

TEST_CASE("a dashboard bound to a non-loopback address requires the token", "[dashboard]") {
  // 0.0.0.0 listens on every interface, loopback included, so the test can still connect.
  DashboardFixture f;
  seed_cluster(f.store());
  f.start([](dashboard::DashboardOptions& o) { o.bind = "0.0.0.0"; });
  CHECK(f.server().token_required());
  CHECK(f.server().url().rfind("http://", 0) == 0);
  CHECK(f.server().url().find("0.0.0.0") == std::string::npos);  // the hostname, which people can use
  int status = 0;
  f.get("/api/nodes", &status);
  CHECK(status == 401);
  f.ok("/api/nodes?token=secret-token");

  // Without a token to check against it does not start at all.
  auto none = dashboard::DashboardServer::start([&] {
    dashboard::DashboardOptions o;
    o.bind = "0.0.0.0";
    o.store = std::make_shared<gcs::InMemoryStore>();
    return o;
  }());
  CHECK(none.status().code() == Code::invalid_argument);
}

TEST_CASE("a dashboard on 127.0.0.2 is loopback: no token needed", "[dashboard]") {
  DashboardFixture f;
  seed_cluster(f.store());
  f.start([](dashboard::DashboardOptions& o) { o.bind = "127.0.0.2"; });
  CHECK_FALSE(f.server().token_required());
  CHECK(f.server().url() == "http://127.0.0.2:" + std::to_string(f.server().port()));
  httplib::Client client("127.0.0.2", f.server().port());
  auto res = client.Get("/api/nodes");
  REQUIRE(res);
  CHECK(res->status == 200);
}

TEST_CASE("the live stream sends the document at once and then every interval", "[dashboard]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  f.start([](dashboard::DashboardOptions& o) { o.stream_interval = std::chrono::milliseconds(300); });
  StreamReader reader(f.server().port());
  auto docs = reader.wait_for(3, std::chrono::seconds(5));
  REQUIRE(docs.size() >= 3);
  CHECK(reader.status() == 200);
  CHECK(docs[0].at("nodes").size() == 3);
  CHECK(docs[0].contains("summary"));
  CHECK(docs[0].at("actors").size() == 7);
  // actors=0, as the page asks: no actor entries, the summary still counts them.
  StreamReader counts_only(f.server().port(), "/api/stream?actors=0");
  auto lean = counts_only.wait_for(1, std::chrono::seconds(5));
  REQUIRE(lean.size() >= 1);
  CHECK(lean[0].at("actors").empty());
  CHECK(lean[0].at("summary").at("actors") == 7);
  CHECK(lean[0].at("nodes").size() == 3);
}

TEST_CASE("an event pushes a document long before the interval", "[dashboard]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  f.start([](dashboard::DashboardOptions& o) { o.stream_interval = std::chrono::milliseconds(10000); });
  StreamReader reader(f.server().port());
  REQUIRE(reader.wait_for(1, std::chrono::seconds(5)).size() == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past the minimum gap
  // The worker node dies: record and event, as the cluster manager writes them.
  gcs::NodeRecord n = c.worker;
  n.state = gcs::NodeState::dead;
  n.death_reason = "killed by the test";
  REQUIRE(gcs::Table<gcs::NodeRecord>(f.store()).put(n).ok());
  const auto t0 = Clock::now();
  REQUIRE(gcs::record_event(f.store(), {gcs::now_ms(), "node_died", n.id.hex(), "node died: killed by the test"}).ok());
  auto docs = reader.wait_for(2, std::chrono::seconds(5));
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  REQUIRE(docs.size() == 2);
  CHECK(waited < 2000);
  CHECK(node_state(docs[1], c.worker.id.hex()) == "DEAD");
}

TEST_CASE("live streams are bounded and end promptly when the server stops", "[dashboard]") {
  DashboardFixture f;
  seed_cluster(f.store());
  f.start([](dashboard::DashboardOptions& o) {
    o.max_streams = 1;
    o.stream_interval = std::chrono::milliseconds(200);
  });
  StreamReader first(f.server().port());
  REQUIRE(first.wait_for(1, std::chrono::seconds(5)).size() == 1);
  CHECK(f.server().live_streams() == 1);
  Json refused = f.fails("/api/stream", 503);
  CHECK(refused.at("error").get<std::string>().find("dashboard_max_streams") != std::string::npos);
  CHECK(f.fails("/api/stream?events=x", 400).at("parameter") == "events");
  CHECK(f.fails("/api/stream?actors=-1", 400).at("parameter") == "actors");
  // The API still answers while the stream holds its thread.
  f.ok("/api/nodes");

  const auto t0 = Clock::now();
  f.server().stop();
  const auto stop_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  CHECK(stop_ms < 3000);
  first.wait_finished(std::chrono::seconds(5));
  CHECK(first.finished());
  f.server().stop();  // idempotent
}

TEST_CASE("the stream reports a GCS outage as an error event and recovers", "[dashboard]") {
  DashboardFixture f;
  seed_cluster(f.store());
  f.start([](dashboard::DashboardOptions& o) { o.stream_interval = std::chrono::milliseconds(100); });
  f.store().set_down(true);
  httplib::Client client("127.0.0.1", f.server().port());
  client.set_read_timeout(5, 0);
  std::string got;
  auto res = client.Get("/api/stream", [&](const char* data, size_t len) {
    got.append(data, len);
    return got.find("event: error") == std::string::npos;  // stop once the error came
  });
  CHECK(got.find("event: error") != std::string::npos);
  CHECK(got.find("\"status\":503") != std::string::npos);
  f.store().set_down(false);
  StreamReader reader(f.server().port());
  CHECK(reader.wait_for(1, std::chrono::seconds(5)).size() == 1);
}

dashboard::QueryParams QP(std::initializer_list<std::pair<const std::string, std::string>> params) {
  return dashboard::QueryParams(std::multimap<std::string, std::string>(params));
}

TEST_CASE("query parameters are checked strictly", "[dashboard]") {
  int64_t v = 0;
  CHECK_FALSE(QP({{"limit", "42"}}).integer("limit", 1, 100, 7, &v));
  CHECK(v == 42);
  CHECK_FALSE(QP({}).integer("limit", 1, 100, 7, &v));
  CHECK(v == 7);
  for (const char* bad : {"", "4.2", "0x10", " 4", "4 ", "+4", "-", "101", "0", "1e2", "99999999999999999999"}) {
    INFO(bad);
    auto e = QP({{"limit", bad}}).integer("limit", 1, 100, 7, &v);
    REQUIRE(e);
    CHECK(e->parameter == "limit");
    CHECK(e->message.find("limit") != std::string::npos);
  }
  std::string s;
  CHECK_FALSE(QP({{"node", "AbC1"}}).hex_prefix("node", &s));
  CHECK(s == "abc1");
  CHECK(QP({{"node", "abg"}}).hex_prefix("node", &s));
  CHECK(QP({{"node", ""}}).hex_prefix("node", &s));
  CHECK_FALSE(QP({{"state", "alive"}}).one_of("state", {"ALIVE", "DEAD"}, &s));
  CHECK(s == "ALIVE");
  CHECK(QP({{"state", "x"}}).one_of("state", {"ALIVE", "DEAD"}, &s)->message.find("ALIVE, DEAD") !=
        std::string::npos);
  CHECK_FALSE(QP({{"token", "t"}, {"limit", "1"}}).check_known({"limit"}));
  CHECK(QP({{"limits", "1"}}).check_known({"limit"})->parameter == "limits");
}

TEST_CASE("the dashboard's address round-trips through the GCS", "[dashboard]") {
  gcs::InMemoryStore store;
  auto none = dashboard::read_dashboard_address(store);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  dashboard::DashboardAddress a;
  a.url = "http://10.0.0.1:8265";
  a.token_required = true;
  a.pid = 42;
  REQUIRE(dashboard::write_dashboard_address(store, a).ok());
  auto back = dashboard::read_dashboard_address(store);
  REQUIRE(back.ok());
  REQUIRE(back->has_value());
  CHECK((*back)->url == a.url);
  CHECK((*back)->token_required);
  CHECK((*back)->pid == 42);
  CHECK(dashboard::dashboard_link(**back, "tok") == "http://10.0.0.1:8265/?token=tok");
  a.token_required = false;
  CHECK(dashboard::dashboard_link(a, "tok") == "http://10.0.0.1:8265");
  REQUIRE(store.put(dashboard::kClusterTable, dashboard::kDashboardKey, "{\"url\": 5}").ok());
  CHECK(dashboard::read_dashboard_address(store).status().code() == Code::corrupt_data);
  REQUIRE(dashboard::clear_dashboard_address(store).ok());
  CHECK_FALSE(dashboard::read_dashboard_address(store)->has_value());
}
