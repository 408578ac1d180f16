#pragma once
/// \file
/// Internal to the app API (<troupe/app.hpp>): the platform-side types the public ones point to.
/// Nothing here is promised to an application; it may change in any release.



namespace troupe {
namespace detail {
struct continuation;
class user_host;
struct user_access;
}  // namespace detail
}  // namespace troupe
