// The dashboard of a cluster a test brought up: its URL from `troupe up`'s output, and GETs of its
// JSON API with a deadline.
#pragma once

#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace troupe::testing {

struct DashboardUrl {
  std::string host;
  int port = 0;
};

// The "dashboard:" line of `troupe up`'s output.
inline DashboardUrl dashboard_url(const std::string& up_output) {
  std::smatch m;
  const std::regex line(R"(dashboard:\s+https?://([^:/\s]+):(\d+))");
  INFO(up_output);
  REQUIRE(std::regex_search(up_output, m, line));
  return {m[1].str(), std::stoi(m[2].str())};
}

// GET `path`, REQUIREd to answer 200 with JSON (10 s deadline).
inline nlohmann::json get_json(const DashboardUrl& url, const std::string& path) {
  httplib::Client client(url.host, url.port);
  client.set_read_timeout(10, 0);
  client.set_connection_timeout(5, 0);
  auto res = client.Get(path.c_str());
  INFO("GET " << path);
  REQUIRE(res);
  INFO(res->body);
  REQUIRE(res->status == 200);
  return nlohmann::json::parse(res->body);
}

}  // namespace troupe::testing
