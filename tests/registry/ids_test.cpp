#include "registry/ids.hpp"

#include <gtest/gtest.h>
#include <openssl/hmac.h>

#include <filesystem>
#include <fstream>
#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include <sys/stat.h>

namespace ids_test_file {

using namespace troupe::registry;

TEST(ids, minted_cids_are_valid_url_safe_and_distinct) {
  auto signer = cid_signer::with_random_secret();
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto cid = signer.mint();
    EXPECT_EQ(cid.size(), cid_length);
    EXPECT_EQ(cid_length, 32u);
    EXPECT_TRUE(valid_cid(cid)) << cid;
    EXPECT_TRUE(signer.verify(cid)) << cid;
    EXPECT_EQ(cid.find_first_not_of(
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
              std::string::npos);
    seen.insert(cid);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(ids, a_cid_verifies_only_under_its_secret) {
  cid_signer alpha(std::string("secret of alpha, 32 bytes long.."));
  cid_signer same(std::string("secret of alpha, 32 bytes long.."));
  cid_signer beta(std::string("secret of beta, 32 bytes long..."));
  auto cid = alpha.mint();
  EXPECT_TRUE(alpha.verify(cid));
  EXPECT_TRUE(same.verify(cid));  // another member sharing the secret accepts it
  EXPECT_FALSE(beta.verify(cid));
  EXPECT_FALSE(cid_signer::with_random_secret().verify(cid));
  EXPECT_THROW(cid_signer(std::string()), std::invalid_argument);
}

TEST(ids, a_cid_is_a_nonce_and_the_first_8_bytes_of_its_hmac_sha256) {
  const std::string secret = "a secret for the known-answer test";
  auto cid = cid_signer(secret).mint();
  // URL-safe base64 back to its 24 bytes (an independent decoder).
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::vector<unsigned char> raw;
  unsigned bits = 0, acc = 0;
  for (char c : cid) {
    acc = (acc << 6) | static_cast<unsigned>(alphabet.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      raw.push_back(static_cast<unsigned char>(acc >> bits));
      acc &= (1u << bits) - 1;
    }
  }
  ASSERT_EQ(raw.size(), 24u);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  ASSERT_TRUE(HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), raw.data(), 16, md, &md_len));
  EXPECT_EQ(std::vector<unsigned char>(raw.begin() + 16, raw.end()), std::vector<unsigned char>(md, md + 8));
}

TEST(ids, one_signer_serves_several_threads) {
  auto signer = cid_signer::with_random_secret();
  auto cid = signer.mint();
  std::atomic<int> verified{0}, distinct_ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        verified += signer.verify(cid);
        distinct_ok += signer.verify(signer.mint());
      }
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(verified.load(), 8000);
  EXPECT_EQ(distinct_ok.load(), 8000);
}

TEST(ids, any_changed_character_fails_verification) {
  auto signer = cid_signer::with_random_secret();
  auto cid = signer.mint();
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  for (std::size_t i = 0; i < cid.size(); ++i) {
    auto forged = cid;
    forged[i] = alphabet[(alphabet.find(cid[i]) + 1) % alphabet.size()];
    EXPECT_TRUE(valid_cid(forged));
    EXPECT_FALSE(signer.verify(forged)) << "position " << i;
  }
}

TEST(ids, malformed_or_forged_cids_are_rejected) {
  auto signer = cid_signer::with_random_secret();
  EXPECT_FALSE(valid_cid(""));
  EXPECT_FALSE(valid_cid("abc"));
  EXPECT_FALSE(valid_cid(std::string(cid_length, '!')));
  EXPECT_FALSE(valid_cid(std::string(cid_length + 1, 'a')));
  EXPECT_FALSE(valid_cid(std::string(cid_length - 1, 'a') + "="));
  EXPECT_FALSE(valid_cid(std::string(24, 'a')));  // the old length
  EXPECT_TRUE(valid_cid(std::string(cid_length, 'a')));
  for (auto s : {std::string(), std::string("abc"), std::string(cid_length, 'a'), std::string(cid_length, '!'),
                 std::string(cid_length + 1, 'a'), signer.mint() + "x", signer.mint().substr(1)})
    EXPECT_FALSE(signer.verify(s)) << s;
}

namespace {

struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    path = std::filesystem::temp_directory_path()
           / ("troupe-ids-" + cid_signer::with_random_secret().mint().substr(0, 12));
    std::filesystem::create_directories(path);
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
};

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace

