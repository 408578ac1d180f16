// The filesystem deposit: its files, names, modes, quarantine, healing, a full
// disk, and its fencing under the shard lock (docs/deposit.md).
#include "deposit_fixtures.hpp"

namespace deposit_test_file {

using namespace deposit_fixtures;

TEST_F(deposit_test, creates_its_directories) {
  EXPECT_TRUE(fs::is_directory(dir + "/users"));
  EXPECT_TRUE(fs::is_directory(dir + "/connections"));
  EXPECT_TRUE(fs::is_directory(dir + "/quarantine"));
  EXPECT_TRUE(files_in(dir + "/users").empty());  // the write probe leaves nothing
}

TEST_F(deposit_test, escape_scheme) {
  EXPECT_EQ(escape_key("alice"), "alice");
  EXPECT_EQ(escape_key("A"), "%41");
  EXPECT_EQ(escape_key("."), "%2e");
  EXPECT_EQ(escape_key(".."), "%2e%2e");
  EXPECT_EQ(escape_key(".hidden"), "%2ehidden");
  EXPECT_EQ(escape_key("a@b.c"), "a@b%2ec");
  EXPECT_EQ(escape_key("a/b%"), "a%2fb%25");
  EXPECT_EQ(escape_key(std::string("x\0y", 3)), "x%00y");
  EXPECT_EQ(escape_key(guest_a), guest_a);
}

TEST_F(deposit_test, tricky_names_are_distinct_files_inside_the_deposit) {
  std::vector<std::string> names = {".",   "..",    ".hidden", "a@b.c",  "A",     "a",    guest_a,
                                    guest_b, "Alice", "alice",   "x.y-z_w", "%2e",   "a/../../etc", "users"};
  std::set<std::string> paths;
  const std::string users_root = fs::weakly_canonical(dir + "/users").string() + "/";
  for (std::size_t i = 0; i < names.size(); ++i) {
    dep->put_user(names[i], make_parcel(i + 1, "state " + names[i]));
    auto path = user_path(names[i]);
    auto canon = fs::weakly_canonical(path).string();
    EXPECT_EQ(canon.rfind(users_root, 0), 0u) << names[i] << " -> " << canon;
    auto file = fs::path(path).filename().string();
    EXPECT_NE(file[0], '.') << names[i];
    // Case-insensitive filesystems: no two files may differ only by case.
    std::string lower = canon;
    for (auto& c : lower)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_TRUE(paths.insert(lower).second) << names[i] << " collides";
    EXPECT_TRUE(fs::is_regular_file(path)) << names[i];
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto back = dep->get_user(names[i]);
    ASSERT_TRUE(back) << names[i];
    EXPECT_EQ(back->generation, i + 1) << names[i];
    EXPECT_EQ(text_of(*back), "state " + names[i]);
  }
  // Keys starting with '%' are the platform's own (never a user name): not counted.
  auto platform = std::count_if(names.begin(), names.end(), [](const std::string& n) { return n[0] == '%'; });
  EXPECT_EQ(platform, 1);
  EXPECT_EQ(dep->count_users(), names.size() - platform);
}

TEST_F(deposit_test, leftover_temp_files_are_ignored_by_reads) {
  dep->put_user("dave", make_parcel(1, "good"));
  auto shard = fs::path(user_path("dave")).parent_path().string();
  write_file(shard + "/.tmp-99999-0", "half a parcel");
  auto back = dep->get_user("dave");
  ASSERT_TRUE(back);
  EXPECT_EQ(text_of(*back), "good");
  EXPECT_EQ(dep->count_users(), 1u);
}

TEST_F(deposit_test, empty_file_and_long_key_are_quarantined_too) {
  const std::string upper(255, 'Q');
  dep->put_user(upper, make_parcel(1, "x"));
  write_file(user_path(upper), "");
  EXPECT_THROW(dep->get_user(upper), parcel_quarantined);
  EXPECT_EQ(dep->counters().quarantined, 1u);
  auto q = files_in(dir + "/quarantine");
  ASSERT_EQ(q.size(), 1u);
  EXPECT_LE(q[0].size(), 255u);
  EXPECT_THROW(dep->get_user(upper), parcel_quarantined);  // the marker fits next to a 200-character piece
  dep->remove_user(upper);
  EXPECT_FALSE(dep->get_user(upper));
}

// Root ignores modes, so the write is made to fail in a root-proof way: the
// shard directory is replaced by a regular file (ENOTDIR).
TEST_F(deposit_test, failed_write_throws_and_keeps_the_previous_parcel) {
  dep->put_user("gina", make_parcel(1, "old state"));
  auto shard = fs::path(user_path("gina")).parent_path().string();
  fs::rename(shard, shard + ".aside");
  write_file(shard, "not a directory");

  try {
    dep->put_user("gina", make_parcel(2, "new state"));
    FAIL() << "put did not throw";
  } catch (const deposit_error& e) {
    EXPECT_NE(std::string(e.what()).find(shard), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Not a directory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dep->counters().failures, 1u);
  EXPECT_EQ(dep->counters().writes, 1u);

  fs::remove(shard);
  fs::rename(shard + ".aside", shard);
  auto back = dep->get_user("gina");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->generation, 1u);
  EXPECT_EQ(text_of(*back), "old state");
  EXPECT_EQ(files_but_claims_in(shard).size(), 1u);  // no temp file left
}

// A write that fails half-way (as on a full disk): RLIMIT_FSIZE binds root too.
TEST_F(deposit_test, write_failing_halfway_removes_the_temp_and_keeps_the_previous_parcel) {
  dep->put_user("hank", make_parcel(1, "old state"));
  auto shard = fs::path(user_path("hank")).parent_path().string();

  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  bool threw = false;
  try {
    dep->put_user("hank", make_parcel(2, std::string(64 * 1024, 'z')));
  } catch (const deposit_error& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find("/.tmp-"), std::string::npos) << e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_TRUE(threw);
  EXPECT_EQ(dep->counters().failures, 1u);
  auto back = dep->get_user("hank");
  ASSERT_TRUE(back);
  EXPECT_EQ(text_of(*back), "old state");
  EXPECT_EQ(files_but_claims_in(shard).size(), 1u);  // the temp file was removed
}

TEST(deposit_creation, refuses_an_unusable_directory) {
  char tmpl[] = "/tmp/deposit_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string base = tmpl;
  write_file(base + "/plain", "a file");
  EXPECT_THROW(make_filesystem_deposit(base + "/plain/deposit"), deposit_error);
  EXPECT_THROW(make_filesystem_deposit(base + "/plain"), deposit_error);
  EXPECT_THROW(make_filesystem_deposit("/proc/troupe-deposit"), deposit_error);
  EXPECT_THROW(make_filesystem_deposit(""), deposit_error);
  // An existing deposit is reopened as it is.
  auto d1 = make_filesystem_deposit(base + "/dep/");
  d1->put_user("ivy", make_parcel(4, "kept"));
  d1.reset();
  auto d2 = make_filesystem_deposit(base + "/dep");
  auto back = d2->get_user("ivy");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->generation, 4u);
  EXPECT_EQ(d2->count_users(), 1u);
  fs::remove_all(base);
}

