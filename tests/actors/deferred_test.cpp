// Deferred answers (user_actor_base::defer) in the actor tree: promises
// resolved by a timer, kept alive, timed out, refused, failing — counted.
#include "tree_fixture.hpp"

namespace deferred_test_file {

using troupe::test::eventually;
using troupe::test::tree;

// Deferred answers (defer): a later event resolves the promise once (a second
// resolve is late, counted); keep_alive moves the deadline; past it 504; a
// continuation is refused (500); a start that throws is a failed handler.
TEST_F(tree, a_deferred_answer_is_resolved_once_kept_alive_timed_out_or_refused) {
  auto a = ctx->cids->mint();
  auto pa = resolve(a);
  auto& m = ctx->metrics.deferred;
  auto r = call(pa.actor, a, "POST", "/defer/timer");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(n_of(r), 1);
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].value, "yes");
  EXPECT_EQ(call(pa.actor, a, "GET", "/defer/seen").body, R"({"first":true,"open_after":false,"second":false})");
  EXPECT_EQ(m.resolved.load(), 1u);
  EXPECT_EQ(m.late.load(), 1u);
  EXPECT_EQ(call(pa.actor, a, "POST", "/defer/never").status, 504);
  EXPECT_EQ(m.timed_out.load(), 1u);
  auto kept = call(pa.actor, a, "POST", "/defer/kept");
  EXPECT_EQ(kept.status, 200) << kept.body;
  EXPECT_EQ(call(pa.actor, a, "POST", "/defer/continued").status, 500);
  EXPECT_EQ(m.pending.load(), 0);
  EXPECT_EQ(ctx->metrics.user_restarts.load(), 0u);
  EXPECT_EQ(call(pa.actor, a, "POST", "/defer/throws").status, 502);
  EXPECT_TRUE(eventually([&] { return ctx->metrics.user_restarts.load() == 1u; }));
  EXPECT_EQ(m.pending.load(), 0);
  EXPECT_EQ(n_of(serve(a, "POST", "/n")), 2) << "the timer's change was kept";
}

// A streamed body's handlers, without a front: the body is one piece, then
// the end answers; its changes are kept. receive() on a plain route still reads
// the body whole (the front streams only route_table::upload routes).
TEST_F(tree, an_upload_without_a_front_reads_the_body_as_one_piece) {
  auto a = ctx->cids->mint();
  auto pa = resolve(a);
  auto r = call(pa.actor, a, "POST", "/upload", "hello");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"n":5,"received":5})");
  EXPECT_EQ(call(pa.actor, a, "POST", "/not-an-upload", "abc").body, R"({"bytes":3})");
  EXPECT_EQ(ctx->metrics.uploads.completed.load(), 2u);
  EXPECT_EQ(n_of(call(pa.actor, a, "POST", "/n")), 6);
}

}  // namespace deferred_test_file