TEST(ids, a_secret_is_generated_once_with_mode_0600_and_reused) {
  temp_dir dir;
  auto file = dir.path / "cookie.secret";
  auto first = load_or_create_secret(file.string());
  EXPECT_EQ(first.size(), generated_secret_bytes);
  ASSERT_TRUE(std::filesystem::exists(file));
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto text = read_all(file);
  EXPECT_EQ(text.size(), generated_secret_bytes * 2 + 1);  // hex and a newline
  EXPECT_EQ(text.find_first_not_of("0123456789abcdef\n"), std::string::npos) << text;
  // Read back, not made anew: an id minted under it still verifies.
  auto cid = cid_signer(first).mint();
  auto again = load_or_create_secret(file.string());
  EXPECT_EQ(again, first);
  EXPECT_TRUE(cid_signer(again).verify(cid));
  EXPECT_EQ(read_all(file), text);
  // No temp file left behind.
  std::size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path))
    files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
  // Another file, another secret.
  EXPECT_NE(load_or_create_secret((dir.path / "other.secret").string()), first);
}

TEST(ids, a_malformed_secret_file_is_an_error_that_does_not_show_it) {
  temp_dir dir;
  auto file = dir.path / "cookie.secret";
  const std::string good(64, 'a');
  for (const std::string& bad : {std::string(), std::string("abc\n"), good.substr(1) + "\n", good + "a\n",
                                 std::string(63, 'a') + "g", good + "\n\n", std::string(200, 'b')}) {
    write_all(file, bad);
    try {
      load_or_create_secret(file.string());
      ADD_FAILURE() << "accepted [" << bad << "]";
    } catch (const std::runtime_error& e) {
      std::string what = e.what();
      EXPECT_NE(what.find("malformed"), std::string::npos) << what;
      if (bad.size() >= 8) {
        EXPECT_EQ(what.find(bad.substr(0, 8)), std::string::npos) << what;
      }
    }
    EXPECT_EQ(read_all(file), bad);  // never replaced
  }
  write_all(file, good);  // without the newline is fine too
  EXPECT_EQ(load_or_create_secret(file.string()), std::string(32, '\xaa'));
  std::filesystem::remove(file);
  std::filesystem::create_directory(file);  // not a file at all
  EXPECT_THROW(load_or_create_secret(file.string()), std::runtime_error);
  EXPECT_THROW(load_or_create_secret((dir.path / "no-such-dir" / "cookie.secret").string()), std::runtime_error);
}

TEST(ids, user_names) {
  EXPECT_TRUE(valid_user_name("alice"));
  EXPECT_TRUE(valid_user_name("a.b-c_d@example.org"));
  EXPECT_TRUE(valid_user_name(std::string(64, 'x')));
  EXPECT_FALSE(valid_user_name(std::string(65, 'x')));
  EXPECT_FALSE(valid_user_name(""));
  EXPECT_FALSE(valid_user_name("guest_abc"));
  EXPECT_FALSE(valid_user_name("al ice"));
  EXPECT_FALSE(valid_user_name("al/ice"));
  EXPECT_FALSE(valid_user_name("\xC3\xA9t\xC3\xA9"));
}

TEST(ids, page_ids) {
  EXPECT_TRUE(valid_page_id("p1"));
  EXPECT_TRUE(valid_page_id("tab-3.main_x"));
  EXPECT_FALSE(valid_page_id(""));
  EXPECT_FALSE(valid_page_id("a/b"));
  EXPECT_FALSE(valid_page_id(std::string(65, 'p')));
}

TEST(ids, guests_and_redaction) {
  auto cid = cid_signer::with_random_secret().mint();
  auto guest = guest_name(cid);
  EXPECT_EQ(guest, "guest_" + cid);
  EXPECT_TRUE(is_guest(guest));
  EXPECT_FALSE(is_guest("alice"));
  EXPECT_EQ(redact(cid).find(cid), std::string::npos);
  EXPECT_EQ(redact(guest).find(cid), std::string::npos);
  EXPECT_EQ(redact(guest).rfind("guest_" + cid.substr(0, 4), 0), 0u);
  EXPECT_EQ(redact("alice"), "alice");
}

// A thread keeps a working copy of a signer's HMAC (registry/ids.cpp): signers
// used in turn on one thread, and one made where a freed one was, never mix keys.
TEST(ids, signers_used_in_turn_on_one_thread_keep_their_own_keys) {
  cid_signer a("secret-a"), b("secret-b");
  for (int i = 0; i < 20; ++i) {
    auto from_a = a.mint(), from_b = b.mint();
    EXPECT_TRUE(a.verify(from_a));
    EXPECT_FALSE(b.verify(from_a));
    EXPECT_TRUE(b.verify(from_b));
    EXPECT_FALSE(a.verify(from_b));
  }
  std::string minted;
  {
    cid_signer gone("secret-gone");
    minted = gone.mint();
    EXPECT_TRUE(gone.verify(minted));
  }
  for (int i = 0; i < 10; ++i) {  // new signers, some likely where the gone one was
    cid_signer fresh("secret-fresh-" + std::to_string(i));
    EXPECT_FALSE(fresh.verify(minted));
    EXPECT_TRUE(fresh.verify(fresh.mint()));
  }
}

}  // namespace ids_test_file
