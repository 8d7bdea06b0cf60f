// Rank statistics the analysis shares: ranks with ties, Pearson and Spearman correlation, and the area under the
// ROC curve of a score for a yes/no outcome.
#pragma once
#include <cstdint>
#include <vector>

namespace uoe::analysis {

// Ranks 1..m of v (ties share their average rank).
std::vector<double> ranks(const std::vector<double>& v);

// Pearson correlation; NaN when either side is constant (or empty).
double pearson(const std::vector<double>& a, const std::vector<double>& b);

// Pearson correlation of the ranks.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

// P(score of a random positive > score of a random negative), ties counting one half (the Mann-Whitney U over
// positives × negatives): 1 = the score separates them perfectly, 0.5 = no better than chance. NaN without both.
double auc(const std::vector<double>& score, const std::vector<uint8_t>& positive);

// |selected ∩ the top-|selected| entries of ref| / |selected| (ties: lower index first); 0 when none is selected.
double selection_overlap(const std::vector<double>& ref, const std::vector<int64_t>& selected);

}  // namespace uoe::analysis
