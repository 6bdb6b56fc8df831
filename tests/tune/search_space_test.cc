// The search space of `troupe tune` (tune/search_space.h): what each kind parses to, the errors a
// user gets for bad --search arguments, and how trials are drawn (grids enumerated, draws seeded
// and within their bounds).
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "tune/search_space.h"

using troupe::tune::expand_trials;
using troupe::tune::parse_search_param;
using troupe::tune::SearchParam;

namespace {
std::string error_of(const std::string& text) {
  auto p = parse_search_param(text);
  REQUIRE_FALSE(p.ok());
  return p.status().message();
}
}  // namespace

TEST_CASE("search space: each kind parses, with quoted values keeping their commas", "[tune]") {
  auto c = parse_search_param("hidden=choice('256,128', 512 , \"64\")");
  REQUIRE(c.ok());
  CHECK(c->name == "hidden");
  CHECK(c->kind == SearchParam::Kind::choice);
  CHECK(c->values == std::vector<std::string>{"256,128", "512", "64"});
  auto g = parse_search_param("--batch-size=grid(64,128)");
  REQUIRE(g.ok());
  CHECK(g->name == "batch-size");
  CHECK(g->kind == SearchParam::Kind::grid);
  auto l = parse_search_param("lr=loguniform(1e-4, 1e-1)");
  REQUIRE(l.ok());
  CHECK(l->kind == SearchParam::Kind::loguniform);
  CHECK(l->low == Approx(1e-4));
  CHECK(l->high == Approx(0.1));
  auto r = parse_search_param("trainer-arg.layers=randint(2,6)");
  REQUIRE(r.ok());
  CHECK(r->name == "trainer-arg.layers");
  CHECK(r->kind == SearchParam::Kind::randint);
}

TEST_CASE("search space: bad arguments are refused naming what is wrong", "[tune]") {
  CHECK(error_of("lr").find("no '='") != std::string::npos);
  CHECK(error_of("lr=choice()").find("an empty choice") != std::string::npos);
  CHECK(error_of("lr=grid( )").find("an empty grid") != std::string::npos);
  CHECK(error_of("lr=uniform(0.1,0.1)").find("low (0.1) must be below high (0.1)") != std::string::npos);
  CHECK(error_of("lr=uniform(0.5,0.1)").find("must be below high") != std::string::npos);
  CHECK(error_of("lr=loguniform(0,1)").find("loguniform needs low > 0") != std::string::npos);
  CHECK(error_of("lr=normal(0,1)").find("unknown kind 'normal'") != std::string::npos);
  CHECK(error_of("lr=uniform(a,1)").find("'a' is not a number") != std::string::npos);
  CHECK(error_of("lr=uniform(1)").find("takes two bounds") != std::string::npos);
  CHECK(error_of("lr=0.1").find("not KIND(...)") != std::string::npos);
  CHECK(error_of("hidden=choice(64,64)").find("listed twice") != std::string::npos);
  CHECK(error_of("hidden=choice('64,)").find("unclosed quote") != std::string::npos);
  CHECK(error_of("layers=randint(1.5,3)").find("whole numbers") != std::string::npos);
  CHECK(error_of("=choice(1)").find("no flag name") != std::string::npos);
  // Every message names the argument and the accepted forms.
  CHECK(error_of("lr=choice()").find("--search 'lr=choice()'") != std::string::npos);
}

TEST_CASE("search space: a grid gives every point per sample, draws are seeded and within bounds", "[tune]") {
  std::vector<SearchParam> params;
  for (const char* t : {"lr=loguniform(1e-4,1e-1)", "batch-size=grid(64,128,256)", "hidden=grid(128,256)",
                        "layers=randint(2,4)", "opt=choice(sgd,adam)"}) {
    auto p = parse_search_param(t);
    REQUIRE(p.ok());
    params.push_back(*p);
  }
  auto trials = expand_trials(params, 2, 7);
  REQUIRE(trials.ok());
  REQUIRE(trials->size() == 2u * 3 * 2);
  std::set<std::pair<std::string, std::string>> grid_points;
  std::set<std::string> layers, opts;
  for (const auto& t : *trials) {
    REQUIRE(t.size() == 5u);
    CHECK(t[0].first == "lr");
    const double lr = std::stod(t[0].second);
    CHECK(lr >= 1e-4);
    CHECK(lr <= 1e-1);
    grid_points.insert({t[1].second, t[2].second});
    layers.insert(t[3].second);
    opts.insert(t[4].second);
  }
  CHECK(grid_points.size() == 6u);  // every (batch-size, hidden) pair
  for (const std::string& l : layers) CHECK((l == "2" || l == "3" || l == "4"));
  CHECK(layers.size() >= 2u);
  CHECK(opts.size() == 2u);
  // The same seed draws the same trials; another seed others.
  auto again = expand_trials(params, 2, 7);
  REQUIRE(again.ok());
  CHECK(*again == *trials);
  auto other = expand_trials(params, 2, 8);
  REQUIRE(other.ok());
  CHECK(*other != *trials);
  // A log-uniform draw spreads over the decades (not bunched near the top as a uniform would be).
  auto lp = parse_search_param("lr=loguniform(1e-4,1e-1)");
  auto many = expand_trials({*lp}, 300, 1);
  REQUIRE(many.ok());
  int below_1e3 = 0;
  for (const auto& t : *many) below_1e3 += std::stod(t[0].second) < 1e-3 ? 1 : 0;
  CHECK(below_1e3 > 60);   // a third of the log range: ~100 of 300
  CHECK(below_1e3 < 140);
}

TEST_CASE("search space: a name searched twice, no trials, or too many trials are refused", "[tune]") {
  auto a = parse_search_param("lr=choice(0.1,0.2)");
  auto g = parse_search_param("hidden=grid(1,2,3,4,5,6,7,8,9,10)");
  REQUIRE(a.ok());
  REQUIRE(g.ok());
  auto twice = expand_trials({*a, *a}, 1, 0);
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.status().message().find("'lr' is searched twice") != std::string::npos);
  auto none = expand_trials({*a}, 0, 0);
  REQUIRE_FALSE(none.ok());
  auto big = expand_trials({*g, *g}, 1, 0, 50);
  REQUIRE_FALSE(big.ok());
  auto huge = expand_trials({*g}, 20, 0, 100);
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.status().message().find("10 grid points x 20 trials each: more than 100") != std::string::npos);
}
