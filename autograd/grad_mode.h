// Grad mode (thread-local on/off switch for graph recording) and anomaly mode.
#pragma once

namespace uoe::autograd {

bool grad_enabled();
void set_grad_enabled(bool on);
bool anomaly_enabled();
void set_anomaly_enabled(bool on);

}  // namespace uoe::autograd

namespace uoe {

// While alive, ops record no graph (like torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(autograd::grad_enabled()) { autograd::set_grad_enabled(false); }
  ~NoGradGuard() { autograd::set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// While alive, backward checks every gradient for NaN/Inf and names the op that produced it.
class AnomalyGuard {
 public:
  AnomalyGuard() : prev_(autograd::anomaly_enabled()) { autograd::set_anomaly_enabled(true); }
  ~AnomalyGuard() { autograd::set_anomaly_enabled(prev_); }
  AnomalyGuard(const AnomalyGuard&) = delete;
  AnomalyGuard& operator=(const AnomalyGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace uoe
