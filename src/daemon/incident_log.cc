#include "daemon/incident_log.h"

#include <set>

namespace chamber::daemon {
namespace {

// An open incident says what the backend knows of its fault: the rule, the readings and what was
// done. A GPU marked unhealthy without a known fault (by hand, or a fence restored from an
// earlier leader) still says what was done; a fault known once is kept while the GPU stays out
// (a probation outlives the agent's incident).
void DescribeFault(Incident& inc, const std::unordered_map<std::string, GpuFault>& faults) {
  const std::string where = "GPU " + std::to_string(inc.gpu_index) + " on " + inc.node;
  auto f = faults.find(inc.uuid);
  if (f == faults.end()) {
    if (!inc.evidence.empty()) return;
    inc.message = where +
                  " is marked unhealthy (no fault evidence reported); excluded from "
                  "scheduling";
    ActionEvidence fenced;
    fenced.gpu_fenced = true;
    inc.evidence = {fenced};
    return;
  }
  inc.cause = f->second.cause;
  inc.severity = f->second.severity;
  inc.message = where + ": " + f->second.message;
  inc.evidence = f->second.evidence;
}

}  // namespace

void IncidentLog::Observe(const core::Snapshot& s,
                          const std::unordered_map<std::string, GpuFault>& faults, int64_t now) {
  std::set<std::string> unhealthy_now;
  for (const core::Node& node : s.nodes) {
    for (size_t g = 0; g < node.gpus.size(); ++g) {
      const core::Gpu& gpu = node.gpus[g];
      if (gpu.healthy) continue;
      unhealthy_now.insert(gpu.uuid);
      auto open = open_.find(gpu.uuid);
      if (open == open_.end()) {
        Incident inc;
        inc.time_ms = now;
        inc.node = node.name;
        inc.gpu_index = static_cast<int32_t>(g);
        inc.uuid = gpu.uuid;
        open = open_.emplace(gpu.uuid, incidents_.size()).first;
        incidents_.push_back(std::move(inc));
      }
      DescribeFault(incidents_[open->second], faults);
    }
  }
  for (auto it = open_.begin(); it != open_.end();) {
    if (unhealthy_now.contains(it->first)) {
      ++it;
      continue;
    }
    incidents_[it->second].resolved_ms = now;
    it = open_.erase(it);
  }
  if (incidents_.size() > max_kept_ * 2) {
    // Drop the oldest resolved incidents; open ones are kept.
    std::vector<Incident> kept;
    const size_t drop = incidents_.size() - max_kept_;
    for (size_t i = 0; i < incidents_.size(); ++i)
      if (i >= drop || !incidents_[i].resolved_ms) kept.push_back(incidents_[i]);
    incidents_ = std::move(kept);
    open_.clear();
    for (size_t i = 0; i < incidents_.size(); ++i)
      if (!incidents_[i].resolved_ms) open_[incidents_[i].uuid] = i;
  }
}

std::vector<Incident> IncidentLog::Latest(size_t n) const {
  std::vector<Incident> out;
  for (size_t i = incidents_.size(); i-- > 0 && out.size() < n;) out.push_back(incidents_[i]);
  return out;
}

}  // namespace chamber::daemon