TEST(deposit_keys, unescape_inverts_escape) {
  for (std::string key : {"alice", "Bob.Smith", "%global", "über", ".."})
    EXPECT_EQ(troupe::store::unescape_key(troupe::store::escape_key(key)), key);
  EXPECT_FALSE(troupe::store::unescape_key("bad%2"));
  EXPECT_FALSE(troupe::store::unescape_key("bad%zz"));
  EXPECT_FALSE(troupe::store::unescape_key(""));
}

// ---- issue 10: owners, things in place of parcels, modes, healing, full disk --------

TEST_F(deposit_test, directory_in_place_of_a_parcel_is_quarantined_and_a_write_succeeds) {
  const auto path = user_path("carl");
  fs::create_directories(path + "/inside");
  write_file(path + "/inside/file", "kept as is");
  try {
    dep->get_user("carl");
    FAIL() << "a directory in place of a parcel was not reported";
  } catch (const parcel_quarantined& e) {
    EXPECT_NE(e.reason().find("directory"), std::string::npos) << e.reason();
    EXPECT_EQ(read_file(e.quarantine_path() + "/inside/file"), "kept as is");  // moved as is
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(dep->counters().quarantined, 1u);
  EXPECT_THROW(dep->get_user("carl"), parcel_quarantined);
  dep->put_user("carl", make_parcel(1, "fresh"));
  EXPECT_EQ(text_of(*dep->get_user("carl")), "fresh");

  // A write over a directory (never read) moves it to quarantine and lands.
  const auto dpath = user_path("dora");
  fs::create_directories(dpath + "/x");
  dep->put_user("dora", make_parcel(1, "dora"));
  EXPECT_EQ(text_of(*dep->get_user("dora")), "dora");
  EXPECT_EQ(dep->counters().quarantined, 2u);
  auto errors = dep->put_batch({{false, "ed", make_parcel(1, "ed")}, {false, "fay", make_parcel(1, "fay")}});
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  fs::create_directories(user_path("ed") + ".dir");  // unrelated: must not matter
  fs::remove(user_path("fay"));
  fs::create_directories(user_path("fay") + "/y");
  errors = dep->put_batch({{false, "ed", make_parcel(2, "ed2")}, {false, "fay", make_parcel(2, "fay2")}});
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(text_of(*dep->get_user("fay")), "fay2");
  EXPECT_EQ(dep->counters().quarantined, 3u);
  EXPECT_EQ(dep->count_users(), 4u);
}

TEST_F(deposit_test, fifo_socket_and_symlink_in_place_are_quarantined_never_followed) {
  dep->put_user("target", make_parcel(1, "target's"));
  // symlink to a valid parcel: not followed (and would be another owner's anyway)
  const auto link = user_path("lena");
  fs::create_directories(fs::path(link).parent_path());
  fs::create_symlink(user_path("target"), link);
  EXPECT_THROW(dep->get_user("lena"), parcel_quarantined);
  EXPECT_TRUE(fs::exists(user_path("target")));
  // fifo: the open must not block
  const auto fifo = user_path("finn");
  fs::create_directories(fs::path(fifo).parent_path());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THROW(dep->get_user("finn"), parcel_quarantined);
  // socket
  const auto sock_path = user_path("sam");
  fs::create_directories(fs::path(sock_path).parent_path());
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock_path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, sock_path.c_str(), sock_path.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  EXPECT_THROW(dep->get_user("sam"), parcel_quarantined);
  ::close(fd);
  EXPECT_EQ(dep->counters().quarantined, 3u);
  for (const auto& p : {link, fifo, sock_path})
    EXPECT_FALSE(fs::exists(fs::symlink_status(p))) << p;
  std::set<std::string> kinds;
  for (const auto& q : files_in(dir + "/quarantine")) {
    auto st = fs::symlink_status(dir + "/quarantine/" + q).type();
    kinds.insert(st == fs::file_type::symlink ? "symlink" : st == fs::file_type::fifo ? "fifo"
                 : st == fs::file_type::socket ? "socket" : "other");
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"symlink", "fifo", "socket"}));
  // A write over any of them lands (rename replaces them).
  fs::create_symlink(user_path("target"), link);
  dep->put_user("lena", make_parcel(1, "lena"));
  EXPECT_EQ(text_of(*dep->get_user("lena")), "lena");
  EXPECT_EQ(text_of(*dep->get_user("target")), "target's");
}

