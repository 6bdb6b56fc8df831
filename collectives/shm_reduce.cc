// Loading, combining and storing pieces of a rank's buffer for the shm reductions
// (collectives/shm_collectives.h), on the kernels/cpu vector ops. Accumulation is always f32.
#include <cstring>

#include "collectives/shm_collectives.h"
#include "kernels/cpu/ops.h"

namespace troupe::collectives::shm {

namespace cpu = troupe::kernels::cpu;

namespace {

const uint16_t* halves(const View& v, size_t at) { return reinterpret_cast<const uint16_t*>(v.base) + at; }

}  // namespace

void load(float* acc, const View& v, size_t at, size_t n) {
  switch (v.dtype) {
    case DType::f32: std::memcpy(acc, reinterpret_cast<const float*>(v.base) + at, n * sizeof(float)); break;
    case DType::f16: cpu::f16_to_f32(halves(v, at), acc, n); break;
    case DType::bf16: cpu::bf16_to_f32(halves(v, at), acc, n); break;
  }
}

void combine(ReduceOp op, float* acc, const View& v, size_t at, size_t n, float* tmp) {
  if (v.dtype == DType::f32) {
    const float* src = reinterpret_cast<const float*>(v.base) + at;
    op == ReduceOp::max ? cpu::max_into(acc, src, n) : cpu::sum_into(acc, src, n);
  } else if (op != ReduceOp::max) {  // sum and avg accumulate as sums; avg scales at the end
    v.dtype == DType::f16 ? cpu::sum_into_f16(acc, halves(v, at), n) : cpu::sum_into_bf16(acc, halves(v, at), n);
  } else {
    load(tmp, v, at, n);
    cpu::max_into(acc, tmp, n);
  }
}

void store(const View& v, size_t at, const float* acc, size_t n) {
  switch (v.dtype) {
    case DType::f32: std::memcpy(reinterpret_cast<float*>(v.base) + at, acc, n * sizeof(float)); break;
    case DType::f16: cpu::f32_to_f16(acc, reinterpret_cast<uint16_t*>(v.base) + at, n); break;
    case DType::bf16: cpu::f32_to_bf16(acc, reinterpret_cast<uint16_t*>(v.base) + at, n); break;
  }
}

}  // namespace troupe::collectives::shm
