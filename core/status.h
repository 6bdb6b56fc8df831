// Errors as values: Status (ok, or a code and a message) and Expected<T> (a T, or the Status that
// explains why there is none). Every message says what failed, where, and what to do about it;
// the code lets callers branch without parsing text.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace troupe {

enum class Code {
  ok = 0,
  invalid_argument,   // a flag, option or input value is out of range or malformed
  not_found,          // a file, record or name does not exist
  io_error,           // reading or writing a file or socket failed
  corrupt_data,       // data exists but does not decode: bad magic, short file, bad checksum
  numeric_error,      // NaN or infinity where finite numbers are required
  unavailable,        // a device or service is absent (no GPU, built without CUDA, server down)
  timeout,            // a deadline passed
  version_mismatch,   // a record or peer of another schema or build version
  internal,           // a broken invariant: a bug in troupe
};

const char* code_name(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return {}; }

  bool ok() const { return code_ == Code::ok; }
  explicit operator bool() const { return ok(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "<code>: <message>", e.g. "corrupt_data: train-images-idx3-ubyte.gz: wrong IDX magic ...".
  std::string to_string() const;

  // Returns a copy whose message is prefixed with `context` ("loading dataset: ...").
  Status with_context(const std::string& context) const;

 private:
  Code code_ = Code::ok;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {Code::invalid_argument, std::move(m)}; }
inline Status not_found(std::string m) { return {Code::not_found, std::move(m)}; }
inline Status io_error(std::string m) { return {Code::io_error, std::move(m)}; }
inline Status corrupt_data(std::string m) { return {Code::corrupt_data, std::move(m)}; }
inline Status numeric_error(std::string m) { return {Code::numeric_error, std::move(m)}; }
inline Status unavailable(std::string m) { return {Code::unavailable, std::move(m)}; }
inline Status internal_error(std::string m) { return {Code::internal, std::move(m)}; }

// A value of T, or the Status saying why there is none. Constructing from an ok Status is a bug.
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Status error) : v_(std::move(error)) {  // NOLINT
    assert(!std::get<Status>(v_).ok() && "Expected<T> built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The error; an ok Status when a value is held.
  Status status() const { return ok() ? Status{} : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace troupe

// Returns from the enclosing function when `expr` (a Status) is not ok.
#define TROUPE_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::troupe::Status _troupe_st = (expr);     \
    if (!_troupe_st.ok()) return _troupe_st;  \
  } while (0)
