#include "actors/node_stats_publisher.h"

#include <spdlog/spdlog.h>

#include "gcs/node_stats.h"

namespace troupe::actors {

void NodeStatsPublisher::start(gcs::Store* store, const std::string& node_hex, std::chrono::milliseconds period) {
  stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this, store, node_hex, period] {
    bool failing = false;
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      lock.unlock();
      auto stats = gcs::measure_this_process(node_hex);
      Status st = stats.ok() ? gcs::put_node_stats(*store, *stats) : stats.status();
      if (!st.ok() && !failing) spdlog::warn("node {}: publishing its process figures: {}", node_hex.substr(0, 8), st.to_string());
      failing = !st.ok();
      lock.lock();
      wake_.wait_for(lock, period, [&] { return stopping_; });
    }
  });
}

void NodeStatsPublisher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace troupe::actors
