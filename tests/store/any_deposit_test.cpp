// What every deposit backend does alike (filesystem and PostgreSQL): round trips,
// quarantine, owners, sweeps, lists, batches, health counters.
#include "deposit_fixtures.hpp"

namespace any_deposit_test_file {

using namespace deposit_fixtures;

// ---- backend-agnostic tests (TEST_P: filesystem and postgres) ------------------------------

TEST_P(any_deposit, user_round_trip) {
  auto p = make_parcel(7, "state of alice");
  p.cause = parcel_cause::quit;
  dep->put_user("alice", p);
  auto back = dep->get_user("alice");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->generation, 7u);
  EXPECT_EQ(back->writer_node, "n1");
  EXPECT_EQ(back->writer_worker, "default-w1");
  EXPECT_EQ(back->cause, parcel_cause::quit);
  EXPECT_EQ(text_of(*back), "state of alice");
  EXPECT_EQ(dep->counters().writes, 1u);
  EXPECT_EQ(dep->counters().reads, 1u);
  EXPECT_TRUE(stored(true, "alice"));
  // The same bytes as the filesystem backend writes (store::encode).
  EXPECT_EQ(raw(true, "alice"), [&] {
    auto b = encode(p, "alice");
    return std::string(b.begin(), b.end());
  }());
  // Users and connections are separate namespaces.
  EXPECT_FALSE(dep->get_connection("alice"));
}

TEST_P(any_deposit, connection_round_trip) {
  connection_record rec{"c0123456789abcdefghijklm", "alice", {"p1", "p2"}};
  parcel p;
  p.generation = 2;
  p.cause = parcel_cause::login;
  p.payload = pack(rec);
  dep->put_connection(rec.cid, p);
  auto back = dep->get_connection(rec.cid);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->generation, 2u);
  EXPECT_EQ(back->cause, parcel_cause::login);
  connection_record r2;
  unpack(back->payload, r2);
  EXPECT_EQ(r2.cid, rec.cid);
  EXPECT_EQ(r2.user, "alice");
  EXPECT_EQ(r2.pages, rec.pages);
  EXPECT_FALSE(dep->get_user(rec.cid));
  dep->remove_connection(rec.cid);
  EXPECT_FALSE(dep->get_connection(rec.cid));
  dep->remove_connection(rec.cid);  // absent is fine
}

TEST_P(any_deposit, overwrite_keeps_the_newest) {
  for (std::uint64_t g = 1; g <= 5; ++g)
    dep->put_user("bob", make_parcel(g, "v" + std::to_string(g)));
  auto back = dep->get_user("bob");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->generation, 5u);
  EXPECT_EQ(text_of(*back), "v5");
  EXPECT_EQ(dep->counters().writes, 5u);
  if (is_fs()) {  // no temp file left behind
    for (const auto& f : files_but_claims_in(fs::path(user_path("bob")).parent_path().string()))
      EXPECT_NE(f[0], '.') << f;
  }
}

TEST_P(any_deposit, absent_and_remove) {
  EXPECT_FALSE(dep->get_user("nobody"));
  EXPECT_EQ(dep->counters().reads, 0u);  // nothing was read
  dep->remove_user("nobody");            // absent is fine
  dep->put_user("carol", make_parcel(1, "x"));
  ASSERT_TRUE(dep->get_user("carol"));
  dep->remove_user("carol");
  EXPECT_FALSE(dep->get_user("carol"));
  EXPECT_FALSE(stored(true, "carol"));
  EXPECT_EQ(dep->counters().failures, 0u);
}

TEST_P(any_deposit, platform_keys_are_never_swept_nor_counted) {
  dep->put_user("%global", make_parcel(1, "snapshot"));
  dep->put_user("old", make_parcel(1, "x"));
  age(true, "%global", std::chrono::hours(48));
  age(true, "old", std::chrono::hours(48));
  EXPECT_EQ(dep->count_users(), 1u);
  EXPECT_EQ(dep->sweep(std::chrono::hours(1), std::chrono::hours(1)), 1u);
  EXPECT_TRUE(dep->get_user("%global"));
  EXPECT_FALSE(dep->get_user("old"));
}

