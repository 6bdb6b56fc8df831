// A failure inside libtorch (a module that raises, shapes that do not fit) as an error naming where,
// without the C++ stack libtorch appends to its messages.
#pragma once

#include <exception>
#include <string>

#include "core/status.h"

namespace troupe::torch_model {

template <typename F>
auto guarded(const std::string& where, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    std::string what = e.what();
    const size_t trace = what.find("\nException raised from");
    if (trace != std::string::npos) what.resize(trace);
    return invalid_argument(where + ": " + what);
  }
}

}  // namespace troupe::torch_model
