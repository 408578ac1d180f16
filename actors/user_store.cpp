#include "actors/user_store.hpp"

#include "actors/user_access.hpp"

namespace troupe {


using detail::user_access;

void user_store::install(const store::parcel& p) {
  user_access::load(*app_, p.payload, p.state_version);
  generation_ = std::max(generation_, p.generation);
  had_state_ = true;
  // A migrated state is kept as today's version (what a restart reloads).
  if (p.state_version == user_access::version(*app_) || (p.state_version == 0 && user_access::version(*app_) == 1))
    good_ = p.payload;
  else
    good_ = user_access::save(*app_);
  good_generation_ = generation_;
}

store::parcel user_store::next_parcel(store::parcel_cause cause, const std::string& node, const std::string& worker) {
  store::parcel p;
  p.generation = ++generation_;
  p.writer_node = node;
  p.writer_worker = worker;
  p.cause = cause;
  p.payload = user_access::save(*app_);
  p.state_version = user_access::version(*app_);
  p.owner_epoch = owner_epoch_;
  p.group = group_;
  return p;
}

void user_store::keep_as_good() {
  keep_as_good(user_access::save(*app_));
}

void user_store::keep_as_good(const store::bytes& payload) {
  good_ = payload;
  good_generation_ = generation_;
  had_state_ = true;
}

void user_store::roll_back() {
  if (!had_state_) {
    user_access::reset(*app_);
    return;
  }
  user_access::load(*app_, good_, user_access::version(*app_));
  generation_ = std::max(generation_, good_generation_);
}

store::bytes user_store::last_good_encoded(const std::string& node, const std::string& worker) const {
  if (!had_state_)
    return {};
  store::parcel p;
  p.generation = good_generation_;
  p.writer_node = node;
  p.writer_worker = worker;
  p.cause = store::parcel_cause::checkpoint;
  p.payload = good_;
  p.state_version = user_access::version(*app_);
  p.owner_epoch = owner_epoch_;
  p.group = group_;
  return store::encode(p);
}

}  // namespace troupe