TEST_P(any_deposit, key_length_limits) {
  auto p = make_parcel(1, "x");
  EXPECT_THROW(dep->put_user("", p), std::invalid_argument);
  EXPECT_THROW(dep->get_user(""), std::invalid_argument);
  EXPECT_THROW(dep->remove_user(""), std::invalid_argument);
  EXPECT_THROW(dep->put_connection("", p), std::invalid_argument);
  const std::string too_long(256, 'a');
  EXPECT_THROW(dep->put_user(too_long, p), std::invalid_argument);
  EXPECT_THROW(dep->get_user(too_long), std::invalid_argument);
  EXPECT_THROW(dep->remove_connection(too_long), std::invalid_argument);
  EXPECT_EQ(dep->count_users(), 0u);

  // The longest keys work (on files even when escaping triples them: nested pieces), and any byte.
  const std::string plain(255, 'a');
  const std::string upper(255, 'A');
  const std::string dots(255, '.');
  const std::string odd("x\0y\xff/..%", 9);
  for (const auto& k : {plain, upper, dots, odd}) {
    dep->put_user(k, make_parcel(3, k.substr(0, 1)));
    auto back = dep->get_user(k);
    ASSERT_TRUE(back);
    EXPECT_EQ(text_of(*back), k.substr(0, 1));
  }
  EXPECT_EQ(dep->count_users(), 4u);
  std::set<std::string> listed;
  dep->for_each_user([&](const std::string& name) { listed.insert(name); });
  EXPECT_EQ(listed, (std::set<std::string>{plain, upper, dots, odd}));
  for (const auto& k : {plain, upper, dots, odd}) {
    dep->remove_user(k);
    EXPECT_FALSE(dep->get_user(k));
  }
}

TEST_P(any_deposit, corrupted_parcel_is_quarantined) {
  dep->put_user("eve", make_parcel(1, "a fairly long state so that a byte can be flipped"));
  auto data = raw(true, "eve");
  data[data.size() - 5] ^= 0x20;  // inside the payload
  write_raw(true, "eve", data);

  try {
    dep->get_user("eve");
    FAIL() << "a corrupt parcel was not reported as quarantined";
  } catch (const parcel_quarantined& e) {
    EXPECT_EQ(e.key(), "eve");
    EXPECT_EQ(e.reason(), "parcel checksum mismatch");
    EXPECT_TRUE(in_quarantine(e.quarantine_path())) << e.quarantine_path();
  }
  EXPECT_EQ(dep->counters().quarantined, 1u);
  EXPECT_EQ(dep->counters().reads, 1u);
  EXPECT_FALSE(stored(true, "eve"));
  auto q = quarantined();
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0], data);  // moved, never altered
  if (is_fs()) {
    EXPECT_EQ(files_in(dir + "/quarantine")[0].rfind("eve.parcel.", 0), 0u);
  }
  // He is not started empty: every later read says so too, until a new parcel.
  EXPECT_THROW(dep->get_user("eve"), parcel_quarantined);
  EXPECT_THROW(dep->claim_user("eve", 3), parcel_quarantined);
  EXPECT_EQ(dep->counters().quarantined, 1u);
  dep->put_user("eve", make_parcel(2, "fresh"));
  ASSERT_TRUE(dep->get_user("eve"));
  EXPECT_EQ(dep->counters().quarantined, 1u);
  EXPECT_EQ(quarantined().size(), 1u);  // never deleted
}

TEST_P(any_deposit, truncated_parcel_is_quarantined) {
  connection_record rec{"c0123456789abcdefghijklm", "frank", {"p1"}};
  parcel p;
  p.payload = pack(rec);
  dep->put_connection(rec.cid, p);
  dep->put_user("frank", make_parcel(1, "state of frank"));
  for (bool user : {false, true}) {
    const std::string key = user ? "frank" : rec.cid;
    auto data = raw(user, key);
    write_raw(user, key, data.substr(0, data.size() / 2));
  }
  EXPECT_THROW(dep->get_connection(rec.cid), parcel_quarantined);
  EXPECT_THROW(dep->get_user("frank"), parcel_quarantined);
  EXPECT_FALSE(dep->get_connection(rec.cid)) << "a connection leaves no marker: found nothing next time";
  EXPECT_THROW(dep->get_user("frank"), parcel_quarantined) << "a user's marker says it again";
  EXPECT_EQ(dep->counters().quarantined, 2u);
  EXPECT_FALSE(stored(false, rec.cid));
  EXPECT_FALSE(stored(true, "frank"));
  EXPECT_EQ(quarantined().size(), 2u);
}

