// Whether a collective (or a pipeline's message) was cut short by a lost peer or link.
#pragma once

#include "core/status.h"

namespace troupe::collectives {

// unavailable, timeout or io_error: what a dead, cut-off or aborting peer leaves a collective with,
// which live recovery goes on from; not a bug, bad numbers or input.
inline bool lost_peer(const Status& st) {
  return st.code() == Code::unavailable || st.code() == Code::timeout || st.code() == Code::io_error;
}

}  // namespace troupe::collectives
