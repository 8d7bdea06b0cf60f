// Timing for the GPU benchmarks: CUDA events around each iteration on the current stream of device 0
// (UseManualTime), after warm-up calls that keep module load, handle creation and heuristics out of the numbers.
#pragma once
#include <benchmark/benchmark.h>

#include <functional>

#include "cuda/stream.h"

namespace uoe {

// Runs body() `warmup` times, then once per benchmark iteration timed with events; returns the total seconds.
inline double time_with_events(benchmark::State& state, const std::function<void()>& body, int warmup = 2) {
  for (int i = 0; i < warmup; ++i) body();
  cuda::synchronize(0, "bench warm-up");
  const cudaStream_t stream = cuda::current_stream(0);
  cuda::Event start(true), stop(true);
  double total_s = 0;
  for (auto _ : state) {
    start.record(stream);
    body();
    stop.record(stream);
    stop.synchronize();
    const double s = double(stop.elapsed_ms(start)) * 1e-3;
    state.SetIterationTime(s);
    total_s += s;
  }
  cuda::synchronize(0, "bench");
  return total_s;
}

// A peer's time outside the benchmark loop: `warmup` calls, then the mean seconds of `reps` calls between two
// events.
inline double seconds_per_call(const std::function<void()>& body, int reps = 5, int warmup = 2) {
  for (int i = 0; i < warmup; ++i) body();
  cuda::synchronize(0, "bench peer warm-up");
  const cudaStream_t stream = cuda::current_stream(0);
  cuda::Event start(true), stop(true);
  start.record(stream);
  for (int i = 0; i < reps; ++i) body();
  stop.record(stream);
  stop.synchronize();
  return double(stop.elapsed_ms(start)) * 1e-3 / reps;
}

}  // namespace uoe
