#include "actors/deposit.hpp"

#include "actors/errors.hpp"

#include <caf/all.hpp>

namespace troupe {

namespace {

struct deposit_state {
  static const char* name;
  std::shared_ptr<store::deposit> backend;
};

const char* deposit_state::name = "troupe.deposit";

template <class F>
auto guarded(F&& fn) -> caf::result<decltype(fn())> {
  try {
    return fn();
  } catch (const std::exception& e) {
    return make_error(errc::deposit_failed, e.what());
  }
}

deposit_handle::behavior_type deposit_impl(deposit_handle::stateful_pointer<deposit_state> self,
                                           std::shared_ptr<store::deposit> backend) {
  self->state.backend = std::move(backend);
  return {
    [=](put_atom, parcel_kind kind, const std::string& key, const store::parcel& p) {
      return guarded([&] {
        auto& b = *self->state.backend;
        kind == parcel_kind::user ? b.put_user(key, p) : b.put_connection(key, p);
        return static_cast<std::uint64_t>(p.payload.size());
      });
    },
    [=](get_atom, parcel_kind kind, const std::string& key) {
      return guarded([&] {
        auto& b = *self->state.backend;
        auto p = kind == parcel_kind::user ? b.get_user(key) : b.get_connection(key);
        std::vector<store::parcel> out;
        if (p)
          out.push_back(std::move(*p));
        return out;
      });
    },
    [=](remove_atom, parcel_kind kind, const std::string& key) {
      return guarded([&] {
        auto& b = *self->state.backend;
        kind == parcel_kind::user ? b.remove_user(key) : b.remove_connection(key);
        return true;
      });
    },
    [=](sweep_atom, double user_hours, double guest_hours) {
      return guarded([&] {
        auto secs = [](double h) { return std::chrono::seconds(static_cast<std::int64_t>(h * 3600)); };
        return static_cast<std::uint64_t>(self->state.backend->sweep(secs(user_hours), secs(guest_hours)));
      });
    },
  };
}

}  // namespace

deposit_handle spawn_deposit(caf::actor_system& sys, std::shared_ptr<store::deposit> backend) {
  return sys.spawn<caf::detached>(deposit_impl, std::move(backend));
}

}  // namespace troupe
