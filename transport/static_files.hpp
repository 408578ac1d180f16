#pragma once
/// \file
/// Static files served by the front without an actor (`[[static]]` mounts;
/// docs/http.md "Static files"): a traversal-safe path resolver, and what a
/// GET or HEAD under a mount is answered with (ETag / If-None-Match,
/// Last-Modified / If-Modified-Since, one Range, a precompressed .gz sibling).

#include "actors/messages.hpp"
#include "config/static_settings.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

/// The file path, relative to a mount's root, that `rest` (the URL path after
/// the mount's prefix, still percent-encoded) names; a trailing '/' names a
/// directory. nullopt for what may not be served whatever the files are: a
/// malformed escape, an encoded '/' or '\', NUL or another control character,
/// a "." or ".." segment, an empty segment ("a//b"), a hidden name (".env").
std::optional<std::string> static_relative_path(std::string_view rest);

/// The Content-Type of a file name by its extension (application/octet-stream when unknown).
std::string_view static_content_type(std::string_view file_name);

/// One mount, ready to serve: its settings and its root's real path.
class static_mount {
public:
  /// Throws std::runtime_error naming the mount when its root is not a readable directory.
  explicit static_mount(config::static_settings settings);
  const config::static_settings& settings() const noexcept { return settings_; }
  const std::string& prefix() const noexcept { return settings_.prefix; }
  /// The root's real path (symlinks resolved): what every served file must lie under.
  const std::string& root() const noexcept { return root_; }
  /// The root, open (O_PATH): files are opened beneath it (openat2 RESOLVE_BENEATH).
  int root_fd() const noexcept { return *root_fd_; }

private:
  config::static_settings settings_;
  std::string root_;
  std::shared_ptr<const int> root_fd_;  // closed with the last copy
};

/// What a request under a mount says that the answer depends on.
struct static_request {
  std::string_view path;  ///< the whole URL path (prefix included), no query
  bool head = false;
  std::string_view if_none_match, if_modified_since, range, if_range, accept_encoding;
};

/// The answer: a status, its headers and either a file range (fd ≥ 0, owned by
/// whoever takes it) or a small body.
struct static_answer {
  std::uint16_t status = 404;
  std::vector<http_header> headers;
  int fd = -1;
  std::uint64_t offset = 0, length = 0;
  std::string body;
  std::string content_type;
  static_answer() = default;
  static_answer(static_answer&& o) noexcept;
  static_answer& operator=(static_answer&&) = delete;
  ~static_answer();
  /// Takes the file descriptor (the caller closes it).
  int take_fd() noexcept;
};

/// Answers `req` (a GET or HEAD whose path is under `mount`'s prefix).
static_answer serve_static(const static_mount& mount, const static_request& req);

}  // namespace troupe
