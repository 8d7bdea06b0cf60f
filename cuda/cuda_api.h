// The CUDA backend's device queries and the calling thread's GPU, for programs and tests; a CPU-only build links
// stubs that raise.
#pragma once

namespace uoe::cuda {

bool is_available();  // a CUDA build with at least one visible GPU
int device_count();
// Makes `device` the calling thread's current GPU. A process that trains on one GPU calls it first, so that what
// the CUDA runtime does on the current device (its context, the legacy default stream) happens on that GPU.
void set_device(int device);

}  // namespace uoe::cuda
