// In-process transport: the ranks of a group are threads of one process. Each ordered pair of ranks
// has a byte stream (a queue of messages guarded by the receiver's mutex); send copies and never
// blocks, recv waits on a condition variable until its bytes arrived, the sender closed, or the
// deadline passed. Used by the collectives' tests and by single-process runs.
//
// close() marks a rank dead: its peers' pending and later calls involving it return `unavailable`
// naming it (as when a process dies under TCP). Destroying a transport closes it.
//
// As under TCP, each message carries the sender's CallDescriptor: a rank that called another
// collective, count or dtype is invalid_argument naming it and both calls. abort() marks the whole
// group aborted with its error: every rank's waits in that call or a later one then return
// "rank P aborted <error>" (a rank still in an earlier call may finish it: P already did).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "collectives/transport.h"

namespace troupe::collectives {

struct InprocGroup;

class InprocTransport final : public Transport {
 public:
  InprocTransport(std::shared_ptr<InprocGroup> group, int rank);
  ~InprocTransport() override;

  int rank() const override { return rank_; }
  int size() const override;
  Status send(int to, const void* data, size_t bytes, Clock::time_point deadline) override;
  Status recv(int from, void* data, size_t bytes, Clock::time_point deadline) override;
  Status send_recv(int to, const void* send_data, size_t send_bytes, int from, void* recv_data,
                   size_t recv_bytes, Clock::time_point deadline) override;
  std::string kind() const override { return "inproc"; }
  void begin_call(const CallDescriptor& call) override { call_ = call; }
  void abort(const Status& error) override;
  void interrupt(const Status& why) override;

  // Marks this rank dead for its peers and fails its own later calls. Idempotent.
  void close();

 private:
  Status check_peer(int peer, const char* what) const;
  Status fail(Status s);
  // A message from `peer` of another call: fails this rank and aborts the group.
  Status disagree(int peer, const CallDescriptor& theirs);

  std::shared_ptr<InprocGroup> group_;
  int rank_;
  CallDescriptor call_;
  Status failed_;  // first error; a failed transport stays failed
  std::atomic<bool> interrupted_{false};
  std::mutex interrupt_mu_;
  Status interrupt_why_;  // under interrupt_mu_
  Status interrupted();   // fails with interrupt_why_
};

// One transport per rank 0..size-1, sharing one group. size must be >= 1.
std::vector<std::unique_ptr<Transport>> make_inproc_group(int size);

}  // namespace troupe::collectives
