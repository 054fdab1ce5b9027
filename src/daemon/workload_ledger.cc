#include "daemon/workload_ledger.h"

#include <algorithm>
#include <set>

namespace chamber::daemon {
namespace {

fleet::WorkloadPhase PhaseOf(core::WorkloadState s) {
  switch (s) {
    case core::WorkloadState::kPending:
      return fleet::WorkloadPhase::kPending;
    case core::WorkloadState::kRunning:
      return fleet::WorkloadPhase::kRunning;
    case core::WorkloadState::kPreempting:
      return fleet::WorkloadPhase::kPreempting;
    case core::WorkloadState::kSuspended:
      return fleet::WorkloadPhase::kSuspended;
  }
  return fleet::WorkloadPhase::kPending;
}

fleet::PreemptionReason ReasonOf(core::PreemptReason r) {
  switch (r) {
    case core::PreemptReason::kReclaim:
      return fleet::PreemptionReason::kReclaim;
    case core::PreemptReason::kPriority:
      return fleet::PreemptionReason::kPriority;
    case core::PreemptReason::kHardwareFault:
      return fleet::PreemptionReason::kHardwareFault;
  }
  return fleet::PreemptionReason::kReclaim;
}

// The node of a decision's first placed pod; -1 when none is placed.
int32_t FirstNode(const std::vector<core::PodAssignment>& pods) {
  for (const core::PodAssignment& a : pods)
    if (a.placement.node.valid()) return a.placement.node.value;
  return -1;
}

}  // namespace

void WorkloadLedger::NoteDecisions(const core::Snapshot& snap, const core::CycleResult& result) {
  ++cycle_;
  pending_.clear();
  for (const core::PendingDecision& p : result.pending)
    pending_[snap.workloads[p.workload.index()].name] = fleet::PendingWhy{
        std::string(core::PendingReasonName(p.reason)), p.message(), p.queue_position, p.details()};
  noted_starts_.clear();
  for (const core::BindDecision& b : result.binds) {
    const core::Workload& w = snap.workloads[b.workload.index()];
    NoteBorrowing(w.name, b.borrowing);
    // A workload preempted before starts again: its wait since submission is not a queue wait.
    if (!w.recent_preemptions.empty() || losses_.contains(w.name)) continue;
    fleet::StartRecord r;
    r.wait_seconds = static_cast<double>((snap.now - w.submit_time).count()) / 1000;
    r.queue = w.queue;
    noted_starts_.push_back({std::move(r), FirstNode(b.pods)});
  }
  for (const core::ResumeDecision& r : result.resumes)
    NoteBorrowing(snap.workloads[r.workload.index()].name, r.borrowing);
  noted_preemptions_.clear();
  for (const core::PreemptDecision& p : result.preemptions) {
    const core::Workload& w = snap.workloads[p.workload.index()];
    // A run is preempted once: the engine decides again while the cluster has not yet acted
    // (a suspend still on its way, a workload on a failed GPU until it stops).
    if (auto it = losses_.find(w.name);
        it != losses_.end() && it->second.preempted_run == w.start_time.count())
      continue;
    fleet::PreemptionRecord r;
    r.workload = w.name;
    r.queue = w.queue;
    r.reason = ReasonOf(p.reason);
    r.gpu_hours_lost = p.gpu_hours_lost;
    int32_t node = -1;
    for (const core::PodPlacement& pl : w.placements)
      if (pl.node.valid() && node < 0) node = pl.node.value;
    noted_preemptions_.push_back({std::move(r), node, w.start_time.count(), p.workload.index()});
  }
}

WorkloadLedger::Losses& WorkloadLedger::LossesOf(const Observation& obs, size_t workload,
                                                 const std::string& name) {
  auto [it, inserted] = losses_.try_emplace(name);
  if (inserted && workload < obs.stored_losses.size()) {
    it->second.preemptions = obs.stored_losses[workload].preemptions;
    it->second.gpu_hours_lost = obs.stored_losses[workload].gpu_hours_lost;
  }
  return it->second;
}

void WorkloadLedger::Record(const Observation& obs, int64_t now) {
  auto pool_of = [&obs](int32_t node) {
    return node >= 0 && static_cast<size_t>(node) < obs.node_pool.size() ? obs.node_pool[node] : -1;
  };
  for (NotedStart& n : noted_starts_) {
    n.record.time = now;
    n.record.pool = pool_of(n.node);
    starts_.push_back(std::move(n.record));
  }
  noted_starts_.clear();
  for (NotedPreemption& n : noted_preemptions_) {
    fleet::PreemptionRecord& r = n.record;
    r.time = now;
    r.pool = pool_of(n.node);
    fleet::AddPreemption(preemption_totals_, r);
    Losses& l = LossesOf(obs, n.workload, r.workload);
    l.preempted_run = n.run;
    l.preemptions += 1;
    l.gpu_hours_lost += r.gpu_hours_lost;
    l.history.push_back(r);
    if (l.history.size() > kPreemptionHistory) l.history.pop_front();
    preemptions_.push_back(std::move(r));
  }
  noted_preemptions_.clear();
  const int64_t window_start = now - window_ms_;
  while (!starts_.empty() && starts_.front().time <= window_start) starts_.pop_front();
  while (!preemptions_.empty() && preemptions_.front().time <= window_start)
    preemptions_.pop_front();
}

void WorkloadLedger::NoteBorrowing(const std::string& workload, bool borrowing) {
  if (borrowing) {
    borrowing_[workload] = 0;
  } else {
    borrowing_.erase(workload);
  }
}

const SharedItems<fleet::WorkloadInput>::Item* WorkloadLedger::Last(size_t index,
                                                                    const std::string& name) {
  if (index < last_.size() && last_[index].name == name) return &last_.item(index);
  if (last_index_.empty()) {
    for (size_t i = 0; i < last_.size(); ++i) last_index_.emplace(last_[i].name, i);
  }
  auto it = last_index_.find(name);
  return it == last_index_.end() ? nullptr : &last_.item(it->second);
}

SharedItems<fleet::WorkloadInput> WorkloadLedger::Workloads(Observation& obs) {
  const core::Snapshot& s = *obs.snapshot;
  SharedItems<fleet::WorkloadInput> out;
  ++sweep_;
  out.reserve(s.workloads.size());
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const core::Workload& w = s.workloads[i];
    fleet::WorkloadInput wi;
    wi.name = w.name;
    wi.queue = w.queue;
    wi.priority = w.priority;
    wi.phase = PhaseOf(w.state);
    wi.gpu_milli = w.TotalRequest().gpu_milli();
    for (const core::PodSet& ps : w.pod_sets) {
      if (!ps.mig.any() || static_cast<size_t>(ps.mig.profile) >= s.mig_profiles.size()) continue;
      const std::string& profile = s.mig_profiles[static_cast<size_t>(ps.mig.profile)].name;
      auto it = std::find_if(wi.mig_devices.begin(), wi.mig_devices.end(),
                             [&](const auto& d) { return d.first == profile; });
      if (it == wi.mig_devices.end())
        it = wi.mig_devices.insert(wi.mig_devices.end(), {profile, 0});
      it->second += ps.count * ps.mig.devices;
    }
    wi.submitted = obs.clock_offset_ms + w.submit_time.count();
    wi.reserved = w.reserved();
    if (i < obs.workload_pods.size()) wi.pods = std::move(obs.workload_pods[i]);
    wi.bare_pod = i < obs.bare_pods.size() && obs.bare_pods[i];
    for (const core::Time t : w.recent_preemptions)
      wi.preemptions.push_back(obs.clock_offset_ms + t.count());
    Losses* losses = nullptr;
    if (i < obs.stored_losses.size() && obs.stored_losses[i].preemptions > 0) {
      losses = &LossesOf(obs, i, w.name);
    } else if (!losses_.empty()) {
      if (auto it = losses_.find(w.name); it != losses_.end()) losses = &it->second;
    }
    if (losses != nullptr) {
      losses->seen_cycle = cycle_;
      wi.preemption_count = losses->preemptions;
      wi.gpu_hours_lost = losses->gpu_hours_lost;
      wi.preemption_history.assign(losses->history.begin(), losses->history.end());
    }
    const bool holding =
        w.state == core::WorkloadState::kRunning || w.state == core::WorkloadState::kPreempting;
    if (holding) {
      wi.started = obs.clock_offset_ms + w.start_time.count();
      if (auto it = borrowing_.find(w.name); it != borrowing_.end()) {
        wi.borrowing = true;
        it->second = sweep_;
      }
      std::set<int32_t> nodes;
      for (const core::PodPlacement& p : w.placements)
        if (p.node.valid() && p.node.index() < s.nodes.size()) nodes.insert(p.node.value);
      for (int32_t n : nodes) wi.nodes.push_back(s.nodes[n].name);
    } else if (auto it = pending_.find(w.name); it != pending_.end()) {
      wi.pending = it->second;
    }
    const SharedItems<fleet::WorkloadInput>::Item* last = Last(i, wi.name);
    if (last != nullptr && **last == wi) {
      out.Add(*last);
    } else {
      out.Add(std::move(wi));
    }
  }
  std::erase_if(borrowing_, [&](const auto& kv) { return kv.second != sweep_; });
  std::erase_if(losses_, [&](const auto& kv) { return kv.second.seen_cycle != cycle_; });
  last_index_.clear();
  last_ = out;
  return out;
}

}  // namespace chamber::daemon