TEST_F(deposit_test, files_are_0600_and_directories_0700) {
  dep->put_user("alice", make_parcel(1, "a"));
  dep->put_user(std::string(250, 'p'), make_parcel(1, "long"));  // piece directories
  dep->put_connection("c1", make_parcel(1, "c"));
  dep->put_batch({{false, "b1", make_parcel(1, "b")}, {true, "c2", make_parcel(1, "c")}});
  dep->put_user("eve", make_parcel(1, "e"));
  write_file(user_path("eve"), "corrupt");
  ::chmod(user_path("eve").c_str(), 0600);  // written by this test: quarantine keeps modes as they are
  EXPECT_THROW(dep->get_user("eve"), parcel_quarantined);
  std::size_t files = 0, dirs = 0;
  EXPECT_EQ(mode_of(dir), 0700u);
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto p = it->path().string();
    if (it->is_directory()) {
      ++dirs;
      EXPECT_EQ(mode_of(p), 0700u) << p;
    } else {
      ++files;
      EXPECT_EQ(mode_of(p), 0600u) << p;
    }
  }
  EXPECT_GE(files, 7u);  // 5 parcels, the quarantined one, its marker
  EXPECT_GE(dirs, 7u);   // users, connections, quarantine, shards, pieces
}

TEST(deposit_creation, tightens_a_deposit_open_to_others) {
  char tmpl[] = "/tmp/deposit_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string base = tmpl;
  const std::string d = base + "/dep";
  for (const auto* sub : {"", "/users", "/connections", "/quarantine"})
    fs::create_directories(d + sub);
  ::chmod(d.c_str(), 0755);
  ::chmod((d + "/users").c_str(), 0777);
  ::chmod((d + "/connections").c_str(), 0750);
  ::chmod((d + "/quarantine").c_str(), 0700);
  auto dep = make_filesystem_deposit(d);
  EXPECT_EQ(mode_of(d), 0700u);
  EXPECT_EQ(mode_of(d + "/users"), 0700u);
  EXPECT_EQ(mode_of(d + "/connections"), 0700u);
  EXPECT_EQ(mode_of(d + "/quarantine"), 0700u);
  // A new deposit below a missing parent: DIR is 0700.
  auto dep2 = make_filesystem_deposit(base + "/a/b/dep");
  EXPECT_EQ(mode_of(base + "/a/b/dep"), 0700u);
  fs::remove_all(base);
}

