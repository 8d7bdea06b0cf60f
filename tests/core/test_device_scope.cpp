// DeviceScope (core/device_scope.h): nothing for the CPU; for a GPU, the registered switch's enter on the way in and
// leave with the previous device on the way out; without a switch (no CUDA build or no visible GPU), one error
// naming the device. The fake switch runs only where no GPU is visible, so the real one is never replaced.
#include <gtest/gtest.h>

#include <vector>

#include "core/device_scope.h"
#include "cuda/cuda_api.h"
#include "gradcheck.h"

namespace uoe {
namespace {

std::vector<int> g_calls;  // enter(d) records d, leave(p) records -1 - p
int fake_enter(int device) {
  g_calls.push_back(device);
  return 3;  // the device that was current
}
void fake_leave(int previous) noexcept { g_calls.push_back(-1 - previous); }

TEST(DeviceScope, CpuScopeSwitchesNothing) {
  const DeviceScope scope(Device::cpu());
  SUCCEED();
}

TEST(DeviceScope, GpuScopeWithoutASwitchNamesTheDevice) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is visible: the CUDA backend's switch is registered";
  testing::expect_error([] { const DeviceScope scope(Device::cuda(1)); }, {"[device]", "cuda:1", "CUDA build"});
}

TEST(DeviceScope, GpuScopeEntersAndLeavesThroughTheSwitch) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is visible: its switch is not replaced by a fake";
  g_calls.clear();
  register_cuda_device_switch({fake_enter, fake_leave});
  {
    const DeviceScope scope(Device::cuda(2));
    EXPECT_EQ(g_calls, std::vector<int>({2}));
  }
  register_cuda_device_switch({nullptr, nullptr});
  EXPECT_EQ(g_calls, std::vector<int>({2, -1 - 3}));
}

}  // namespace
}  // namespace uoe