TEST_P(any_deposit, parcel_copied_over_another_users_is_quarantined_and_he_stays_refused) {
  dep->put_user("bob", make_parcel(5, "bob's state"));
  dep->put_user("alice", make_parcel(3, "alice's state"));
  const auto bobs = raw(true, "bob");
  write_raw(true, "alice", bobs);  // an operator's mistake, or an attack

  try {
    dep->get_user("alice");
    FAIL() << "bob's parcel was served to alice";
  } catch (const parcel_quarantined& e) {
    EXPECT_EQ(e.key(), "alice");
    EXPECT_NE(e.reason().find("'bob'"), std::string::npos) << e.reason();
    EXPECT_NE(e.reason().find("'alice'"), std::string::npos) << e.reason();
    if (is_fs()) {
      EXPECT_EQ(read_file(e.quarantine_path()), bobs);  // moved as it was
    }
  }
  EXPECT_EQ(dep->counters().quarantined, 1u);
  EXPECT_FALSE(stored(true, "alice"));
  ASSERT_EQ(quarantined(), std::vector<std::string>{bobs});
  // Not "absent": she is refused again (the marker), bob is untouched.
  try {
    dep->get_user("alice");
    FAIL() << "the second read of alice found nothing: she would start empty";
  } catch (const parcel_quarantined& e) {
    EXPECT_NE(e.reason().find("'bob'"), std::string::npos) << e.reason();
    EXPECT_TRUE(in_quarantine(e.quarantine_path())) << e.quarantine_path();
  }
  EXPECT_EQ(dep->counters().quarantined, 1u);
  EXPECT_EQ(text_of(*dep->get_user("bob")), "bob's state");
  EXPECT_EQ(dep->count_users(), 1u) << "the marker is not a user";
  std::set<std::string> listed;
  dep->for_each_user([&](const std::string& name) { listed.insert(name); });
  EXPECT_EQ(listed, std::set<std::string>{"bob"}) << "the marker is not a user";
  // A removal (the operator's way out) or a new parcel lifts it.
  dep->remove_user("alice");
  EXPECT_FALSE(dep->get_user("alice"));
  write_raw(true, "alice", bobs);
  EXPECT_THROW(dep->get_user("alice"), parcel_quarantined);
  dep->put_user("alice", make_parcel(4, "fresh"));
  EXPECT_EQ(text_of(*dep->get_user("alice")), "fresh");
  dep->remove_user("alice");
  EXPECT_FALSE(dep->get_user("alice"));
}

TEST_P(any_deposit, connection_parcel_of_another_connection_is_quarantined) {
  connection_record rec{"cAAAAAAAAAAAAAAAAAAAAAAA", "mallory", {}};
  parcel cp;
  cp.payload = pack(rec);
  dep->put_connection(rec.cid, cp);
  write_raw(false, "cBBBBBBBBBBBBBBBBBBBBBBB", raw(false, rec.cid));
  EXPECT_THROW(dep->get_connection("cBBBBBBBBBBBBBBBBBBBBBBB"), parcel_quarantined);
  EXPECT_EQ(dep->counters().quarantined, 1u);
  EXPECT_FALSE(dep->get_connection("cBBBBBBBBBBBBBBBBBBBBBBB"));
  EXPECT_TRUE(dep->get_connection(rec.cid));
}

