#include "cli/workload_text.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include "cli/api_client.h"
#include "daemon/http_server.h"

namespace chamber::cli {

using nlohmann::json;

namespace {

std::string Str(const json& v) { return v.is_string() ? v.get<std::string>() : std::string(); }

std::string Join(const json& items, size_t max) {
  std::string out;
  size_t n = 0;
  for (const json& i : items) {
    if (n == max) {
      out += ", and " + std::to_string(items.size() - max) + " more";
      break;
    }
    if (n++ > 0) out += ", ";
    out += Str(i);
  }
  return out;
}

std::string Gpus(double n) { return GpuAmount(n) + (n == 1 ? " GPU" : " GPUs"); }

// A wait percentile of the last hour; "-" when no workload started in it.
std::string Wait(const json& x, const char* field) {
  if (x.value("started_last_hour", 0) == 0 || !x.value(field, json()).is_number()) return "-";
  return DurationText(x.at(field).get<double>());
}

std::string GpuHours(double h) { return Number(h) + (h == 1 ? " GPU-hour" : " GPU-hours"); }

}  // namespace

std::vector<std::pair<size_t, int>> QueueTreeOrder(const json& queues) {
  std::map<std::string, size_t> index;
  for (size_t q = 0; q < queues.size(); ++q) index.emplace(Str(queues[q].value("name", json())), q);
  std::vector<std::vector<size_t>> children(queues.size());
  std::vector<size_t> roots;
  for (size_t q = 0; q < queues.size(); ++q) {
    const std::string parent = Str(queues[q].value("parent", json()));
    auto it = parent.empty() ? index.end() : index.find(parent);
    if (it == index.end() || it->second == q)
      roots.push_back(q);
    else
      children[it->second].push_back(q);
  }
  std::vector<std::pair<size_t, int>> out;
  std::vector<bool> seen(queues.size(), false);
  std::function<void(size_t, int)> visit = [&](size_t q, int depth) {
    if (seen[q]) return;
    seen[q] = true;
    out.emplace_back(q, depth);
    for (size_t c : children[q]) visit(c, depth + 1);
  };
  for (size_t r : roots) visit(r, 0);
  // Queues in a parent cycle are reachable from no root.
  for (size_t q = 0; q < queues.size(); ++q) visit(q, 0);
  return out;
}

std::vector<std::vector<std::string>> QueueRows(const json& queues) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& [q, depth] : QueueTreeOrder(queues)) {
    const json& x = queues[q];
    const json& limit = x.at("limit");
    rows.push_back({std::string(2 * static_cast<size_t>(depth), ' ') + Str(x.at("name")),
                    x.at("parent").is_null() ? "-" : Str(x.at("parent")), Number(x.at("quota")),
                    limit.is_null() ? "-" : Number(limit), Number(x.at("allocated")),
                    Number(x.at("fair_share")), Number(x.at("borrowed")), Number(x.at("lent")),
                    Number(x.at("pending_workloads")), Number(x.at("running_workloads")),
                    Wait(x, "wait_p50_seconds"), Wait(x, "wait_p95_seconds"),
                    Number(x.value("preemptions_last_hour", 0.0)),
                    Number(x.value("gpu_hours_lost_last_hour", 0.0))});
  }
  return rows;
}

double SecondsBetween(const std::string& from, const std::string& to) {
  Result<int64_t> a = daemon::ParseTimeParam(from);
  Result<int64_t> b = daemon::ParseTimeParam(to);
  if (!a.ok() || !b.ok()) return 0;
  return static_cast<double>(*b - *a);
}

std::vector<std::string> WorkloadRow(const json& w, const std::string& now) {
  std::string priority = std::to_string(w.at("priority").get<int64_t>());
  if (w.value("reserved", false)) priority += " (reserved)";
  std::string reason = Str(w.at("pending_reason"));
  if (reason.empty()) reason = w.value("borrowing", false) ? "borrowing" : "-";
  const std::string lost = w.value("preemption_count", 0) > 0
                               ? Number(w.value("gpu_hours_lost", 0.0))
                               : std::string("-");
  return {Str(w.at("name")),
          Str(w.at("queue")),
          Str(w.at("state")),
          GpuAmount(w.at("gpus")),
          priority,
          DurationText(std::max(0.0, SecondsBetween(Str(w.at("submitted")), now))),
          lost,
          reason};
}

