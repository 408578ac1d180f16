#pragma once
/// \file
/// A user's state as the platform keeps it around his actor type's instance:
/// the generation of his parcels, the last good state (what a restart after a
/// failed handler starts from, and what a change the deposit refused is rolled
/// back to), and loading a parcel with its state version checked and migrated.
/// A plain class: unit tests drive it without an actor system.

#include "actors/app.hpp"
#include "store/parcel.hpp"

#include <memory>

namespace troupe {

class user_store {
public:
  explicit user_store(std::unique_ptr<user_actor_base> app) : app_(std::move(app)) {}

  user_actor_base& app() noexcept { return *app_; }
  const user_actor_base& app() const noexcept { return *app_; }

  /// Installs a parcel's state (its version checked, an older one migrated);
  /// it becomes the last good state. Throws (store::codec_error, or whatever a
  /// migration throws) leaving everything as it was: the caller quarantines the
  /// parcel and refuses the user, never starts him empty.
  void install(const store::parcel& p);

  /// The current state as a new parcel (the next generation).
  store::parcel next_parcel(store::parcel_cause cause, const std::string& node, const std::string& worker);

  /// The current state becomes the last good one (after a request that changed
  /// it succeeded, or once it is durable). `encoded`: its payload if the caller
  /// packed it already.
  void keep_as_good();
  void keep_as_good(const store::bytes& payload);

  /// Back to the last good state (a change that could not be made durable),
  /// or to an empty one if he never had any.
  void roll_back();

  /// The last good state as a parcel (what his restart starts from); empty
  /// bytes when he never had a state.
  store::bytes last_good_encoded(const std::string& node, const std::string& worker) const;

  /// The owner epoch of his placement (fencing): stamped on every parcel made
  /// here (next_parcel, last_good_encoded). 0 until set.
  void set_owner_epoch(std::uint64_t epoch) noexcept { owner_epoch_ = epoch; }
  std::uint64_t owner_epoch() const noexcept { return owner_epoch_; }

  /// The [[group]] he lives in: stamped on every parcel made here (he wakes
  /// in it again: docs/SUPERVISION.md "Groups and placement").
  void set_group(std::string group) { group_ = std::move(group); }
  const std::string& group() const noexcept { return group_; }

  /// True until he first holds a state: nothing installed, nothing kept.
  bool pristine() const noexcept { return !had_state_; }
  std::uint64_t generation() const noexcept { return generation_; }

private:
  std::unique_ptr<user_actor_base> app_;
  store::bytes good_;                ///< payload of the last good state
  std::uint64_t good_generation_ = 0;
  std::uint64_t generation_ = 0;     ///< of the last parcel written or installed
  std::uint64_t owner_epoch_ = 0;
  std::string group_;
  bool had_state_ = false;
};

}  // namespace troupe
