#include "transport/static_files.hpp"

#include "registry/url.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <utility>

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace troupe {

namespace {

// An open regular file and what was learnt of it.
struct opened {
  int fd = -1;
  struct stat st {};
  ~opened() {
    if (fd >= 0)
      ::close(fd);
  }
};

enum class lookup { file, directory, missing, refused };

// Opens `rel` beneath the mount's root: the kernel resolves it and refuses any
// step out of the root ("..", an absolute path or symlink, one that leads
// elsewhere; RESOLVE_BENEATH), so a symlink may point inside the root, never out
// of it. A kernel without openat2 (before 5.6): the real path is checked instead.
lookup find(const static_mount& mount, const std::string& rel, opened& out) {
  open_how how{};
  how.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK;  // O_NONBLOCK: a FIFO never blocks the io thread
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  auto fd = static_cast<int>(::syscall(SYS_openat2, mount.root_fd(), rel.empty() ? "." : rel.c_str(), &how, sizeof how));
  if (fd < 0 && errno == ENOSYS) {
    const auto& root = mount.root();
    std::string joined = rel.empty() ? root : root + "/" + rel;
    char real[PATH_MAX];
    if (!::realpath(joined.c_str(), real))
      return errno == ENOENT || errno == ENOTDIR ? lookup::missing : lookup::refused;
    std::string_view r(real);
    if (r != root && (r.size() <= root.size() || r.compare(0, root.size(), root) != 0 || r[root.size()] != '/'))
      return lookup::refused;  // a symlink leaving the root
    fd = ::open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  }
  if (fd < 0)
    return errno == ENOENT || errno == ENOTDIR ? lookup::missing : lookup::refused;  // EXDEV, ELOOP: out of the root
  out.fd = fd;
  if (::fstat(fd, &out.st) != 0)
    return lookup::refused;
  if (S_ISDIR(out.st.st_mode))
    return lookup::directory;
  return S_ISREG(out.st.st_mode) ? lookup::file : lookup::refused;  // no devices, fifos, sockets
}

std::string http_date(std::time_t t) {
  thread_local std::time_t last = -1;  // files change seldom: most answers repeat a date
  thread_local std::string text;
  if (t == last)
    return text;
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[64];
  auto n = std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  text.assign(buf, n);
  last = t;
  return text;
}

std::optional<std::time_t> parse_http_date(std::string_view s) {
  std::tm tm{};
  std::string text(s);
  auto* end = ::strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (!end || *end != '\0')
    return std::nullopt;
  return ::timegm(&tm);
}

// If-None-Match: "*" or a list of entity tags, compared weakly (W/ ignored).
bool none_match_hits(std::string_view header, std::string_view etag) {
  while (!header.empty()) {
    auto comma = header.find(',');
    auto tag = registry::trim_ows(header.substr(0, comma));
    if (tag == "*")
      return true;
    if (tag.substr(0, 2) == "W/")
      tag.remove_prefix(2);
    if (tag == etag)
      return true;
    header = comma == std::string_view::npos ? std::string_view{} : header.substr(comma + 1);
  }
  return false;
}

// Accept-Encoding names gzip with a q above 0.
bool accepts_gzip(std::string_view header) {
  while (!header.empty()) {
    auto comma = header.find(',');
    auto item = registry::trim_ows(header.substr(0, comma));
    header = comma == std::string_view::npos ? std::string_view{} : header.substr(comma + 1);
    auto semi = item.find(';');
    if (!registry::iequals(registry::trim_ows(item.substr(0, semi)), "gzip"))
      continue;
    if (semi == std::string_view::npos)
      return true;
    auto q = registry::trim_ows(item.substr(semi + 1));
    if (q.substr(0, 2) != "q=" && q.substr(0, 2) != "Q=")
      return true;
    q.remove_prefix(2);
    return !(q == "0" || q == "0." || q.find_first_not_of("0.") == std::string_view::npos);
  }
  return false;
}

// One range "bytes=a-b" / "a-" / "-n" of a file of `size` bytes: {offset, length};
// nullopt when it is not satisfiable; `ignored` when it is not one range we honour
// (several ranges, another unit, a malformed one): the whole file is sent.
struct range_result {
  bool ignored = true;
  bool satisfiable = false;
  std::uint64_t offset = 0, length = 0;
};

range_result parse_range(std::string_view header, std::uint64_t size) {
  range_result r;
  header = registry::trim_ows(header);
  if (header.substr(0, 6) != "bytes=" || header.find(',') != std::string_view::npos)
    return r;
  auto spec = registry::trim_ows(header.substr(6));
  auto dash = spec.find('-');
  if (dash == std::string_view::npos)
    return r;
  auto number = [](std::string_view s, std::uint64_t& v) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return !s.empty() && ec == std::errc{} && end == s.data() + s.size();
  };
  auto first = spec.substr(0, dash), last = spec.substr(dash + 1);
  std::uint64_t a = 0, b = 0;
  if (first.empty()) {  // the last b bytes
    if (!number(last, b))
      return r;
    r.ignored = false;
    if (b == 0 || size == 0)
      return r;  // unsatisfiable
    b = std::min(b, size);
    r.satisfiable = true;
    r.offset = size - b;
    r.length = b;
    return r;
  }
  if (!number(first, a) || (!last.empty() && (!number(last, b) || b < a)))
    return r;
  r.ignored = false;
  if (a >= size)
    return r;  // unsatisfiable
  std::uint64_t end = last.empty() ? size - 1 : std::min(b, size - 1);
  r.satisfiable = true;
  r.offset = a;
  r.length = end - a + 1;
  return r;
}

static_answer not_found() {
  static_answer a;
  a.status = 404;
  a.content_type = "application/json";
  a.body = error_body("no such file");
  return a;
}

}  // namespace

