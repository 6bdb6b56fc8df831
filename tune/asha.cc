#include "tune/asha.h"

#include <algorithm>
#include <functional>

namespace troupe::tune {

std::vector<int> asha_rungs(int grace, int eta, int epochs) {
  std::vector<int> rungs;
  if (grace < 1 || eta < 2) return rungs;
  for (long long r = grace; r < epochs; r *= eta) rungs.push_back(static_cast<int>(r));
  return rungs;
}

double asha_cutoff(const std::vector<double>& others, double value, int eta, bool maximize) {
  std::vector<double> all = others;
  all.push_back(value);
  if (maximize) std::sort(all.begin(), all.end(), std::greater<double>());
  else std::sort(all.begin(), all.end());
  const size_t k = all.size();
  const size_t keep = std::max<size_t>(1, (k + static_cast<size_t>(eta) - 1) / static_cast<size_t>(eta));
  return all[keep - 1];
}

bool asha_keeps(const std::vector<double>& others, double value, int eta, bool maximize) {
  const double cut = asha_cutoff(others, value, eta, maximize);
  return maximize ? value >= cut : value <= cut;
}

}  // namespace troupe::tune
