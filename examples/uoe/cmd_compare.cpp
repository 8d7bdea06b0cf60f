// uoe compare: trains each FFN kind at matched active compute for the same wall-clock budget
// and writes results.md (validation loss mean ± std over seeds) and val_loss.svg.
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "args.h"
#include "commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "nn/accounting.h"
#include "nn/trainer.h"
#include "svg_plot.h"

namespace uoe::cli {
namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

struct Run {
  std::string arch;
  uint64_t seed;
  nn::TrainResult result;
};

}  // namespace

int cmd_compare(const std::vector<std::string>& argv) {
  const Args a("compare", argv,
               {"data", "archs", "minutes", "seeds", "out", "batch", "seq", "lr", "steps", "threads", "eval-every",
                "eval-batches", "preset-prefix"});
  set_threads(a.integer("threads", 0));
  const std::string out = a.required("out"), data = a.required("data");
  const std::vector<std::string> archs = split_list(a.str("archs", "dense,moe,aoe,uoe"));
  const int64_t seeds = a.integer("seeds", 2);
  const double minutes = a.number("minutes", 10);
  const std::string prefix = a.str("preset-prefix", "tiny-");
  UOE_CHECK(!archs.empty() && seeds > 0 && minutes > 0, "--archs, --seeds and --minutes must be non-empty/positive");
  ::mkdir(out.c_str(), 0755);
  auto tok = nn::make_byte_tokenizer();
  const auto tokens = open_tokens(data, *tok, out + "/tokens.bin");
  const nn::TokenDataset dataset(tokens);

  std::vector<Run> runs;
  for (const std::string& arch : archs)
    for (int64_t s = 0; s < seeds; ++s) {
      const nn::ModelConfig config = nn::load_model_config(prefix + arch);
      nn::TrainOptions o;
      o.steps = a.integer("steps", 1000);
      o.batch = a.integer("batch", 16);
      o.seq = a.integer("seq", config.context);
      o.lr = a.number("lr", 1e-3);
      o.seed = uint64_t(s);
      o.eval_every = a.integer("eval-every", 25);
      o.eval_batches = a.integer("eval-batches", 8);
      o.time_limit_s = minutes * 60;
      o.out_dir = out + "/" + arch + "-seed" + std::to_string(s);
      std::printf("== %s seed %ld (%.1f min)\n", arch.c_str(), long(s), minutes);
      std::fflush(stdout);
      runs.push_back({arch, uint64_t(s), nn::train(config, o, dataset, *tok)});
    }

  std::ostringstream md;
  md << "# uoe compare\n\n" << seeds << " seed(s) x " << minutes << " min per kind, batch " << a.integer("batch", 16)
     << " x " << a.integer("seq", 256) << ", AdamW lr " << a.number("lr", 1e-3) << ", data `" << data << "`\n\n";
  md << "| kind | val loss (nats/token) | tokens/s | steps | tokens seen | total params | active params |\n";
  md << "|---|---|---|---|---|---|---|\n";
  std::vector<Series> series;
  for (const std::string& arch : archs) {
    double sum = 0, sumsq = 0, tps = 0, steps = 0, seen = 0;
    int n = 0;
    for (const Run& r : runs) {
      if (r.arch != arch) continue;
      sum += r.result.final_val_loss;
      sumsq += r.result.final_val_loss * r.result.final_val_loss;
      tps += r.result.tokens_per_s;
      steps += double(r.result.steps);
      seen += r.result.curve.empty() ? 0 : double(r.result.curve.back().tokens);
      ++n;
      Series sr{arch + " seed " + std::to_string(r.seed), {}, {}};
      for (const nn::EvalPoint& p : r.result.curve) {
        sr.x.push_back(double(p.tokens));
        sr.y.push_back(p.val_loss);
      }
      series.push_back(sr);
    }
    const double mean = sum / n, var = n > 1 ? std::max(0.0, (sumsq - n * mean * mean) / (n - 1)) : 0.0;
    const nn::ModelCounts k = nn::count_model(nn::load_model_config(prefix + arch));
    char row[256];
    std::snprintf(row, sizeof row, "| %s | %.4f ± %.4f | %.0f | %.0f | %.2fM | %.2fM | %.2fM |\n", arch.c_str(), mean,
                  std::sqrt(var), tps / n, steps / n, seen / n / 1e6, k.total / 1e6, k.active / 1e6);
    md << row;
  }
  md << "\n![validation loss](val_loss.svg)\n";
  write_file_atomic(out + "/results.md", md.str());
  write_file_atomic(out + "/val_loss.svg",
                    line_chart_svg("Validation loss vs tokens", "tokens", "val loss (nats/token)", series));
  std::fputs(md.str().c_str(), stdout);
  return 0;
}

}  // namespace uoe::cli