std::optional<std::string> static_relative_path(std::string_view rest) {
  std::string out;
  while (true) {
    auto slash = rest.find('/');
    auto raw = rest.substr(0, slash);
    bool last = slash == std::string_view::npos;
    if (raw.empty()) {
      if (!last)
        return std::nullopt;  // "a//b": no file has that name
      break;                  // "" or a trailing '/': the directory itself
    }
    auto seg = registry::percent_decode(raw, false, registry::bad_escape::refuse);
    if (!seg || seg->empty() || seg->front() == '.')
      return std::nullopt;  // malformed, "." / "..", a hidden name
    for (unsigned char c : *seg)
      if (c < 0x20 || c == 0x7f || c == '/' || c == '\\')
        return std::nullopt;  // an encoded separator or a control character (NUL too)
    out += *seg;
    if (last)
      return out;
    out += '/';
    rest.remove_prefix(slash + 1);
  }
  return out;
}

std::string_view static_content_type(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 30> types{{
    {"html", "text/html; charset=utf-8"},     {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},       {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"}, {"json", "application/json"},
    {"map", "application/json"},              {"txt", "text/plain; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},   {"csv", "text/csv; charset=utf-8"},
    {"xml", "application/xml"},               {"svg", "image/svg+xml"},
    {"png", "image/png"},                     {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},                   {"gif", "image/gif"},
    {"webp", "image/webp"},                   {"avif", "image/avif"},
    {"ico", "image/x-icon"},                  {"wasm", "application/wasm"},
    {"woff", "font/woff"},                    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},                      {"otf", "font/otf"},
    {"pdf", "application/pdf"},               {"mp4", "video/mp4"},
    {"webm", "video/webm"},                   {"mp3", "audio/mpeg"},
    {"ogg", "audio/ogg"},                     {"webmanifest", "application/manifest+json"},
  }};
  auto dot = name.rfind('.');
  auto slash = name.rfind('/');
  if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash))
    return "application/octet-stream";
  auto ext = name.substr(dot + 1);
  for (auto& [e, type] : types)
    if (registry::iequals(e, ext))
      return type;
  return "application/octet-stream";
}

