#pragma once
/// \file
/// Internal to the app API (<troupe/app.hpp>): what a user actor hands the platform for the global store and for
/// a message to another user, and the encoding of such a message.
/// Nothing here is promised to an application; it may change in any release.

#include <troupe/codec.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace troupe {
namespace detail {
/// One operation on the global store (sent to the global store actor).
struct global_op {
  enum class kind : std::uint8_t { get, set, erase, lease, commit, abort } what = kind::get;
  std::string key;
  bool has_value = false;            ///< set, commit: false erases the key
  std::string value;
  std::int64_t ttl_ms = 0;           ///< lease
  std::int64_t wait_ms = 0;          ///< lease: how long to wait in the key's queue
  std::uint64_t token = 0;           ///< commit, abort
};

/// The global store's answer to a global_op.
struct global_reply {
  std::string refusal;               ///< empty: done; else why not (invalid_key, lease_expired, …)
  bool found = false;                ///< get, lease: the key has a value
  std::string value;                 ///< get, lease: the current value
  std::uint64_t token = 0;           ///< lease: the fencing token

  std::optional<std::string> current() const { return found ? std::optional<std::string>(value) : std::nullopt; }
};


/// A message to another user, encoded: what tell() hands the platform.
struct encoded_message {
  std::string to;    ///< the recipient's user name
  std::string name;  ///< the message type's stable name (M::message_name)
  store::bytes data; ///< the message's msgpack bytes
};


template <class M, class = void>
struct has_message_name : std::false_type {};
template <class M>
struct has_message_name<M, std::void_t<decltype(M::message_name)>> : std::true_type {};

/// The stable name of message type M: its `static constexpr const char* message_name`.
template <class M>
std::string message_name_of() {
  static_assert(has_message_name<M>::value,
                "a message type declares `static constexpr const char* message_name = \"app.name\";` "
                "(or is registered with message_table::on<M>(name, handler))");
  return std::string(M::message_name);
}

/// `message` encoded for `to` under `name`: {name, its msgpack bytes}.
template <class M>
encoded_message encode_message(std::string to, const M& message, std::string name) {
  return encoded_message{std::move(to), std::move(name), store::pack(message)};
}
/// `message` encoded for `to` under M's message_name.
template <class M>
encoded_message encode_message(std::string to, const M& message) {
  return encode_message(std::move(to), message, message_name_of<M>());
}
}  // namespace detail
}  // namespace troupe
