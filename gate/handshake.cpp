#include "gate/handshake.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>

namespace troupe::gate {

namespace {

constexpr std::string_view mac_context = "troupe gate 1";

std::string hmac_sha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
            data.size(), out, &len))
    throw std::runtime_error("HMAC-SHA256 failed");
  return std::string(reinterpret_cast<const char*>(out), len);
}

}  // namespace

nonce make_nonce() {
  nonce n;
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1)
    throw std::runtime_error("no random bytes from OpenSSL");
  return n;
}

std::string encode_challenge(kind k, const nonce& n) {
  std::string out(challenge_magic);
  out += static_cast<char>(k);
  out.append(reinterpret_cast<const char*>(n.data()), n.size());
  return out;
}

std::optional<nonce> parse_challenge(std::string_view bytes, kind k) {
  if (bytes.size() != challenge_size || bytes.substr(0, challenge_magic.size()) != challenge_magic ||
      bytes[challenge_magic.size()] != static_cast<char>(k))
    return std::nullopt;
  nonce n;
  bytes.remove_prefix(challenge_magic.size() + 1);
  std::copy(bytes.begin(), bytes.end(), n.begin());
  return n;
}

mac sign(std::string_view key, kind k, const nonce& n) {
  std::string data(mac_context);
  data += static_cast<char>(k);
  data.append(reinterpret_cast<const char*>(n.data()), n.size());
  auto h = hmac_sha256(key, data);
  mac m;
  std::copy(h.begin(), h.end(), m.begin());
  OPENSSL_cleanse(h.data(), h.size());
  return m;
}

std::string encode_answer(const mac& m) {
  std::string out(answer_magic);
  out.append(reinterpret_cast<const char*>(m.data()), m.size());
  return out;
}

std::optional<mac> parse_answer(std::string_view bytes) {
  if (bytes.size() != answer_size || bytes.substr(0, answer_magic.size()) != answer_magic)
    return std::nullopt;
  mac m;
  bytes.remove_prefix(answer_magic.size());
  std::copy(bytes.begin(), bytes.end(), m.begin());
  return m;
}

bool same(const mac& a, const mac& b) noexcept {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string cluster_key(std::string_view cookie_secret) {
  return hmac_sha256(cookie_secret, "troupe cluster gate 1");
}

}  // namespace troupe::gate