TEST_F(deposit_test, heals_after_its_directory_is_removed) {
  dep->put_user("alice", make_parcel(1, "before"));
  fs::remove_all(dir);  // rm -rf DIR
  dep->put_user("alice", make_parcel(2, "after"));
  EXPECT_EQ(dep->counters().healed, 1u);
  EXPECT_EQ(text_of(*dep->get_user("alice")), "after");
  for (const auto* sub : {"", "/users", "/connections", "/quarantine"})
    EXPECT_EQ(mode_of(dir + sub), 0700u) << sub;

  // Removed and recreated empty (by an operator): the same.
  fs::remove_all(dir);
  fs::create_directory(dir);
  auto errors = dep->put_batch({{false, "bob", make_parcel(1, "b")}, {true, "c1", make_parcel(1, "c")}});
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(dep->counters().healed, 2u);
  EXPECT_TRUE(dep->get_user("bob"));
  EXPECT_TRUE(dep->get_connection("c1"));

  // Only quarantine/ removed: a bad parcel is still moved there.
  fs::remove_all(dir + "/quarantine");
  write_file(user_path("bob"), "corrupt");
  EXPECT_THROW(dep->get_user("bob"), parcel_quarantined);
  EXPECT_EQ(dep->counters().healed, 3u);
  EXPECT_EQ(files_in(dir + "/quarantine").size(), 1u);

  // The commander generation it gave goes back with the structure: a restarted
  // commander's epochs stay above those of the parcels written since.
  EXPECT_EQ(dep->next_commander_generation(), 1u);
  EXPECT_EQ(dep->next_commander_generation(), 2u);
  fs::remove_all(dir);
  dep->put_user("dora", make_parcel(1, "d"));
  EXPECT_EQ(read_file(dir + "/commander-generation"), "2\n");
  EXPECT_EQ(make_filesystem_deposit(dir)->next_commander_generation(), 3u) << "a restart continues above it";

  // A single put after rm -rf (the one-entry batch path) too.
  fs::remove_all(dir);
  EXPECT_EQ(dep->put_batch({{false, "carl", make_parcel(1, "c")}}), (std::vector<std::string>{""}));
  EXPECT_EQ(dep->counters().healed, 5u);
  EXPECT_EQ(dep->counters().failures, 0u);
  EXPECT_TRUE(temp_files_under(dir).empty());
}

