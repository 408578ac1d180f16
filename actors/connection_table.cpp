#include "actors/connection_table.hpp"

#include "registry/ids.hpp"

#include <algorithm>

namespace troupe {

page_record* connection_record::find_page(std::string_view id) noexcept {
  auto i = std::find_if(pages.begin(), pages.end(), [&](const page_record& p) { return p.id == id; });
  return i == pages.end() ? nullptr : &*i;
}

connection_record* connection_table::find(std::string_view cid) noexcept {
  auto i = std::find_if(connections_.begin(), connections_.end(),
                        [&](const connection_record& c) { return c.cid == cid; });
  return i == connections_.end() ? nullptr : &*i;
}

bool connection_table::add(std::string cid) {
  if (find(cid))
    return false;
  connection_record rec;
  rec.cid = std::move(cid);
  connections_.push_back(std::move(rec));
  return true;
}

bool connection_table::erase(std::string_view cid) {
  auto i = std::find_if(connections_.begin(), connections_.end(),
                        [&](const connection_record& c) { return c.cid == cid; });
  if (i == connections_.end())
    return false;
  page_count_ -= i->pages.size();
  connections_.erase(i);
  if (connections_.empty())
    connections_.shrink_to_fit();  // a user who keeps none keeps no buffer
  return true;
}

connection_table::touched connection_table::touch_page(connection_record& conn, std::string_view page_id,
                                                       std::size_t max_per_connection, std::size_t max_per_user) {
  if (!registry::valid_page_id(page_id))
    return {touch_outcome::invalid_id};
  if (auto* p = conn.find_page(page_id))
    return {touch_outcome::known, p};
  if (conn.pages.size() >= max_per_connection)
    return {touch_outcome::too_many_on_connection};
  // Pages of browsers that are never coming back would otherwise lock the user
  // out of new pages until their connections expire.
  bool reclaimed = false;
  if (page_count_ >= max_per_user && !(reclaimed = reclaim_idle_page(conn)))
    return {touch_outcome::too_many_for_user};
  if (conn.pages.empty())
    conn.pages.reserve(1);  // the usual single page: no growth factor's spare capacity
  page_record rec;
  rec.id = std::string(page_id);
  conn.pages.push_back(std::move(rec));
  ++page_count_;
  return {touch_outcome::added, &conn.pages.back(), reclaimed};
}

bool connection_table::erase_page(connection_record& conn, std::string_view page_id) {
  auto i = std::find_if(conn.pages.begin(), conn.pages.end(), [&](const page_record& p) { return p.id == page_id; });
  if (i == conn.pages.end())
    return false;
  conn.pages.erase(i);
  --page_count_;
  return true;
}

bool connection_table::reclaim_idle_page(const connection_record& keep) {
  auto has_channel = [](const page_record& p) { return p.channel != nullptr; };
  std::vector<page_record>* owner = nullptr;
  std::vector<page_record>::iterator oldest;
  for (auto& c : connections_) {
    if (&c == &keep || c.pages.empty() || std::any_of(c.pages.begin(), c.pages.end(), has_channel))
      continue;
    auto lru = std::min_element(c.pages.begin(), c.pages.end(), [](const page_record& a, const page_record& b) {
      return a.clocks.last_activity() < b.clocks.last_activity();
    });
    if (!owner || lru->clocks.last_activity() < oldest->clocks.last_activity()) {
      owner = &c.pages;
      oldest = lru;
    }
  }
  if (!owner)
    return false;
  owner->erase(oldest);  // a record is an id and clocks: naming the page again records it afresh
  --page_count_;
  return true;
}

}  // namespace troupe
