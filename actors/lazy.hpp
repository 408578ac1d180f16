#pragma once
/// \file
/// Optional members that cost one pointer while empty. A user actor holds
/// some things only now and then (a deferred call, the text of why his parcel
/// is refused, a deferred continuation); as std::optional / std::function they
/// cost their full size in every idle user (issue 14, S5: 100,000 idle users).
/// `lazy<T>` has std::optional's interface (the part the actors use) and
/// allocates only while it holds a value.

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace troupe {

template <class T>
class lazy {
public:
  lazy() noexcept = default;
  lazy(lazy&&) noexcept = default;
  lazy& operator=(lazy&&) noexcept = default;
  lazy(const lazy& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  lazy& operator=(const lazy& o) {
    if (this != &o)
      p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }

  /// Holds `v` (as std::optional's assignment).
  template <class U, class = std::enable_if_t<!std::is_same_v<std::decay_t<U>, lazy>>>
  lazy& operator=(U&& v) {
    if (p_)
      *p_ = std::forward<U>(v);
    else
      p_ = std::make_unique<T>(std::forward<U>(v));
    return *this;
  }

  template <class... Ts>
  T& emplace(Ts&&... xs) {
    p_ = std::make_unique<T>(std::forward<Ts>(xs)...);
    return *p_;
  }

  void reset() noexcept { p_.reset(); }
  bool has_value() const noexcept { return p_ != nullptr; }
  explicit operator bool() const noexcept { return has_value(); }

  T& operator*() noexcept { return *p_; }
  const T& operator*() const noexcept { return *p_; }
  T* operator->() noexcept { return p_.get(); }
  const T* operator->() const noexcept { return p_.get(); }

private:
  std::unique_ptr<T> p_;
};

/// A nullary callable that costs one pointer while empty (std::function costs 32 bytes).
template <class R>
class lazy_function {
public:
  lazy_function() noexcept = default;
  lazy_function(std::nullptr_t) noexcept {}

  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, lazy_function> &&
                                              !std::is_same_v<std::decay_t<F>, std::nullptr_t>>>
  lazy_function& operator=(F&& f) {
    std::function<R()> fn(std::forward<F>(f));
    p_ = fn ? std::make_unique<std::function<R()>>(std::move(fn)) : nullptr;
    return *this;
  }
  lazy_function& operator=(std::nullptr_t) noexcept {
    p_.reset();
    return *this;
  }

  explicit operator bool() const noexcept { return p_ != nullptr; }
  R operator()() const { return (*p_)(); }

private:
  std::unique_ptr<std::function<R()>> p_;
};

}  // namespace troupe