TEST(deposit_healing, cannot_heal_without_the_parent_and_says_so) {
  char tmpl[] = "/tmp/deposit_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string base = tmpl;
  auto dep = make_filesystem_deposit(base + "/parent/dep");
  fs::remove_all(base + "/parent");
  EXPECT_THROW(dep->put_user("alice", make_parcel(1, "x")), deposit_error);
  EXPECT_EQ(dep->counters().healed, 0u);
  EXPECT_EQ(dep->counters().consecutive_failures, 1);
  EXPECT_FALSE(dep->get_user("alice"));  // nothing there: absent, not an error
  fs::create_directories(base + "/parent");
  dep->put_user("alice", make_parcel(1, "x"));  // the parent is back: healed
  EXPECT_EQ(dep->counters().healed, 1u);
  fs::remove_all(base);
}

TEST_F(deposit_test, health_counters_follow_successes_and_failures) {
  const auto& c = dep->counters();
  EXPECT_EQ(c.last_success_unix_ms, 0);
  EXPECT_EQ(c.last_failure_unix_ms, 0);
  const auto t0 = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  dep->put_user("gina", make_parcel(1, "x"));
  EXPECT_GE(c.last_success_unix_ms, t0);
  EXPECT_EQ(c.consecutive_failures, 0);
  // Writes made to fail root-proof: the shard replaced by a file (ENOTDIR).
  auto shard = fs::path(user_path("gina")).parent_path().string();
  fs::rename(shard, shard + ".aside");
  write_file(shard, "not a directory");
  EXPECT_THROW(dep->put_user("gina", make_parcel(2, "y")), deposit_error);
  EXPECT_THROW(dep->put_user("gina", make_parcel(3, "y")), deposit_error);
  EXPECT_THROW(dep->get_user("gina"), deposit_error);
  EXPECT_EQ(c.consecutive_failures, 3);
  EXPECT_GE(c.last_failure_unix_ms, t0);
  EXPECT_EQ(c.failures, 3u);
  fs::remove(shard);
  fs::rename(shard + ".aside", shard);
  EXPECT_TRUE(dep->get_user("gina"));
  EXPECT_EQ(c.consecutive_failures, 0);
  EXPECT_GE(c.last_success_unix_ms, c.last_failure_unix_ms);
}

// ---- a full disk: a 1 MiB tmpfs (root only; skipped elsewhere) ----------------------

