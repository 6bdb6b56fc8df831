// The trainer API's pieces a user touches directly: job settings, parameter declaration, the
// runtime's initialisation of declared blocks, and the registry's names and errors.
#include <catch2/catch.hpp>

#include "trainers/api/trainer.h"
#include "models/mlp/mlp.h"
#include "trainers/optim/param_init.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/library/trainer_registry.h"

using namespace troupe;

TEST_CASE("JobConfig parses key=value items and typed values, naming a bad one", "[trainer_api][config]") {
  auto c = JobConfig::parse({"hidden=256,128", "lr=0.5", "name=x=y", "empty="});
  REQUIRE(c.ok());
  CHECK(c->get("name") == "x=y");
  CHECK(c->get("empty") == "");
  CHECK(c->get("absent", "dflt") == "dflt");
  CHECK(*c->get_double("lr", 0) == 0.5);
  CHECK(*c->get_int("absent", 7) == 7);
  CHECK(*c->get_int_list("hidden", {}) == std::vector<int64_t>{256, 128});
  CHECK(*c->get_int_list("absent", {3}) == std::vector<int64_t>{3});

  auto bad_int = c->get_int("lr", 0);
  REQUIRE(!bad_int.ok());
  CHECK(bad_int.status().message() == "trainer setting 'lr' = '0.5' is not an integer");
  for (const char* list : {"256,", ",256", "256,,128", "a,b"}) {
    JobConfig l(std::map<std::string, std::string>{{"hidden", list}});
    auto r = l.get_int_list("hidden", {});
    INFO(list);
    CHECK(r.status().code() == Code::invalid_argument);
  }
  CHECK(JobConfig(std::map<std::string, std::string>{{"hidden", ""}}).get_int_list("hidden", {1})->empty());
  CHECK(!JobConfig(std::map<std::string, std::string>{{"lr", "fast"}}).get_double("lr", 0).ok());

  auto no_eq = JobConfig::parse({"hidden"});
  REQUIRE(!no_eq.ok());
  CHECK(no_eq.status().message().find("key=value") != std::string::npos);
  CHECK(!JobConfig::parse({"=3"}).ok());
}

TEST_CASE("ParameterSpace lays blocks out back to back and reports the first bad one", "[trainer_api][params]") {
  ParameterSpace s;
  Param w = s.declare("w", {3, 4}, Init::zeros());
  Param b = s.declare("b", {4}, Init::constant(1));
  CHECK(w.index == 0);
  CHECK(w.offset == 0);
  CHECK(w.numel == 12);
  CHECK(b.index == 1);
  CHECK(b.offset == 12);
  CHECK(s.size() == 16);
  CHECK(s.status().ok());
  CHECK(s.blocks()[1].name == "b");

  s.declare("w", {2}, Init::zeros());
  s.declare("z", {0}, Init::zeros());  // also bad; the first error is the one kept
  CHECK(s.status().code() == Code::invalid_argument);
  CHECK(s.status().message() == "parameter 'w': declared twice; give every block its own name");
  CHECK(s.size() == 16);

  ParameterSpace t;
  t.declare("neg", {4, -1}, Init::zeros());
  CHECK(t.status().message().find("dimension -1 must be positive") != std::string::npos);
  ParameterSpace u;
  u.declare("scalar", {}, Init::zeros());
  CHECK(!u.status().ok());
}

TEST_CASE("init_parameters fills blocks in order from the seed, as mlp_init does for the MLP", "[trainer_api][params]") {
  auto layout = MlpLayout::make({20, 7, 5, 3});
  REQUIRE(layout.ok());
  ParameterSpace s;
  for (int l = 0; l < layout->layers(); ++l) {
    const Init init = Init::uniform(1.0f / std::sqrt(static_cast<float>(layout->in(l))));
    s.declare("w" + std::to_string(l), {layout->in(l), layout->out(l)}, init);
    s.declare("b" + std::to_string(l), {layout->out(l)}, init);
  }
  REQUIRE(s.size() == layout->param_count);
  std::vector<float> want(s.size()), got(s.size()), other(s.size());
  mlp_init(*layout, 42, want.data());
  init_parameters(s, 42, got.data());
  CHECK(got == want);  // bit for bit
  init_parameters(s, 43, other.data());
  CHECK(other != want);

  ParameterSpace z;
  z.declare("zeros", {3}, Init::zeros());
  z.declare("ones", {2}, Init::constant(1.5f));
  z.declare("noise", {1000}, Init::normal(0.1f));
  std::vector<float> v(z.size(), -7.0f);
  init_parameters(z, 1, v.data());
  CHECK(v[0] == 0.0f);
  CHECK(v[2] == 0.0f);
  CHECK(v[3] == 1.5f);
  CHECK(v[4] == 1.5f);
  double sq = 0;
  for (size_t i = 5; i < v.size(); ++i) sq += v[i] * v[i];
  CHECK(std::sqrt(sq / 1000) == Approx(0.1).epsilon(0.1));
}

