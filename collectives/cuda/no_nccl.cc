// Built with CUDA but without NCCL: the NCCL path says so; the staged path still works.
#include "collectives/device_communicator.h"

namespace troupe::collectives {

Expected<std::unique_ptr<DeviceCommunicator>> form_nccl_group(gcs::Store&, const GroupOptions& o, int) {
  return unavailable("nccl group '" + o.name + "': this build has no NCCL (install it and reconfigure); "
                     "use make_staged_communicator for device buffers");
}

bool built_with_nccl() { return false; }

}  // namespace troupe::collectives
