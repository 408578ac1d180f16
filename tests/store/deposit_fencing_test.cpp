// Fencing by owner epochs on both backends (docs/deposit.md "Fencing"): claims,
// stale writes refused, races between views and processes, commander generations.
#include "deposit_fixtures.hpp"

namespace deposit_fencing_test_file {

using namespace deposit_fixtures;

// --- fencing, on both backends: two deposit objects are two processes' views --------------

class any_fencing : public any_deposit {
protected:
  void SetUp() override {
    any_deposit::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    other = open();
  }
  void TearDown() override {
    other.reset();
    any_deposit::TearDown();
  }
  std::unique_ptr<deposit> other;  // the second process's view
};

TEST_P(any_fencing, an_older_epoch_is_refused_after_a_newer_write) {
  dep->put_user("alice", epoch_parcel(10, "a's state"));
  other->put_user("alice", epoch_parcel(20, "b's state"));
  try {
    dep->put_user("alice", epoch_parcel(10, "a's stale state", 2));
    FAIL() << "the older epoch was written";
  } catch (const stale_owner_error& e) {
    EXPECT_EQ(e.epoch(), 10u);
    EXPECT_EQ(e.current(), 20u);
    EXPECT_TRUE(is_stale_owner(e.what())) << e.what();
  }
  EXPECT_EQ(dep->counters().fenced, 1u);
  EXPECT_EQ(dep->counters().failures, 0u);  // refusing is not failing
  auto back = other->get_user("alice");
  ASSERT_TRUE(back);
  EXPECT_EQ(text_of(*back), "b's state");
  EXPECT_EQ(back->owner_epoch, 20u);
  EXPECT_EQ(dep->owner_epoch("alice"), 20u);
  if (is_fs()) {
    for (const auto& f : files_in(fs::path(user_path("alice")).parent_path().string()))
      EXPECT_NE(f.rfind(".tmp-", 0), 0u) << "the refused write left " << f;
  }
}

TEST_P(any_fencing, a_newer_claim_fences_the_older_holder_before_the_new_owner_wrote) {
  dep->put_user("alice", epoch_parcel(10, "a's state"));
  auto woken = other->claim_user("alice", 20);  // B wakes him: reads A's state, claims him
  ASSERT_TRUE(woken);
  EXPECT_EQ(text_of(*woken), "a's state");
  EXPECT_EQ(dep->owner_epoch("alice"), 20u);
  EXPECT_THROW(dep->put_user("alice", epoch_parcel(10, "a's stale change", 2)), stale_owner_error);
  EXPECT_EQ(text_of(*other->get_user("alice")), "a's state");  // B's (unwritten) state is what A left
  // A cannot claim him back with its older epoch either.
  EXPECT_THROW(dep->claim_user("alice", 15), stale_owner_error);
  EXPECT_EQ(dep->counters().fenced, 2u);
  other->put_user("alice", epoch_parcel(20, "b's change", 2));
  EXPECT_EQ(text_of(*dep->get_user("alice")), "b's change");
}

TEST_P(any_fencing, an_equal_epoch_is_accepted_and_a_newer_one_takes_over) {
  ASSERT_FALSE(dep->claim_user("carol", 7));  // a new user: nothing to read, claimed all the same
  EXPECT_EQ(other->owner_epoch("carol"), 7u);
  dep->put_user("carol", epoch_parcel(7, "one"));
  dep->put_user("carol", epoch_parcel(7, "two", 2));
  EXPECT_TRUE(dep->claim_user("carol", 7));  // his restart under the same placement
  dep->put_user("carol", epoch_parcel(7, "three", 3));
  other->put_user("carol", epoch_parcel(8, "four", 4));  // a newer placement writes without claiming
  EXPECT_THROW(dep->put_user("carol", epoch_parcel(7, "five", 5)), stale_owner_error);
  EXPECT_EQ(text_of(*other->get_user("carol")), "four");
  EXPECT_EQ(dep->counters().fenced + other->counters().fenced, 1u);
}

TEST_P(any_fencing, epoch_zero_is_the_oldest_and_records_no_claim) {
  const auto claim = (fs::path(user_path("dave")).parent_path() / ".claim-dave.parcel").string();
  dep->put_user("dave", epoch_parcel(0, "legacy"));  // as written before fencing
  EXPECT_EQ(dep->owner_epoch("dave"), 0u);
  if (is_fs()) {
    EXPECT_EQ(read_file(claim), "");  // his first write made his claim file, empty: no claim
  }
  EXPECT_TRUE(dep->claim_user("dave", 0));
  if (is_fs()) {
    EXPECT_EQ(read_file(claim), "");  // epoch 0 claims nothing
  }
  EXPECT_EQ(dep->owner_epoch("dave"), 0u);
  dep->put_user("dave", epoch_parcel(0, "legacy again", 2));  // 0 against 0: accepted
  ASSERT_TRUE(other->claim_user("dave", 1));
  if (is_fs()) {
    EXPECT_EQ(read_file(claim), "00000000000000000001\n");
  }
  EXPECT_THROW(dep->put_user("dave", epoch_parcel(0, "legacy writer", 3)), stale_owner_error);
  EXPECT_THROW(dep->claim_user("dave", 0), stale_owner_error);
  EXPECT_EQ(text_of(*dep->get_user("dave")), "legacy again");
}

TEST_P(any_fencing, a_claim_survives_the_removal_of_the_parcel_and_connections_are_not_fenced) {
  dep->put_user("erin", epoch_parcel(5, "s"));
  other->claim_user("erin", 9);
  other->remove_user("erin");  // dropped by the new owner's node
  EXPECT_EQ(dep->owner_epoch("erin"), 9u);
  EXPECT_THROW(dep->put_user("erin", epoch_parcel(5, "stale", 2)), stale_owner_error);
  EXPECT_FALSE(dep->get_user("erin"));
  // Connection parcels carry no owner to fence: any epoch lands.
  dep->put_connection("c1", epoch_parcel(9, "x"));
  dep->put_connection("c1", epoch_parcel(1, "y"));
  EXPECT_EQ(text_of(*dep->get_connection("c1")), "y");
}

TEST_P(any_fencing, a_batch_refuses_its_stale_entries_and_writes_the_others) {
  other->claim_user("frank", 50);
  std::vector<deposit::batch_entry> batch{
    {false, "frank", epoch_parcel(40, "stale")},
    {false, "gina", epoch_parcel(40, "fine")},
    {true, "c2", epoch_parcel(1, "conn")},
    {false, "frank", epoch_parcel(50, "current")},
  };
  auto errors = dep->put_batch(batch);
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_TRUE(is_stale_owner(errors[0])) << errors[0];
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(errors[2], "");
  EXPECT_EQ(errors[3], "");
  EXPECT_FALSE(is_stale_owner(""));
  EXPECT_FALSE(is_stale_owner("deposit: cannot write"));
  EXPECT_EQ(text_of(*dep->get_user("frank")), "current");
  EXPECT_EQ(text_of(*dep->get_user("gina")), "fine");
  EXPECT_EQ(dep->counters().fenced, 1u);
  EXPECT_EQ(dep->counters().writes, 3u);
  // The single-entry path (one fsync on files) says it the same way.
  auto one = dep->put_batch({{false, "frank", epoch_parcel(49, "stale again")}});
  EXPECT_TRUE(is_stale_owner(one[0])) << one[0];
  // Many stale entries among many good ones, over several statements.
  std::vector<deposit::batch_entry> big;
  for (int i = 0; i < 2100; ++i) {
    const std::string key = "m" + std::to_string(i);
    if (i % 7 == 0)
      other->claim_user(key, 100);
    big.push_back({false, key, epoch_parcel(90, "v")});
  }
  auto texts = dep->put_batch(big);
  for (int i = 0; i < 2100; ++i) {
    EXPECT_EQ(is_stale_owner(texts[static_cast<std::size_t>(i)]), i % 7 == 0) << i << ": " << texts[static_cast<std::size_t>(i)];
    EXPECT_EQ(dep->get_user("m" + std::to_string(i)).has_value(), i % 7 != 0) << i;
  }
}

TEST_P(any_fencing, a_claim_as_old_as_an_expired_parcel_is_swept) {
  dep->put_user("hugo", epoch_parcel(3, "s"));
  dep->claim_user("hugo", 4);
  EXPECT_EQ(dep->sweep(std::chrono::hours(1), std::chrono::hours(1)), 0u);
  EXPECT_EQ(dep->owner_epoch("hugo"), 4u);  // young: kept
  age_claim("hugo", std::chrono::hours(2));
  age(true, "hugo", std::chrono::hours(2));
  EXPECT_EQ(dep->sweep(std::chrono::hours(1), std::chrono::hours(1)), 1u);  // the parcel counts, the claim not
  EXPECT_EQ(dep->owner_epoch("hugo"), 0u);
  EXPECT_FALSE(dep->get_user("hugo"));
  if (is_fs()) {
    EXPECT_FALSE(fs::exists((fs::path(user_path("hugo")).parent_path() / ".claim-hugo.parcel").string()));
  }
}

TEST_P(any_fencing, commander_generations_only_grow_across_deposit_objects) {
  EXPECT_EQ(dep->next_commander_generation(), 1u);
  EXPECT_EQ(other->next_commander_generation(), 2u);
  EXPECT_EQ(dep->next_commander_generation(), 3u);
  auto reopened = open();  // a restart
  EXPECT_EQ(reopened->next_commander_generation(), 4u);
  if (is_fs()) {
    EXPECT_EQ(read_file(dir + "/commander-generation"), "4\n");
    write_file(dir + "/commander-generation", "garbage");
    EXPECT_THROW(dep->next_commander_generation(), deposit_error);  // never guessed
    EXPECT_EQ(read_file(dir + "/commander-generation"), "garbage");
  } else {
    EXPECT_EQ(admin->one("SELECT generation FROM " + table("commander_generation")), "4");
    admin->exec("DELETE FROM " + table("commander_generation"));
    EXPECT_THROW(dep->next_commander_generation(), deposit_error);  // never guessed
  }
}

TEST_P(any_fencing, two_processes_never_get_the_same_generation) {
  char tmpl[] = "/tmp/deposit_gens.XXXXXX";
  ASSERT_GE(::mkstemp(tmpl), 0);
  const std::string gens = tmpl;
  std::vector<std::uint64_t> mine;
  int rc = in_two_processes(
    [&] {
      auto d = open();
      std::ofstream out(gens);
      for (int i = 0; i < 40; ++i)
        out << d->next_commander_generation() << "\n";
      return 0;
    },
    [&] {
      for (int i = 0; i < 40; ++i)
        mine.push_back(dep->next_commander_generation());
    });
  ASSERT_EQ(rc, 0);
  std::ifstream in(gens);
  std::vector<std::uint64_t> theirs{std::istream_iterator<std::uint64_t>(in), {}};
  fs::remove(gens);
  ASSERT_EQ(theirs.size(), 40u);
  EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
  EXPECT_TRUE(std::is_sorted(theirs.begin(), theirs.end()));
  std::set<std::uint64_t> all(mine.begin(), mine.end());
  all.insert(theirs.begin(), theirs.end());
  EXPECT_EQ(all.size(), 80u);  // none given twice
  EXPECT_EQ(*all.begin(), 1u);
  EXPECT_EQ(*all.rbegin(), 80u);
}

TEST_P(any_fencing, two_processes_writing_one_user_the_newer_epoch_always_wins) {
  // The child writes at epoch 1 and keeps trying past the parent; the parent
  // claims at 2 then writes. Once the claim is made, no write of epoch 1 lands.
  constexpr int child_writes = 120;
  constexpr int parent_writes = 40;
  std::vector<std::uint64_t> seen;  // generations read back after the claim
  int rc = in_two_processes(
    [&] {
      auto d = open();
      for (int i = 1; i <= child_writes; ++i) {
        try {
          d->put_user("judy", epoch_parcel(1, "old owner", static_cast<std::uint64_t>(i)));
        } catch (const stale_owner_error&) {
        } catch (const std::exception&) {
          return 2;
        }
      }
      return 0;
    },
    [&] {
      while (!dep->get_user("judy").has_value())  // the child has written once
        std::this_thread::yield();
      dep->claim_user("judy", 2);
      for (int i = 0; i < parent_writes; ++i) {
        auto p = dep->get_user("judy");
        ASSERT_TRUE(p);
        seen.push_back(p->owner_epoch);
        dep->put_user("judy", epoch_parcel(2, "new owner", 1000 + static_cast<std::uint64_t>(i)));
      }
    });
  ASSERT_EQ(rc, 0);
  auto final_parcel = dep->get_user("judy");
  ASSERT_TRUE(final_parcel);
  EXPECT_EQ(final_parcel->owner_epoch, 2u);
  EXPECT_EQ(text_of(*final_parcel), "new owner");
  EXPECT_EQ(final_parcel->generation, 1000u + parent_writes - 1);
  for (std::size_t i = 1; i < seen.size(); ++i)
    EXPECT_EQ(seen[i], 2u) << "read " << i;
}

TEST_P(any_fencing, threads_racing_claims_and_writes_leave_the_newest_epoch) {
  // Each thread has its own deposit object (as processes would) and its own
  // epoch; each claims then writes repeatedly. The user ends at the largest epoch.
  constexpr int threads = 4;
  std::vector<std::thread> pool;
  std::atomic<int> unexpected{0};
  std::vector<std::unique_ptr<deposit>> views;
  for (int t = 0; t < threads; ++t)
    views.push_back(open());
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      auto& d = views[static_cast<std::size_t>(t)];
      const std::uint64_t epoch = 10 + static_cast<std::uint64_t>(t);
      for (int i = 0; i < 25; ++i) {
        try {
          if (i == 0)
            d->claim_user("kate", epoch);
          d->put_user("kate", epoch_parcel(epoch, "from " + std::to_string(epoch), static_cast<std::uint64_t>(i)));
        } catch (const stale_owner_error&) {
        } catch (const std::exception&) {
          ++unexpected;
        }
      }
    });
  for (auto& th : pool)
    th.join();
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_EQ(dep->owner_epoch("kate"), 13u);
  auto p = dep->get_user("kate");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->owner_epoch, 13u);
  EXPECT_EQ(text_of(*p), "from 13");
  EXPECT_EQ(p->generation, 24u);  // the newest owner's last write is the one in place
}

