// Formatting, figures and the page frame of the analysis reports.
#include <cmath>
#include <cstdio>

#include "analysis/report_parts.h"
#include "analysis/svg_chart.h"

namespace uoe::analysis::html {

std::string num(double v, const char* format) {
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

double finite_mean(const std::vector<double>& v) {
  double sum = 0, count = 0;
  for (double x : v)
    if (std::isfinite(x)) sum += x, count += 1;
  return count > 0 ? sum / count : NAN;
}

std::vector<std::string> expert_names(int64_t n, const char* prefix) {
  std::vector<std::string> names;
  for (int64_t i = 0; i < n; ++i) names.push_back(prefix + std::to_string(i));
  return names;
}

std::string ffn_summary(const nn::ModelConfig& c) {
  const nn::FfnConfig& f = c.ffn;
  std::ostringstream o;
  o << nn::ffn_kind_name(f.kind) << " FFN, " << c.n_layers << " layers, d_model " << c.d_model << ", n = " << f.n_experts
    << " experts of width D = " << f.expert_width;
  if (f.kind == nn::FfnKind::UoE)
    o << ", r = " << f.routing_neurons << " routing neurons, score " << nn::switch_name(f.score) << ", combine "
      << nn::switch_name(f.combine) << ", routing "
      << (f.routing == nn::Routing::TopP ? "top-p " + num(f.top_p, "%.2f") : "top-" + std::to_string(f.top_k));
  else
    o << ", top-" << f.top_k;
  if (f.aux_loss > 0) o << ", load-balance loss α = " << num(f.aux_loss, "%.3g");
  return o.str();
}

void figure(std::ostringstream& o, const std::string& id, const std::string& svg, const std::string& caption) {
  o << "<figure id=\"" << id << "\">\n" << svg << "<figcaption>" << escape_xml(caption) << "</figcaption>\n</figure>\n";
}

std::string page_start(const std::string& title) {
  return "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
         "<title>" + escape_xml(title) + "</title>\n<style>\n"
         "body { font-family: sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }\n"
         "table { border-collapse: collapse; font-size: 13px; } td, th { border: 1px solid #ccc; padding: 3px 6px; }\n"
         "figure { margin: 1.5em 0; } figcaption { font-size: 13px; color: #555; }\n"
         ".tokens { font-family: monospace; white-space: pre-wrap; line-height: 1.6; border: 1px solid #ddd; padding: 8px; }\n"
         ".legend span { padding: 2px 6px; margin-right: 4px; font-size: 13px; }\n"
         ".flags { border: 2px solid #c0392b; background: #fdf2f0; padding: 4px 12px; }\n"
         ".ok { border: 1px solid #27ae60; background: #f0faf3; padding: 4px 12px; }\n"
         ".piece { font-family: monospace; background: #eef; padding: 0 3px; white-space: pre; }\n"
         "</style>\n</head>\n<body>\n";
}

std::string page_end() { return "</body>\n</html>\n"; }

void flags_section(std::ostringstream& o, const std::vector<RoutingFlag>& flags, const std::string& id,
                   const std::string& heading) {
  o << "<h2 id=\"" << id << "\">" << escape_xml(heading) << "</h2>\n";
  if (flags.empty()) {
    o << "<p class=\"ok\">No flags: every expert takes at least a tenth of the uniform load, and no layer's routing "
         "score agrees with the full activation below chance.</p>\n";
    return;
  }
  o << "<div class=\"flags\"><ul>\n";
  for (const RoutingFlag& f : flags) o << "<li>" << escape_xml(f.message) << "</li>\n";
  o << "</ul></div>\n";
}

}  // namespace uoe::analysis::html
