#pragma once
/// \file
/// One section of the node's recipe (config/recipe.hpp composes them): a source
/// that reads only this section includes only this header, so a changed field
/// recompiles only its readers.

#include <string>

namespace troupe::config {

/// One `[[group]]` entry.
struct group_settings {
  std::string name = "default";
  std::string user_type = "notes";
  std::string isolation = "thread";         ///< thread (workers are actors in the node) | process (an OS process each)
  int workers = 1;                          ///< workers the group keeps started at least
  int worker_max_number = 0;
  int worker_max_users = 0;                 ///< users one worker hosts at most (admission refuses past it); 0: no cap                ///< workers the group may grow to; 0: max(8, workers) (see max_workers())
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

}  // namespace troupe::config
