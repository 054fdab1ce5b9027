#include "core/io/result_json.h"

#include <bit>

namespace chamber::core::io {
namespace {

using nlohmann::json;

json ResourcesJson(const Resources& r) {
  return json{{"gpu", GpuAmountJson(r.gpu_milli())},
              {"cpuMilli", r.cpu_milli()},
              {"memoryBytes", r.memory_bytes()}};
}

json PodsJson(const Snapshot& s, const Workload& w, const std::vector<PodAssignment>& pods) {
  json out = json::array();
  for (const PodAssignment& a : pods) {
    json gpus = json::array();
    for (uint64_t m = a.placement.gpu_mask; m != 0; m &= m - 1) gpus.push_back(std::countr_zero(m));
    const PodSet& ps = w.pod_sets[static_cast<size_t>(a.pod_set)];
    out.push_back({{"podSet", ps.name},
                   {"replica", a.replica},
                   {"node", s.nodes[a.placement.node.index()].name},
                   {"gpus", std::move(gpus)}});
  }
  return out;
}

}  // namespace

json GpuAmountJson(int64_t milli) {
  if (milli % kMilliPerGpu == 0) return milli / kMilliPerGpu;
  return GpusOf(milli);
}

json CycleResultToJson(const Snapshot& s, const CycleResult& r) {
  auto name = [&](WorkloadId w) { return s.workloads[w.index()].name; };
  json binds = json::array();
  for (const BindDecision& b : r.binds)
    binds.push_back({{"workload", name(b.workload)},
                     {"borrowing", b.borrowing},
                     {"pods", PodsJson(s, s.workloads[b.workload.index()], b.pods)}});
  json resumes = json::array();
  for (const ResumeDecision& b : r.resumes)
    resumes.push_back({{"workload", name(b.workload)},
                       {"borrowing", b.borrowing},
                       {"pods", PodsJson(s, s.workloads[b.workload.index()], b.pods)}});
  json preemptions = json::array();
  for (const PreemptDecision& p : r.preemptions)
    preemptions.push_back({{"workload", name(p.workload)},
                           {"reason", PreemptReasonName(p.reason)},
                           {"preemptor", p.preemptor.valid() ? json(name(p.preemptor)) : json()},
                           {"graceSeconds", p.grace_seconds},
                           {"gpuHoursLost", p.gpu_hours_lost},
                           {"message", p.message}});
  json nominations = json::array();
  for (const NominationDecision& n : r.nominations)
    nominations.push_back({{"workload", name(n.workload)},
                           {"pods", PodsJson(s, s.workloads[n.workload.index()], n.pods)}});
  json pending = json::array();
  for (const PendingDecision& p : r.pending)
    pending.push_back({{"workload", name(p.workload)},
                       {"reason", PendingReasonName(p.reason)},
                       {"message", p.message()},
                       {"details", p.details()},
                       {"queuePosition", p.queue_position}});
  json queues = json::array();
  for (const QueueStatus& q : r.queues) {
    json fair = {{"gpu", q.fair_share[0] / kMilliPerGpu},
                 {"cpuMilli", q.fair_share[1]},
                 {"memoryBytes", q.fair_share[2]}};
    json entry = {{"name", q.name},
                  {"allocated", ResourcesJson(q.allocated)},
                  {"fairShare", std::move(fair)},
                  {"borrowed", ResourcesJson(q.borrowed)},
                  {"lent", ResourcesJson(q.lent)},
                  {"pendingWorkloads", q.pending_workloads},
                  {"runningWorkloads", q.running_workloads}};
    if (!q.error.empty()) entry["error"] = q.error;
    queues.push_back(std::move(entry));
  }
  json issues = json::array();
  for (const SnapshotIssue& i : r.issues)
    issues.push_back({{"object", i.object}, {"message", i.message}});
  return json{{"binds", std::move(binds)},
              {"resumes", std::move(resumes)},
              {"preemptions", std::move(preemptions)},
              {"nominations", std::move(nominations)},
              {"pending", std::move(pending)},
              {"queues", std::move(queues)},
              {"issues", std::move(issues)},
              {"stats",
               {{"workloadsConsidered", r.stats.workloads_considered},
                {"placementAttempts", r.stats.placement_attempts},
                {"placementCacheHits", r.stats.placement_cache_hits},
                {"preemptionSearches", r.stats.preemption_searches},
                {"indexedPreemptionSearches", r.stats.indexed_preemption_searches}}}};
}

}  // namespace chamber::core::io
