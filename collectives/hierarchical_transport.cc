#include "collectives/hierarchical_transport.h"

#include <algorithm>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/native.h"
#include "collectives/sub_transport.h"
#include "kernels/cpu/ops.h"

namespace troupe::collectives {
namespace {

namespace cpu = troupe::kernels::cpu;

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
  HierarchicalTransport(std::unique_ptr<Transport> mesh, std::unique_ptr<Transport> local,
                        std::unique_ptr<Transport> leaders_view)
      : mesh_(std::move(mesh)), local_(std::make_unique<Communicator>(std::move(local))) {
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
  NativeCollectives* native() override { return this; }

  // NativeCollectives: only all-reduce is staged; the rest run the point-to-point algorithms.
  std::string name() const override { return "hierarchical"; }
  bool handles(CollectiveKind kind) const override { return kind == CollectiveKind::allreduce; }

  Status allreduce(const NativeCall& call, const void* in, void* out, size_t count, DType dtype,
                   ReduceOp op) override {
    const ReduceOp stage_op = op == ReduceOp::avg ? ReduceOp::sum : op;
    Status st = local_->allreduce(in, out, count, dtype, stage_op, stage_options(call));
    if (!st.ok()) return Status(st.code(), call.prefix + ": within the host: " + st.message());
    if (leaders_ && leaders_->size() > 1) {
      st = leaders_->allreduce(out, out, count, dtype, stage_op, stage_options(call));
      if (!st.ok()) return Status(st.code(), call.prefix + ": across hosts: " + st.message());
    }
    st = local_->broadcast(out, count, dtype, 0, stage_options(call));
    if (!st.ok()) return Status(st.code(), call.prefix + ": broadcast within the host: " + st.message());
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
  static Status unhandled(const NativeCall& call) {
    return internal_error(call.prefix + ": the hierarchical path only all-reduces (handles() said so)");
  }

  std::unique_ptr<Transport> mesh_;           // declared first: leaders_ views it
  std::unique_ptr<Communicator> local_;
  std::unique_ptr<Communicator> leaders_;    // this host's leader only
};

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
      std::make_unique<HierarchicalTransport>(std::move(mesh), std::move(local), std::move(view)));
}

}  // namespace troupe::collectives
