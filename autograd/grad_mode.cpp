// Grad mode and anomaly mode flags.
#include "autograd/grad_mode.h"

#include <atomic>

namespace uoe::autograd {
namespace {
thread_local bool t_grad_enabled = true;
std::atomic<bool> g_anomaly{false};
}  // namespace

bool grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool on) { t_grad_enabled = on; }
bool anomaly_enabled() { return g_anomaly.load(); }
void set_anomaly_enabled(bool on) { g_anomaly.store(on); }

}  // namespace uoe::autograd
