// Error and Result<T>: how bad input is reported everywhere in deltaserve (never an abort).
// A message names the module, the subject, what was expected and what was found, and where:
//   "gguf: tensor 'blk.3.ssm_out.weight': shape [2048, 4096], expected [4096, 2048] (model.gguf, offset 0x1a2b40)"
#pragma once
#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace ds {

struct Error {
  std::string message;
};

// Builds an Error from a fmt format string: ds::err("gguf: bad magic {:#x}", m).
template <typename... Args>
Error err(fmt::format_string<Args...> f, Args&&... args) {
  return Error{fmt::format(f, std::forward<Args>(args)...)};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error e) : v_(std::move(e)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error e) : e_(std::move(e)) {}
  bool ok() const { return !e_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *e_; }

 private:
  std::optional<Error> e_;
};

using Status = Result<void>;

}  // namespace ds

// DS_TRY(expr): returns the Error from the enclosing function if expr (a Result) failed.
#define DS_TRY(expr)                              \
  do {                                            \
    auto&& _ds_r = (expr);                        \
    if (!_ds_r.ok()) return _ds_r.error();        \
  } while (0)

// DS_ASSIGN(lhs, expr): lhs = value of expr, or return its Error.
#define DS_CONCAT_INNER(a, b) a##b
#define DS_CONCAT(a, b) DS_CONCAT_INNER(a, b)
#define DS_ASSIGN(lhs, expr) DS_ASSIGN_IMPL(DS_CONCAT(_ds_res_, __LINE__), lhs, expr)
#define DS_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                   \
  if (!tmp.ok()) return tmp.error();   \
  lhs = std::move(tmp).value()
