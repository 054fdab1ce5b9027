// Xid lines in the kernel log. The NVIDIA driver logs every Xid as
//   NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.
// The agent reads the log once at start to catch Xids from before its NVML event registration;
// after that the NVML event set delivers them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace chamber::agent {

struct XidLogEntry {
  std::string pci_bus_id;  // as logged: "0000:3b:00"
  unsigned xid = 0;
  std::optional<long> pid;
  std::string message;  // the text after "<xid>, ", pid included
};

// Parses one line of /dev/kmsg ("4,1234,5678,-;NVRM: Xid ..."), dmesg ("[  12.3] NVRM: Xid
// ...") or syslog ("Oct 15 12:40:10 host kernel: NVRM: Xid ..."). Nullopt for any other line.
std::optional<XidLogEntry> ParseXidLine(std::string_view line);

// Reads every Xid line of the log at `path`: /dev/kmsg (read without blocking, up to the newest
// record) or a file of dmesg or syslog lines. NotFound/Unavailable when it cannot be read.
Result<std::vector<XidLogEntry>> ScanKernelLog(const std::string& path);

}  // namespace chamber::agent
