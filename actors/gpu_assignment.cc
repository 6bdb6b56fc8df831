#include "actors/gpu_assignment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace troupe::actors {
namespace {

// Demands and usage are sums of fractions: compare them with the scheduler's tolerance.
constexpr double kEps = 1e-9;

bool whole(double g) { return std::abs(g - std::round(g)) < kEps; }

std::string amount(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

Status check_gpu_demand(double gpus, const std::string& what) {
  if (!std::isfinite(gpus) || gpus < 0) {
    return invalid_argument(what + " " + amount(gpus) + ": a GPU demand must be a finite number >= 0");
  }
  if (gpus > 1 + kEps && !whole(gpus)) {
    return invalid_argument(what + " " + amount(gpus) +
                            ": a demand above 1 GPU must be a whole number (a share below 1 fits on one device)");
  }
  return {};
}

GpuAssignments::GpuAssignments(NodeId node, int devices)
    : node_(node), used_(static_cast<size_t>(std::max(devices, 0)), 0.0) {}

Expected<std::vector<int>> GpuAssignments::assign(const ActorId& actor, double gpus) {
  TROUPE_RETURN_IF_ERROR(check_gpu_demand(gpus, "actor " + actor.short_hex() + ": gpus"));
  std::lock_guard<std::mutex> lock(mu_);
  if (held_.count(actor)) {
    return invalid_argument("actor " + actor.short_hex() + " already holds GPUs on node " + node_.short_hex());
  }
  if (gpus < kEps) return std::vector<int>();
  const std::string node = "node " + node_.short_hex();
  if (used_.empty()) return unavailable("no GPU on " + node + ": it offers none");

  Holding h;
  if (whole(gpus)) {
    // Whole devices: the lowest-indexed ones nobody uses at all.
    const size_t k = static_cast<size_t>(std::llround(gpus));
    for (size_t d = 0; d < used_.size() && h.devices.size() < k; ++d) {
      if (used_[d] < kEps) h.devices.push_back(static_cast<int>(d));
    }
    if (h.devices.size() < k) {
      if (k == 1) return unavailable("no whole GPU free on " + node + " (" + describe_usage() + ")");
      return unavailable("needs " + std::to_string(k) + " whole GPUs, " + std::to_string(h.devices.size()) +
                         " free on " + node + " (" + describe_usage() + ")");
    }
    h.share = 1.0;
  } else {
    // A share: the most used device it still fits on (best fit; ties to the lowest index), so
    // shares fill partly used devices before they break into a free one.
    int best = -1;
    for (size_t d = 0; d < used_.size(); ++d) {
      if (used_[d] + gpus > 1 + kEps) continue;
      if (best < 0 || used_[d] > used_[static_cast<size_t>(best)] + kEps) best = static_cast<int>(d);
    }
    if (best < 0) {
      return unavailable("no GPU on " + node + " has " + amount(gpus) + " free (" + describe_usage() + ")");
    }
    h.devices.push_back(best);
    h.share = gpus;
  }
  for (int d : h.devices) used_[static_cast<size_t>(d)] += h.share;
  std::vector<int> out = h.devices;
  held_.emplace(actor, std::move(h));
  return out;
}

void GpuAssignments::release(const ActorId& actor) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(actor);
  if (it == held_.end()) return;
  for (int d : it->second.devices) {
    double& u = used_[static_cast<size_t>(d)];
    u -= it->second.share;
    if (u < kEps) u = 0;  // shares given back in another order leave rounding dust
  }
  held_.erase(it);
}

std::vector<int> GpuAssignments::devices_of(const ActorId& actor) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(actor);
  return it == held_.end() ? std::vector<int>() : it->second.devices;
}

std::vector<double> GpuAssignments::usage() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

std::string GpuAssignments::describe_usage() const {
  std::string out;
  for (size_t d = 0; d < used_.size(); ++d) {
    if (d) out += ", ";
    out += "device " + std::to_string(d) + ": " + (used_[d] < kEps ? std::string("free") : amount(used_[d]) + " used");
  }
  return out;
}

}  // namespace troupe::actors