std::string ExplainWorkload(const json& d) {
  const json& w = d.at("workload");
  const json& q = d.at("queue");
  const std::string name = Str(w.at("name"));
  const std::string queue = Str(w.at("queue"));
  const std::string state = Str(w.at("state"));
  const std::string now = Str(d.at("time"));
  std::string out;
  if (!d.value("pod", json()).is_null())
    out += "Pod " + Str(d.at("pod")) + " belongs to workload " + name + ".\n";

  auto waiting_line = [&](const std::string& what) {
    std::string line = name + " is " + what + " in queue " + queue;
    if (w.at("queue_position").is_number()) {
      line += " (position " + std::to_string(w.at("queue_position").get<int64_t>());
      if (q.is_object()) line += " of " + Number(q.at("pending_workloads"));
      line += ")";
    }
    if (w.at("pending_reason").is_string()) {
      line += ": " + Str(w.at("pending_reason"));
      if (w.at("pending_message").is_string() && !Str(w.at("pending_message")).empty())
        line += " \u2014 " + Str(w.at("pending_message"));
    } else {
      line += "; no scheduling cycle has explained it yet";
    }
    return line + "\n";
  };
  if (state == "pending") {
    out += waiting_line("pending");
  } else if (state == "suspended") {
    out += waiting_line("suspended (preempted, waiting to resume)");
  } else if (state == "running") {
    out += name + " is running in queue " + queue + " on " + Join(w.at("nodes"), 8);
    if (w.at("started").is_string())
      out += " since " + Str(w.at("started")) + " (" +
             DurationText(std::max(0.0, SecondsBetween(Str(w.at("started")), now))) + ")";
    out += w.value("borrowing", false) ? ", borrowing beyond its queue's quota.\n"
                                       : ", within its queue's quota.\n";
  } else {
    out += name + " is being preempted in queue " + queue + ": it still holds GPUs on " +
           Join(w.at("nodes"), 8) + " while it releases them.\n";
  }
  for (const json& line : w.value("pending_details", json::array())) out += "  " + Str(line) + "\n";

  const auto gpus = w.at("gpus").get<double>();
  std::string mig;
  const json mig_devices = w.value("mig_devices", json::object());
  for (const auto& [profile, count] : mig_devices.items()) {
    const int64_t n = count.get<int64_t>();
    mig += (mig.empty() ? " as " : " and ") + std::to_string(n) + " MIG " + profile +
           (n == 1 ? " device" : " devices");
  }
  out += "It asks for " + Gpus(gpus) + mig + " at priority " +
         std::to_string(w.at("priority").get<int64_t>()) +
         (w.value("reserved", false) ? " (reserved: runs within quota, never preempted)"
                                     : " (elastic: may borrow beyond quota and be preempted)") +
         "; submitted " + Str(w.at("submitted"));
  if (state == "pending" || state == "suspended")
    out += ", waiting " + DurationText(std::max(0.0, SecondsBetween(Str(w.at("submitted")), now)));
  out += ".\n";
  const json preemptions = w.value("preemptions", json::array());
  if (!preemptions.empty())
    out += "Preempted " + std::to_string(preemptions.size()) +
           (preemptions.size() == 1 ? " time" : " times") + " before: " + Join(preemptions, 5) +
           ".\n";
  if (const int64_t count = w.value("preemption_count", int64_t{0}); count > 0) {
    out += "Its " + std::to_string(count) + (count == 1 ? " preemption" : " preemptions") +
           " lost " + GpuHours(w.value("gpu_hours_lost", 0.0)) + " of work";
    const json history = w.value("preemption_history", json::array());
    const size_t shown = std::min<size_t>(history.size(), 5);
    if (shown > 0) {
      out += static_cast<size_t>(count) > shown ? " (the latest " + std::to_string(shown) + "): "
                                                : ": ";
      for (size_t i = history.size() - shown; i < history.size(); ++i) {
        const json& p = history[i];
        if (i > history.size() - shown) out += ", ";
        out += Str(p.value("time", json())) + " " + Str(p.value("reason", json())) + " (" +
               GpuHours(p.value("gpu_hours_lost", 0.0)) + ")";
      }
    }
    out += ".\n";
  }
  const json pods = w.value("pods", json::array());
  if (!pods.empty()) out += "Pods: " + Join(pods, 10) + ".\n";

  if (!q.is_object()) {
    out += "Queue " + queue + " is not known to the scheduler.\n";
    return out;
  }
  out += "Queue " + queue + ": quota " + Gpus(q.at("quota").get<double>()) + ", limit " +
         (q.at("limit").is_null() ? std::string("none") : Number(q.at("limit"))) + ", allocated " +
         Number(q.at("allocated")) + " (borrowed " + Number(q.at("borrowed")) + ", lent " +
         Number(q.at("lent")) + "), fair share " + Number(q.at("fair_share")) + "; " +
         Number(q.at("pending_workloads")) + " waiting, " + Number(q.at("running_workloads")) +
         " running.\n";
  if (q.at("error").is_string()) out += "The queue is rejected: " + Str(q.at("error")) + "\n";
  return out;
}

std::string UrlEncode(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace chamber::cli
