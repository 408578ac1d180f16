#include "actors/deposit.hpp"

#include "actors/errors.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

namespace troupe {

namespace {

constexpr std::size_t max_batch = 1024;

struct staged_put {
  store::deposit::batch_entry entry;
  caf::typed_response_promise<std::uint64_t> promise;
};

struct deposit_state {
  static const char* name;
  std::shared_ptr<store::deposit> backend;
  std::vector<staged_put> staged;

  // Writes every staged parcel in one batch and answers each.
  void flush() {
    if (staged.empty())
      return;
    auto batch = std::move(staged);
    staged.clear();
    std::vector<store::deposit::batch_entry> entries;
    entries.reserve(batch.size());
    for (auto& s : batch)
      entries.push_back(std::move(s.entry));
    std::vector<std::string> errors;
    auto t0 = std::chrono::steady_clock::now();
    try {
      errors = backend->put_batch(entries);
    } catch (const std::exception& e) {
      errors.assign(entries.size(), e.what());
    }
    spdlog::debug("deposit: {} parcel(s) written in {} us", entries.size(),
                  std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (errors[i].empty())
        batch[i].promise.deliver(static_cast<std::uint64_t>(entries[i].contents.payload.size()));
      else
        batch[i].promise.deliver(make_error(errc::deposit_failed, errors[i]));
    }
  }
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
    [=](put_atom, parcel_kind kind, std::string& key, store::parcel& p) -> caf::result<std::uint64_t> {
      auto& st = self->state;
      auto promise = self->make_response_promise<std::uint64_t>();
      if (st.staged.empty())  // handled after everything already queued: they form one batch
        self->send(self, flush_atom::value);
      st.staged.push_back({{kind == parcel_kind::connection, std::move(key), std::move(p)}, promise});
      if (st.staged.size() >= max_batch)
        st.flush();
      return promise;
    },
    [=](flush_atom) { self->state.flush(); },
    [=](get_atom, parcel_kind kind, const std::string& key) -> caf::result<std::vector<store::parcel>> {
      self->state.flush();
      try {
        auto& b = *self->state.backend;
        auto p = kind == parcel_kind::user ? b.get_user(key) : b.get_connection(key);
        std::vector<store::parcel> out;
        if (p)
          out.push_back(std::move(*p));
        return out;
      } catch (const store::parcel_quarantined& e) {
        if (kind == parcel_kind::connection)  // the backend logged it; he is a guest again
          return std::vector<store::parcel>{};
        return make_error(errc::bad_state, e.what());
      } catch (const std::exception& e) {
        return make_error(errc::deposit_failed, e.what());
      }
    },
    [=](quarantine_atom, const std::string& user, const std::string& reason) {
      self->state.flush();  // what he wrote last is what goes to quarantine
      return guarded([&] { return self->state.backend->quarantine_user(user, reason); });
    },
    [=](remove_atom, parcel_kind kind, const std::string& key) {
      self->state.flush();
      return guarded([&] {
        auto& b = *self->state.backend;
        kind == parcel_kind::user ? b.remove_user(key) : b.remove_connection(key);
        return true;
      });
    },
    [=](sweep_atom, double user_hours, double guest_hours) {
      self->state.flush();
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