TEST_P(any_fencing, two_objects_racing_for_one_user_exactly_one_owner_wins) {
  // Round after round, two views wake the same new user at once (epochs 1 and 2)
  // and write him: whatever the interleaving, the newer owner holds him at the end
  // and the older one can write him no more.
  for (int round = 0; round < 30; ++round) {
    const std::string user = "race" + std::to_string(round);
    std::atomic<int> go{0};
    std::atomic<int> unexpected{0};
    auto contender = [&](deposit& d, std::uint64_t epoch) {
      ++go;
      while (go < 2)
        std::this_thread::yield();
      try {
        d.claim_user(user, epoch);
        d.put_user(user, epoch_parcel(epoch, "owner " + std::to_string(epoch)));
      } catch (const stale_owner_error&) {
      } catch (const std::exception&) {
        ++unexpected;
      }
    };
    std::thread a([&] { contender(*dep, 1); });
    std::thread b([&] { contender(*other, 2); });
    a.join();
    b.join();
    ASSERT_EQ(unexpected.load(), 0);
    EXPECT_EQ(dep->owner_epoch(user), 2u) << user;
    auto p = other->get_user(user);
    ASSERT_TRUE(p) << user;
    EXPECT_EQ(text_of(*p), "owner 2") << user;
    EXPECT_THROW(dep->put_user(user, epoch_parcel(1, "late")), stale_owner_error) << user;
    EXPECT_THROW(dep->claim_user(user, 1), stale_owner_error) << user;
  }
}

