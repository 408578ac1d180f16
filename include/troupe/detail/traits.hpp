#pragma once
/// \file
/// Internal to the app API (<troupe/app.hpp>): what app_types::add() asks of a user actor type.
/// Nothing here is promised to an application; it may change in any release.

#include <string_view>
#include <type_traits>
#include <utility>

namespace troupe {
template <class Self>
class route_table;
template <class Self>
class message_table;
}  // namespace troupe

namespace troupe {
namespace detail {
template <class T, class = void>
struct has_routes : std::false_type {};
template <class T>
struct has_routes<T, std::void_t<decltype(T::routes(std::declval<route_table<T>&>()))>> : std::true_type {};
template <class T, class = void>
struct has_messages : std::false_type {};
template <class T>
struct has_messages<T, std::void_t<decltype(T::messages(std::declval<message_table<T>&>()))>> : std::true_type {};
template <class T, class = void>
struct has_login_group : std::false_type {};
template <class T>
struct has_login_group<T, std::void_t<decltype(T::login_group(std::string_view{}))>> : std::true_type {};
}  // namespace detail
}  // namespace troupe
