// How many threads the CPU kernels use (the OpenMP team size), chosen for the machine as it is when a program starts.
//
// OpenMP's own default is one thread per core, whose workers spin at every barrier. On a machine that other
// processes keep busy, a team that large waits at each barrier for a worker the scheduler has paused: a tiny
// model's `uoe sample` went from 2 s to over 60 s. So the default counts only the cores that are idle.
#pragma once

namespace uoe {

// The cores of this process's CPU set that were idle over a short sample of /proc/stat (0.1 s), rounded, at least 1;
// every core of the set where /proc/stat cannot be read.
int idle_cores();

// Sets the CPU kernels' thread count: `threads` > 0 exactly that many; 0 the default, which is OMP_NUM_THREADS when
// that is set and idle_cores() otherwise. Returns the count in use.
int set_cpu_threads(int threads);

}  // namespace uoe
