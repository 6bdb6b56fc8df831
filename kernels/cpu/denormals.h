// Flush-to-zero for the training loop. As training goes on, gradients and Adam's second moments
// underflow into denormal floats, and on Intel cores every arithmetic operation on a denormal costs
// on the order of a hundred cycles: the same job ran at half speed on an H100 host's Xeon (and at
// full speed on AMD cores, which handle denormals in hardware). Values below 1.2e-38 carry nothing a
// model can use, so trainers treat them as zero (as PyTorch's set_flush_denormal does).
#pragma once

namespace troupe::kernels::cpu {

// Sets flush-to-zero (FTZ) and denormals-are-zero (DAZ) for the calling thread, and restores the
// previous mode when destroyed. Other threads (BLAS worker threads when cpu_threads > 1) keep their
// own mode. A no-op on processors without SSE control registers.
class ScopedFlushDenormals {
 public:
  ScopedFlushDenormals();
  ~ScopedFlushDenormals();
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  unsigned int saved_ = 0;
};

}  // namespace troupe::kernels::cpu
