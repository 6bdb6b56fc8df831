#include "collectives/hierarchical_transport.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/native.h"
#include "collectives/sub_transport.h"
#include "kernels/cpu/ops.h"

namespace troupe::collectives {
namespace {

namespace cpu = troupe::kernels::cpu;

// All-reduces above one chunk are pipelined chunk by chunk: while the leaders exchange chunk k over
// TCP, the host reduces chunk k+1 and broadcasts chunk k-1 over shared memory. Smaller chunks fill
// the pipeline sooner; larger ones pay the per-call cost of each stage less often.
constexpr size_t kPipelineChunkBytes = size_t{4} << 20;

CollectiveOptions stage_options(const NativeCall& call) {
  CollectiveOptions o;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(call.deadline - Clock::now());
  o.timeout = std::max(std::chrono::milliseconds(1), left);
  o.wire = call.descriptor.wire;
  return o;
}

// out *= 1/n in `dtype`, computed in f32 so every rank rounds the same way.
void scale_in_place(void* out, size_t count, DType dtype, float factor) {
  if (dtype == DType::f32) return cpu::scale(static_cast<float*>(out), count, factor);
  std::vector<float> tmp(count);
  auto* h = static_cast<uint16_t*>(out);
  if (dtype == DType::f16) {
    cpu::f16_to_f32(h, tmp.data(), count);
    cpu::scale(tmp.data(), count, factor);
    cpu::f32_to_f16(tmp.data(), h, count);
  } else {
    cpu::bf16_to_f32(h, tmp.data(), count);
    cpu::scale(tmp.data(), count, factor);
    cpu::f32_to_bf16(tmp.data(), h, count);
  }
}

class HierarchicalTransport final : public Transport, public NativeCollectives {
 public:
  // `leaders_view` is a view of `mesh` over the hosts' leaders; null on ranks that do not lead.
  // `hosts` is the number of hosts (leaders) in the group; every rank knows it.
  HierarchicalTransport(std::unique_ptr<Transport> mesh, std::unique_ptr<Transport> local,
                        std::unique_ptr<Transport> leaders_view, int hosts)
      : mesh_(std::move(mesh)), local_(std::make_unique<Communicator>(std::move(local))), hosts_(hosts) {
    if (leaders_view) leaders_ = std::make_unique<Communicator>(std::move(leaders_view));
  }

  // Transport: point-to-point goes over the mesh.
  int rank() const override { return mesh_->rank(); }
  int size() const override { return mesh_->size(); }
  Status send(int to, const void* data, size_t bytes, Clock::time_point deadline) override {
    return mesh_->send(to, data, bytes, deadline);
  }
  Status recv(int from, void* data, size_t bytes, Clock::time_point deadline) override {
    return mesh_->recv(from, data, bytes, deadline);
  }
  Status send_recv(int to, const void* send_data, size_t send_bytes, int from, void* recv_data, size_t recv_bytes,
                   Clock::time_point deadline) override {
    return mesh_->send_recv(to, send_data, send_bytes, from, recv_data, recv_bytes, deadline);
  }
  std::string kind() const override { return "hierarchical"; }
  void begin_call(const CallDescriptor& call) override { mesh_->begin_call(call); }
  void abort(const Status& error) override {
    mesh_->abort(error);
    local_->transport().abort(error);
  }
  void interrupt(const Status& why) override {
    mesh_->interrupt(why);
    local_->transport().interrupt(why);
  }
  NativeCollectives* native() override { return this; }

  // NativeCollectives: only all-reduce is staged; the rest run the point-to-point algorithms.
  std::string name() const override { return "hierarchical"; }
  bool handles(CollectiveKind kind) const override { return kind == CollectiveKind::allreduce; }

