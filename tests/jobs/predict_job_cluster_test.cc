// Prediction as a cluster job (issue 22, `troupe predict --workers N`) on a real local cluster with
// a real redis-server: the job's output equals one process's byte for byte; a predictor's node
// SIGKILLed while shards remain is replaced by the supervisor and every row is still predicted
// exactly once, in input order (the accounting event); status, logs, stop and bad input.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "gcs/predict_accounting.h"
#include "gcs/redis_store.h"
#include "gcs/tables.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/dashboard/dashboard_url.h"
#include "tests/data/numpy_fixture.h"
#include "tests/jobs/job_fault_helpers.h"

using namespace troupe::testing;
namespace fs = std::filesystem;

namespace {

// A model to predict with: 300 steps of the MLP on the .npy files (a trained model's accuracy, in
// about a second).
std::string train_model(ClusterFixture& c, const std::string& data) {
  const std::string model = c.home() + "/model.safetensors";
  auto r = c.troupe("train --data " + data + " --epochs 1 --max-steps 300 --no-progress --save " + model, 120);
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  return model;
}

Json predict_json(ClusterFixture& c, const std::string& args) {
  auto r = c.troupe("predict --json --no-progress " + args, 240);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  return Json::parse(r.last_line());
}

// The supervisor's accounting of the prediction job: data_accounted, every row exactly once.
std::string predict_accounting(ClusterFixture& c, const std::string& id) {
  Json e = accounting_of(c, id);
  INFO(e.dump());
  REQUIRE_FALSE(e.is_null());
  REQUIRE(e.at("kind") == "data_accounted");
  const std::string message = e.at("message").get<std::string>();
  CHECK(message.find("predicted exactly once and assembled in input order") != std::string::npos);
  return message;
}

bool parts_left(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".parts-") != std::string::npos) return true;
  return false;
}


}  // namespace

TEST_CASE("predict job: 2 predictors write the one-process outputs byte for byte, shown like a training job",
          "[jobs][cluster][predict]") {
  ClusterFixture c;
  auto up = c.up("--nodes 1 --cpus 2");
  const DashboardUrl url = dashboard_url(up.out);
  const std::string data = c.home() + "/data";
  fs::create_directories(data);
  write_fashion_npy(data);
  const std::string model = train_model(c, data);
  const Json one = predict_json(c, "--model " + model + " --data " + data + " --split test --out " + c.home() + "/one.npy");
  const Json job = predict_json(c, "--model " + model + " --data " + data + " --split test --out " + c.home() +
                                       "/job.npy --workers 2 --shard-rows 1024");
  CHECK(job.at("rows") == 10000);
  CHECK(job.at("shards") == 10);
  CHECK(job.at("workers") == 2);
  CHECK(job.at("kind") == "predict");
  CHECK(job.at("accuracy").get<double>() == one.at("accuracy").get<double>());
  CHECK(job.at("rows_per_second").get<double>() > 0);
  const std::string a = read_bytes(c.home() + "/one.npy"), b = read_bytes(c.home() + "/job.npy");
  REQUIRE(a.size() == 128 + 10000 * 10 * 4);
  CHECK(a == b);
  CHECK_FALSE(parts_left(c.home()));
  const std::string id = job.at("job_id").get<std::string>();
  CHECK(predict_accounting(c, id).find("10 shards") != std::string::npos);

  // troupe status (and /api/jobs, the same documents): the job with kind "predict" and its rows.
  Json view = c.status();
  Json j = job_of(view, id);
  REQUIRE_FALSE(j.is_null());
  CHECK(j.at("strategy") == "predict");
  CHECK(j.at("state") == "SUCCEEDED");
  CHECK(j.at("step") == 10000);
  CHECK(j.at("steps") == 10000);
  CHECK(j.at("result").at("kind") == "predict");
  // The dashboard's /api/jobs lists it beside training jobs, /api/jobs/<id> with its metrics.
  bool listed = false;
  const Json jobs = get_json(url, "/api/jobs");
  for (const Json& k : jobs.at("jobs")) listed = listed || (k.at("id") == id && k.at("strategy") == "predict");
  CHECK(listed);
  const Json page = get_json(url, "/api/jobs/" + id);
  INFO(page.dump().substr(0, 2000));
  CHECK(page.dump().find("\"kind\":\"predict\"") != std::string::npos);
  CHECK(page.dump().find("rows_predicted") != std::string::npos);
  auto text = c.troupe("status", 30);
  CHECK(text.out.find("rows 10000/10000") != std::string::npos);
  auto logs = c.troupe("logs " + id.substr(0, 8), 30);
  INFO(logs.both());
  CHECK(logs.exit_code == 0);
  CHECK(logs.both().find("predictor") != std::string::npos);

  // A file that is no model: the predictor fails, the job FAILS naming the node and the file.
  auto broken = c.troupe("predict --no-progress --max-restarts 0 --model " + data + "/y_test.npy --data " + data +
                             " --split test --out " + c.home() + "/broken.npy --workers 1",
                         120);
  INFO(broken.both());
  CHECK(broken.exit_code != 0);
  CHECK(broken.err.find("troupe predict: error:") != std::string::npos);
  CHECK(broken.err.find("loading the model and data on node") != std::string::npos);
  CHECK(broken.err.find("y_test.npy") != std::string::npos);

  // --detach returns the id; troupe stop cancels the job (it waits PENDING: no node has 3 cpus).
  auto detached = c.troupe("predict --detach --model " + model + " --data " + data + " --split test --out " + c.home() +
                               "/never.npy --workers 1 --cpus-per-worker 3",
                           60);
  INFO(detached.both());
  REQUIRE(detached.exit_code == 0);
  const std::string pending = detached.last_line();
  REQUIRE(pending.size() == 32);
  auto stopped = c.troupe("stop " + pending.substr(0, 8), 60);
  INFO(stopped.both());
  CHECK(stopped.exit_code == 0);
  CHECK(job_of(c.status(), pending).at("state") == "CANCELLED");
  CHECK_FALSE(fs::exists(c.home() + "/never.npy"));
}

