// Status / StatusOr: the error model for everything a user can cause (bad files, bad flags,
// impossible plans). Broken invariants use MOESPLIT_CHECK instead, which aborts with a message.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

namespace moesplit {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // a flag, a request or a config value is wrong
  kNotFound,            // a file, key or tensor does not exist
  kDataLoss,            // a file is corrupt or truncated
  kOutOfRange,          // an index/size beyond what is allowed
  kUnimplemented,       // valid input we do not support (yet)
  kResourceExhausted,   // not enough RAM / VRAM / disk
  kFailedPrecondition,  // the system is not in a state to do this
  kIoError,             // the OS refused (open, mmap, write)
  kInternal,            // a bug; should not happen
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "DATA_LOSS: model.gguf: offset 24: ..." — what the CLI prints.
  std::string ToString() const;

  // Returns a copy with `context + ": "` prepended to the message (keeps the code).
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Concatenates any streamable values: StrCat("offset ", 24, ": bad magic").
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

template <typename... Args>
Status InvalidArgumentError(const Args&... a) {
  return Status(StatusCode::kInvalidArgument, StrCat(a...));
}
template <typename... Args>
Status NotFoundError(const Args&... a) {
  return Status(StatusCode::kNotFound, StrCat(a...));
}
template <typename... Args>
Status DataLossError(const Args&... a) {
  return Status(StatusCode::kDataLoss, StrCat(a...));
}
template <typename... Args>
Status OutOfRangeError(const Args&... a) {
  return Status(StatusCode::kOutOfRange, StrCat(a...));
}
template <typename... Args>
Status UnimplementedError(const Args&... a) {
  return Status(StatusCode::kUnimplemented, StrCat(a...));
}
template <typename... Args>
Status ResourceExhaustedError(const Args&... a) {
  return Status(StatusCode::kResourceExhausted, StrCat(a...));
}
template <typename... Args>
Status FailedPreconditionError(const Args&... a) {
  return Status(StatusCode::kFailedPrecondition, StrCat(a...));
}
template <typename... Args>
Status IoError(const Args&... a) {
  return Status(StatusCode::kIoError, StrCat(a...));
}
template <typename... Args>
Status InternalError(const Args&... a) {
  return Status(StatusCode::kInternal, StrCat(a...));
}

namespace internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond, const std::string& msg);
[[noreturn]] void StatusOrValueOfError(const Status& s);
}  // namespace internal

// A value or the error that prevented computing it.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& s) : status_(s) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = InternalError("StatusOr constructed from an OK status");
  }
  StatusOr(Status&& s) : status_(std::move(s)) {  // NOLINT
    if (status_.ok()) status_ = InternalError("StatusOr constructed from an OK status");
  }
  template <typename U = T,
            typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                        !std::is_same_v<std::decay_t<U>, Status> &&
                                        !std::is_same_v<std::decay_t<U>, StatusOr<T>>>>
  StatusOr(U&& v) : value_(std::forward<U>(v)) {}  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & {
    if (!ok()) internal::StatusOrValueOfError(status_);
    return *value_;
  }
  const T& value() const& {
    if (!ok()) internal::StatusOrValueOfError(status_);
    return *value_;
  }
  T&& value() && {
    if (!ok()) internal::StatusOrValueOfError(status_);
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace moesplit

#define MOESPLIT_CONCAT_INNER_(a, b) a##b
#define MOESPLIT_CONCAT_(a, b) MOESPLIT_CONCAT_INNER_(a, b)

#define MOESPLIT_RETURN_IF_ERROR(expr)           \
  do {                                           \
    ::moesplit::Status _moesplit_st = (expr);    \
    if (!_moesplit_st.ok()) return _moesplit_st; \
  } while (0)

#define MOESPLIT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return tmp.status();                   \
  lhs = std::move(tmp).value()

// MOESPLIT_ASSIGN_OR_RETURN(auto file, GgufFile::Open(path));
#define MOESPLIT_ASSIGN_OR_RETURN(lhs, expr) \
  MOESPLIT_ASSIGN_OR_RETURN_IMPL_(MOESPLIT_CONCAT_(_moesplit_so_, __LINE__), lhs, expr)

// Invariant checks: always on (also in release builds); abort with file:line and a message.
#define MOESPLIT_CHECK(cond, ...)                                                           \
  do {                                                                                      \
    if (!(cond))                                                                            \
      ::moesplit::internal::CheckFailed(__FILE__, __LINE__, #cond,                          \
                                        ::moesplit::StrCat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
