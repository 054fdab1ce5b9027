#include "agent/xid_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace chamber::agent {

namespace {

bool IsHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

void SkipSpaces(std::string_view& s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
}

}  // namespace

std::optional<XidLogEntry> ParseXidLine(std::string_view line) {
  constexpr std::string_view kMarker = "NVRM: Xid (";
  size_t at = line.find(kMarker);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view s = line.substr(at + kMarker.size());
  if (s.starts_with("PCI:")) s.remove_prefix(4);
  // The address: hex digits and colons (and a '.' before a function number), up to ')'.
  size_t close = s.find(')');
  if (close == std::string_view::npos || close == 0) return std::nullopt;
  std::string_view address = s.substr(0, close);
  for (char c : address) {
    if (!IsHex(c) && c != ':' && c != '.') return std::nullopt;
  }
  if (address.find(':') == std::string_view::npos) return std::nullopt;
  s.remove_prefix(close + 1);
  if (s.empty() || s.front() != ':') return std::nullopt;
  s.remove_prefix(1);
  SkipSpaces(s);
  if (s.empty() || !IsDigit(s.front())) return std::nullopt;
  unsigned xid = 0;
  while (!s.empty() && IsDigit(s.front())) {
    xid = xid * 10 + static_cast<unsigned>(s.front() - '0');
    if (xid > 100000) return std::nullopt;
    s.remove_prefix(1);
  }
  XidLogEntry entry;
  entry.pci_bus_id = std::string(address);
  entry.xid = xid;
  if (!s.empty() && s.front() == ',') s.remove_prefix(1);
  SkipSpaces(s);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) {
    s.remove_suffix(1);
  }
  entry.message = std::string(s);
  if (s.starts_with("pid=")) {
    std::string_view p = s.substr(4);
    if (!p.empty() && p.front() == '\'') p.remove_prefix(1);
    // Linux pids stay below 2^22; a number past kMaxPid is no pid, and is not read further
    // (it would overflow `long`).
    constexpr long kMaxPid = 1L << 30;
    long pid = 0;
    bool digits = false;
    while (!p.empty() && IsDigit(p.front()) && pid <= kMaxPid) {
      pid = pid * 10 + (p.front() - '0');
      digits = true;
      p.remove_prefix(1);
    }
    if (digits && pid <= kMaxPid) entry.pid = pid;
  }
  return entry;
}

Result<std::vector<XidLogEntry>> ScanKernelLog(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string why = fmt::format("cannot read kernel log {}: {}", path, std::strerror(err));
    return err == ENOENT ? Status::NotFound(why) : Status::Unavailable(why);
  }
  std::vector<XidLogEntry> entries;
  std::string pending;
  char buf[8192];
  for (;;) {
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR) continue;
      // /dev/kmsg: EPIPE when records were overwritten while reading; keep going.
      if (errno == EPIPE) continue;
      break;  // EAGAIN: no more records in /dev/kmsg
    }
    if (got == 0) break;
    pending.append(buf, static_cast<size_t>(got));
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (auto e = ParseXidLine(std::string_view(pending).substr(start, nl - start))) {
        entries.push_back(std::move(*e));
      }
    }
    pending.erase(0, start);
  }
  if (!pending.empty()) {
    if (auto e = ParseXidLine(pending)) entries.push_back(std::move(*e));
  }
  ::close(fd);
  return entries;
}

}  // namespace chamber::agent
