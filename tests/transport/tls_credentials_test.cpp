// tls_credentials (transport/tls_credentials.hpp) as a plain class: what loads, what is
// refused and why, and that a refused reload keeps the context served.
#include "transport/tls_credentials.hpp"

#include "../support/node_process.hpp"
#include "../support/tls_client.hpp"

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <filesystem>
#include <fstream>

namespace tls_credentials_test_file {

using namespace troupe;
using namespace troupe::test;
namespace fs = std::filesystem;

namespace {

class TlsCredentials : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = make_temp_dir("troupe-tlscred");
    pki_ = std::make_unique<test_pki>(dir_);
    pki_->issue("a", "alpha", "AA01");
    pki_->issue("b", "beta", "BB02");
  }
  static void TearDownTestSuite() {
    pki_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::string loaded_error(const tls_paths& p) {
    auto r = load_tls(p);
    return r.index() == 1 ? std::get<1>(r) : std::string();
  }
  static inline std::string dir_;
  static inline std::unique_ptr<test_pki> pki_;
};

}  // namespace

TEST_F(TlsCredentials, AGoodPairLoadsWithItsIdentityAndTls12AtLeast) {
  auto r = load_tls({pki_->cert("a"), pki_->key("a"), ""});
  ASSERT_EQ(r.index(), 0u) << std::get<1>(r);
  auto& l = std::get<0>(r);
  EXPECT_EQ(l.identity.subject, "/CN=alpha");
  EXPECT_EQ(l.identity.serial, "AA01");
  EXPECT_GT(l.identity.not_after_unix, 0);
  EXPECT_EQ(SSL_CTX_get_min_proto_version(l.context->native_handle()), TLS1_2_VERSION);
  EXPECT_EQ(SSL_CTX_get_verify_mode(l.context->native_handle()), SSL_VERIFY_NONE);
  auto with_ca = load_tls({pki_->cert("a"), pki_->key("a"), pki_->ca()});
  ASSERT_EQ(with_ca.index(), 0u) << std::get<1>(with_ca);
  EXPECT_EQ(SSL_CTX_get_verify_mode(std::get<0>(with_ca).context->native_handle()),
            SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT);
}

TEST_F(TlsCredentials, BadPairsAreRefusedNamingTheKeyAndFile) {
  auto mismatch = loaded_error({pki_->cert("a"), pki_->key("b"), ""});
  EXPECT_NE(mismatch.find("node.tls_key"), std::string::npos) << mismatch;
  EXPECT_NE(mismatch.find("does not match"), std::string::npos) << mismatch;
  auto missing = loaded_error({dir_ + "/absent.pem", pki_->key("a"), ""});
  EXPECT_NE(missing.find("node.tls_cert: cannot read " + dir_ + "/absent.pem"), std::string::npos) << missing;
  std::ofstream(dir_ + "/garbage.pem") << "not PEM at all";
  auto garbage_cert = loaded_error({dir_ + "/garbage.pem", pki_->key("a"), ""});
  EXPECT_NE(garbage_cert.find("node.tls_cert"), std::string::npos) << garbage_cert;
  auto garbage_key = loaded_error({pki_->cert("a"), dir_ + "/garbage.pem", ""});
  EXPECT_NE(garbage_key.find("node.tls_key"), std::string::npos) << garbage_key;
  auto garbage_ca = loaded_error({pki_->cert("a"), pki_->key("a"), dir_ + "/garbage.pem"});
  EXPECT_NE(garbage_ca.find("node.tls_client_ca"), std::string::npos) << garbage_ca;
  // An encrypted key is refused, never prompted for.
  auto [code, out] = run_shell("openssl pkey -in '" + pki_->key("a") + "' -aes256 -passout pass:secret -out '" + dir_
                               + "/encrypted.key'");
  ASSERT_EQ(code, 0) << out;
  auto encrypted = loaded_error({pki_->cert("a"), dir_ + "/encrypted.key", ""});
  EXPECT_NE(encrypted.find("node.tls_key"), std::string::npos) << encrypted;
}

TEST_F(TlsCredentials, ReloadSwapsAGoodPairAndKeepsTheOldOneOnARefusal) {
  auto cert = dir_ + "/live.pem", key = dir_ + "/live.key";
  fs::copy_file(pki_->cert("a"), cert, fs::copy_options::overwrite_existing);
  fs::copy_file(pki_->key("a"), key, fs::copy_options::overwrite_existing);
  auto first = load_tls({cert, key, ""});
  ASSERT_EQ(first.index(), 0u);
  tls_credentials creds({cert, key, ""}, std::move(std::get<0>(first)));
  auto before = creds.current();
  EXPECT_EQ(creds.identity().serial, "AA01");

  fs::copy_file(pki_->key("b"), key, fs::copy_options::overwrite_existing);  // mismatched now
  auto refused = creds.reload();
  EXPECT_FALSE(refused.ok);
  EXPECT_NE(refused.reason.find("does not match"), std::string::npos) << refused.reason;
  EXPECT_EQ(refused.identity.serial, "AA01");
  EXPECT_EQ(creds.current(), before);  // the very same context is served on

  fs::copy_file(pki_->cert("b"), cert, fs::copy_options::overwrite_existing);
  auto ok = creds.reload();
  ASSERT_TRUE(ok.ok) << ok.reason;
  EXPECT_EQ(ok.identity.serial, "BB02");
  EXPECT_NE(creds.current(), before);
  EXPECT_EQ(creds.identity().subject, "/CN=beta");
  EXPECT_EQ(before.use_count(), 1);  // only this test holds the old one: the credentials let it go
}

}  // namespace tls_credentials_test_file
