#pragma once
/// \file
/// The node's recipe: every setting a troupe node runs with, composed as
/// defaults ⊕ recipe file (TOML) ⊕ environment (`TROUPE_*`) ⊕ `--set KEY=VALUE`.
/// The key names are troupe's public contract (see docs/config.md).

#include <chrono>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace troupe::config {

/// A recipe's duration in seconds (a double: 0.25 is a quarter second) as whole milliseconds.
inline std::chrono::milliseconds to_millis(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

/// A recipe that cannot be used: `key` names the offending setting
/// (dotted, e.g. "limits.max_body_bytes"), `what()` says the problem in one line.
class recipe_error : public std::runtime_error {
public:
  recipe_error(std::string key, const std::string& problem)
    : std::runtime_error(key.empty() ? problem : key + ": " + problem), key_(std::move(key)) {}
  /// As above, but `what()` starts with `label` instead of the key, for problems
  /// worth pointing at their source: ("limits.x", "--set limits.x", "expected KEY=VALUE")
  /// says "--set limits.x: expected KEY=VALUE" and key() is still "limits.x".
  recipe_error(std::string key, const std::string& label, const std::string& problem)
    : std::runtime_error(label.empty() ? problem : label + ": " + problem), key_(std::move(key)) {}
  /// The dotted key the problem is about (empty when it is about the file as a whole).
  const std::string& key() const noexcept { return key_; }

private:
  std::string key_;
};

/// `[node]`
struct node_settings {
  std::string listen = "127.0.0.1:8080";   ///< HOST:PORT; port 0 picks a free port
  std::string admin_token;                 ///< empty: the admin surface is off (health aside)
  std::string name;                        ///< shown in whoami/census; empty: the host name
  std::string log_level = "info";          ///< trace|debug|info|warn|error|critical|off
  int io_threads = 1;                      ///< threads running the HTTP front
  int actor_threads = 1;                   ///< CAF scheduler threads (1 io + 1 actor thread fit 2 cores)
  std::string actor_scheduler = "sharing"; ///< CAF scheduler policy: sharing | stealing
  double shutdown_grace_seconds = 10;      ///< in-flight requests get this long on SIGTERM
  double shutdown_freeze_seconds = 60;     ///< then the soft quit gets this long to make every user durable
  std::string cookie_secret;               ///< HMAC key of minted connection ids; "": generated into the deposit
  double health_probe_seconds = 5;         ///< with no deposit write for this long, health probes the deposit
  double health_max_restart_rate = 10;     ///< user restarts per second (last minute) past which health is degraded
  std::uint64_t history_seconds = 600;     ///< samples (one a second) of GET /_troupe/history and the console's charts
  // TLS (issue 14, docs/tls.md): `listen` serves HTTPS/WSS when tls_cert and tls_key are set.
  std::string tls_cert;                    ///< PEM certificate chain; "": plain HTTP on listen
  std::string tls_key;                     ///< PEM private key of tls_cert (unencrypted)
  std::string tls_client_ca;               ///< PEM CAs: client certificates required and verified; "": none asked
  std::string plain_listen;                ///< HOST:PORT of a second, plain-HTTP listener (TLS only); "": none
};

/// `[limits]`
struct limits_settings {
  std::uint64_t max_body_bytes = 1048576;      ///< 413 past it
  std::uint64_t max_header_bytes = 16384;      ///< 431 past it
  double request_timeout_seconds = 30;         ///< 504 past it
  std::uint64_t max_inflight = 10000;          ///< 503 + Retry-After past it
  double hold_seconds = 5;                     ///< wait for a user between two homes, then 503
  double idle_timeout_seconds = 60;            ///< keep-alive connection with no request: closed
  double read_timeout_seconds = 30;            ///< a started request must be read within this
  std::uint64_t user_queue_length = 1024;      ///< requests waiting on one busy user; 503 past it
  std::uint64_t max_pages_per_connection = 32; ///< live pages per connection; 429 past it
  std::uint64_t max_consoles = 16;             ///< open console live channels; 503 past it
  std::uint64_t max_unauthenticated_consoles = 64; ///< live channels still waiting for their token; the oldest is closed past it
  std::uint64_t max_connections = 10000;       ///< open TCP connections; the excess is answered 503 and closed
  std::uint64_t max_buffered_body_bytes = 268435456; ///< request bodies buffered across the node; 503 past it
  std::uint64_t max_live_users = 100000;       ///< live user actors on the node; newcomers get 503 past it
  std::uint64_t max_pages_per_user = 64;       ///< live pages of one user over all his connections; 429 past it
  std::uint64_t max_forwarded_requests = 10000; ///< requests in flight to users on other nodes; 503 past it
  // Streaming responses (SSE, NDJSON; docs/streaming.md).
  std::uint64_t max_streams = 1000;            ///< open streams on this node's front; 503 + Retry-After past it
  std::uint64_t max_streams_per_user = 8;      ///< open streams of one user; 503 + Retry-After past it
  std::uint64_t stream_queue_bytes = 262144;   ///< bytes queued per stream (in flight included), at most
  std::uint64_t stream_credit_bytes = 65536;   ///< the writer's credit window (≤ stream_queue_bytes)
  std::uint64_t stream_max_event_bytes = 65536; ///< one framed event, at most (≤ stream_credit_bytes)
  double stream_keepalive_seconds = 15;        ///< an SSE comment on a stream quiet this long; 0: none
  double tls_handshake_timeout_seconds = 10;   ///< a TLS handshake (and a TLS close) must complete within this
  std::uint64_t max_message_bytes = 65536;     ///< an encoded message between users (tell); refused too_big past it
  // The gates in front of CAF's middleman (the worker gate, the cluster port; docs/CLUSTER.md "The gate").
  std::uint64_t gate_max_pending = 64;         ///< connections being vetted at once per gate; one more is closed
  double gate_handshake_timeout_seconds = 3;   ///< a connection must answer the gate's challenge within this
};

/// `[channel]`: the page channels on /_troupe/ws (docs/channels.md).
struct channel_settings {
  std::string overflow = "close";            ///< a socket's full outgoing queue: close (1013) | drop_oldest
  std::uint64_t max_queued_frames = 256;     ///< frames waiting to be written on one socket
  std::uint64_t max_queued_bytes = 1048576;  ///< bytes waiting to be written on one socket
  std::uint64_t max_frame_bytes = 65536;     ///< a larger incoming frame closes the socket (1009)
  std::uint64_t max_sockets = 10000;         ///< open channel sockets on the node; one more is closed (1013)
  std::uint64_t max_sockets_per_connection = 16;  ///< open sockets of one connection (cookie) on the node; past it 1013
  std::uint64_t max_sockets_per_user = 64;   ///< open sockets of one user (all his connections) on the node; past it 1013
  std::uint64_t max_calls_per_socket = 128;  ///< calls in flight (or queued on a sequential page) per socket; 503 past it
  double idle_timeout_seconds = 60;          ///< nothing received (pings included) for this long: closed
  double push_timeout_seconds = 5;           ///< how long a push waits for a socket or a user to answer
  std::uint64_t max_push_users = 1000;       ///< users one push_users may name; more: refused, nothing sent
};

/// `[log]`: the node's log lines on stderr.
struct log_settings {
  std::string format = "text";  ///< text (for people) | json (one object per line); both stamped in UTC
};

/// `[deposit]`
struct deposit_settings {
  std::string backend = "filesystem";  ///< filesystem (parcels under path) | postgres (tables at url)
  std::string url;                     ///< postgres: libpq URI/conninfo; "": everything from the PG* variables
  std::string schema = "troupe";       ///< postgres: the SQL schema of troupe's tables
  std::string path = "./deposit";
  std::string fallback_path;  ///< where a soft quit writes what the deposit refused; "": $TMPDIR/troupe-rescue
};

/// `[commander]`
struct commander_settings {
  double user_expiry_hours = 720;
  double guest_expiry_hours = 24;
  std::string durability = "freeze";             ///< global store: freeze (at soft quit) | reply (before each ack)
  std::uint64_t global_max_value_bytes = 1048576; ///< a larger global value is refused (413)
  std::uint64_t global_max_waiters = 1024;       ///< requesters queued per key for a lease; 503 past it
  double global_max_lease_seconds = 600;         ///< a longer lease TTL is refused (400)
  std::string orchestration_log;                 ///< JSON lines of operator actions; "": <deposit.path>/orchestration.log
  std::uint64_t orchestration_log_max_bytes = 10485760;  ///< rotated past this size
  std::uint64_t orchestration_log_files = 5;     ///< rotated files kept (orchestration.log.1 …)
  std::string default_group;                     ///< where a newcomer is born; "": the first [[group]]
};

/// `[cluster]` (docs/CLUSTER.md). With `listen` empty the node is alone: no
/// middleman port is opened and nothing of this section is used.
struct cluster_settings {
  std::string listen;                      ///< HOST:PORT of the node-to-node listener; "": not a cluster member
  std::string name = "troupe";             ///< the cluster's name: a node of another cluster is refused at join
  std::string join;                        ///< HOST:PORT of any member to join (--join); "": start a new cluster
  std::uint64_t heartbeat_interval_ms = 500;  ///< every member tells every other it is alive this often
  std::uint64_t failure_timeout_ms = 3000;    ///< a member not heard from for this long is declared down
  std::uint64_t join_timeout_ms = 10000;      ///< joining (reaching the member, the member list, each peer) gives up after this
  std::string tls_cert;                    ///< PEM certificate of this node (node-to-node TLS; needs tls_key and tls_ca)
  std::string tls_key;                     ///< PEM private key of tls_cert
  std::string tls_ca;                      ///< PEM CA certificate(s) every member's certificate must chain to
  bool allow_plaintext = false;            ///< a non-loopback listen without TLS is refused unless true
  /// True when the node is a cluster member.
  bool enabled() const noexcept { return !listen.empty(); }
};

/// One `[[group]]` entry.
struct group_settings {
  std::string name = "default";
  std::string user_type = "notes";
  std::string isolation = "thread";         ///< thread (workers are actors in the node) | process (an OS process each)
  int workers = 1;                          ///< workers the group keeps started at least
  int worker_max_number = 0;                ///< workers the group may grow to; 0: max(8, workers) (see max_workers())
  double worker_min_life_seconds = 60;      ///< a worker younger than this is never retired
  double cpu_retirement_quiet_seconds = 30; ///< a worker with no users is retired once the group's CPU was quiet this long
  double user_idle_freeze_minutes = 30;
  std::string durability = "freeze";        ///< freeze | interval | reply
  double checkpoint_seconds = 5;
  int max_restarts = 5;                     ///< worker restarts of the group within restart_window_seconds; past it: degraded
  double restart_window_seconds = 10;
  double recovery_interval_seconds = 30;    ///< a degraded group tries again after this long; 0: never (until restart)
  int max_user_restarts = 5;                ///< crashes of one user within restart_window_seconds; reaching it: quarantined
  double stuck_timeout_seconds = 10;        ///< process: a worker not answering heartbeats this long is killed and replaced
  int permanent_failure_exitcode = 0;       ///< process: a worker exiting with this code parks its slot; 0: off
  double memory_max_percent = 90;           ///< of the machine's memory, for the group
  double worker_memory_admission_percent = 90;  ///< of a worker's share (group budget / worker_max_number): stops admitting
  double restart_occupancy_max_percent = 100;   ///< process: past this of its share, a worker is replaced (users frozen first); 0: off
  double cpu_admission_close_percent = 0;   ///< a worker hotter than this (% of one core) is closed to newcomers; 0: off
  double cpu_admission_reopen_percent = 0;  ///< ... and reopens below this (> 0 and < close when CPU admission is on)
  double cpu_offload_percent = 0;           ///< a closed worker hotter than this freezes its least busy user each beat; 0: off
  double cpu_heating_seconds = 1;           ///< the CPU filter's time constant upwards
  double cpu_cooling_seconds = 5;           ///< ... and downwards
  double worker_admission_interval_seconds = 1;  ///< a worker that just admitted a newcomer is skipped this long
  double guest_idle_seconds = 2;            ///< a guest who never changed his state is retired after this long idle
  /// A user idle this long rests: his actor stops and his state waits in his
  /// worker's memory, encoded, until his next request or message (no disk
  /// read); 0: never. Only below user_idle_freeze_minutes does it matter.
  double rest_idle_seconds = 60;

  /// The workers the group may grow to: worker_max_number, or max(8, workers) when it is 0.
  int max_workers() const noexcept { return worker_max_number > 0 ? worker_max_number : (workers > 8 ? workers : 8); }
  bool process_isolation() const noexcept { return isolation == "process"; }
};

/// The effective settings of one node.
struct recipe {
  node_settings node;
  limits_settings limits;
  deposit_settings deposit;
  commander_settings commander;
  cluster_settings cluster;
  channel_settings channel;
  log_settings log;
  std::vector<group_settings> groups{group_settings{}};  ///< never empty; "default" first if present

  /// The group called `name`, or nullptr.
  const group_settings* group(const std::string& name) const;
  /// The group a newcomer is born in: commander.default_group, else the first.
  const group_settings& default_group() const;
};

/// Where the pieces of a recipe come from, lowest precedence first.
struct recipe_sources {
  std::string file;                                      ///< TOML recipe; empty: none
  std::vector<std::pair<std::string, std::string>> env;  ///< (NAME, VALUE) of TROUPE_* variables
  std::vector<std::string> sets;                         ///< "KEY=VALUE" from --set, in order
};

/// Composes defaults ⊕ file ⊕ env ⊕ sets and validates the result.
/// Throws recipe_error naming the first bad key (unknown key, wrong type,
/// out-of-range value, unparsable file).
recipe load_recipe(const recipe_sources& sources);

/// The TROUPE_* variables of this process's environment, for recipe_sources::env.
std::vector<std::pair<std::string, std::string>> troupe_environment();

/// Checks the settings' ranges and enumerations; throws recipe_error.
void validate(const recipe& r);

/// Splits "HOST:PORT" ("[::1]:80" for IPv6); throws recipe_error(key, ...).
/// The host comes back without brackets ("::1"), ready for an address parser or resolver.
std::pair<std::string, std::uint16_t> split_listen(const std::string& listen, const std::string& key = "node.listen");

}  // namespace troupe::config
