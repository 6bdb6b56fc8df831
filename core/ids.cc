#include "core/ids.h"

#include <mutex>
#include <random>

namespace troupe::detail {

std::array<uint8_t, 16> random_id_bytes() {
  static std::mutex mu;
  static std::mt19937_64 gen{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  std::array<uint8_t, 16> out;
  for (int half = 0; half < 2; ++half) {
    uint64_t v = gen();
    for (int i = 0; i < 8; ++i) out[half * 8 + i] = static_cast<uint8_t>(v >> (8 * i));
  }
  return out;
}

std::string id_to_hex(const std::array<uint8_t, 16>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s(32, '0');
  for (size_t i = 0; i < 16; ++i) {
    s[2 * i] = digits[bytes[i] >> 4];
    s[2 * i + 1] = digits[bytes[i] & 15];
  }
  return s;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool id_from_hex(const std::string& hex, std::array<uint8_t, 16>* out) {
  if (hex.size() != 32) return false;
  for (size_t i = 0; i < 16; ++i) {
    int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

}  // namespace troupe::detail
