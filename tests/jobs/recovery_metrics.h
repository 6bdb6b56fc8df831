// The head's /metrics read back after a job's restart (tests/jobs fault tests).
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include <httplib.h>

#include "tests/dashboard/dashboard_url.h"

namespace troupe::testing {

// The head's /metrics after a restart of job `id`: its failure detection time (a killed node's
// connection drops at once, its last heartbeat <= 0.2 s before) and when it trained again.
inline void check_recovery_metrics(const DashboardUrl& url, const std::string& id) {
  httplib::Client http(url.host, url.port);
  http.set_read_timeout(10, 0);
  auto m = http.Get("/metrics");
  REQUIRE(m);
  REQUIRE(m->status == 200);
  auto value = [&](const std::string& family) {
    const std::string key = family + "{job_id=\"" + id + "\"} ";
    const size_t at = m->body.find(key);
    return at == std::string::npos ? -1.0 : std::stod(m->body.substr(at + key.size()));
  };
  const double detection = value("troupe_job_failure_detection_seconds");
  const double resume = value("troupe_job_resume_seconds");
  INFO("detection " << detection << " s, resume " << resume << " s");
  CHECK(detection >= 0);
  CHECK(detection < 5);
  CHECK(resume > 0);
  CHECK(resume < 120);
}

}  // namespace troupe::testing
