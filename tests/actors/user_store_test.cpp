// user_store: a user's state with its generation, its last good copy (restarts,
// rollbacks) and state versions with migration — driven without an actor system.
#include "actors/user_store.hpp"

#include "actors/user_access.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace user_store_test_file {

namespace {

using namespace troupe;

// Version 1 of an application's state: a counter stored as text.
struct cart_v1 {
  std::string count;
  MSGPACK_DEFINE(count);
};

// Version 2: the counter is a number, and there is a list of items.
struct cart_v2 {
  std::int64_t count = 0;
  std::vector<std::string> items;
  MSGPACK_DEFINE(count, items);
};

// What the platform gives an actor type; here only changed() matters.
struct fake_host : detail::user_host {
  std::string name = "alice";
  int changes = 0;
  const std::string& user() const override { return name; }
  const std::string& connection() const override { return name; }
  const std::string& page() const override { return name; }
  const std::string& node() const override { return name; }
  const std::string& worker() const override { return name; }
  void changed() override { ++changes; }
  caf::local_actor* actor() override { return nullptr; }
  void push(detail::push_order) override {}
};

fake_host host;

template <class T>
std::unique_ptr<T> hosted() {
  auto app = std::make_unique<T>();
  detail::user_access::bind(*app, &host);
  return app;
}

class shop_v1 : public user_actor<cart_v1> {
public:
  cart_v1& edit() { return mutate(); }
  const cart_v1& view() const { return state(); }
};

class shop_v2 : public user_actor<cart_v2> {
public:
  std::uint32_t state_version() const noexcept override { return 2; }
  cart_v2 migrate(const stored_state& old) override {
    if (old.version() != 1)
      throw store::codec_error("unknown version");
    auto v1 = old.as<cart_v1>();
    return cart_v2{std::stoll(v1.count), {}};
  }
  const cart_v2& view() const { return state(); }
  cart_v2& edit() { return mutate(); }
};

// A type whose state version 2 has no migration: an old parcel must not load.
class strict_v2 : public user_actor<cart_v2> {
public:
  std::uint32_t state_version() const noexcept override { return 2; }
  const cart_v2& view() const { return state(); }
};

store::parcel parcel_of(const store::bytes& payload, std::uint32_t version, std::uint64_t generation = 7) {
  store::parcel p;
  p.generation = generation;
  p.payload = payload;
  p.state_version = version;
  return p;
}

template <class T>
T& app_of(user_store& s) {
  return static_cast<T&>(s.app());
}

TEST(UserStore, AnOlderParcelIsMigratedAndWrittenBackAsTheNewVersion) {
  user_store v1(hosted<shop_v1>());
  app_of<shop_v1>(v1).edit().count = "41";
  auto old = v1.next_parcel(store::parcel_cause::freeze, "n", "w");
  EXPECT_EQ(old.state_version, 1u);

  user_store v2(hosted<shop_v2>());
  v2.install(old);
  EXPECT_EQ(app_of<shop_v2>(v2).view().count, 41);
  EXPECT_EQ(v2.generation(), old.generation);
  auto next = v2.next_parcel(store::parcel_cause::freeze, "n", "w");
  EXPECT_EQ(next.state_version, 2u);
  EXPECT_GT(next.generation, old.generation);
  // What it writes now is read back by the new version without migrating.
  user_store again(hosted<shop_v2>());
  again.install(next);
  EXPECT_EQ(app_of<shop_v2>(again).view().count, 41);
}

TEST(UserStore, ParcelsFromBeforeVersionsCountAsVersionOne) {
  user_store s(hosted<shop_v2>());
  s.install(parcel_of(store::pack(cart_v1{"5"}), 0));
  EXPECT_EQ(app_of<shop_v2>(s).view().count, 5);
}

TEST(UserStore, ANewerOrUnmigratableOrUndecodableParcelThrowsAndChangesNothing) {
  user_store s(hosted<shop_v2>());
  s.install(parcel_of(store::pack(cart_v2{3, {"a"}}), 2));
  EXPECT_THROW(s.install(parcel_of(store::pack(cart_v2{9, {}}), 3)), store::codec_error);
  EXPECT_THROW(s.install(parcel_of(store::bytes{'\xc1', '\x00'}, 2)), store::codec_error);
  EXPECT_EQ(app_of<shop_v2>(s).view().count, 3);
  EXPECT_EQ(app_of<shop_v2>(s).view().items, std::vector<std::string>{"a"});

  user_store strict(hosted<strict_v2>());
  EXPECT_THROW(strict.install(parcel_of(store::pack(cart_v1{"5"}), 1)), store::codec_error);
  EXPECT_TRUE(strict.pristine());
}

TEST(UserStore, RollBackReturnsToTheLastGoodState) {
  user_store s(hosted<shop_v2>());
  EXPECT_TRUE(s.pristine());
  app_of<shop_v2>(s).edit().count = 1;
  s.keep_as_good();
  EXPECT_FALSE(s.pristine());
  app_of<shop_v2>(s).edit().count = 2;
  s.roll_back();
  EXPECT_EQ(app_of<shop_v2>(s).view().count, 1);

  user_store never(hosted<shop_v2>());
  app_of<shop_v2>(never).edit().count = 5;
  never.roll_back();  // he never had a state: back to an empty one
  EXPECT_EQ(app_of<shop_v2>(never).view().count, 0);
}

TEST(UserStore, TheLastGoodStateIsWhatARestartStartsFrom) {
  user_store s(hosted<shop_v2>());
  EXPECT_TRUE(s.last_good_encoded("n", "w").empty());
  app_of<shop_v2>(s).edit().count = 4;
  s.keep_as_good();
  app_of<shop_v2>(s).edit().count = 99;  // half-done by a failing handler
  auto restart = store::decode(s.last_good_encoded("n", "w"));
  user_store next(hosted<shop_v2>());
  next.install(restart);
  EXPECT_EQ(app_of<shop_v2>(next).view().count, 4);
}

TEST(UserStore, EveryParcelCarriesThePlacementsOwnerEpochNotTheInstalledOne) {
  user_store s(hosted<shop_v2>());
  EXPECT_EQ(s.next_parcel(store::parcel_cause::checkpoint, "n", "w").owner_epoch, 0u);
  const std::uint64_t epoch = (std::uint64_t{5} << 32) | 3;
  s.set_owner_epoch(epoch);
  auto older = parcel_of(store::pack(cart_v2{2, {}}), 2);
  older.owner_epoch = (std::uint64_t{4} << 32) | 9;  // written by an earlier placement
  s.install(older);
  EXPECT_EQ(s.owner_epoch(), epoch);
  for (auto cause : {store::parcel_cause::freeze, store::parcel_cause::checkpoint, store::parcel_cause::quit,
                     store::parcel_cause::login})
    EXPECT_EQ(s.next_parcel(cause, "n", "w").owner_epoch, epoch);
  s.keep_as_good();
  EXPECT_EQ(store::decode(s.last_good_encoded("n", "w")).owner_epoch, epoch);  // a restart's (and quit's) state
}

}  // namespace

}  // namespace user_store_test_file