TEST_F(full_disk_test, put_on_enospc_keeps_the_previous_parcel_and_no_temp) {
  dep->put_user("alice", make_parcel(1, "old state"));
  try {
    dep->put_user("alice", make_parcel(2, std::string(2 * 1024 * 1024, 'z')));
    FAIL() << "a 2 MiB parcel fitted in a 1 MiB tmpfs";
  } catch (const deposit_error& e) {
    EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(temp_files_under(dir).empty());
  EXPECT_EQ(text_of(*dep->get_user("alice")), "old state");
  EXPECT_EQ(dep->counters().failures, 1u);
}

TEST_F(full_disk_test, put_batch_on_enospc_keeps_previous_parcels_and_no_temp) {
  dep->put_user("alice", make_parcel(1, "alice old"));
  dep->put_user("bob", make_parcel(1, "bob old"));
  // One entry too big for the disk: it alone fails, the other lands.
  auto errors = dep->put_batch({{false, "alice", make_parcel(2, std::string(2 * 1024 * 1024, 'a'))},
                                {false, "bob", make_parcel(2, "bob new")}});
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("No space left on device"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[1], "");
  EXPECT_TRUE(temp_files_under(dir).empty());
  EXPECT_EQ(text_of(*dep->get_user("alice")), "alice old");
  EXPECT_EQ(text_of(*dep->get_user("bob")), "bob new");
  // The disk full to the brim: every entry fails, nothing is left behind or lost.
  fill();
  errors = dep->put_batch({{false, "alice", make_parcel(3, std::string(64 * 1024, 'a'))},
                           {false, "bob", make_parcel(3, std::string(64 * 1024, 'b'))},
                           {true, "c1", make_parcel(1, std::string(64 * 1024, 'c'))}});
  for (const auto& e : errors)
    EXPECT_NE(e.find("No space left on device"), std::string::npos) << e;
  EXPECT_EQ(dep->counters().consecutive_failures, 3);
  EXPECT_TRUE(temp_files_under(dir).empty());
  EXPECT_EQ(text_of(*dep->get_user("alice")), "alice old");
  EXPECT_EQ(text_of(*dep->get_user("bob")), "bob new");
  EXPECT_FALSE(dep->get_connection("c1"));
  // Space back: writes land again.
  fs::remove(mount_point + "/filler");
  dep->put_user("alice", make_parcel(4, "alice again"));
  EXPECT_EQ(text_of(*dep->get_user("alice")), "alice again");
  EXPECT_EQ(dep->counters().consecutive_failures, 0);
}
// --- fencing: owner epochs (docs/deposit.md "Fencing") ---------------------------------------
// Two deposit objects on one directory are two processes' views of it.

TEST_F(fencing_test, a_cut_claim_counts_as_none) {
  dep->put_user("ivy", epoch_parcel(3, "s"));
  dep->claim_user("ivy", 4);
  auto claim = (fs::path(user_path("ivy")).parent_path() / ".claim-ivy.parcel").string();
  write_file(claim, "");  // what a crash can leave of a claim (not fsynced)
  EXPECT_EQ(dep->owner_epoch("ivy"), 3u);  // the parcel's epoch still holds
  write_file(claim, "12x\n");
  EXPECT_EQ(dep->owner_epoch("ivy"), 3u);
}

// A batch leaves its first writers' (empty) claim files to do_deferred; the
// fence is the same either way: an empty claim file and none both read as no claim.
TEST_F(fencing_test, a_batch_defers_the_claim_files_of_first_writes) {
  auto claim_of = [&](const std::string& user) {
    return (fs::path(user_path(user)).parent_path() / (".claim-" + user + ".parcel")).string();
  };
  std::vector<deposit::batch_entry> batch;
  for (int i = 0; i < 40; ++i)
    batch.push_back({false, "new" + std::to_string(i), epoch_parcel(3, "s")});
  batch.push_back({false, "%platform", epoch_parcel(3, "nobody claims a platform key")});
  auto errors = dep->put_batch(batch);
  EXPECT_EQ(std::count(errors.begin(), errors.end(), ""), 41);
  EXPECT_EQ(dep->do_deferred(0), 40u);  // asking does nothing
  EXPECT_FALSE(fs::exists(claim_of("new0")));
  EXPECT_EQ(other->owner_epoch("new0"), 3u);  // fenced by his parcel meanwhile
  EXPECT_THROW(other->put_user("new0", epoch_parcel(2, "stale")), stale_owner_error);
  ASSERT_TRUE(other->claim_user("new1", 4));  // a wake before do_deferred creates the claim itself
  EXPECT_EQ(dep->do_deferred(15), 25u);
  EXPECT_EQ(dep->do_deferred(100), 0u);
  for (int i = 0; i < 40; ++i)
    EXPECT_EQ(read_file(claim_of("new" + std::to_string(i))), i == 1 ? "00000000000000000004\n" : "") << i;
  EXPECT_EQ(dep->owner_epoch("new1"), 4u);  // the deferred O_EXCL left the wake's claim alone
  EXPECT_EQ(dep->owner_epoch("new2"), 3u);

  // The deposit removed meanwhile: the deferred files are given up, nothing is
  // made in its place, and the next write heals the structure as always.
  ASSERT_EQ(std::count(errors.begin(), errors.end(), ""), 41);
  batch.resize(10);
  errors = dep->put_batch(batch);
  ASSERT_EQ(dep->do_deferred(0), 0u);  // written before: their claim files exist
  batch.clear();
  for (int i = 0; i < 10; ++i)
    batch.push_back({false, "later" + std::to_string(i), epoch_parcel(3, "s")});
  errors = dep->put_batch(batch);
  ASSERT_EQ(dep->do_deferred(0), 10u);
  fs::remove_all(dir + "/users");
  EXPECT_EQ(dep->do_deferred(100), 0u);
  EXPECT_FALSE(fs::exists(dir + "/users"));
  dep->put_user("later0", epoch_parcel(3, "after the removal", 2));
  EXPECT_EQ(text_of(*other->get_user("later0")), "after the removal");
}

// A batch renames one shard's users under one lock: an entry refused there
// (stale, or its temp file gone) leaves the others of the shard to land.
TEST_F(fencing_test, a_refused_entry_does_not_stop_the_rest_of_its_shard) {
  auto shard_of = [&](const std::string& user) { return fs::path(user_path(user)).parent_path().filename(); };
  std::vector<std::string> same{"u0"};
  for (int i = 1; same.size() < 4 && i < 100000; ++i)
    if (shard_of("u" + std::to_string(i)) == shard_of("u0"))
      same.push_back("u" + std::to_string(i));
  ASSERT_EQ(same.size(), 4u);
  ASSERT_TRUE(other->claim_user(same[0], 9) == std::nullopt);  // a newer owner holds the first
  ASSERT_TRUE(other->claim_user(same[2], 9) == std::nullopt);  // and the third
  write_file(user_path(same[1]), "corrupt");  // a corrupt parcel in place: the write replaces it
  write_file((fs::path(user_path(same[3])).parent_path() / (".claim-" + same[3] + ".parcel")).string(),
             "12x\n");  // a claim a crash cut: none
  std::vector<deposit::batch_entry> batch;
  for (const auto& u : same)
    batch.push_back({false, u, epoch_parcel(5, u)});
  batch.push_back({true, "c1", epoch_parcel(5, "connection")});
  auto errors = dep->put_batch(batch);
  EXPECT_TRUE(is_stale_owner(errors[0])) << errors[0];
  EXPECT_EQ(errors[1], "");
  EXPECT_TRUE(is_stale_owner(errors[2])) << errors[2];
  EXPECT_EQ(errors[3], "");
  EXPECT_EQ(errors[4], "");
  EXPECT_FALSE(other->get_user(same[0]));
  EXPECT_EQ(text_of(*other->get_user(same[1])), same[1]);
  EXPECT_EQ(text_of(*other->get_user(same[3])), same[3]);
  EXPECT_EQ(text_of(*other->get_connection("c1")), "connection");
}

TEST_F(fencing_test, the_check_is_made_under_the_shard_lock_another_process_holds) {
  // This test holds the shard's lock as another process writing would; a
  // write of the old epoch that arrives meanwhile waits, then sees the newer
  // parcel the lock holder put in place, and is refused.
  dep->put_user("liz", epoch_parcel(5, "old owner"));
  const auto shard_dir = fs::path(user_path("liz")).parent_path();
  const std::string lock_path = dir + "/users/.fence-" + shard_dir.filename().string() + ".lock";
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  std::atomic<int> outcome{0};  // 1 written, 2 stale, 3 other
  std::thread late([&] {
    try {
      dep->put_user("liz", epoch_parcel(5, "old owner, late", 2));
      outcome = 1;
    } catch (const stale_owner_error&) {
      outcome = 2;
    } catch (const std::exception&) {
      outcome = 3;
    }
  });
  // Wait until it waits for the lock (/proc/locks lists a blocked "->" waiter on its inode).
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  const std::string inode = ":" + std::to_string(st.st_ino) + " ";
  auto waits_for_lock = [&] {
    std::ifstream locks("/proc/locks");
    for (std::string line; std::getline(locks, line);)
      if (line.find("->") != std::string::npos && line.find(inode) != std::string::npos)
        return true;
    return false;
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!waits_for_lock() && outcome == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  EXPECT_EQ(outcome.load(), 0) << "the write did not wait for the shard lock";
  // The lock holder's write: a newer owner's parcel, renamed into place.
  auto newer = encode(epoch_parcel(9, "new owner"), "liz");
  const std::string tmp = shard_dir.string() + "/.tmp-lockholder";
  write_file(tmp, std::string(newer.begin(), newer.end()));
  ASSERT_EQ(::rename(tmp.c_str(), user_path("liz").c_str()), 0);
  ::flock(fd, LOCK_UN);
  ::close(fd);
  late.join();
  EXPECT_EQ(outcome.load(), 2) << "1: the old epoch was written past the lock";
  EXPECT_EQ(text_of(*dep->get_user("liz")), "new owner");
}

}  // namespace deposit_test_file
