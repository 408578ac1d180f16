// The worker's freeze runs on a real actor tree (tree_fixture.hpp): what a
// run does when its users cannot make their parcels durable in time.
#include "tree_fixture.hpp"

#include "actors/worker.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

namespace worker_test_file {

using namespace troupe;
using namespace std::chrono_literals;

// A filesystem deposit whose batches wait while it is held: a disk that hangs.
// A held batch waits 30 s at most, so a failing test still ends.
class hanging_deposit : public store::deposit {
public:
  explicit hanging_deposit(const std::string& dir) : inner_(store::make_filesystem_deposit(dir)) {}

  void hold(bool on) {
    std::lock_guard<std::mutex> lk(mu_);
    held_ = on;
    cv_.notify_all();
  }
  std::size_t batches_waiting() {
    std::lock_guard<std::mutex> lk(mu_);
    return waiting_;
  }

  std::vector<std::string> put_batch(const std::vector<batch_entry>& batch) override {
    {
      std::unique_lock<std::mutex> lk(mu_);
      ++waiting_;
      cv_.wait_for(lk, 30s, [&] { return !held_; });
      --waiting_;
    }
    return inner_->put_batch(batch);
  }
  void put_user(const std::string& u, const store::parcel& p) override { put_batch({{false, u, p}}); }
  void put_connection(const std::string& c, const store::parcel& p) override { put_batch({{true, c, p}}); }
  std::optional<store::parcel> get_user(const std::string& u) override { return inner_->get_user(u); }
  void remove_user(const std::string& u) override { inner_->remove_user(u); }
  std::string quarantine_user(const std::string& u, const std::string& why) override {
    return inner_->quarantine_user(u, why);
  }
  std::uint64_t owner_epoch(const std::string& u) override { return inner_->owner_epoch(u); }
  std::optional<store::parcel> claim_user(const std::string& u, std::uint64_t e) override {
    return inner_->claim_user(u, e);
  }
  std::uint64_t next_commander_generation() override { return inner_->next_commander_generation(); }
  std::optional<store::parcel> get_connection(const std::string& c) override { return inner_->get_connection(c); }
  void remove_connection(const std::string& c) override { inner_->remove_connection(c); }
  std::size_t sweep(std::chrono::seconds u, std::chrono::seconds g) override { return inner_->sweep(u, g); }
  std::size_t count_users() override { return inner_->count_users(); }
  void for_each_user(const std::function<void(const std::string&)>& fn) override { inner_->for_each_user(fn); }

private:
  std::unique_ptr<store::deposit> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  std::size_t waiting_ = 0;
};

class tree_on_a_hanging_disk : public troupe::test::tree {
protected:
  tree_on_a_hanging_disk()
    : tree([](const std::string& dir) { return std::make_shared<hanging_deposit>(dir); }) {}

  hanging_deposit& disk() { return static_cast<hanging_deposit&>(*backend); }

  ~tree_on_a_hanging_disk() override { disk().hold(false); }  // before the tree stops
};

// The soft quit's writes carry no timeout of their own (one deadline per freeze
// run bounds them): with the deposit hung, each worker still answers its quit
// at the run's deadline, every user named as not saved; released, they land.
TEST_F(tree_on_a_hanging_disk, a_soft_quit_whose_writes_hang_answers_at_the_runs_deadline) {
  ctx->recipe().node.shutdown_freeze_seconds = 1;  // each run: 0.9 s
  const int users = 4;
  for (int i = 0; i < users; ++i)
    ASSERT_EQ(n_of(serve(ctx->cids->mint(), "POST", "/n")), 1);

  std::vector<worker_handle> workers;
  (*self)->request(group, 5s, workers_atom::value).receive(
    [&](std::vector<worker_handle>& ws) { workers = std::move(ws); },
    [&](caf::error& e) { FAIL() << sys->render(e); });
  ASSERT_EQ(workers.size(), 2u);

  disk().hold(true);
  std::uint64_t frozen = 0;
  std::size_t not_saved = 0;
  for (auto& w : workers)  // 10 s: far past the 0.9 s deadline, far short of the held 30 s
    (*self)->request(w, 10s, quit_atom::value).receive(
      [&](std::uint64_t f, std::vector<std::string>& failed) {
        frozen += f;
        not_saved += failed.size();
      },
      [&](caf::error& e) { ADD_FAILURE() << "a worker did not answer its quit: " << sys->render(e); });
  EXPECT_EQ(frozen, 0u);
  EXPECT_EQ(not_saved, static_cast<std::size_t>(users));
  EXPECT_GE(disk().batches_waiting(), 1u) << "the writes were not held: the test tests nothing";

  disk().hold(false);  // the writes still land: the users were waiting for them
  EXPECT_TRUE(troupe::test::eventually([&] { return backend->count_users() == static_cast<std::size_t>(users); }));
}

}  // namespace worker_test_file
