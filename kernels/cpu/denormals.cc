#include "kernels/cpu/denormals.h"

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define TROUPE_HAS_MXCSR 1
#endif

namespace troupe::kernels::cpu {

#ifdef TROUPE_HAS_MXCSR
namespace {
constexpr unsigned int kFlushToZero = 0x8000;      // MXCSR.FTZ: denormal results become 0
constexpr unsigned int kDenormalsAreZero = 0x0040;  // MXCSR.DAZ: denormal inputs read as 0
}  // namespace

ScopedFlushDenormals::ScopedFlushDenormals() : saved_(_mm_getcsr()) {
  _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero);
}
ScopedFlushDenormals::~ScopedFlushDenormals() { _mm_setcsr(saved_); }
#else
ScopedFlushDenormals::ScopedFlushDenormals() = default;
ScopedFlushDenormals::~ScopedFlushDenormals() = default;
#endif

}  // namespace troupe::kernels::cpu
