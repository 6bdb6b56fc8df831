#include "kernels/cpu/blas_info.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <set>

namespace troupe::kernels::cpu {

std::string blas_corename() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

std::string choose_blas_coretype(const std::string& user_coretype, const std::string& corename, bool avx512,
                                 bool avx2_fma) {
  if (!user_coretype.empty()) return "";
  static const std::set<std::string> uses_avx512{"SkylakeX", "Cooperlake", "SapphireRapids", "skylakex",
                                                 "cooperlake", "sapphirerapids"};
  static const std::set<std::string> pre_avx2{"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom",
                                              "Sandybridge", "Katmai", "Coppermine", "Northwood", "Banias",
                                              "prescott", "core2", "penryn", "dunnington", "nehalem", "atom",
                                              "sandybridge", "unknown"};
  if (avx512 && uses_avx512.count(corename) == 0) return "SkylakeX";
  if (!avx512 && avx2_fma && pre_avx2.count(corename) != 0) return "Haswell";
  return "";
}

void reexec_for_blas(char** argv) {
  const char* autotune = std::getenv("TROUPE_BLAS_AUTOTUNE");
  if (autotune && (std::string(autotune) == "0" || std::string(autotune) == "false")) return;
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  bool avx512 = false, avx2_fma = false;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  const std::string coretype = choose_blas_coretype(user ? user : "", blas_corename(), avx512, avx2_fma);
  if (coretype.empty()) return;
  if (::setenv("OPENBLAS_CORETYPE", coretype.c_str(), 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  ::unsetenv("OPENBLAS_CORETYPE");  // exec failed: carry on with the kernels we have
}

}  // namespace troupe::kernels::cpu
