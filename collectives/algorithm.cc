#include "collectives/algorithm.h"

#include <cstring>

#include "kernels/cpu/ops.h"

namespace troupe::collectives {

namespace cpu = troupe::kernels::cpu;

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::allreduce: return "allreduce";
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::allgather: return "allgather";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::barrier: return "barrier";
    case CollectiveKind::shift: return "shift";
  }
  return "collective?";
}

std::string CallDescriptor::describe() const {
  std::string s = std::string(collective_name(kind)) + " #" + std::to_string(sequence);
  if (kind == CollectiveKind::barrier) return s;
  s += " of " + std::to_string(count) + " " + dtype_name(dtype);
  if (kind == CollectiveKind::allreduce || kind == CollectiveKind::reduce_scatter) {
    s += std::string(" (") + reduce_op_name(static_cast<ReduceOp>(reduce));
    if (wire != dtype && dtype == DType::f32) s += std::string(", ") + dtype_name(wire) + " wire";
    s += ")";
  }
  if (kind == CollectiveKind::broadcast) s += " from root " + std::to_string(root);
  if (kind == CollectiveKind::shift) s += " by " + std::to_string(root);
  return s;
}

Expected<std::string> choose_algorithm(const std::string& op, const std::string& requested, size_t bytes,
                                       const std::string& native) {
  std::vector<std::string> known;
  std::string chosen;
  if (op == "allreduce") {
    known = {"ring", "halving_doubling"};
    chosen = bytes <= kSmallAllreduceBytes ? "halving_doubling" : "ring";
  } else if (op == "broadcast") {
    known = {"tree"};
    chosen = "tree";
  } else if (op == "allgather" || op == "reduce_scatter") {
    known = {"ring"};
    chosen = "ring";
  } else if (op == "shift") {
    known = {"pairs"};
    chosen = "pairs";
  } else if (op == "barrier") {
    known = {"dissemination"};
    chosen = "dissemination";
  } else {
    return internal_error("choose_algorithm: unknown collective '" + op + "'");
  }
  if (!native.empty()) {
    known.insert(known.begin(), native);
    chosen = native;
  }
  if (requested.empty() || requested == "auto") return chosen;
  for (const auto& k : known)
    if (k == requested) return k;
  std::string list = "auto";
  for (const auto& k : known) list += ", " + k;
  return invalid_argument(op + ": unknown algorithm '" + requested + "'; choose one of: " + list);
}

void Wire::encode(const float* src, size_t n, void* dst) const {
  switch (dtype) {
    case DType::f32: std::memcpy(dst, src, n * 4); break;
    case DType::f16: cpu::f32_to_f16(src, static_cast<uint16_t*>(dst), n); break;
    case DType::bf16: cpu::f32_to_bf16(src, static_cast<uint16_t*>(dst), n); break;
  }
}

void Wire::decode(const void* src, size_t n, float* dst) const {
  switch (dtype) {
    case DType::f32: std::memcpy(dst, src, n * 4); break;
    case DType::f16: cpu::f16_to_f32(static_cast<const uint16_t*>(src), dst, n); break;
    case DType::bf16: cpu::bf16_to_f32(static_cast<const uint16_t*>(src), dst, n); break;
  }
}

void Wire::accumulate(ReduceOp op, float* dst, const void* src, size_t n, std::vector<float>* scratch) const {
  if (op != ReduceOp::max) {
    if (dtype == DType::f32) return cpu::sum_into(dst, static_cast<const float*>(src), n);
    if (dtype == DType::f16) return cpu::sum_into_f16(dst, static_cast<const uint16_t*>(src), n);
    return cpu::sum_into_bf16(dst, static_cast<const uint16_t*>(src), n);
  }
  if (dtype == DType::f32) return cpu::max_into(dst, static_cast<const float*>(src), n);
  if (scratch->size() < n) scratch->resize(n);
  decode(src, n, scratch->data());
  cpu::max_into(dst, scratch->data(), n);
}

void Wire::round(float* x, size_t n) const {
  if (dtype == DType::f32 || n == 0) return;
  std::vector<uint16_t> tmp(n);
  encode(x, n, tmp.data());
  decode(tmp.data(), n, x);
}

std::vector<size_t> even_blocks(size_t count, int blocks) {
  std::vector<size_t> offsets(blocks + 1);
  size_t base = count / blocks, extra = count % blocks;
  for (int b = 0; b < blocks; ++b) offsets[b + 1] = offsets[b] + base + (static_cast<size_t>(b) < extra ? 1 : 0);
  return offsets;
}

}  // namespace troupe::collectives