TEST_CASE("a block declared with its values starts from them, draws nothing, and every range sees them (ABI 8)",
          "[trainer_api][params]") {
  // The blocks around it get what they would without it: a module's own initialisation (a
  // PyTorch model's) leaves the seeded stream of the others as it was.
  ParameterSpace with, without;
  with.declare("a", {4}, Init::uniform(0.5f));
  const Param g = with.declare("given", {2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  with.declare("b", {5}, Init::normal(0.2f));
  without.declare("a", {4}, Init::uniform(0.5f));
  without.declare("b", {5}, Init::normal(0.2f));
  REQUIRE(with.status().ok());
  REQUIRE(g.numel == 6);
  CHECK(with.blocks()[1].init.kind == Init::Kind::given);
  std::vector<float> w(with.size()), wo(without.size());
  init_parameters(with, 9, w.data());
  init_parameters(without, 9, wo.data());
  CHECK(std::vector<float>(w.begin(), w.begin() + 4) == std::vector<float>(wo.begin(), wo.begin() + 4));
  CHECK(std::vector<float>(w.begin() + 4, w.begin() + 10) == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(std::vector<float>(w.begin() + 10, w.end()) == std::vector<float>(wo.begin() + 4, wo.end()));
  // A range (a pipeline stage's, a sharded replica's chunk) is the same floats as the whole.
  std::vector<float> part(5);
  init_parameter_range(with, 9, 3, 8, part.data());
  CHECK(part == std::vector<float>(w.begin() + 3, w.begin() + 8));

  ParameterSpace bad;
  bad.declare("short", {2, 2}, std::vector<float>{1, 2, 3});
  CHECK(bad.status().code() == Code::invalid_argument);
  CHECK_THAT(bad.status().message(), Catch::Contains("parameter 'short': 3 starting values for 4 elements"));
}

TEST_CASE("the registry has the built-in mlp and names the known trainers for an unknown one", "[trainer_api][registry]") {
  TrainerRegistry& r = trainer_registry();
  REQUIRE(r.contains("mlp"));
  CHECK(r.find("mlp")->origin == "built-in");
  auto t = r.create("mlp");
  REQUIRE(t.ok());
  CHECK(*t != nullptr);

  auto unknown = r.create("cnn9000");
  REQUIRE(!unknown.ok());
  CHECK(unknown.status().code() == Code::not_found);
  const std::string m = unknown.status().message();
  CHECK(m.find("unknown trainer 'cnn9000'; known: ") == 0);
  CHECK(m.find("mlp") != std::string::npos);
  CHECK(m.find("--lib") != std::string::npos);

  // The built-in names are literals of this repository: every one must be well formed.
  for (const std::string& name : r.names()) CHECK(check_trainer_name(name).ok());
  CHECK(!check_trainer_name("").ok());
  CHECK(!check_trainer_name("My Trainer").ok());
  CHECK(!check_trainer_name(std::string(65, 'a')).ok());
  CHECK(check_trainer_name("user_logreg-2.0").ok());
}

TEST_CASE("the registry adds a library's trainers all or none", "[trainer_api][registry]") {
  TrainerRegistry r;
  auto factory = []() -> std::unique_ptr<Trainer> { return nullptr; };
  REQUIRE(r.add({{"a", factory}, {"b", factory}}, "liba.so").ok());
  CHECK(r.add({{"a", factory}, {"b", factory}}, "liba.so").ok());  // the same origin again: no-op
  Status clash = r.add({{"c", factory}, {"a", factory}}, "libc.so");
  CHECK(clash.code() == Code::invalid_argument);
  CHECK(clash.message() == "libc.so registers a trainer named 'a', which liba.so already registered; rename one of them");
  CHECK(!r.contains("c"));  // refused whole
  CHECK(!r.add({{"d", factory}, {"d", factory}}, "libd.so").ok());
  CHECK(!r.add({{"Bad Name", factory}}, "libe.so").ok());
  CHECK(r.names() == std::vector<std::string>{"a", "b"});
  auto null_trainer = r.create("a");
  CHECK(null_trainer.status().code() == Code::internal);
}