  Status allreduce(const NativeCall& call, const void* in, void* out, size_t count, DType dtype,
                   ReduceOp op) override {
    const ReduceOp stage_op = op == ReduceOp::avg ? ReduceOp::sum : op;
    // Every rank decides alike: the count, dtype and host count are the same on all of them.
    const size_t chunk = kPipelineChunkBytes / dtype_size(dtype);
    Status st = hosts_ > 1 && count > chunk ? allreduce_pipelined(call, in, out, count, dtype, stage_op, chunk)
                                            : allreduce_staged(call, in, out, count, dtype, stage_op);
    if (!st.ok()) return st;
    if (op == ReduceOp::avg) scale_in_place(out, count, dtype, 1.0f / static_cast<float>(size()));
    return {};
  }
  Status broadcast(const NativeCall& call, void*, size_t, DType, int) override { return unhandled(call); }
  Status allgather(const NativeCall& call, const void*, void*, size_t, DType) override { return unhandled(call); }
  Status reduce_scatter(const NativeCall& call, const void*, void*, size_t, DType, ReduceOp) override {
    return unhandled(call);
  }
  Status barrier(const NativeCall& call) override { return unhandled(call); }

 private:
  // The three stages one after the other, over the whole buffer.
  Status allreduce_staged(const NativeCall& call, const void* in, void* out, size_t count, DType dtype, ReduceOp op) {
    Status st = local_->allreduce(in, out, count, dtype, op, stage_options(call));
    if (!st.ok()) return within_host(call, "", st);
    if (leaders_ && leaders_->size() > 1) {
      st = leaders_->allreduce(out, out, count, dtype, op, stage_options(call));
      if (!st.ok()) return across_hosts(call, st);
    }
    st = local_->broadcast(out, count, dtype, 0, stage_options(call));
    if (!st.ok()) return within_host(call, "broadcast ", st);
    return {};
  }

  // The stages pipelined over chunks of `chunk` elements; see the definition for the schedule.
  Status allreduce_pipelined(const NativeCall& call, const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                             size_t chunk);

  static Status within_host(const NativeCall& call, const char* what, const Status& st) {
    return Status(st.code(), call.prefix + ": " + what + "within the host: " + st.message());
  }
  static Status across_hosts(const NativeCall& call, const Status& st) {
    return Status(st.code(), call.prefix + ": across hosts: " + st.message());
  }

  static Status unhandled(const NativeCall& call) {
    return internal_error(call.prefix + ": the hierarchical path only all-reduces (handles() said so)");
  }