TEST_CASE("predict job: a language model (--seq-len) reads a text's windows in order, 2 predictors as one process",
          "[jobs][cluster][predict][gpt]") {
  ClusterFixture c;
  c.up("--nodes 1 --cpus 2");
  const std::string text = c.home() + "/story.txt";
  {
    std::ofstream out(text);
    static const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "while", "dogs", "ran", "and", "slept"};
    unsigned x = 11;
    for (int w = 0; w < 4000; ++w) {
      x = x * 1103515245u + 12345u;
      out << words[(x >> 16) % 11] << (w % 8 == 7 ? "\n" : " ");
    }
  }
  const std::string model = c.home() + "/gpt.safetensors";
  auto trained = c.troupe("train --model gpt --trainer-arg layers=1 --trainer-arg heads=2 --trainer-arg dim=16 "
                          "--data text:" + text + " --seq-len 16 --batch-size 16 --epochs 1 --max-steps 60 "
                          "--lr 0.01 --no-progress --save " + model, 180);
  INFO(trained.both());
  REQUIRE(trained.exit_code == 0);
  const std::string data = "--model " + model + " --data text:" + text + " --batch-size 64";
  const Json one = predict_json(c, data + " --out " + c.home() + "/one.npy");
  const Json job = predict_json(c, data + " --out " + c.home() + "/job.npy --workers 2 --shard-rows 256");
  const int64_t bytes = static_cast<int64_t>(fs::file_size(text));
  CHECK(one.at("rows") == (bytes - 1) / 16);  // the text's whole windows of 16 bytes
  CHECK(one.at("outputs") == 256);            // byte-level: a vocabulary of 256
  CHECK(job.at("rows") == one.at("rows"));
  CHECK(read_bytes(c.home() + "/one.npy") == read_bytes(c.home() + "/job.npy"));
  CHECK(job.at("accuracy").get<double>() == one.at("accuracy").get<double>());
  const double loss = one.at("loss").get<double>();
  CHECK(loss > 0);
  CHECK(loss < 4.0);  // 60 steps learned something: a uniform guess over 256 bytes is 5.55 nats
  CHECK(job.at("loss").get<double>() == Approx(loss).epsilon(1e-9));  // summed over the shards
  predict_accounting(c, job.at("job_id").get<std::string>());
  auto text_out = c.troupe("predict --no-progress " + data + " --out " + c.home() + "/again.npy", 120);
  INFO(text_out.both());
  CHECK(text_out.out.find("next-token loss ") != std::string::npos);
  CHECK(text_out.out.find("(perplexity ") != std::string::npos);
}

