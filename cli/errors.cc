#include <cstdio>

#include "cli/commands.h"

namespace troupe::cli {

int report_error(const std::string& command, const Status& status) {
  std::fprintf(stderr, "troupe %s: error: %s\n", command.c_str(), status.to_string().c_str());
  return status.code() == Code::invalid_argument ? kExitUsage : kExitFailure;
}

}  // namespace troupe::cli
