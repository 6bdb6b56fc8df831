// Built without CUDA: the device paths say so.
#include "collectives/device_communicator.h"

namespace troupe::collectives {

Expected<std::unique_ptr<DeviceCommunicator>> make_staged_communicator(std::unique_ptr<Communicator>, int) {
  return unavailable("device collectives: this build has no CUDA (nvcc was not found at configure time)");
}

Expected<std::unique_ptr<DeviceCommunicator>> form_nccl_group(gcs::Store&, const GroupOptions& o, int) {
  return unavailable("nccl group '" + o.name + "': this build has no CUDA (nvcc was not found at configure time)");
}

bool built_with_cuda_collectives() { return false; }
bool built_with_nccl() { return false; }

}  // namespace troupe::collectives
