// The StepDevice (trainers/ps/step_device.h) of one GPU: what an async job's GPU worker computes
// its gradients on (trainers/cuda/cuda_ps_worker.h). Internal to trainers/cuda.
//
//   host (pinned)          copy stream                      compute stream
//   batch[b]      ------>  H2D x[b], y[b]; record up[b]
//   pull[s]       ------>  wait computed; H2D params;
//                          record params_up        ------>  wait params_up, up[b]; zero loss and
//                                                           count; forward/backward -> grads;
//                                                           record computed
//   push          <------  wait computed; D2H grads, loss,
//                          count; record grads_down (the host waits for it, bounded)
//
// Two pinned batch slots and device batch buffers alternate, so a batch is written while the
// previous one may still be read; the copy stream also waits for the last computation before it
// overwrites the parameters or a batch buffer, so the order holds whatever the host waited for.
// Replays and evaluations run on the compute stream and wait for it (bounded). All calls from the
// thread that made it (its device is that thread's current one).
#pragma once

#include <memory>

#include "trainers/cuda/model_spec.h"
#include "trainers/ps/step_device.h"

namespace troupe::cuda_detail {

struct PsDeviceOptions {
  int device = 0;         // the worker's GPU, selected for the calling thread
  int64_t max_rows = 1;   // the largest batch (and replay)
  double wait_seconds = 60;  // per wait for the GPU
};

// Streams, cuBLAS, the model's buffers and the pinned host slots on options.device. Errors:
// unavailable (no such device, out of memory), the CUDA runtime's.
// The model is `spec` (trainers/cuda/model_spec.h: the mlp or the cnn).
Expected<std::unique_ptr<ps::StepDevice>> make_ps_cuda_device(ModelSpec spec, const PsDeviceOptions& options);

}  // namespace troupe::cuda_detail