TEST_P(any_deposit, quarantine_user_on_the_callers_word) {
  dep->put_user("olga", make_parcel(2, "a state of another shape"));
  const auto bytes_before = raw(true, "olga");
  auto q = dep->quarantine_user("olga", "payload does not decode as notes_state v3");
  EXPECT_TRUE(in_quarantine(q)) << q;
  EXPECT_EQ(quarantined(), std::vector<std::string>{bytes_before});
  EXPECT_FALSE(stored(true, "olga"));
  try {
    dep->get_user("olga");
    FAIL() << "olga was not refused";
  } catch (const parcel_quarantined& e) {
    EXPECT_NE(e.reason().find("notes_state v3"), std::string::npos) << e.reason();
    EXPECT_EQ(e.quarantine_path(), q);
  }
  EXPECT_EQ(dep->quarantine_user("nobody", "x"), "");
  EXPECT_THROW(dep->get_user("nobody"), parcel_quarantined);  // the marker is left all the same
  EXPECT_EQ(dep->counters().quarantined, 1u);
}

TEST_P(any_deposit, put_records_the_key_as_owner) {
  auto parcel_of = [&](bool user, const std::string& key) {
    auto data = raw(user, key);
    return decode(data.data(), data.size());
  };
  dep->put_user("alice", make_parcel(1, "a"));
  EXPECT_EQ(parcel_of(true, "alice").owner, "alice");
  EXPECT_EQ(dep->get_user("alice")->owner, "alice");
  connection_record rec{"c0123456789abcdefghijklm", "alice", {}};
  parcel cp;
  cp.payload = pack(rec);
  dep->put_connection(rec.cid, cp);
  EXPECT_EQ(parcel_of(false, rec.cid).owner, rec.cid);
  // A parcel naming its owner already is written as is; another owner is refused.
  auto own = make_parcel(2, "b");
  own.owner = "bob";
  own.state_version = 4;
  own.owner_epoch = 9;
  dep->put_user("bob", own);
  auto back = dep->get_user("bob");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->owner, "bob");
  EXPECT_EQ(back->state_version, 4u);
  EXPECT_EQ(back->owner_epoch, 9u);
  EXPECT_THROW(dep->put_user("carol", own), deposit_error);
  EXPECT_FALSE(stored(true, "carol"));
  auto errors = dep->put_batch({{false, "carol", own}, {false, "dave", make_parcel(1, "d")}});
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("cannot be written under"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(parcel_of(true, "dave").owner, "dave");
}

TEST_P(any_deposit, format_1_parcel_still_reads) {
  wire_v1 w;
  auto payload = pack(std::string("from version 1"));
  w.sum = checksum(payload.data(), payload.size());
  w.payload = msgpack::type::raw_ref(payload.data(), static_cast<std::uint32_t>(payload.size()));
  auto bytes = pack(w);
  dep->put_user("vera", make_parcel(1, "x"));  // makes the shard
  write_raw(true, "vera", std::string(bytes.begin(), bytes.end()));
  auto back = dep->get_user("vera");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->generation, 8u);
  EXPECT_EQ(back->owner, "");
  EXPECT_EQ(back->state_version, 0u);
  EXPECT_EQ(text_of(*back), "from version 1");
  EXPECT_EQ(dep->counters().quarantined, 0u);
}

