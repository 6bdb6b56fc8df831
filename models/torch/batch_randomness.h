// libtorch's CPU generator is one per process, so what a module's training forward draws (dropout)
// would follow the process — which replicas share it, what ran in it before — rather than the job.
// BatchRandomness seeds the generator for each training forward from the job's seed and the forward's
// input, under a lock every torch trainer of the process shares: a step trained again (a restart, a
// live replacement, a replay) draws what it drew the first time, and replicas side by side in one
// process do not interleave their draws. A module whose first training forward draws nothing runs
// without the lock from then on (a module that draws only now and then is not supported; on a GPU
// the CUDA generator is not probed yet — issue 45).
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace troupe::torch_model {

// Held while libtorch's generator is seeded and drawn from: a module made (its initialisation) or a
// training forward that draws. One per process, shared by every torch trainer in it.
std::mutex& generator_lock();

// A key of `bytes` bytes at `data` mixed into `key`: the length and at most ~1,024 of its 8-byte
// words spread over it (cheap for a large batch; batches that differ differ there in practice).
uint64_t sample_key(const void* data, size_t bytes, uint64_t key);

class BatchRandomness {
 public:
  void set_seed(uint64_t seed) { seed_ = seed; }

  // f() — a training forward — with libtorch's generator seeded from the seed and `key`.
  template <class F>
  auto seeded(uint64_t key, F&& f) -> decltype(f()) {
    if (draws_ == Draws::no) return f();
    std::lock_guard<std::mutex> lock(generator_lock());
    torch::manual_seed(forward_seed(key));
    if (draws_ == Draws::yes) return f();
    const at::Tensor before = generator_state();
    auto out = f();
    draws_ = torch::equal(before, generator_state()) ? Draws::no : Draws::yes;
    return out;
  }

 private:
  enum class Draws { unknown, yes, no };
  uint64_t forward_seed(uint64_t key) const;
  static at::Tensor generator_state();

  uint64_t seed_ = 0;
  Draws draws_ = Draws::unknown;
};

}  // namespace troupe::torch_model
