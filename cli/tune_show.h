// How a search looks in the terminal: the table of its trials (settings, state, metric by epoch,
// wall time, why it ended) for `troupe tune` / `troupe tune show`, and the lines `troupe status`
// prints per search.
#pragma once

#include <cstdio>
#include <string>

#include "gcs/search_record.h"

namespace troupe::cli {

// The search's header line and one row per trial (at most `max_rows`; the rest counted).
void print_search_table(std::FILE* out, const gcs::SearchRecord& s, size_t max_rows = 1000);
// "1a2b3c4d  name  RUNNING  asha test_accuracy max  12 trials: 3 running, 2 waiting, 5 done, 2 stopped  best 0.8712"
std::string search_line(const gcs::SearchRecord& s);

}  // namespace troupe::cli
