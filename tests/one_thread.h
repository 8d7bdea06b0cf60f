// One OpenMP thread for the life of a test's object. ctest runs two tests on two cores: a test whose parallel loops
// wake every worker spins them on the core the other test holds, and both slow down several-fold (two fuzz
// campaigns side by side: 22 s instead of 0.5 s; the bfloat16 quality run: 300 s instead of 67 s).
#pragma once
#include <omp.h>

namespace uoe::test {

class OneThread {
 public:
  OneThread() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(saved_); }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int saved_;
};

}  // namespace uoe::test