TEST_P(any_deposit, sweep_honours_ages) {
  using namespace std::chrono;
  const auto user_max = hours(10);
  const auto guest_max = hours(1);
  auto put_aged = [&](const std::string& user, seconds a) {
    dep->put_user(user, make_parcel(1, user));
    age(true, user, a);
  };
  put_aged("old_user", hours(11));       // removed
  put_aged("recent_user", hours(2));     // kept: users live 10 h
  put_aged("fresh_user", seconds(0));    // kept
  put_aged(guest_a, hours(2));           // removed: guests live 1 h
  put_aged(guest_b, minutes(30));        // kept
  put_aged(std::string(255, 'O'), hours(12));  // removed (nested pieces on files)
  dep->put_connection("c_old", make_parcel(1, "c"));
  age(false, "c_old", hours(11));     // removed: connections live max(10 h, 1 h)
  dep->put_connection("c_mid", make_parcel(1, "c"));
  age(false, "c_mid", hours(5));      // kept
  std::string shard;
  if (is_fs()) {
    // Leftover temp files: an old one goes, a fresh one (a write in progress) stays.
    shard = fs::path(user_path("fresh_user")).parent_path().string();
    write_file(shard + "/.tmp-424242-1", "leftover");
    age_file(shard + "/.tmp-424242-1", hours(1));
    write_file(shard + "/.tmp-424242-2", "in progress");
  }

  EXPECT_EQ(dep->count_users(), 6u);
  EXPECT_EQ(dep->sweep(user_max, guest_max), 3u);
  EXPECT_EQ(dep->counters().removed, 3u);
  EXPECT_FALSE(dep->get_user("old_user"));
  EXPECT_FALSE(dep->get_user(guest_a));
  EXPECT_FALSE(dep->get_user(std::string(255, 'O')));
  EXPECT_TRUE(dep->get_user("recent_user"));
  EXPECT_TRUE(dep->get_user("fresh_user"));
  EXPECT_TRUE(dep->get_user(guest_b));
  EXPECT_FALSE(dep->get_connection("c_old"));
  EXPECT_TRUE(dep->get_connection("c_mid"));
  EXPECT_EQ(dep->count_users(), 3u);
  EXPECT_EQ(dep->counters().failures, 0u);
  // Nothing left to do; no tombstone left behind.
  EXPECT_EQ(dep->sweep(user_max, guest_max), 0u);
  if (is_fs()) {
    EXPECT_FALSE(fs::exists(shard + "/.tmp-424242-1"));
    EXPECT_TRUE(fs::exists(shard + "/.tmp-424242-2"));
    for (const auto& s : files_in(dir + "/users"))
      for (const auto& f : files_in(dir + "/users/" + s))
        EXPECT_NE(f.rfind(".sweep-", 0), 0u) << f;
  }
}

TEST_P(any_deposit, count_users) {
  EXPECT_EQ(dep->count_users(), 0u);
  for (int i = 0; i < 300; ++i)
    dep->put_user("user" + std::to_string(i), make_parcel(1, "s"));
  dep->put_connection("c1", make_parcel(1, "c"));
  EXPECT_EQ(dep->count_users(), 300u);
  dep->remove_user("user7");
  EXPECT_EQ(dep->count_users(), 299u);
  dep->claim_user("claimed_only", 5);  // a claim without a parcel is not a user
  EXPECT_EQ(dep->count_users(), 299u);
}

TEST_P(any_deposit, concurrent_puts_and_gets_on_distinct_keys) {
  constexpr int threads = 8;
  constexpr int keys = 50;
  constexpr int rounds = 20;
  std::atomic<int> errors{0};
  std::atomic<bool> done{false};
  auto key = [](int k) { return (k % 2 ? "User" : "guest_") + std::to_string(k); };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int r = 1; r <= rounds; ++r) {
        for (int k = t; k < keys; k += threads) {
          auto text = key(k) + "#" + std::to_string(r);
          if (k % 3 == 0) {
            connection_record rec{key(k), "u", {text}};
            parcel p;
            p.generation = static_cast<std::uint64_t>(r);
            p.payload = pack(rec);
            dep->put_connection(key(k), p);
            auto back = dep->get_connection(key(k));
            connection_record got;
            if (back)
              unpack(back->payload, got);
            if (!back || back->generation != static_cast<std::uint64_t>(r) || got.pages != rec.pages)
              ++errors;
          } else {
            dep->put_user(key(k), make_parcel(static_cast<std::uint64_t>(r), text));
            auto back = dep->get_user(key(k));
            if (!back || back->generation != static_cast<std::uint64_t>(r) || text_of(*back) != text)
              ++errors;
          }
        }
      }
    });
  }
  // A background sweep with long ages and counts run meanwhile: they must not disturb anything.
  std::thread sweeper([&] {
    while (!done) {
      dep->sweep(std::chrono::hours(1), std::chrono::hours(1));
      dep->count_users();
    }
  });
  for (auto& th : pool)
    th.join();
  done = true;
  sweeper.join();
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(dep->counters().failures, 0u);
  EXPECT_EQ(dep->counters().quarantined, 0u);
  EXPECT_EQ(dep->counters().removed, 0u);
  EXPECT_EQ(dep->counters().writes, static_cast<std::uint64_t>(keys * rounds));
  int user_keys = 0;
  for (int k = 0; k < keys; ++k)
    if (k % 3 != 0)
      ++user_keys;
  EXPECT_EQ(dep->count_users(), static_cast<std::size_t>(user_keys));
}

