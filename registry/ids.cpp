#include "registry/ids.hpp"

#include "registry/url.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <array>
#include <atomic>
#include <optional>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace troupe::registry {

namespace {

constexpr std::string_view guest_prefix = "guest_";
constexpr char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

bool is_b64url(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'
         || c == '_';
}

template <class Pred>
bool all_of(std::string_view s, Pred pred) noexcept {
  for (char c : s)
    if (!pred(c))
      return false;
  return true;
}

constexpr std::size_t nonce_bytes = 16;  // 128 random bits (DESIGN.md)
constexpr std::size_t tag_bytes = 8;     // of HMAC-SHA256(secret, nonce)
using raw_cid = std::array<unsigned char, nonce_bytes + tag_bytes>;
static_assert(raw_cid{}.size() * 4 / 3 == cid_length && raw_cid{}.size() % 3 == 0);

void random_bytes(unsigned char* out, std::size_t n) {
  if (RAND_bytes(out, static_cast<int>(n)) != 1)
    throw std::runtime_error("OpenSSL RAND_bytes failed");
}

int b64url_value(char c) noexcept {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  return c == '-' ? 62 : c == '_' ? 63 : -1;
}

// The calling thread's working copy of signer `signer`'s keyed HMAC: made once
// per thread and signer (a copy costs about ten allocations: per request, that
// was a sixth of the front's), restarted under the same key for each tag.
// Signers are told apart by their number, never by address (a new signer may
// reuse a freed one's).
EVP_MAC_CTX* working_copy(const EVP_MAC_CTX* keyed, std::uint64_t signer) noexcept {
  struct copy {
    std::uint64_t of = 0;
    EVP_MAC_CTX* ctx = nullptr;
    ~copy() { EVP_MAC_CTX_free(ctx); }
  };
  thread_local copy c;
  if (c.of != signer || !c.ctx) {
    EVP_MAC_CTX_free(c.ctx);
    c.ctx = EVP_MAC_CTX_dup(keyed);
    c.of = signer;
  }
  return c.ctx;
}

// The tag of `nonce` under signer `signer`'s keyed HMAC; false only if OpenSSL fails.
bool tag_of(const EVP_MAC_CTX* keyed, std::uint64_t signer, const unsigned char* nonce, unsigned char* tag) noexcept {
  auto* mac = working_copy(keyed, signer);
  unsigned char md[EVP_MAX_MD_SIZE];
  std::size_t md_len = 0;
  if (!mac || EVP_MAC_init(mac, nullptr, 0, nullptr) != 1 || EVP_MAC_update(mac, nonce, nonce_bytes) != 1
      || EVP_MAC_final(mac, md, &md_len, sizeof md) != 1 || md_len < tag_bytes)
    return false;
  std::memcpy(tag, md, tag_bytes);
  OPENSSL_cleanse(md, sizeof md);
  return true;
}


std::string errno_text(int e) {
  return std::strerror(e);
}

}  // namespace