TEST_CASE("predict job: a predictor's node SIGKILLed midway over 240k rows, every row predicted exactly once in order",
          "[jobs][cluster][predict]") {
  ClusterFixture c;
  c.up("--nodes 3 --cpus 2");
  const std::string data = c.home() + "/data", big = c.home() + "/big";
  fs::create_directories(data);
  fs::create_directories(big);
  write_fashion_npy(data);
  // 240,000 Fashion-MNIST-like rows: the training images four times over, as NumPy writes them.
  run_numpy(big, "x = np.load('../data/x_train.npy'); y = np.load('../data/y_train.npy')\n"
                 "np.save('x.npy', np.tile(x, (4, 1, 1))); np.save('y.npy', np.tile(y, 4))");
  const std::string model = train_model(c, data);
  const Json one = predict_json(c, "--model " + model + " --data " + big + " --out " + c.home() + "/one.npy");
  REQUIRE(one.at("rows") == 240000);

  auto detached = c.troupe("predict --detach --model " + model + " --data " + big + " --out " + c.home() +
                               "/job.npy --workers 4 --shard-rows 8192",
                           60);
  INFO(detached.both());
  REQUIRE(detached.exit_code == 0);
  const std::string id = detached.last_line();
  const auto job = troupe::JobId::from_hex(id);
  REQUIRE(job.ok());
  // Midway: the hunt starts as soon as rows are being predicted (waiting for a later step, the
  // status seen lagged so far that the job could end before a predictor was caught holding a shard:
  // "0 shard(s) held" for 30 s in loaded runs). Every node but the head is frozen at once (SIGSTOP),
  // so what their predictors hold cannot change while the ledger is read; one that holds a shard is
  // killed and the others let go, else all are let go and tried again 50 ms later (a predictor may
  // be between shards).
  Json view = wait_for_step(c, id, 1);
  REQUIRE(job_of(view, id).at("step").get<int64_t>() < 240000);
  auto store = cluster_gcs(c);
  auto rec = troupe::gcs::Table<troupe::gcs::JobRecord>(*store).get(id);
  REQUIRE(rec.ok());
  std::map<std::string, pid_t> pid_of_node;
  for (const Json& n : view.at("nodes"))
    if (!n.value("is_head", false)) pid_of_node[n.at("id").get<std::string>()] = n.at("pid").get<pid_t>();
  std::map<int, std::string> node_of_slot;
  for (size_t slot = 0; slot < rec->actors.size(); ++slot)
    for (const Json& a : view.at("actors"))
      if (a.at("id") == rec->actors[slot]) node_of_slot[static_cast<int>(slot)] = a.at("node").get<std::string>();
  pid_t victim = 0;
  int held = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int attempt = 0; victim == 0 && std::chrono::steady_clock::now() < give_up; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::map<std::string, pid_t> frozen;
    for (const auto& [node, pid] : pid_of_node)
      if (::kill(pid, SIGSTOP) == 0) frozen[node] = pid;
    auto shards = troupe::gcs::Table<troupe::gcs::ShardRecord>(*store).list();
    REQUIRE(shards.ok());
    std::map<std::string, int> held_on;
    for (const auto& sh : *shards) {
      if (sh.job != *job || sh.state != troupe::gcs::ShardState::assigned) continue;
      for (const auto& [slot, where] : node_of_slot)
        held_on[where] += frozen.count(where) && troupe::gcs::predictor_identity(*job, slot) == sh.owner;
    }
    for (const auto& [node, pid] : frozen)
      if (victim == 0 && held_on[node] > 0) {
        victim = pid;
        held = held_on[node];
      }
    for (const auto& [node, pid] : frozen)
      if (pid != victim) ::kill(pid, SIGCONT);
  }
  int away = 0;  // predictors on nodes that can be frozen
  for (const auto& [slot, where] : node_of_slot) away += pid_of_node.count(where) ? 1 : 0;
  INFO(held << " shard(s) held on the frozen node; " << away << " of " << rec->actors.size()
            << " predictors on nodes other than the head");
  REQUIRE(victim > 0);
  REQUIRE(::kill(victim, SIGKILL) == 0);  // nothing here restarts it: the supervisor must

  Json end = wait_for_end(c, id, std::chrono::seconds(180));
  INFO(c.logs_tail());
  Json j = job_of(end, id);
  INFO(j.dump(1));
  REQUIRE(j.at("state") == "SUCCEEDED");
  CHECK(j.at("result").at("accuracy").get<double>() == one.at("accuracy").get<double>());
  CHECK_FALSE(event_of(end, "job_restarting", id).is_null());
  CHECK_FALSE(event_of(end, "job_restarted", id).is_null());
  // The replacement(s) gave back what the dead predictors held: those shards were claimed again.
  int given_back = 0;
  for (const std::string& m : event_messages(end, "shards_moved", id)) {
    const size_t at = m.find("gave back ");
    if (at != std::string::npos) given_back += std::stoi(m.substr(at + 10));
  }
  CHECK(given_back == held);
  const std::string accounted = predict_accounting(c, id);
  CHECK(accounted.find(std::to_string(held) + " shard claims repeated") != std::string::npos);
  // In input order, every row once: the very bytes of one process.
  const std::string a = read_bytes(c.home() + "/one.npy"), b = read_bytes(c.home() + "/job.npy");
  REQUIRE(a.size() == 128 + size_t{240000} * 10 * 4);
  CHECK(a == b);
  CHECK_FALSE(parts_left(c.home()));
}

