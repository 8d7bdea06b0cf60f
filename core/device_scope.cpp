// DeviceScope through the CUDA backend's registered switch.
#include "core/device_scope.h"

#include "core/error.h"

namespace uoe {
namespace {

CudaDeviceSwitch g_switch{nullptr, nullptr};

}  // namespace

void register_cuda_device_switch(CudaDeviceSwitch s) { g_switch = s; }

DeviceScope::DeviceScope(Device device) {
  if (!device.is_cuda()) return;
  UOE_CHECK(g_switch.enter, "[device] ", device.str(), " needs a CUDA build with a visible GPU");
  previous_ = g_switch.enter(device.index);
}

DeviceScope::~DeviceScope() {
  if (previous_ >= 0) g_switch.leave(previous_);
}

}  // namespace uoe
