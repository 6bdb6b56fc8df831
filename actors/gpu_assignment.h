// Which of a node's GPUs each of its actors holds. The head's scheduler counts GPUs per node as one
// number; this table, one per node process, turns a placed demand into device indices, so two
// 1-GPU actors on a 2-GPU node get devices 0 and 1 instead of both using device 0.
//
// Demands (check_gpu_demand):
//   0          no device
//   k = 1, 2.. k devices that are entirely free, lowest indices first
//   0 < g < 1  a share of one device: the fitting device already most used (best fit), so fractions
//              pack together and whole devices stay free for whole demands
//   above 1 and not whole: refused (a share of several devices means nothing to a program)
//
// The head's numeric view can be fragmented (two devices half used: "1 GPU free", yet no whole
// device), so a refusal names every device's usage for the person reading the PENDING reason.
//
// Thread-safe: the node manager assigns and releases on its thread; actors look their devices up
// from theirs (devices_of).
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"

namespace troupe::actors {

// invalid_argument when `gpus` is negative, not finite, or above 1 and not whole; `what` names the
// demand in the message ("--gpus", "spawn batch item 2").
Status check_gpu_demand(double gpus, const std::string& what);

class GpuAssignments {
 public:
  // Devices 0..devices-1 of node `node` (named in errors); devices < 0 counts as 0.
  GpuAssignments(NodeId node, int devices);

  // Gives `actor` devices for `gpus` (see above) and returns their indices, ascending; empty for a
  // demand of 0. invalid_argument for a bad demand or an actor that already holds devices;
  // unavailable when nothing fits: "no whole GPU free on node 3fa2c1d0 (device 0: 0.5 used,
  // device 1: 0.5 used)". On error nothing changes.
  Expected<std::vector<int>> assign(const ActorId& actor, double gpus);
  // Gives back what `actor` holds; nothing when it holds nothing.
  void release(const ActorId& actor);

  // The devices `actor` holds (ascending), empty when none.
  std::vector<int> devices_of(const ActorId& actor) const;
  // Fraction of each device in use, by index.
  std::vector<double> usage() const;
  int devices() const { return static_cast<int>(used_.size()); }

 private:
  std::string describe_usage() const;  // "device 0: 0.5 used, device 1: free"; caller holds mu_

  struct Holding {
    std::vector<int> devices;
    double share = 1.0;  // of each device: 1 for whole demands, g for a fraction
  };

  mutable std::mutex mu_;
  const NodeId node_;
  std::vector<double> used_;  // per device, 0..1
  std::map<ActorId, Holding> held_;
};

}  // namespace troupe::actors
