// uoe plot: a run's training-time charts (loss, lr, grad norm, tokens/s, expert load) as SVG files and one HTML page.
#include <cstdio>

#include "analysis/metrics_plot.h"
#include "commands.h"

namespace uoe::cli {

int cmd_plot(const Args& a) {
  const std::string dir = analysis::write_run_plots(a.required("run"), a.str("out"));
  std::printf("wrote %s/index.html\n", dir.c_str());
  return 0;
}

}  // namespace uoe::cli
