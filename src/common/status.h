// Chamber's one error type: Status for operations without a value, Result<T> for those with one.
// No exceptions cross a component boundary; code that calls a throwing library (yaml-cpp,
// nlohmann-json) catches at the edge and returns a Status naming the place of the problem.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace chamber {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad input from a user or a file: names the field and why
  kNotFound,            // a named thing does not exist
  kAlreadyExists,       // a create that found the thing there
  kFailedPrecondition,  // the system is not in a state where the call can run
  kUnavailable,         // a dependency cannot be reached now; retrying may help
  kInternal,            // a broken invariant: a bug in Chamber
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status FailedPrecondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid argument: queues.yaml:4:9: field spec.resources.gpu.quota: must not be negative"
  std::string ToString() const;

  // Adds context in front of the message: WithContext("queues.yaml") -> "queues.yaml: <message>".
  // The HTTP detail below is kept.
  Status WithContext(std::string_view context) const;

  // An error answered by a remote HTTP API carries the status code and the API's reason word
  // ("Conflict", "NotFound", "DisruptionBudget", ...), so callers can tell errors apart without
  // reading the message. 0 and "" for every other error.
  Status WithHttp(int http_code, std::string reason) && {
    http_code_ = http_code;
    reason_ = std::move(reason);
    return std::move(*this);
  }
  int http_code() const { return http_code_; }
  const std::string& reason() const { return reason_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  int http_code_ = 0;
  std::string reason_;
};

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : data_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(data_).ok() && "a Result holding a Status must hold an error");
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(data_);
  }

  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace chamber

#define CHAMBER_STATUS_CONCAT_INNER(a, b) a##b
#define CHAMBER_STATUS_CONCAT(a, b) CHAMBER_STATUS_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` is not OK.
#define CHAMBER_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::chamber::Status chamber_status_ = (expr);        \
    if (!chamber_status_.ok()) return chamber_status_; \
  } while (false)

// CHAMBER_ASSIGN_OR_RETURN(auto x, MakeX()); returns the error Status when MakeX() fails.
#define CHAMBER_ASSIGN_OR_RETURN(lhs, expr) \
  CHAMBER_ASSIGN_OR_RETURN_IMPL(CHAMBER_STATUS_CONCAT(chamber_result_, __LINE__), lhs, expr)
#define CHAMBER_ASSIGN_OR_RETURN_IMPL(result, lhs, expr) \
  auto result = (expr);                                  \
  if (!result.ok()) return result.status();              \
  lhs = std::move(result).value()