  std::unique_ptr<Transport> mesh_;           // declared first: leaders_ views it
  std::unique_ptr<Communicator> local_;
  std::unique_ptr<Communicator> leaders_;    // this host's leader only
  int hosts_;
};

// Every rank of a host issues its shared-memory calls on the caller's thread in one order:
//   reduce 0, reduce 1, broadcast 0, reduce 2, broadcast 1, ..., reduce K-1, broadcast K-2, broadcast K-1.
// The leader runs the TCP stage on a helper thread, which alone uses leaders_ (and so the mesh)
// until it is joined: it all-reduces chunk k once "reduce k" is done, and the leader's "broadcast
// k" waits for it. So the link carries chunk k while the host reduces k+1 and broadcasts k-1.
// Chunks are disjoint ranges of `out`, so no two stages touch the same bytes at once.
//
// Failure: an error on either side stops both. The helper stops taking chunks when the caller's
// side fails (it finishes the exchange under way, which the other leaders can complete, or fails
// with it); the caller stops at its next broadcast when the helper fails. The helper is joined
// before returning, so the Communicator's abort (mesh and local group) never races it, and the
// other ranks learn the error, which names the rank at fault, from that abort.
Status HierarchicalTransport::allreduce_pipelined(const NativeCall& call, const void* in, void* out, size_t count,
                                                  DType dtype, ReduceOp op, size_t chunk) {
  const size_t chunks = (count + chunk - 1) / chunk, chunk_bytes = chunk * dtype_size(dtype);
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  auto length = [&](size_t k) { return std::min(chunk, count - k * chunk); };
  const bool lead = leaders_ && leaders_->size() > 1;

  // Between the caller's thread and the helper, under `mu`.
  std::mutex mu;
  std::condition_variable cv;
  size_t reduced = 0, exchanged = 0;  // chunks ready for the TCP stage; chunks back from it
  bool stop = false;                  // the caller's side failed or finished
  Status helper_error;
  bool waited_out = false;            // the caller's deadline passed waiting for an exchange

  std::thread helper;
  if (lead) {
    helper = std::thread([&] {
      for (size_t k = 0; k < chunks; ++k) {
        {
          std::unique_lock<std::mutex> lock(mu);
          // On a timeout here the caller's own shared-memory call times out too and says so.
          if (!cv.wait_until(lock, call.deadline, [&] { return stop || reduced > k; }) || stop) return;
        }
        Status st = leaders_->allreduce(dst + k * chunk_bytes, dst + k * chunk_bytes, length(k), dtype, op,
                                        stage_options(call));
        std::lock_guard<std::mutex> lock(mu);
        if (!st.ok()) helper_error = across_hosts(call, st);
        else exchanged = k + 1;
        cv.notify_all();
        if (!st.ok()) return;
      }
    });
  }

  auto reduce = [&](size_t k) -> Status {
    Status st = local_->allreduce(src + k * chunk_bytes, dst + k * chunk_bytes, length(k), dtype, op,
                                  stage_options(call));
    if (!st.ok()) return within_host(call, "", st);
    if (lead) {
      std::lock_guard<std::mutex> lock(mu);
      reduced = k + 1;
      cv.notify_all();
    }
    return {};
  };
  auto broadcast = [&](size_t k) -> Status {
    if (lead) {
      std::unique_lock<std::mutex> lock(mu);
      if (!cv.wait_until(lock, call.deadline, [&] { return exchanged > k || !helper_error.ok(); })) {
        waited_out = true;  // the helper's own error, if it brings one by the deadline, says more
        return Status(Code::timeout, call.prefix + ": across hosts: the leaders' exchange of chunk " +
                                         std::to_string(k) + " of " + std::to_string(chunks) +
                                         " did not finish by the deadline");
      }
      if (!helper_error.ok()) return helper_error;
    }
    Status st = local_->broadcast(dst + k * chunk_bytes, length(k), dtype, 0, stage_options(call));
    if (!st.ok()) return within_host(call, "broadcast ", st);
    return {};
  };

  Status st = reduce(0);
  for (size_t k = 1; st.ok() && k < chunks; ++k) {
    st = reduce(k);
    if (st.ok()) st = broadcast(k - 1);
  }
  if (st.ok()) st = broadcast(chunks - 1);

  if (helper.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    helper.join();  // its exchange under way returns by the same deadline
    if (waited_out && !helper_error.ok()) return helper_error;
  }
  return st;
}

}  // namespace

Expected<std::unique_ptr<Transport>> make_hierarchical_transport(std::unique_ptr<Transport> mesh,
                                                                 std::unique_ptr<Transport> local,
                                                                 const std::vector<int>& host_of_rank) {
  if (!mesh || !local) return invalid_argument("hierarchical transport: mesh and local transports are required");
  const int size = mesh->size(), rank = mesh->rank();
  if (static_cast<int>(host_of_rank.size()) != size)
    return invalid_argument("hierarchical transport: " + std::to_string(host_of_rank.size()) +
                            " host labels for a group of " + std::to_string(size));
  // Leaders: the lowest rank of each host, in rank order; my local index: my place among my host's ranks.
  std::vector<int> leaders, seen_hosts;
  int local_index = 0, local_count = 0;
  for (int r = 0; r < size; ++r) {
    if (std::find(seen_hosts.begin(), seen_hosts.end(), host_of_rank[r]) == seen_hosts.end()) {
      seen_hosts.push_back(host_of_rank[r]);
      leaders.push_back(r);
    }
    if (host_of_rank[r] == host_of_rank[rank]) {
      if (r < rank) ++local_index;
      ++local_count;
    }
  }
  if (local->size() != local_count || local->rank() != local_index)
    return invalid_argument("hierarchical transport: the local transport is rank " + std::to_string(local->rank()) +
                            " of " + std::to_string(local->size()) + " but rank " + std::to_string(rank) +
                            " is local rank " + std::to_string(local_index) + " of " + std::to_string(local_count) +
                            " on its host");
  std::unique_ptr<Transport> view;
  if (local_index == 0) {  // this rank leads its host
    auto made = SubTransport::make(*mesh, leaders);
    if (!made) return made.status();
    view = std::move(*made);
  }
  return std::unique_ptr<Transport>(
      std::make_unique<HierarchicalTransport>(std::move(mesh), std::move(local), std::move(view),
                                             static_cast<int>(leaders.size())));
}

}  // namespace troupe::collectives