TEST_P(any_fencing, two_views_batching_the_same_users_at_once_both_land) {
  // Two members write the same users in batches at once, in opposite orders: every
  // entry lands (no deadlock left unresolved), and each user holds one of the two.
  constexpr int users = 600;
  auto batch_of = [&](const std::string& text, bool reversed) {
    std::vector<deposit::batch_entry> b;
    for (int i = 0; i < users; ++i) {
      const int k = reversed ? users - 1 - i : i;
      b.push_back({false, "same" + std::to_string(k), epoch_parcel(1, text)});
    }
    return b;
  };
  std::atomic<long> failed{0};
  auto writer = [&](deposit& d, const std::string& text, bool reversed) {
    for (int round = 0; round < 4; ++round)
      for (const auto& t : d.put_batch(batch_of(text, reversed)))
        if (!t.empty())
          ++failed;
  };
  std::thread a([&] { writer(*dep, "from a", false); });
  std::thread b([&] { writer(*other, "from b", true); });
  a.join();
  b.join();
  EXPECT_EQ(failed.load(), 0);
  for (int i = 0; i < users; ++i) {
    auto p = dep->get_user("same" + std::to_string(i));
    ASSERT_TRUE(p) << i;
    EXPECT_TRUE(text_of(*p) == "from a" || text_of(*p) == "from b") << text_of(*p);
  }
}
INSTANTIATE_TEST_SUITE_P(backends, any_fencing, ::testing::Values(backend::filesystem, backend::postgres),
                         backend_name);

}  // namespace deposit_fencing_test_file
