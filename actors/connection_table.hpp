#pragma once
/// \file
/// A user's connections and their pages, kept as plain records in his actor.
/// Connections and pages are virtual (docs/channels.md): they always exist
/// logically, and an actor is activated for one only when something needs a
/// mailbox (an open channel, a push, a sequential queue); an idle page costs
/// its record here and nothing else. A plain class: a unit test drives it
/// without an actor system.

#include "actors/messages.hpp"
#include "registry/clocks.hpp"

#include <caf/actor.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

/// One page (tab) of a connection: its id (X-Troupe-Page) and clocks.
/// What only a page with an open channel needs (docs/channels.md): the
/// socket actor it is bound to and how its calls are served. Never frozen: a
/// woken user has no binding, and his pages open their channels again.
struct page_channel {
  channel_ref socket;       ///< its socket: its front's channel hub and number (actors/channel.hpp)
  bool sequential = false;  ///< its calls are served one at a time, in order (by the socket's session)
  /// An app WebSocket (the page is the socket): its upgrade's path, whose
  /// route serves its messages, and its subprotocol. "" for a page channel.
  std::string app_path;
  std::string subprotocol;
};

struct page_record {
  std::string id;
  registry::clocks clocks;
  std::unique_ptr<page_channel> channel;  ///< null while the page has no open channel: the idle record stays small
};

/// One connection (the cookie's id) of a user: its clocks and its pages.
struct connection_record {
  std::string cid;
  registry::clocks clocks;
  std::vector<page_record> pages;  // a handful per connection: a vector beats a map here

  page_record* find_page(std::string_view id) noexcept;
};

/// The connections of one user and their pages, bounded per connection and per user.
class connection_table {
public:
  /// What touch_page found.
  enum class touch_outcome : std::uint8_t {
    known,                   ///< the page was there
    added,                   ///< a new page was recorded
    invalid_id,              ///< not 1-64 characters of [A-Za-z0-9_.-]
    too_many_on_connection,  ///< limits.max_pages_per_connection reached
    too_many_for_user,       ///< limits.max_pages_per_user reached, and no idle page to reclaim
  };
  struct touched {
    touch_outcome outcome;
    page_record* page = nullptr;  ///< set for known and added
    bool reclaimed = false;       ///< added in the place of another connection's idle page
  };

  connection_record* find(std::string_view cid) noexcept;
  /// Records connection `cid`; false when he had it already.
  bool add(std::string cid);
  /// Forgets connection `cid` and its pages; false when he did not have it.
  bool erase(std::string_view cid);
  /// Finds page `page_id` of `conn` (a record of this table), recording it when new and within the limits.
  /// At `max_per_user`, the least recently used page of another connection
  /// that is idle (no page of it has an open channel) makes room; at
  /// `max_per_connection` nothing does.
  touched touch_page(connection_record& conn, std::string_view page_id, std::size_t max_per_connection,
                     std::size_t max_per_user);
  /// Forgets page `page_id` of `conn` (a record of this table); false when it had none.
  bool erase_page(connection_record& conn, std::string_view page_id);

  bool empty() const noexcept { return connections_.empty(); }
  std::size_t size() const noexcept { return connections_.size(); }
  std::size_t page_count() const noexcept { return page_count_; }
  const connection_record& front() const { return connections_.front(); }

  auto begin() noexcept { return connections_.begin(); }
  auto end() noexcept { return connections_.end(); }
  auto begin() const noexcept { return connections_.begin(); }
  auto end() const noexcept { return connections_.end(); }

private:
  // Forgets the least recently used page (by its clocks' last activity) of a
  // connection other than `keep` that is idle: none of its pages has an open
  // channel. False when there is none.
  bool reclaim_idle_page(const connection_record& keep);

  std::vector<connection_record> connections_;  // one or two per user, as a rule
  std::size_t page_count_ = 0;
};

}  // namespace troupe
