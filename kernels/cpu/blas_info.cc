#include "kernels/cpu/blas_info.h"

#include <cblas.h>

namespace troupe::kernels::cpu {

std::string blas_corename() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

}  // namespace troupe::kernels::cpu
