#pragma once
/// \file
/// The worker gate's tokens: each worker-process slot expects its child with a
/// fresh random token (handed to the child through an inherited descriptor,
/// never its command line or environment); the gate's listener finds whose
/// token signed a connection's answer, and forgets it (one use: a replayed or
/// guessed answer is refused). Thread-safe: slots add, the listener's thread takes.

#include "gate/caf_socket.hpp"
#include "gate/handshake.hpp"

#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace troupe::gate {

class token_table {
public:
  /// A child with `token` will dial: it reaches `whom` (its slot).
  void expect(std::string token, published whom);
  /// It will not (killed before it dialed, or its slot stops).
  void drop(const std::string& token);
  /// Whom the token that signed `m` for nonce `n` leads to, the token then
  /// forgotten; nullopt when no expected token did.
  std::optional<published> take(const nonce& n, const mac& m);
  std::size_t size() const;

  /// A fresh random token (32 bytes of OpenSSL's CSPRNG).
  static std::string make_token();

private:
  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, published>> expected_;  // a handful: children being started
};

}  // namespace troupe::gate
