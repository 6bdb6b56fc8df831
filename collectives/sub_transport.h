// A view of some ranks of a Transport as a smaller group: rank i of the view is ranks[i] of the
// transport underneath. The hierarchical transport runs its leaders' all-reduce over such a view of
// its TCP mesh, so the leaders need no second set of connections. Errors keep the underlying
// transport's rank numbers (the group's global ranks), which is what a user looks up.
#pragma once

#include <memory>
#include <vector>

#include "collectives/transport.h"

namespace troupe::collectives {

class SubTransport final : public Transport {
 public:
  // `base` must outlive the view; base.rank() must be one of `ranks` (distinct, in range).
  static Expected<std::unique_ptr<Transport>> make(Transport& base, std::vector<int> ranks);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  Status send(int to, const void* data, size_t bytes, Clock::time_point deadline) override;
  Status recv(int from, void* data, size_t bytes, Clock::time_point deadline) override;
  Status send_recv(int to, const void* send_data, size_t send_bytes, int from, void* recv_data, size_t recv_bytes,
                   Clock::time_point deadline) override;
  std::string kind() const override { return base_.kind(); }
  void begin_call(const CallDescriptor& call) override { base_.begin_call(call); }
  void abort(const Status& error) override { base_.abort(error); }
  void interrupt(const Status& why) override { base_.interrupt(why); }

 private:
  SubTransport(Transport& base, std::vector<int> ranks, int rank) : base_(base), ranks_(std::move(ranks)), rank_(rank) {}
  Status check(int peer) const;

  Transport& base_;
  std::vector<int> ranks_;  // view rank -> base rank
  int rank_;
};

}  // namespace troupe::collectives
