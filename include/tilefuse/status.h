// Status and StatusOr: how tilefuse reports what users and hardware can get wrong
// (bad models, unsupported ops, compiler failures, out of memory). Our own bugs use
// TF_CHECK instead (src/support/check.h). No exceptions cross module boundaries.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace tilefuse {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // malformed model, bad attribute, shape mismatch, bad CLI input
  kUnimplemented,     // an op or feature tilefuse does not support (yet)
  kNotFound,          // a file or named entity that does not exist
  kResourceExhausted, // out of memory
  kInternal,          // a failure in a tool we drive (compiler, driver)
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: <message>"
  std::string ToString() const;

  // Prefixes context, e.g. the ONNX node that caused the error.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
inline Status Unimplemented(std::string msg) { return {StatusCode::kUnimplemented, std::move(msg)}; }
inline Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
inline Status ResourceExhausted(std::string msg) { return {StatusCode::kResourceExhausted, std::move(msg)}; }
inline Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tilefuse

#define TF_CONCAT_INNER(a, b) a##b
#define TF_CONCAT(a, b) TF_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                         \
  do {                                                \
    ::tilefuse::Status tf_status_ = (expr);           \
    if (!tf_status_.ok()) return tf_status_;          \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) ASSIGN_OR_RETURN_IMPL(TF_CONCAT(tf_statusor_, __LINE__), lhs, expr)