std::optional<std::string> read_secret(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return std::nullopt;
    throw std::runtime_error("cannot read " + path + ": " + errno_text(errno));
  }
  char buf[generated_secret_bytes * 2 + 2];  // one byte more than a valid file may have
  std::size_t got = 0;
  int error = 0;
  while (got < sizeof buf) {
    auto n = ::read(fd, buf + got, sizeof buf - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      error = errno;
    if (n <= 0)
      break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (error)
    throw std::runtime_error("cannot read " + path + ": " + errno_text(error));
  std::string_view text(buf, got);
  if (!text.empty() && text.back() == '\n')
    text.remove_suffix(1);
  std::string secret;
  if (text.size() == generated_secret_bytes * 2)
    for (std::size_t i = 0; i < text.size(); i += 2) {
      int hi = hex_digit(text[i]), lo = hex_digit(text[i + 1]);
      if (hi < 0 || lo < 0)
        break;
      secret += static_cast<char>(hi * 16 + lo);
    }
  OPENSSL_cleanse(buf, sizeof buf);
  if (secret.size() != generated_secret_bytes)
    throw std::runtime_error(path + " is malformed (expected " + std::to_string(generated_secret_bytes * 2)
                             + " hex digits); removing it makes a new secret, which ends every session");
  return secret;
}

namespace {

void write_all(int fd, const std::string& text, const std::string& path) {
  std::size_t done = 0;
  while (done < text.size()) {
    auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw std::runtime_error("cannot write " + path + ": " + errno_text(errno));
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

cid_signer::cid_signer(const std::string& secret) {
  if (secret.empty())
    throw std::invalid_argument("the connection id secret is empty");
  std::unique_ptr<EVP_MAC, void (*)(EVP_MAC*)> hmac(EVP_MAC_fetch(nullptr, "HMAC", nullptr), EVP_MAC_free);
  std::shared_ptr<EVP_MAC_CTX> keyed(hmac ? EVP_MAC_CTX_new(hmac.get()) : nullptr, EVP_MAC_CTX_free);
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  if (!keyed
      || EVP_MAC_init(keyed.get(), reinterpret_cast<const unsigned char*>(secret.data()), secret.size(), params)
           != 1)
    throw std::runtime_error("OpenSSL cannot make an HMAC-SHA256");
  keyed_ = std::move(keyed);
  static std::atomic<std::uint64_t> signers{0};
  number_ = ++signers;
}

cid_signer cid_signer::with_random_secret() {
  std::string secret(generated_secret_bytes, '\0');
  random_bytes(reinterpret_cast<unsigned char*>(secret.data()), secret.size());
  cid_signer signer(secret);
  OPENSSL_cleanse(secret.data(), secret.size());
  return signer;
}

std::string cid_signer::mint() const {
  raw_cid raw{};
  random_bytes(raw.data(), nonce_bytes);
  if (!tag_of(keyed_.get(), number_, raw.data(), raw.data() + nonce_bytes))
    throw std::runtime_error("OpenSSL HMAC failed");
  std::string out;
  out.reserve(cid_length);
  for (std::size_t i = 0; i < raw.size(); i += 3) {
    unsigned v = (raw[i] << 16) | (raw[i + 1] << 8) | raw[i + 2];
    out += b64url[(v >> 18) & 63];
    out += b64url[(v >> 12) & 63];
    out += b64url[(v >> 6) & 63];
    out += b64url[v & 63];
  }
  return out;
}

bool cid_signer::verify(std::string_view cid) const noexcept {
  if (cid.size() != cid_length)
    return false;
  raw_cid raw{};
  for (std::size_t i = 0, o = 0; i < cid_length; i += 4, o += 3) {
    int a = b64url_value(cid[i]), b = b64url_value(cid[i + 1]), c = b64url_value(cid[i + 2]),
        d = b64url_value(cid[i + 3]);
    if ((a | b | c | d) < 0)
      return false;
    unsigned v = (unsigned(a) << 18) | (unsigned(b) << 12) | (unsigned(c) << 6) | unsigned(d);
    raw[o] = static_cast<unsigned char>(v >> 16);
    raw[o + 1] = static_cast<unsigned char>(v >> 8);
    raw[o + 2] = static_cast<unsigned char>(v);
  }
  unsigned char expected[tag_bytes];
  if (!tag_of(keyed_.get(), number_, raw.data(), expected))
    return false;
  return CRYPTO_memcmp(expected, raw.data() + nonce_bytes, tag_bytes) == 0;
}

bool store_secret_if_absent(const std::string& path, const std::string& secret) {
  unsigned char suffix[8];
  random_bytes(suffix, sizeof suffix);
  std::string tmp = path + ".tmp-" + hex_of(suffix, sizeof suffix);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw std::runtime_error("cannot create " + tmp + ": " + errno_text(errno));
  std::string text = hex_of(reinterpret_cast<const unsigned char*>(secret.data()), secret.size()) + "\n";
  try {
    if (::fchmod(fd, 0600) != 0)  // exactly 0600, whatever the umask
      throw std::runtime_error("cannot set the mode of " + tmp + ": " + errno_text(errno));
    write_all(fd, text, tmp);
    if (::fsync(fd) != 0)
      throw std::runtime_error("cannot fsync " + tmp + ": " + errno_text(errno));
  } catch (...) {
    OPENSSL_cleanse(text.data(), text.size());
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  OPENSSL_cleanse(text.data(), text.size());
  ::close(fd);
  // link() never replaces: of two nodes starting on one deposit, the first one's secret stands.
  int linked = ::link(tmp.c_str(), path.c_str()) == 0 ? 0 : errno;
  ::unlink(tmp.c_str());
  if (linked == EEXIST)
    return false;
  if (linked)
    throw std::runtime_error("cannot create " + path + ": " + errno_text(linked));
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int synced = dfd >= 0 && ::fsync(dfd) == 0 ? 0 : errno;
  if (dfd >= 0)
    ::close(dfd);
  if (synced)
    throw std::runtime_error("cannot fsync directory " + dir + ": " + errno_text(synced));
  return true;
}

std::string generate_secret() {
  std::string secret(generated_secret_bytes, '\0');
  random_bytes(reinterpret_cast<unsigned char*>(secret.data()), secret.size());
  return secret;
}

std::string load_or_create_secret(const std::string& path) {
  // Two rounds at most: the second reads what another process made meanwhile.
  for (int round = 0; round < 2; ++round) {
    if (auto secret = read_secret(path))
      return std::move(*secret);
    auto secret = generate_secret();
    if (store_secret_if_absent(path, secret))
      return secret;
  }
  throw std::runtime_error(path + " appeared and vanished while it was being created");
}

bool valid_cid(std::string_view cid) noexcept {
  return cid.size() == cid_length && all_of(cid, is_b64url);
}

bool valid_user_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 64 || is_guest(name))
    return false;
  return all_of(name, [](char c) { return is_b64url(c) || c == '.' || c == '@'; });
}

bool valid_page_id(std::string_view page) noexcept {
  return !page.empty() && page.size() <= 64
         && all_of(page, [](char c) { return is_b64url(c) || c == '.'; });
}

std::string guest_name(std::string_view cid) {
  std::string out(guest_prefix);
  out += cid;
  return out;
}

bool is_guest(std::string_view user) noexcept {
  return user.substr(0, guest_prefix.size()) == guest_prefix;
}

std::string redact(std::string_view s) {
  constexpr std::size_t keep = 4;
  if (is_guest(s))
    return std::string(guest_prefix) + redact(s.substr(guest_prefix.size()));
  if (valid_cid(s))
    return std::string(s.substr(0, keep)) + "\xE2\x80\xA6";  // "…"
  return std::string(s);
}

std::string hex_of(const unsigned char* data, std::size_t n) {
  constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out += digits[data[i] >> 4];
    out += digits[data[i] & 15];
  }
  return out;
}

}  // namespace troupe::registry
