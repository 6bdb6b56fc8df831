// The Communicator: checks arguments, numbers the call, picks the algorithm, prepares the f32
// working buffer (widening f16/bf16) and hands over to the algorithm's file.
#include "collectives/communicator.h"

#include <cstring>
#include <vector>

#include "collectives/algorithm.h"
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

}  // namespace

Communicator::Communicator(std::unique_ptr<Transport> transport) : transport_(std::move(transport)) {}
Communicator::~Communicator() = default;

int Communicator::rank() const { return transport_->rank(); }
int Communicator::size() const { return transport_->size(); }

Status Communicator::allreduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                               const CollectiveOptions& options) {
  const uint64_t seq = ++sequence_;
  const size_t bytes = count * dtype_size(dtype);
  auto algorithm = choose_algorithm("allreduce", options.algorithm, bytes);
  if (!algorithm) return algorithm.status().with_context(call_name("allreduce", seq, options.algorithm, options.tag));
  CallContext ctx{*transport_, Clock::now() + options.timeout, call_name("allreduce", seq, *algorithm, options.tag)};
  if (count > 0 && (in == nullptr || out == nullptr)) return invalid_argument(ctx.prefix + ": null buffer");
  auto wire = wire_for(dtype, options.wire, ctx.prefix);
  if (!wire) return wire.status();

  // The f32 working buffer: `out` itself for f32, else a widened copy (accumulation stays f32).
  std::vector<float> widened;
  float* work = static_cast<float*>(out);
  if (dtype != DType::f32) {
    widened.resize(count);
    work = widened.data();
  }
  widen(in, dtype, count, work);
  if (size() > 1 && count > 0) {
    Status st = *algorithm == "ring" ? allreduce_ring(ctx, work, count, op, *wire)
                                     : allreduce_halving_doubling(ctx, work, count, op, *wire);
    TROUPE_RETURN_IF_ERROR(st);
  }
  if (op == ReduceOp::avg) cpu::scale(work, count, 1.0f / static_cast<float>(size()));
  narrow(work, dtype, count, out);
  return {};
}

Status Communicator::broadcast(void* buf, size_t count, DType dtype, int root, const CollectiveOptions& options) {
  const uint64_t seq = ++sequence_;
  auto algorithm = choose_algorithm("broadcast", options.algorithm, count * dtype_size(dtype));
  if (!algorithm) return algorithm.status().with_context(call_name("broadcast", seq, options.algorithm, options.tag));
  CallContext ctx{*transport_, Clock::now() + options.timeout, call_name("broadcast", seq, *algorithm, options.tag)};
  if (root < 0 || root >= size())
    return invalid_argument(ctx.prefix + ": root " + std::to_string(root) + " is not a rank of a group of " +
                            std::to_string(size()));
  if (count > 0 && buf == nullptr) return invalid_argument(ctx.prefix + ": null buffer");
  if (size() == 1 || count == 0) return {};
  return broadcast_tree(ctx, static_cast<char*>(buf), count * dtype_size(dtype), root);
}

Status Communicator::allgather(const void* in, void* out, size_t count, DType dtype, const CollectiveOptions& options) {
  const uint64_t seq = ++sequence_;
  const size_t block = count * dtype_size(dtype);
  auto algorithm = choose_algorithm("allgather", options.algorithm, block * size());
  if (!algorithm) return algorithm.status().with_context(call_name("allgather", seq, options.algorithm, options.tag));
  CallContext ctx{*transport_, Clock::now() + options.timeout, call_name("allgather", seq, *algorithm, options.tag)};
  if (count > 0 && (in == nullptr || out == nullptr)) return invalid_argument(ctx.prefix + ": null buffer");
  char* result = static_cast<char*>(out);
  // In place when `in` is already block rank() of `out`; memmove covers any overlap otherwise.
  if (count > 0) std::memmove(result + rank() * block, in, block);
  if (size() == 1 || count == 0) return {};
  return allgather_ring(ctx, result, block);
}

Status Communicator::reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                                    const CollectiveOptions& options) {
  const uint64_t seq = ++sequence_;
  const size_t total = count * static_cast<size_t>(size());
  auto algorithm = choose_algorithm("reduce_scatter", options.algorithm, total * dtype_size(dtype));
  if (!algorithm)
    return algorithm.status().with_context(call_name("reduce_scatter", seq, options.algorithm, options.tag));
  CallContext ctx{*transport_, Clock::now() + options.timeout, call_name("reduce_scatter", seq, *algorithm, options.tag)};
  if (count > 0 && (in == nullptr || out == nullptr)) return invalid_argument(ctx.prefix + ": null buffer");
  auto wire = wire_for(dtype, options.wire, ctx.prefix);
  if (!wire) return wire.status();
  if (count == 0) return {};
  // Always a working copy: `out` holds one block, and `in` may overlap it (in place).
  std::vector<float> work(total);
  widen(in, dtype, total, work.data());
  if (size() > 1) TROUPE_RETURN_IF_ERROR(reduce_scatter_ring(ctx, work.data(), count, op, *wire));
  float* mine = work.data() + rank() * count;
  if (op == ReduceOp::avg) cpu::scale(mine, count, 1.0f / static_cast<float>(size()));
  narrow(mine, dtype, count, out);
  return {};
}

Status Communicator::barrier(const CollectiveOptions& options) {
  const uint64_t seq = ++sequence_;
  auto algorithm = choose_algorithm("barrier", options.algorithm, 0);
  if (!algorithm) return algorithm.status().with_context(call_name("barrier", seq, options.algorithm, options.tag));
  CallContext ctx{*transport_, Clock::now() + options.timeout, call_name("barrier", seq, *algorithm, options.tag)};
  if (size() == 1) return {};
  return barrier_dissemination(ctx);
}

}  // namespace troupe::collectives
