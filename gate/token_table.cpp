#include "gate/token_table.hpp"

#include <openssl/crypto.h>

#include <algorithm>

namespace troupe::gate {

void token_table::expect(std::string token, published whom) {
  std::lock_guard lock(mutex_);
  expected_.emplace_back(std::move(token), std::move(whom));
}

void token_table::drop(const std::string& token) {
  std::lock_guard lock(mutex_);
  auto i = std::find_if(expected_.begin(), expected_.end(), [&](auto& e) { return e.first == token; });
  if (i == expected_.end())
    return;
  OPENSSL_cleanse(i->first.data(), i->first.size());
  expected_.erase(i);
}

std::optional<published> token_table::take(const nonce& n, const mac& m) {
  std::lock_guard lock(mutex_);
  for (auto i = expected_.begin(); i != expected_.end(); ++i)
    if (same(sign(i->first, kind::worker, n), m)) {
      auto whom = std::move(i->second);
      OPENSSL_cleanse(i->first.data(), i->first.size());
      expected_.erase(i);
      return whom;
    }
  return std::nullopt;
}

std::size_t token_table::size() const {
  std::lock_guard lock(mutex_);
  return expected_.size();
}

std::string token_table::make_token() {
  auto n = make_nonce();
  return std::string(reinterpret_cast<const char*>(n.data()), n.size());
}

}  // namespace troupe::gate
