// CPU time of the calling thread, for figures that should not depend on how busy the machine's
// other processes keep its cores (wall time does).
#pragma once

#include <ctime>

namespace chamber {

inline double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

}  // namespace chamber
