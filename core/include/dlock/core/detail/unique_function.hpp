// dlock/core/detail/unique_function.hpp: a move-only type-erased callable.
//
// C++20 has no std::move_only_function, and Asio 1.18 has no any_completion_handler;
// completion handlers are move-only, so std::function cannot hold them.
#pragma once

#include <memory>
#include <utility>

namespace dlock::detail {

template <typename Signature>
class unique_function;

template <typename R, typename... Args>
class unique_function<R(Args...)> {
 public:
  unique_function() noexcept = default;

  template <typename F>
    requires(!std::is_same_v<std::decay_t<F>, unique_function>)
  unique_function(F&& f)  // NOLINT(google-explicit-constructor): a function wrapper converts
      : callable_(std::make_unique<model<std::decay_t<F>>>(std::forward<F>(f))) {}

  unique_function(unique_function&&) noexcept = default;
  unique_function& operator=(unique_function&&) noexcept = default;

  explicit operator bool() const noexcept { return callable_ != nullptr; }

  /// Invokes the callable. Requires: non-empty.
  R operator()(Args... args) { return callable_->call(std::forward<Args>(args)...); }

 private:
  struct concept_t {
    virtual ~concept_t() = default;
    virtual R call(Args&&... args) = 0;
  };
  template <typename F>
  struct model final : concept_t {
    explicit model(F&& f) : f_(std::move(f)) {}
    explicit model(const F& f) : f_(f) {}
    R call(Args&&... args) override { return f_(std::forward<Args>(args)...); }
    F f_;
  };
  std::unique_ptr<concept_t> callable_;
};

}  // namespace dlock::detail
