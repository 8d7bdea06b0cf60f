// CPU rotary position embedding kernel.
#pragma once
#include "core/tensor.h"

namespace uoe::cpu {

// x: contiguous [B, T, H, Dh] -> rotated copy; inverse rotates by the negative angle (the backward).
Tensor rope(const Tensor& x, double base, int64_t pos_offset, bool inverse);

}  // namespace uoe::cpu
