// Xid lines of the kernel log (agent/xid_log.h, ParseXidLine): /dev/kmsg, dmesg and syslog
// lines the agent reads at start. Each line of the input is one log line. Properties: an Xid
// that reads has a PCI address of hex digits, colons and dots, and a pid (when there is one)
// that is not negative.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "agent/xid_log.h"
#include "common/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = chamber::fuzz;
  std::string_view text = fuzz::Text(data, size);
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    const std::optional<chamber::agent::XidLogEntry> e = chamber::agent::ParseXidLine(line);
    if (!e) continue;
    fuzz::Check(!e->pci_bus_id.empty() && e->pci_bus_id.find_first_not_of(
                                              "0123456789abcdefABCDEF:.") == std::string::npos,
                "a PCI address with other characters", e->pci_bus_id);
    fuzz::Check(!e->pid || *e->pid >= 0, "a negative pid");
  }
  return 0;
}
