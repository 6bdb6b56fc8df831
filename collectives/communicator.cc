// The Communicator: checks arguments, numbers the call, picks the algorithm, prepares the f32
// working buffer (widening f16/bf16) and hands over to the algorithm's file.
#include "collectives/communicator.h"

#include <cstring>
#include <vector>

#include "collectives/algorithm.h"
#include "collectives/native.h"
#include "kernels/cpu/ops.h"

namespace troupe::collectives {

namespace cpu = troupe::kernels::cpu;

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
  }
  return "?";
}

namespace {

std::string call_name(const char* op, uint64_t seq, const std::string& algorithm, uint64_t tag) {
  std::string s = std::string(op) + " #" + std::to_string(seq) + " (" + algorithm + ")";
  if (tag != 0) s += " [tag " + std::to_string(tag) + "]";
  return s;
}

// Reductions of f16/bf16 buffers travel in their own dtype; f32 buffers in options.wire.
Expected<Wire> wire_for(DType dtype, DType requested, const std::string& prefix) {
  if (dtype == DType::f32) return Wire{requested};
  if (requested == DType::f32 || requested == dtype) return Wire{dtype};
  return invalid_argument(prefix + ": a " + dtype_name(dtype) + " buffer cannot travel as " + dtype_name(requested) +
                          "; use wire = f32 (no compression) or " + dtype_name(dtype));
}

void widen(const void* in, DType dtype, size_t n, float* out) {
  if (dtype == DType::f32) {
    if (in != out) std::memmove(out, in, n * 4);
  } else if (dtype == DType::f16) {
    cpu::f16_to_f32(static_cast<const uint16_t*>(in), out, n);
  } else {
    cpu::bf16_to_f32(static_cast<const uint16_t*>(in), out, n);
  }
}

void narrow(const float* in, DType dtype, size_t n, void* out) {
  if (dtype == DType::f32) {
    if (in != out) std::memmove(out, in, n * 4);
  } else if (dtype == DType::f16) {
    cpu::f32_to_f16(in, static_cast<uint16_t*>(out), n);
  } else {
    cpu::f32_to_bf16(in, static_cast<uint16_t*>(out), n);
  }
}

// What all-reduce and reduce-scatter tell the transport: the reduction and the wire with the rest.
CallDescriptor reduction_call(CollectiveKind kind, size_t count, DType dtype, ReduceOp op,
                              const CollectiveOptions& options) {
  CallDescriptor d;
  d.kind = kind;
  d.dtype = dtype;
  d.reduce = static_cast<uint8_t>(op);
  d.wire = options.wire;
  d.count = count;
  return d;
}

}  // namespace

Communicator::Communicator(std::unique_ptr<Transport> transport) : transport_(std::move(transport)) {}
Communicator::~Communicator() = default;

int Communicator::rank() const { return transport_->rank(); }
int Communicator::size() const { return transport_->size(); }

void* Communicator::shared_buffer(size_t bytes) {
  NativeCollectives* native = transport_->native();
  return native ? native->shared_buffer(bytes) : nullptr;
}

// One call in progress: its descriptor, the algorithm chosen, and the context the algorithms use.
struct Communicator::Call {
  CallDescriptor descriptor;
  std::string algorithm;
  CallContext ctx;
  NativeCollectives* native = nullptr;  // set when the chosen algorithm is the transport's own

  NativeCall native_call() const { return NativeCall{descriptor, ctx.deadline, ctx.prefix}; }
};

Expected<Communicator::Call> Communicator::begin(CallDescriptor d, size_t bytes, const CollectiveOptions& options) {
  d.sequence = ++sequence_;
  NativeCollectives* native = transport_->native();
  if (native && !native->handles(d.kind)) native = nullptr;
  const std::string native_name = native ? native->name() : "";
  const char* op = collective_name(d.kind);
  auto algorithm = choose_algorithm(op, options.algorithm, bytes, native_name);
  if (!algorithm) return algorithm.status().with_context(call_name(op, d.sequence, options.algorithm, options.tag));
  Call call{d, *algorithm,
            CallContext{*transport_, Clock::now() + options.timeout, call_name(op, d.sequence, *algorithm, options.tag)},
            (native && *algorithm == native_name) ? native : nullptr};
  transport_->begin_call(call.descriptor);
  return call;
}

Status Communicator::finish(Status st) {
  // A local argument error never reached the wire; anything else may leave peers waiting on us.
  if (!st.ok() && st.code() != Code::invalid_argument) transport_->abort(st);
  return st;
}

Status Communicator::allreduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                               const CollectiveOptions& options) {
  const CallDescriptor d = reduction_call(CollectiveKind::allreduce, count, dtype, op, options);
  auto call = begin(d, count * dtype_size(dtype), options);
  if (!call) return call.status();
  const CallContext& ctx = call->ctx;
  if (count > 0 && (in == nullptr || out == nullptr)) return invalid_argument(ctx.prefix + ": null buffer");
  auto wire = wire_for(dtype, options.wire, ctx.prefix);
  if (!wire) return wire.status();
  count_payload(wire->bytes(count));
  if (call->native) return finish(call->native->allreduce(call->native_call(), in, out, count, dtype, op));

  // The f32 working buffer: `out` itself for f32, else a widened copy (accumulation stays f32).
  std::vector<float> widened;
  float* work = static_cast<float*>(out);
  if (dtype != DType::f32) {
    widened.resize(count);
    work = widened.data();
  }
  widen(in, dtype, count, work);
  if (size() > 1 && count > 0) {
    Status st = call->algorithm == "ring" ? allreduce_ring(ctx, work, count, op, *wire)
                                          : allreduce_halving_doubling(ctx, work, count, op, *wire);
    TROUPE_RETURN_IF_ERROR(finish(st));
  }
  if (op == ReduceOp::avg) cpu::scale(work, count, 1.0f / static_cast<float>(size()));
  narrow(work, dtype, count, out);
  return {};
}

