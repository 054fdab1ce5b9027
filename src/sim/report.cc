#include "sim/report.h"

#include <bit>

#include <fmt/format.h>

namespace chamber::sim {
namespace {

using nlohmann::json;

json SummaryJson(const Summary& s) {
  return json{{"count", s.count}, {"mean", s.mean}, {"p50", s.p50}, {"p99", s.p99}};
}

json SummaryMap(const std::map<std::string, Summary>& m) {
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = SummaryJson(v);
  return out;
}

}  // namespace

json MetricsToJson(const SimMetrics& m) {
  json queues = json::array();
  for (const QueueMetrics& q : m.queues)
    queues.push_back({{"name", q.name},
                      {"gpuHours", q.gpu_hours},
                      {"share", q.share},
                      {"entitlement", q.entitlement}});
  json series = json::array();
  for (const SeriesPoint& p : m.series)
    series.push_back({{"hours", p.hours},
                      {"allocatedGpus", p.allocated_gpus},
                      {"waitingJobs", p.waiting_jobs},
                      {"queueGpus", p.queue_gpus}});
  return json{{"policy", m.policy},
              {"capacityGpus", m.capacity_gpus},
              {"jobs", m.jobs},
              {"finished", m.finished},
              {"unfinished", m.unfinished},
              {"makespanHours", m.makespan_hours},
              {"allocation", m.allocation},
              {"allocationWhileWaiting", m.allocation_while_waiting},
              {"idleGpuHoursWhileQueued", m.idle_gpu_hours_while_queued},
              {"jctHours", SummaryJson(m.jct_hours)},
              {"waitHours", SummaryJson(m.wait_hours)},
              {"jctHoursByPriority", SummaryMap(m.jct_by_priority)},
              {"waitHoursByPriority", SummaryMap(m.wait_by_priority)},
              {"jctHoursByGang", SummaryMap(m.jct_by_gang)},
              {"waitHoursByGang", SummaryMap(m.wait_by_gang)},
              {"queues", std::move(queues)},
              {"jainIndex", m.jain_index},
              {"preemptions", m.preemptions},
              {"gpuFailures", m.gpu_failures},
              {"gpuHoursLostToPreemption", m.gpu_hours_lost_preemption},
              {"gpuHoursLostToFailures", m.gpu_hours_lost_failures},
              {"cycles", m.cycles},
              {"cycleMs", SummaryJson(m.cycle_ms)},
              {"runSeconds", m.run_seconds},
              {"series", std::move(series)}};
}

json ReportToJson(const RunInfo& info, const std::vector<SimMetrics>& runs) {
  json policies = json::array();
  for (const SimMetrics& m : runs) policies.push_back(MetricsToJson(m));
  return json{{"trace", info.trace},
              {"cluster", info.cluster},
              {"skippedLines", info.skipped_lines},
              {"fractionalGpus",
               {{"jobs", info.fractional_jobs},
                {"handling", info.fractional_jobs > 0 ? "placed as shares of one GPU" : "none"}}},
              {"policies", std::move(policies)}};
}

std::string ReportTable(const RunInfo& info, const std::vector<SimMetrics>& runs) {
  std::string out;
  if (runs.empty()) return out;
  const SimMetrics& first = runs.front();
  out += fmt::format("Trace {}: {} jobs on {} ({} GPUs)\n", info.trace, first.jobs, info.cluster,
                     first.capacity_gpus);
  if (info.skipped_lines > 0)
    out += fmt::format("Skipped {} malformed lines\n", info.skipped_lines);
  if (info.fractional_jobs > 0)
    out += fmt::format("{} jobs asked for a fraction of a GPU: placed as shares of one GPU\n",
                       info.fractional_jobs);
  out += "\n";
  auto row = [&](const std::string& label, auto value) {
    out += fmt::format("{:<30}", label);
    for (const SimMetrics& m : runs) out += fmt::format("{:>14}", value(m));
    out += "\n";
  };
  row("policy", [](const SimMetrics& m) { return m.policy; });
  row("finished / jobs",
      [](const SimMetrics& m) { return fmt::format("{}/{}", m.finished, m.jobs); });
  row("makespan (h)", [](const SimMetrics& m) { return fmt::format("{:.1f}", m.makespan_hours); });
  row("GPU allocation",
      [](const SimMetrics& m) { return fmt::format("{:.1f}%", 100 * m.allocation); });
  row("allocation while jobs wait",
      [](const SimMetrics& m) { return fmt::format("{:.1f}%", 100 * m.allocation_while_waiting); });
  row("idle GPU-h while queued",
      [](const SimMetrics& m) { return fmt::format("{:.0f}", m.idle_gpu_hours_while_queued); });
  row("JCT mean (h)", [](const SimMetrics& m) { return fmt::format("{:.2f}", m.jct_hours.mean); });
  row("JCT p50 (h)", [](const SimMetrics& m) { return fmt::format("{:.2f}", m.jct_hours.p50); });
  row("JCT p99 (h)", [](const SimMetrics& m) { return fmt::format("{:.2f}", m.jct_hours.p99); });
  row("wait mean (h)",
      [](const SimMetrics& m) { return fmt::format("{:.2f}", m.wait_hours.mean); });
  row("wait p50 (h)", [](const SimMetrics& m) { return fmt::format("{:.2f}", m.wait_hours.p50); });
  row("wait p99 (h)", [](const SimMetrics& m) { return fmt::format("{:.2f}", m.wait_hours.p99); });
  for (const char* cls : {"reserved", "elastic"}) {
    row(fmt::format("wait p99 {} (h)", cls), [&](const SimMetrics& m) {
      auto it = m.wait_by_priority.find(cls);
      return it == m.wait_by_priority.end() ? std::string("-")
                                            : fmt::format("{:.2f}", it->second.p99);
    });
  }
  for (const char* gang : {"1 gpu", "2-8 gpu", "9-64 gpu", "65+ gpu"}) {
    row(fmt::format("wait mean {} (h)", gang), [&](const SimMetrics& m) {
      auto it = m.wait_by_gang.find(gang);
      return it == m.wait_by_gang.end() ? std::string("-") : fmt::format("{:.2f}", it->second.mean);
    });
  }
  row("Jain's index (share/entitled)",
      [](const SimMetrics& m) { return fmt::format("{:.3f}", m.jain_index); });
  row("preemptions", [](const SimMetrics& m) { return fmt::format("{}", m.preemptions); });
  row("GPU-h lost to preemption",
      [](const SimMetrics& m) { return fmt::format("{:.1f}", m.gpu_hours_lost_preemption); });
  row("GPU failures", [](const SimMetrics& m) { return fmt::format("{}", m.gpu_failures); });
  row("GPU-h lost to failures",
      [](const SimMetrics& m) { return fmt::format("{:.1f}", m.gpu_hours_lost_failures); });
  row("cycles", [](const SimMetrics& m) { return fmt::format("{}", m.cycles); });
  row("cycle CPU p50 (ms)",
      [](const SimMetrics& m) { return fmt::format("{:.3f}", m.cycle_ms.p50); });
  row("cycle CPU p99 (ms)",
      [](const SimMetrics& m) { return fmt::format("{:.3f}", m.cycle_ms.p99); });
  row("simulated jobs/s", [](const SimMetrics& m) {
    return fmt::format("{:.0f}",
                       m.run_seconds > 0 ? static_cast<double>(m.jobs) / m.run_seconds : 0.0);
  });
  out += "\nShare of allocated GPU-hours per queue (entitlement in brackets):\n";
  for (size_t q = 0; q < first.queues.size(); ++q) {
    out += fmt::format("{:<30}", "  " + first.queues[q].name);
    for (const SimMetrics& m : runs) {
      const QueueMetrics& qm = m.queues[q];
      out += fmt::format("{:>14}",
                         fmt::format("{:.1f}% [{:.0f}%]", 100 * qm.share, 100 * qm.entitlement));
    }
    out += "\n";
  }
  return out;
}

std::string EventJsonLine(const SimEvent& e, const std::string& policy,
                          const std::vector<core::Node>& nodes) {
  json j = {{"time", static_cast<double>(e.time.count()) / 1000.0},
            {"policy", policy},
            {"workload", e.job->id},
            {"event", EventKindName(e.kind)}};
  if (!e.placements.empty()) {
    json pods = json::array();
    for (const core::PodPlacement& p : e.placements) {
      json gpus = json::array();
      for (uint64_t m = p.gpu_mask; m != 0; m &= m - 1) gpus.push_back(std::countr_zero(m));
      pods.push_back({{"node", nodes[p.node.index()].name}, {"gpus", std::move(gpus)}});
    }
    j["placement"] = std::move(pods);
  }
  if (!e.reason.empty()) j["reason"] = e.reason;
  if (e.preemptor != nullptr) j["preemptor"] = e.preemptor->id;
  return j.dump();
}

}  // namespace chamber::sim
