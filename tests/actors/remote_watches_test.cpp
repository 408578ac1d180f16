// The commander's watches of requests to other members' workers
// (actors/remote_watches.hpp): each settled once, by its answer or by its
// member's down verdict, whichever comes first.
#include "actors/remote_watches.hpp"

#include <caf/optional.hpp>
#include <gtest/gtest.h>

namespace remote_watches_test_file {

using troupe::remote_watches;

namespace {

caf::node_id node(std::uint32_t pid) {
  return *caf::make_node_id(pid, "0123456789abcdef0123456789abcdef01234567");
}

TEST(remote_watches, an_answer_settles_a_watch_once) {
  remote_watches w;
  int verdicts = 0;
  auto id = w.watch(node(1), [&] { ++verdicts; });
  EXPECT_NE(id, 0u);
  EXPECT_TRUE(w.settle(id));
  EXPECT_FALSE(w.settle(id)) << "a late second answer does not count";
  EXPECT_TRUE(w.release(node(1)).empty()) << "settled: nothing left for the verdict";
  EXPECT_EQ(verdicts, 0);
  EXPECT_TRUE(w.settle(0)) << "a request never watched (a local worker) always counts";
}

TEST(remote_watches, a_verdict_releases_its_members_watches_and_their_late_answers_do_not_count) {
  remote_watches w;
  int on_down = 0, on_live = 0;
  auto a = w.watch(node(1), [&] { ++on_down; });
  auto b = w.watch(node(1), [&] { ++on_down; });
  auto c = w.watch(node(2), [&] { ++on_live; });
  for (auto& f : w.release(node(1)))
    f();
  EXPECT_EQ(on_down, 2);
  EXPECT_EQ(on_live, 0);
  EXPECT_FALSE(w.settle(a)) << "answered at the verdict already";
  EXPECT_FALSE(w.settle(b));
  EXPECT_TRUE(w.settle(c)) << "another member's request is untouched";
  EXPECT_EQ(w.size(), 0u);
}

}  // namespace

}  // namespace remote_watches_test_file