TEST_CASE("predict job: --workers 0, a missing model and an unwritable --out are refused naming them",
          "[jobs][cluster][predict][errors]") {
  ClusterFixture c;
  const std::string data = c.home() + "/data";
  fs::create_directories(data);
  run_numpy(data, "np.save('x.npy', np.zeros((4, 3), np.float32))");
  auto zero = c.troupe("predict --model " + c.home() + "/m.safetensors --data " + data + " --out " + c.home() +
                           "/p.npy --workers 0",
                       30);
  CHECK(zero.exit_code != 0);
  CHECK(zero.both().find("--workers 0: a prediction job needs at least 1 predictor") != std::string::npos);
  auto missing = c.troupe("predict --model " + c.home() + "/absent.safetensors --data " + data + " --out " + c.home() +
                              "/p.npy --workers 2",
                          30);
  CHECK(missing.exit_code != 0);
  CHECK(missing.both().find("--model " + c.home() + "/absent.safetensors does not exist") != std::string::npos);
  write_text(c.home() + "/m.safetensors", "not read before the paths are checked");
  // A directory nobody may write: read-only for a user; root writes anywhere but sysfs.
  std::string locked = c.home() + "/locked";
  fs::create_directories(locked);
  ::chmod(locked.c_str(), 0555);
  if (::geteuid() == 0) locked = "/sys";
  auto unwritable = c.troupe("predict --model " + c.home() + "/m.safetensors --data " + data + " --out " + locked +
                                 "/p.npy --workers 2",
                             30);
  INFO(unwritable.both());
  CHECK(unwritable.exit_code != 0);
  CHECK(unwritable.both().find("the directory " + locked + " is not writable") != std::string::npos);
  ::chmod((c.home() + "/locked").c_str(), 0755);
}
