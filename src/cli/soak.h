// `chamber soak`: the demo's simulated fleet under the real daemon loop and API server, run as
// fast as it goes for many simulated hours, sampling the process as it runs
// (docs/reliability.md, "Soak").
//
// What is judged, on the samples after the warm-up. Memory and cycle time follow the work the
// daemon holds (running and pending workloads), which a production-like trace never keeps still:
// its arrivals follow the day and its long jobs pile up for days. What must not grow is what that
// work does not explain, so each is fitted by least squares as
//     value = a + b * workloads + c * hours
// and judged by c: the growth over the judged hours, c * (last - first), against the value's
// mean. Open files must not grow at all, beyond sockets the server is still closing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace chamber::cli {

struct SoakSample {
  double hours = 0;  // simulated hours since the start
  int64_t cycles = 0;
  double rss_mib = 0;
  double heap_mib = 0;  // allocated and not freed (malloc's own count): what the process holds
  int64_t open_files = 0;
  double history_mib = 0;  // the history database and its write-ahead log
  int64_t running = 0;     // workloads running and waiting: the work the cycle goes through
  int64_t pending = 0;
  double cycle_ms_p50 = 0;  // wall time of the cycles since the previous sample
  double cycle_ms_p95 = 0;
};

struct SoakLimits {
  double warmup_hours = 4;
  double max_heap_growth = 0.05;      // unexplained growth, as a fraction of the mean heap
  double max_rss_growth = 0.05;       // the same for RSS, which adds what malloc keeps
  int64_t max_open_files_growth = 8;  // over the number at the end of the warm-up
  double max_cycle_growth = 0.5;      // unexplained growth, as a fraction of the mean cycle p50
};

// value = a + per_workload * workloads + per_hour * hours, fitted by least squares. Without the
// workloads term when they hardly vary (they would explain nothing the constant does not).
struct SoakTrend {
  double per_workload = 0;
  double per_hour = 0;
  double mean = 0;
};
SoakTrend FitSoakTrend(const std::vector<SoakSample>& samples, double SoakSample::*value);

struct SoakCheck {
  std::string name;
  std::string detail;  // the figures behind the verdict, in words
  bool ok = false;
};

// The checks on samples taken in time order. Fails every check when fewer than two samples
// fall after the warm-up (nothing to judge).
std::vector<SoakCheck> JudgeSoak(const std::vector<SoakSample>& samples, const SoakLimits& limits);

nlohmann::json SoakJson(const std::vector<SoakSample>& samples,
                        const std::vector<SoakCheck>& checks, const nlohmann::json& options);

// Two panels against simulated hours, the warm-up shaded: RSS, and cycle time (p50 and p95).
std::string SoakSvg(const std::vector<SoakSample>& samples, double warmup_hours,
                    const std::string& title);

}  // namespace chamber::cli