TEST_P(any_deposit, lists_every_user_by_name_platform_keys_aside) {
  std::set<std::string> put{"alice", "Bob.Smith", "a@b", std::string(200, 'x'), "guest_AbCdEfGhIjKlMnOpQrStUvWx"};
  for (auto& name : put)
    dep->put_user(name, make_parcel(1, "s"));
  dep->put_user("%global", make_parcel(1, "g"));
  dep->put_connection("c1", make_parcel(1, "c"));
  std::set<std::string> listed;
  dep->for_each_user([&](const std::string& name) { listed.insert(name); });
  EXPECT_EQ(listed, put);
}

TEST_P(any_deposit, lists_more_users_than_a_page) {
  // More than one page of keys (10,000 per page on postgres), written in batches.
  std::vector<deposit::batch_entry> batch;
  for (int i = 0; i < 10500; ++i)
    batch.push_back({false, "u" + std::to_string(i), make_parcel(1, "s")});
  auto errors = dep->put_batch(batch);
  EXPECT_EQ(std::count(errors.begin(), errors.end(), ""), 10500);
  std::set<std::string> listed;
  std::size_t calls = 0;
  dep->for_each_user([&](const std::string& name) {
    listed.insert(name);
    ++calls;
  });
  EXPECT_EQ(calls, 10500u);
  EXPECT_EQ(listed.size(), 10500u);
  EXPECT_EQ(dep->count_users(), 10500u);
}

TEST_P(any_deposit, a_batch_lands_whole_and_durable_for_another_view) {
  // Connections and users mixed, a key twice (the later entry wins), more entries than batch_rows.
  std::vector<deposit::batch_entry> batch;
  for (int i = 0; i < 2500; ++i)
    batch.push_back({i % 5 == 0, "k" + std::to_string(i), make_parcel(1, "first " + std::to_string(i))});
  batch.push_back({false, "k1", make_parcel(2, "second 1")});
  auto errors = dep->put_batch(batch);
  ASSERT_EQ(errors.size(), batch.size());
  EXPECT_EQ(std::count(errors.begin(), errors.end(), ""), static_cast<long>(batch.size()));
  EXPECT_EQ(dep->counters().writes, batch.size());
  auto view = open();  // a restart, or another member
  for (int i = 0; i < 2500; ++i) {
    auto p = i % 5 == 0 ? view->get_connection("k" + std::to_string(i)) : view->get_user("k" + std::to_string(i));
    ASSERT_TRUE(p) << i;
    EXPECT_EQ(text_of(*p), i == 1 ? "second 1" : "first " + std::to_string(i));
  }
  EXPECT_EQ(view->count_users(), 2000u);
}

TEST_P(any_deposit, health_counters_follow_successes) {
  const auto& c = dep->counters();
  EXPECT_EQ(c.last_success_unix_ms, 0);
  EXPECT_EQ(c.last_failure_unix_ms, 0);
  const auto t0 = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  dep->put_user("gina", make_parcel(1, "x"));
  EXPECT_GE(c.last_success_unix_ms, t0);
  EXPECT_EQ(c.consecutive_failures, 0);
  EXPECT_THROW(dep->put_user("gina", [] {
    auto p = make_parcel(2, "y");
    p.owner = "someone else";
    return p;
  }()), deposit_error);
  EXPECT_EQ(c.consecutive_failures, 1);
  EXPECT_GE(c.last_failure_unix_ms, t0);
  EXPECT_TRUE(dep->get_user("gina"));
  EXPECT_EQ(c.consecutive_failures, 0);
}
INSTANTIATE_TEST_SUITE_P(backends, any_deposit, ::testing::Values(backend::filesystem, backend::postgres),
                         backend_name);

}  // namespace any_deposit_test_file
