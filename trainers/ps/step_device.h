// Where a device worker's gradients are computed (device_worker.h): the seam between the
// parameter-server loop on the host thread and a device that works asynchronously to it.
//
//   CUDA      trainers/cuda/ps_cuda_device.h: pinned host buffers, a copy stream and a compute
//             stream ordered by events (what an async job's GPU worker runs).
//   CPU       cpu_step_device.h: the job's Trainer on the host, computing when the loop waits for
//             the gradient, and checking that the loop keeps the rules below (tests).
//
// The host buffers belong to the device: a pull writes straight into pull_buffer(slot) and a push
// reads straight from push_buffer(), with no copy in between (on a GPU they are page-locked, so
// the copies to and from the device run asynchronously on its copy stream). One step:
//
//   upload_batch(b)        the feed's rows copied into the device's own host memory (the feed's
//                          pointers die at its next call), their upload queued
//   pull_buffer(s)         the host is about to write slot s (a pull): s must not be in use
//   compute(s)             queued: upload of slot s, forward/backward on it and the last uploaded
//                          batch, the gradient and the batch's loss and correct count downloaded
//   wait_gradient()        blocks (bounded) until push_buffer() holds that gradient
//
// Rules the loop keeps (the CPU device checks them; breaking one is internal_error): two parameter
// slots alternate, so a pull that fails halfway leaves the other, the last whole pull, intact (a
// replay computes on it); compute() only after upload_batch(), and never twice without
// wait_gradient() between; a slot in flight (computed on, not yet waited for) is never written.
// Not thread-safe: one loop drives it (replays run on the loop's thread, inside a pull or push).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "trainers/api/trainer.h"
#include "data/readers/fashion_mnist.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe::ps {

class StepDevice {
 public:
  virtual ~StepDevice() = default;
  virtual size_t parameters() const = 0;   // floats in the flat vector
  virtual std::string name() const = 0;    // "cuda:0 (NVIDIA H100 80GB HBM3)", "cpu (mlp)"
  virtual std::string model() const = 0;   // "mlp 784-256-128-10 (235146 parameters)"
  // The model's state blocks (ParameterSpace::declare_state) as sorted flat ranges: their pushed
  // slots are changes, which clipping leaves out. None by default.
  virtual std::vector<std::pair<size_t, size_t>> state_ranges() const { return {}; }

  // Host memory for parameters() floats, slot 0 or 1, that the host is about to write (a pull).
  // Errors come from the next call that uses the slot.
  virtual float* pull_buffer(int slot) = 0;
  // The gradient wait_gradient() last returned, parameters() floats.
  virtual const float* push_buffer() const = 0;

  // Queues the upload of `batch` (at most the rows the device was made for); returns without
  // waiting for it.
  virtual Status upload_batch(const Batch& batch) = 0;
  // Queues forward/backward of the last uploaded batch on the parameters of pull_buffer(slot), and
  // the gradient's download into push_buffer(); returns without waiting for them.
  virtual Status compute(int slot) = 0;
  // Waits for the computation compute() queued, at most the device's timeout: its batch's mean
  // loss and correct count. Errors: timeout naming the device, the device's errors.
  virtual Expected<BatchStats> wait_gradient() = 0;

  // The gradient of the batch `rows` (inputs and labels or targets, at most the rows the device
  // was made for; the device binds its fields) on the parameters in pull_buffer(slot) into
  // out[0, parameters()), synchronously: a push recomputed for a restored parameter server
  // (ps_client.h). Only between steps: no computation in flight.
  virtual Status replay(int slot, const Batch& rows, float* out) = 0;
  // `data` scored with the parameters in pull_buffer(slot), synchronously: correctly classified
  // rows (-1 when the model does not classify) and the loss summed over rows (rows = 0 when the
  // device does not compute the loss). Only between steps.
  virtual Expected<EvalTotals> evaluate(int slot, const Dataset& data) = 0;
};

}  // namespace troupe::ps
