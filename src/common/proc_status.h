// Figures of a running process from Linux's /proc/<pid>/status.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

namespace chamber {

// The "<field>" line of /proc/<pid>/status in KiB, e.g. "VmRSS:" (the resident set now) or
// "VmHWM:" (its peak); pid 0 reads this process. 0 when the file or the line is absent.
inline int64_t ProcStatusKib(pid_t pid, std::string_view field) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/status")
                            : "/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with(field)) return std::stoll(line.substr(field.size()));
  return 0;
}

}  // namespace chamber