Status Communicator::broadcast(void* buf, size_t count, DType dtype, int root, const CollectiveOptions& options) {
  CallDescriptor d;
  d.kind = CollectiveKind::broadcast;
  d.dtype = dtype;
  d.root = root;
  d.count = count;
  auto call = begin(d, count * dtype_size(dtype), options);
  if (!call) return call.status();
  const CallContext& ctx = call->ctx;
  if (root < 0 || root >= size())
    return invalid_argument(ctx.prefix + ": root " + std::to_string(root) + " is not a rank of a group of " +
                            std::to_string(size()));
  if (count > 0 && buf == nullptr) return invalid_argument(ctx.prefix + ": null buffer");
  count_payload(count * dtype_size(dtype));
  if (call->native) return finish(call->native->broadcast(call->native_call(), buf, count, dtype, root));
  if (size() == 1 || count == 0) return {};
  return finish(broadcast_tree(ctx, static_cast<char*>(buf), count * dtype_size(dtype), root));
}

Status Communicator::allgather(const void* in, void* out, size_t count, DType dtype, const CollectiveOptions& options) {
  CallDescriptor d;
  d.kind = CollectiveKind::allgather;
  d.dtype = dtype;
  d.count = count;
  const size_t block = count * dtype_size(dtype);
  auto call = begin(d, block * size(), options);
  if (!call) return call.status();
  const CallContext& ctx = call->ctx;
  if (count > 0 && (in == nullptr || out == nullptr)) return invalid_argument(ctx.prefix + ": null buffer");
  count_payload(block * size());
  if (call->native) return finish(call->native->allgather(call->native_call(), in, out, count, dtype));
  char* result = static_cast<char*>(out);
  // In place when `in` is already block rank() of `out`; memmove covers any overlap otherwise.
  if (count > 0) std::memmove(result + rank() * block, in, block);
  if (size() == 1 || count == 0) return {};
  return finish(allgather_ring(ctx, result, block));
}

Status Communicator::reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                                    const CollectiveOptions& options) {
  const CallDescriptor d = reduction_call(CollectiveKind::reduce_scatter, count, dtype, op, options);
  const size_t total = count * static_cast<size_t>(size());
  auto call = begin(d, total * dtype_size(dtype), options);
  if (!call) return call.status();
  const CallContext& ctx = call->ctx;
  if (count > 0 && (in == nullptr || out == nullptr)) return invalid_argument(ctx.prefix + ": null buffer");
  auto wire = wire_for(dtype, options.wire, ctx.prefix);
  if (!wire) return wire.status();
  count_payload(wire->bytes(total));
  if (call->native)
    return finish(call->native->reduce_scatter(call->native_call(), in, out, count, dtype, op));
  if (count == 0) return {};
  // Always a working copy: `out` holds one block, and `in` may overlap it (in place).
  std::vector<float> work(total);
  widen(in, dtype, total, work.data());
  if (size() > 1) TROUPE_RETURN_IF_ERROR(finish(reduce_scatter_ring(ctx, work.data(), count, op, *wire)));
  float* mine = work.data() + rank() * count;
  if (op == ReduceOp::avg) cpu::scale(mine, count, 1.0f / static_cast<float>(size()));
  narrow(mine, dtype, count, out);
  return {};
}

Status Communicator::barrier(const CollectiveOptions& options) {
  CallDescriptor d;
  d.kind = CollectiveKind::barrier;
  auto call = begin(d, 0, options);
  if (!call) return call.status();
  if (call->native) return finish(call->native->barrier(call->native_call()));
  if (size() == 1) return {};
  return finish(barrier_dissemination(call->ctx));
}

Status Communicator::shift(const void* in, void* out, size_t count, DType dtype, int distance,
                           const CollectiveOptions& options) {
  CallDescriptor d;
  d.kind = CollectiveKind::shift;
  d.dtype = dtype;
  d.root = distance;
  d.count = count;
  const size_t bytes = count * dtype_size(dtype);
  auto call = begin(d, bytes, options);
  if (!call) return call.status();
  const CallContext& ctx = call->ctx;
  if (count > 0 && (in == nullptr || out == nullptr)) return invalid_argument(ctx.prefix + ": null buffer");
  const char* from = static_cast<const char*>(in);
  char* to = static_cast<char*>(out);
  if (count > 0 && from < to + bytes && to < from + bytes)
    return invalid_argument(ctx.prefix + ": the buffers overlap; a shift needs two");
  count_payload(bytes);
  if (size() == 1 || ring_mod(distance, size()) == 0) {
    if (count > 0) std::memcpy(out, in, bytes);
    return {};
  }
  return finish(shift_pairs(ctx, from, to, bytes, distance));
}

}  // namespace troupe::collectives