static_mount::static_mount(config::static_settings settings) : settings_(std::move(settings)) {
  char real[PATH_MAX];
  struct stat st {};
  if (!::realpath(settings_.root.c_str(), real) || ::stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
    throw std::runtime_error("[[static]] " + settings_.prefix + ": root " + settings_.root +
                             " is not a directory (" + std::strerror(errno ? errno : ENOTDIR) + ")");
  root_ = real;
  int fd = ::open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error("[[static]] " + settings_.prefix + ": root " + settings_.root + " cannot be opened (" +
                             std::strerror(errno) + ")");
  root_fd_ = std::shared_ptr<const int>(new int(fd), [](const int* p) {
    ::close(*p);
    delete p;
  });
}

static_answer::static_answer(static_answer&& o) noexcept
  : status(o.status), headers(std::move(o.headers)), fd(std::exchange(o.fd, -1)), offset(o.offset),
    length(o.length), body(std::move(o.body)), content_type(std::move(o.content_type)) {}

static_answer::~static_answer() {
  if (fd >= 0)
    ::close(fd);
}

int static_answer::take_fd() noexcept { return std::exchange(fd, -1); }

static_answer serve_static(const static_mount& mount, const static_request& req) {
  const auto& s = mount.settings();
  if (req.path.size() < s.prefix.size()) {  // "/static" for "/static/": the directory's files are under the slash
    static_answer a;
    a.status = 301;
    a.content_type = "text/plain; charset=utf-8";
    a.headers.push_back({"Location", s.prefix});
    return a;
  }
  auto rel = static_relative_path(req.path.substr(s.prefix.size()));
  if (!rel)
    return not_found();  // never the SPA's index: this is no path of the app
  opened f;
  auto what = find(mount, rel->empty() || rel->back() != '/' ? *rel : rel->substr(0, rel->size() - 1), f);
  std::string served = *rel;  // the file's path, for its Content-Type
  if (what == lookup::directory) {
    if (!rel->empty() && rel->back() != '/') {  // the directory's files are relative to "dir/": send the browser there
      static_answer a;
      a.status = 301;
      a.content_type = "text/plain; charset=utf-8";
      a.headers.push_back({"Location", std::string(req.path) + "/"});
      return a;
    }
    if (s.index.empty())
      return not_found();
    served = *rel + s.index;
    opened index;
    what = find(mount, served, index);
    std::swap(f.fd, index.fd);
    std::swap(f.st, index.st);
  } else if (what == lookup::file && !rel->empty() && rel->back() == '/') {
    what = lookup::missing;  // "file.css/": no such directory
  }
  if (what == lookup::missing && s.spa_fallback && !s.index.empty()) {
    served = s.index;
    opened index;
    what = find(mount, served, index);
    std::swap(f.fd, index.fd);
    std::swap(f.st, index.st);
  }
  if (what != lookup::file)
    return not_found();

  static_answer a;
  a.content_type = std::string(static_content_type(served));
  // A precompressed sibling, when the client takes gzip.
  bool gzip = false;
  if (accepts_gzip(req.accept_encoding)) {
    opened gz;
    if (find(mount, served + ".gz", gz) == lookup::file) {
      std::swap(f.fd, gz.fd);
      std::swap(f.st, gz.st);
      gzip = true;
    }
  }
  auto size = static_cast<std::uint64_t>(f.st.st_size);
  auto mtime_ns = static_cast<std::uint64_t>(f.st.st_mtim.tv_sec) * 1000000000u + static_cast<std::uint64_t>(f.st.st_mtim.tv_nsec);
  char etag_buf[64];
  auto n = std::snprintf(etag_buf, sizeof etag_buf, "\"%llx-%llx%s\"", static_cast<unsigned long long>(size),
                         static_cast<unsigned long long>(mtime_ns), gzip ? "-gz" : "");
  std::string etag(etag_buf, static_cast<std::size_t>(n));
  a.headers.push_back({"ETag", etag});
  a.headers.push_back({"Last-Modified", http_date(f.st.st_mtim.tv_sec)});
  a.headers.push_back({"Vary", "Accept-Encoding"});
  if (!s.cache_control.empty())
    a.headers.push_back({"Cache-Control", s.cache_control});
  // Conditional requests: If-None-Match decides when present, else If-Modified-Since.
  bool not_modified = false;
  if (!req.if_none_match.empty())
    not_modified = none_match_hits(req.if_none_match, etag);
  else if (auto since = parse_http_date(req.if_modified_since))
    not_modified = f.st.st_mtim.tv_sec <= *since;
  if (not_modified) {
    a.status = 304;
    return a;
  }
  if (gzip)
    a.headers.push_back({"Content-Encoding", "gzip"});
  a.headers.push_back({"Accept-Ranges", "bytes"});
  a.status = 200;
  a.offset = 0;
  a.length = size;
  if (!req.range.empty() && (req.if_range.empty() || registry::trim_ows(req.if_range) == etag)) {
    auto r = parse_range(req.range, size);
    if (!r.ignored && !r.satisfiable) {
      static_answer refused;
      refused.status = 416;
      refused.content_type = "application/json";
      refused.body = error_body("range not satisfiable (the file has " + std::to_string(size) + " bytes)");
      refused.headers.push_back({"Content-Range", "bytes */" + std::to_string(size)});
      return refused;
    }
    if (!r.ignored) {
      a.status = 206;
      a.offset = r.offset;
      a.length = r.length;
      a.headers.push_back({"Content-Range", "bytes " + std::to_string(r.offset) + "-" +
                                              std::to_string(r.offset + r.length - 1) + "/" + std::to_string(size)});
    }
  }
  a.fd = std::exchange(f.fd, -1);
  return a;
}

}  // namespace troupe
