#include "daemon/api_json.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "common/prometheus_text.h"
#include "core/gpu_model_queues.h"

namespace chamber::daemon {

using nlohmann::json;

namespace {

json Counts(const fleet::GpuCounts& g) {
  return {{"capacity", g.capacity},
          {"allocated", g.allocated},
          {"used", g.used},
          {"idle", g.idle},
          {"allocated_idle", g.allocated_idle},
          {"unhealthy", g.unhealthy},
          {"shared", g.shared},
          {"mig", g.mig}};
}

json Rate(const fleet::CostRates& c, const std::string& currency) {
  return {{"per_hour", c.total}, {"idle_per_hour", c.idle()}, {"currency", currency}};
}

// GPU-equivalents: a whole number of GPUs as an integer, a share as a fraction (0.5).
json GpuEquivalents(int64_t milli) {
  if (milli % fleet::kMilliPerGpu == 0) return milli / fleet::kMilliPerGpu;
  return static_cast<double>(milli) / fleet::kMilliPerGpu;
}

json NullOr(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

json TotalsJson(const fleet::Totals& t) {
  return {{"since", FormatRfc3339Ms(t.since)},
          {"capacity_gpu_hours", t.capacity_gpu_hours},
          {"allocated_gpu_hours", t.allocated_gpu_hours},
          {"used_gpu_hours", t.used_gpu_hours},
          {"cost", t.cost},
          {"idle_cost", t.idle_cost},
          {"backfill_gpu_hours", t.backfill_gpu_hours},
          {"backfill_savings", t.backfill_savings}};
}

// The recent-window figures of a pool or queue, as fields of its object.
void AddRecent(json& j, const fleet::RecentFigures& r) {
  j["started_last_hour"] = r.started;
  j["wait_p50_seconds"] = r.wait_p50_seconds;
  j["wait_p95_seconds"] = r.wait_p95_seconds;
  j["preemptions_last_hour"] = r.preemptions;
  j["gpu_hours_lost_last_hour"] = r.gpu_hours_lost;
}

json PreemptionJson(const fleet::PreemptionRecord& p) {
  return {{"time", FormatRfc3339Ms(p.time)},
          {"reason", fleet::PreemptionReasonName(p.reason)},
          {"gpu_hours_lost", p.gpu_hours_lost}};
}

std::string_view PoolModel(const FleetState& s, int32_t pool) {
  return pool >= 0 && static_cast<size_t>(pool) < s.input.pools.size() ? s.input.pools[pool].model
                                                                       : std::string_view();
}

}  // namespace

json FleetJson(const FleetState& s) {
  const fleet::FleetView& v = s.view;
  json summary = {{"gpus", Counts(v.gpus)},
                  {"utilization", v.ratios.utilization},
                  {"allocation", v.ratios.allocation},
                  {"idle_fraction", v.ratios.idle_fraction},
                  {"efficiency",
                   {{"used_over_capacity", s.totals.UsedOverCapacity()},
                    {"used_over_allocated", s.totals.UsedOverAllocated()}}},
                  {"cost", Rate(v.cost, s.currency)},
                  {"queue",
                   {{"pending_workloads", v.queue.pending_workloads},
                    {"pending_gpus", v.queue.pending_gpus},
                    {"started_last_hour", v.recent.started},
                    {"wait_p50_seconds", v.recent.wait_p50_seconds},
                    {"wait_p95_seconds", v.recent.wait_p95_seconds}}},
                  {"preemptions_last_hour", v.recent.preemptions},
                  {"gpu_hours_lost_last_hour", v.recent.gpu_hours_lost},
                  {"nodes", s.input.nodes.size()},
                  {"running_workloads", v.running_workloads},
                  {"cycle_ms", s.cycle_ms}};
  json pools = json::array();
  for (size_t p = 0; p < s.input.pools.size() && p < v.pools.size(); ++p) {
    const fleet::PoolInput& pi = s.input.pools[p];
    const fleet::PoolView& pv = v.pools[p];
    json pool = {{"name", pi.name},
                 {"model", pi.model},
                 {"pricing", fleet::PricingName(pi.pricing)},
                 {"price_per_gpu_hour", pi.price_per_gpu_hour},
                 {"nodes", pv.nodes},
                 {"gpus", Counts(pv.gpus)},
                 {"utilization", pv.ratios.utilization},
                 {"allocation", pv.ratios.allocation},
                 {"cost", Rate(pv.cost, s.currency)}};
    AddRecent(pool, pv.recent);
    pools.push_back(std::move(pool));
  }
  return {{"time", FormatRfc3339Ms(s.time_ms)},
          {"mode", s.mode.empty() ? "cluster" : s.mode},
          {"simulated", s.simulated},
          {"summary", std::move(summary)},
          {"pools", std::move(pools)}};
}

json NodeJson(const FleetState& s, size_t n) {
  const fleet::NodeInput& ni = s.input.nodes[n];
  const fleet::NodeView& nv = s.view.nodes[n];
  json workloads = json::array();
  std::vector<int32_t> seen;
  auto add = [&](int32_t w) {
    if (w < 0 || std::find(seen.begin(), seen.end(), w) != seen.end()) return;
    seen.push_back(w);
    workloads.push_back(s.input.workloads[w].name);
  };
  for (const fleet::GpuInput& g : ni.gpus) {
    add(g.workload);
    for (const fleet::GpuShareInput& sh : g.shares) add(sh.workload);
  }
  std::string model = std::string(PoolModel(s, ni.pool));
  if (model.empty() && !ni.gpus.empty()) model = ni.gpus[0].model;
  return {{"name", ni.name},
          {"pool", ni.pool >= 0 ? s.input.pools[ni.pool].name : ""},
          {"model", model},
          {"schedulable", ni.schedulable},
          {"healthy", nv.healthy},
          {"gpus", Counts(nv.gpus)},
          {"utilization", nv.ratios.utilization},
          {"cost_per_hour", nv.cost.total},
          {"workloads", std::move(workloads)}};
}

json NodesJson(const FleetState& s) {
  json nodes = json::array();
  for (size_t n = 0; n < s.input.nodes.size(); ++n) nodes.push_back(NodeJson(s, n));
  return {{"time", FormatRfc3339Ms(s.time_ms)}, {"nodes", std::move(nodes)}};
}

json GpusJson(const FleetState& s) {
  json gpus = json::array();
  for (const fleet::GpuView& g : s.view.gpus_flat) {
    const fleet::NodeInput& ni = s.input.nodes[g.node];
    const fleet::GpuInput& gi = ni.gpus[g.index];
    const fleet::WorkloadInput* w = g.workload >= 0 ? &s.input.workloads[g.workload] : nullptr;
    json shares = json::array();
    for (const fleet::GpuShareInput& sh : gi.shares) {
      const fleet::WorkloadInput& sw = s.input.workloads[sh.workload];
      shares.push_back({{"workload", sw.name},
                        {"queue", sw.queue},
                        {"pod", NullOr(sh.pod)},
                        {"gpu_fraction", GpuEquivalents(sh.gpu_milli)},
                        {"gpu_memory_mib", sh.memory_mib > 0 ? json(sh.memory_mib) : json(nullptr)},
                        {"memory_used_bytes",
                         sh.memory_used_bytes >= 0 ? json(sh.memory_used_bytes) : json(nullptr)},
                        {"mig_profile", NullOr(sh.mig_profile)},
                        {"over_memory_since", sh.over_memory_since > 0
                                                  ? json(FormatRfc3339Ms(sh.over_memory_since))
                                                  : json(nullptr)}});
    }
    json mig = json::array();
    for (const fleet::MigDeviceInput& d : gi.mig_devices)
      mig.push_back({{"uuid", d.uuid},
                     {"profile", d.profile},
                     {"memory_total_bytes", d.memory_total_bytes},
                     {"pod", NullOr(d.pod)}});
    gpus.push_back({{"node", ni.name},
                    {"index", g.index},
                    {"mig", gi.mig},
                    {"mig_devices", std::move(mig)},
                    {"allocated", GpuEquivalents(g.held_milli)},
                    {"shares", std::move(shares)},
                    {"uuid", gi.uuid},
                    {"model", gi.model},
                    {"pool", ni.pool >= 0 ? s.input.pools[ni.pool].name : ""},
                    {"state", fleet::GpuStateName(g.state)},
                    {"utilization", g.utilization},
                    {"memory_used_bytes", g.memory_used_bytes},
                    {"memory_total_bytes", gi.memory_total_bytes},
                    {"workload", w ? json(w->name) : json(nullptr)},
                    {"queue", w ? json(w->queue) : json(nullptr)}});
  }
  return {{"time", FormatRfc3339Ms(s.time_ms)}, {"gpus", std::move(gpus)}};
}

std::string GpusBody(const FleetState& s) {
  std::string out;
  out.reserve(64 + s.view.gpus_flat.size() * 256);
  auto quoted = [&out](std::string_view v) { out += json(v).dump(); };
  auto quoted_or_null = [&](const std::string& v) {
    if (v.empty())
      out += "null";
    else
      quoted(v);
  };
  auto number = [&out](double v) { fmt::format_to(std::back_inserter(out), "{}", v); };
  out += "{\"time\":";
  quoted(FormatRfc3339Ms(s.time_ms));
  out += ",\"gpus\":[";
  std::vector<std::string> node_names(s.input.nodes.size()), pool_names(s.input.nodes.size());
  for (size_t n = 0; n < s.input.nodes.size(); ++n) {
    const fleet::NodeInput& ni = s.input.nodes[n];
    node_names[n] = json(ni.name).dump();
    pool_names[n] = json(ni.pool >= 0 ? s.input.pools[ni.pool].name : "").dump();
  }
  bool first = true;
  for (const fleet::GpuView& g : s.view.gpus_flat) {
    const fleet::NodeInput& ni = s.input.nodes[g.node];
    const fleet::GpuInput& gi = ni.gpus[g.index];
    const fleet::WorkloadInput* w = g.workload >= 0 ? &s.input.workloads[g.workload] : nullptr;
    out += first ? "{" : ",{";
    first = false;
    // Keys in the order nlohmann::json sorts them, as GpusJson(s).dump() writes them.
    out += "\"allocated\":";
    out += GpuEquivalents(g.held_milli).dump();
    out += ",\"index\":";
    out += std::to_string(g.index);
    out += ",\"memory_total_bytes\":";
    out += std::to_string(gi.memory_total_bytes);
    out += ",\"memory_used_bytes\":";
    out += std::to_string(g.memory_used_bytes);
    out += gi.mig ? ",\"mig\":true" : ",\"mig\":false";
    out += ",\"mig_devices\":[";
    for (size_t i = 0; i < gi.mig_devices.size(); ++i) {
      const fleet::MigDeviceInput& d = gi.mig_devices[i];
      out += i == 0 ? "{" : ",{";
      out += "\"memory_total_bytes\":";
      out += std::to_string(d.memory_total_bytes);
      out += ",\"pod\":";
      quoted_or_null(d.pod);
      out += ",\"profile\":";
      quoted(d.profile);
      out += ",\"uuid\":";
      quoted(d.uuid);
      out += "}";
    }
    out += "],\"model\":";
    quoted(gi.model.view());
    out += ",\"node\":";
    out += node_names[g.node];
    out += ",\"pool\":";
    out += pool_names[g.node];
    out += ",\"queue\":";
    if (w)
      quoted(w->queue);
    else
      out += "null";
    out += ",\"shares\":[";
    for (size_t i = 0; i < gi.shares.size(); ++i) {
      const fleet::GpuShareInput& sh = gi.shares[i];
      const fleet::WorkloadInput& sw = s.input.workloads[sh.workload];
      out += i == 0 ? "{" : ",{";
      out += "\"gpu_fraction\":";
      out += GpuEquivalents(sh.gpu_milli).dump();
      out += ",\"gpu_memory_mib\":";
      out += sh.memory_mib > 0 ? std::to_string(sh.memory_mib) : "null";
      out += ",\"memory_used_bytes\":";
      out += sh.memory_used_bytes >= 0 ? std::to_string(sh.memory_used_bytes) : "null";
      out += ",\"mig_profile\":";
      quoted_or_null(sh.mig_profile);
      out += ",\"over_memory_since\":";
      if (sh.over_memory_since > 0)
        quoted(FormatRfc3339Ms(sh.over_memory_since));
      else
        out += "null";
      out += ",\"pod\":";
      quoted_or_null(sh.pod);
      out += ",\"queue\":";
      quoted(sw.queue);
      out += ",\"workload\":";
      quoted(sw.name);
      out += "}";
    }
    out += "],\"state\":\"";
    out += fleet::GpuStateName(g.state);
    out += "\",\"utilization\":";
    number(g.utilization);
    out += ",\"uuid\":";
    quoted(gi.uuid.view());
    out += ",\"workload\":";
    if (w)
      quoted(w->name);
    else
      out += "null";
    out += "}";
  }
  out += "]}";
  return out;
}

namespace {

json QueueJson(const FleetState& s, size_t q) {
  const fleet::QueueInput& qi = s.input.queues[q];
  const fleet::QueueView& qv = s.view.queues[q];
  json by_reason = json::object();
  for (size_t r = 0; r < fleet::kPreemptionReasons; ++r)
    by_reason[std::string(fleet::PreemptionReasonName(static_cast<fleet::PreemptionReason>(r)))] = {
        {"preemptions", qv.lost_total[r].preemptions},
        {"gpu_hours_lost", qv.lost_total[r].gpu_hours}};
  const fleet::LostWork total = fleet::Sum(qv.lost_total);
  json out = {{"name", qi.name},
              {"parent", NullOr(qi.parent)},
              {"quota", qi.quota},
              {"limit", qi.limit ? json(*qi.limit) : json(nullptr)},
              {"weight", qi.weight},
              {"allocated", qi.allocated},
              {"used", qv.used},
              {"fair_share", qi.fair_share},
              {"borrowed", qi.borrowed},
              {"lent", qi.lent},
              {"decayed_gpu_hours", qi.decayed_gpu_hours},
              {"pending_workloads", qv.pending_workloads},
              {"pending_gpus", qv.pending_gpus},
              {"running_workloads", qv.running_workloads},
              {"cost_per_hour", qv.cost.total},
              {"preemptions_total", total.preemptions},
              {"gpu_hours_lost_total", total.gpu_hours},
              {"preemptions_by_reason", std::move(by_reason)},
              {"error", NullOr(qi.error)}};
  AddRecent(out, qv.recent);
  return out;
}

json MigDevicesJson(const fleet::WorkloadInput& w) {
  json out = json::object();
  for (const auto& [profile, count] : w.mig_devices) out[profile] = count;
  return out;
}

json WorkloadJson(const fleet::WorkloadInput& w) {
  return {{"name", w.name},
          {"queue", w.queue},
          {"priority", w.priority},
          {"reserved", w.reserved},
          {"state", fleet::WorkloadPhaseName(w.phase)},
          {"gpus", GpuEquivalents(w.gpu_milli)},
          {"mig_devices", MigDevicesJson(w)},
          {"borrowing", w.borrowing},
          {"pending_reason", NullOr(w.pending->reason)},
          {"pending_message", NullOr(w.pending->message)},
          {"queue_position",
           w.pending->queue_position > 0 ? json(w.pending->queue_position) : json(nullptr)},
          {"submitted", FormatRfc3339Ms(w.submitted)},
          {"started", w.started ? json(FormatRfc3339Ms(*w.started)) : json(nullptr)},
          {"nodes", w.nodes},
          {"preemption_count", w.preemption_count},
          {"gpu_hours_lost", w.gpu_hours_lost}};
}

}  // namespace

json QueuesJson(const FleetState& s) {
  json queues = json::array();
  for (size_t q = 0; q < s.input.queues.size(); ++q) queues.push_back(QueueJson(s, q));
  return {{"time", FormatRfc3339Ms(s.time_ms)}, {"queues", std::move(queues)}};
}

json WorkloadsJson(const FleetState& s, const WorkloadFilter& f) {
  std::vector<const fleet::WorkloadInput*> rows;
  for (const fleet::WorkloadInput& w : s.input.workloads) {
    // A queue names its work in its queues per GPU model too ("team" lists "team/H100"'s).
    if (f.queue && w.queue != *f.queue && core::GpuModelQueueOwner(w.queue) != *f.queue) continue;
    if (f.state && fleet::WorkloadPhaseName(w.phase) != *f.state) continue;
    rows.push_back(&w);
  }
  // Waiting work first, by queue and position; then the rest by start time, newest first.
  auto waiting = [](const fleet::WorkloadInput* w) {
    return w->phase == fleet::WorkloadPhase::kPending ||
           w->phase == fleet::WorkloadPhase::kSuspended;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const auto* a, const auto* b) {
    if (waiting(a) != waiting(b)) return waiting(a);
    if (waiting(a)) {
      if (a->queue != b->queue) return a->queue < b->queue;
      if (a->pending->queue_position != b->pending->queue_position)
        return a->pending->queue_position < b->pending->queue_position;
      return a->submitted < b->submitted;
    }
    return a->started.value_or(0) > b->started.value_or(0);
  });
  json out = json::array();
  for (size_t i = 0; i < rows.size() && i < f.limit; ++i) out.push_back(WorkloadJson(*rows[i]));
  return {
      {"time", FormatRfc3339Ms(s.time_ms)}, {"total", rows.size()}, {"workloads", std::move(out)}};
}

std::optional<WorkloadMatch> FindWorkload(const FleetState& s, const std::string& name) {
  const SharedItems<fleet::WorkloadInput>& ws = s.input.workloads;
  for (size_t w = 0; w < ws.size(); ++w)
    if (ws[w].name == name) return WorkloadMatch{w, ""};
  // A bare pod is found by its name above; the pods of the others are listed.
  for (size_t w = 0; w < ws.size(); ++w)
    if (std::find(ws[w].pods.begin(), ws[w].pods.end(), name) != ws[w].pods.end())
      return WorkloadMatch{w, name};
  return std::nullopt;
}

json WorkloadDetailJson(const FleetState& s, const WorkloadMatch& m) {
  const fleet::WorkloadInput& w = s.input.workloads[m.workload];
  json out = WorkloadJson(w);
  out["pods"] = w.PodNames();
  out["pending_details"] = w.pending->details;
  json preemptions = json::array();
  for (const fleet::TimeMs t : w.preemptions) preemptions.push_back(FormatRfc3339Ms(t));
  out["preemptions"] = std::move(preemptions);
  json history = json::array();
  for (const fleet::PreemptionRecord& p : w.preemption_history)
    history.push_back(PreemptionJson(p));
  out["preemption_history"] = std::move(history);
  json queue = nullptr;
  for (size_t q = 0; q < s.input.queues.size() && q < s.view.queues.size(); ++q)
    if (s.input.queues[q].name == w.queue) queue = QueueJson(s, q);
  return {{"time", FormatRfc3339Ms(s.time_ms)},
          {"workload", std::move(out)},
          {"pod", NullOr(m.pod)},
          {"queue", std::move(queue)}};
}

json HealthJson(const FleetState& s) {
  json incidents = json::array();
  for (const Incident& i : s.incidents)
    incidents.push_back(
        {{"time", FormatRfc3339Ms(i.time_ms)},
         {"node", i.node},
         {"gpu_index", i.gpu_index},
         {"uuid", i.uuid},
         {"kind", i.kind},
         {"cause", NullOr(i.cause)},
         {"severity", NullOr(i.severity)},
         {"message", i.message},
         {"evidence", EvidenceListJson(i.evidence)},
         {"resolved", i.resolved_ms.has_value()},
         {"resolved_time", i.resolved_ms ? json(FormatRfc3339Ms(*i.resolved_ms)) : json(nullptr)}});
  json fenced_nodes = json::array(), fenced_gpus = json::array();
  for (const fleet::NodeInput& n : s.input.nodes) {
    if (!n.schedulable) fenced_nodes.push_back(n.name);
    for (size_t g = 0; g < n.gpus.size(); ++g)
      if (!n.gpus[g].healthy)
        fenced_gpus.push_back({{"node", n.name}, {"index", g}, {"uuid", n.gpus[g].uuid}});
  }
  return {{"time", FormatRfc3339Ms(s.time_ms)},
          {"incidents", std::move(incidents)},
          {"fenced_nodes", std::move(fenced_nodes)},
          {"fenced_gpus", std::move(fenced_gpus)}};
}

json CostJson(const FleetState& s) {
  const fleet::FleetView& v = s.view;
  json pools = json::array();
  for (size_t p = 0; p < s.input.pools.size() && p < v.pools.size(); ++p) {
    const fleet::PoolInput& pi = s.input.pools[p];
    json row = {{"name", pi.name},
                {"model", pi.model},
                {"pricing", fleet::PricingName(pi.pricing)},
                {"price_per_gpu_hour", pi.price_per_gpu_hour},
                {"per_hour", v.pools[p].cost.total},
                {"idle_per_hour", v.pools[p].cost.idle()}};
    if (p < s.pool_totals.size()) {
      fleet::Totals t = s.pool_totals[p];
      t.since = s.totals.since;
      row["totals"] = TotalsJson(t);
    }
    pools.push_back(std::move(row));
  }
  json queues = json::array();
  for (size_t q = 0; q < s.input.queues.size(); ++q)
    queues.push_back({{"name", s.input.queues[q].name},
                      {"per_hour", v.queues[q].cost.total},
                      {"backfill_per_hour", v.queues[q].cost.backfill}});
  return {{"time", FormatRfc3339Ms(s.time_ms)},
          {"currency", s.currency},
          {"per_hour", v.cost.total},
          {"idle_per_hour", v.cost.idle()},
          {"unallocated_per_hour", v.cost.unallocated},
          {"allocated_idle_per_hour", v.cost.allocated_idle},
          {"backfill_savings_per_hour", v.cost.backfill},
          {"totals", TotalsJson(s.totals)},
          {"pools", std::move(pools)},
          {"queues", std::move(queues)}};
}

json HistoryJson(const std::string& metric, const std::string& scope, int64_t from, int64_t to,
                 const fleet::HistorySeries& series) {
  json points = json::array();
  for (const fleet::HistoryPoint& p : series.points) points.push_back({p.time, p.value});
  return {{"metric", metric}, {"scope", scope},      {"from", from},
          {"to", to},         {"step", series.step}, {"points", std::move(points)}};
}

json CatalogueJson(const fleet::HistoryCatalogue& c, const fleet::HistoryOptions& o) {
  return {{"metrics", c.metrics},
          {"scopes", c.scopes},
          {"resolutions",
           {{{"step", o.fine_step_seconds}, {"retention", o.fine_retention_seconds}},
            {{"step", o.coarse_step_seconds}, {"retention", o.coarse_retention_seconds}}}}};
}

std::string MetricsPage(const FleetState& s) {
  using prometheus::MetricType;
  prometheus::TextWriter w;
  const fleet::FleetView& v = s.view;

  w.Family("chamber_gpus", "GPUs by state: idle, allocated_idle, busy, unhealthy.",
           MetricType::kGauge);
  const double busy = v.gpus.allocated - v.gpus.allocated_idle;
  w.Sample({{"state", "idle"}}, v.gpus.idle);
  w.Sample({{"state", "allocated_idle"}}, v.gpus.allocated_idle);
  w.Sample({{"state", "busy"}}, busy);
  w.Sample({{"state", "unhealthy"}}, v.gpus.unhealthy);
  w.Family("chamber_gpus_capacity", "GPUs in the fleet.", MetricType::kGauge);
  w.Sample(v.gpus.capacity);
  w.Family("chamber_gpus_allocated", "GPUs held by workloads.", MetricType::kGauge);
  w.Sample(v.gpus.allocated);
  w.Family("chamber_gpus_used", "Sum of GPU utilization (0..1) over all GPUs.", MetricType::kGauge);
  w.Sample(v.gpus.used);
  w.Family("chamber_gpus_shared", "GPUs whose compute pods' shares divide.", MetricType::kGauge);
  w.Sample(v.gpus.shared);
  w.Family("chamber_gpus_mig", "GPUs in MIG mode.", MetricType::kGauge);
  w.Sample(v.gpus.mig);

  w.Family("chamber_pool_gpus", "GPUs per pool by state.", MetricType::kGauge);
  for (size_t p = 0; p < s.input.pools.size(); ++p) {
    const fleet::PoolInput& pi = s.input.pools[p];
    const fleet::GpuCounts& g = v.pools[p].gpus;
    const std::string_view pricing = fleet::PricingName(pi.pricing);
    for (auto [state, value] :
         {std::pair{"idle", g.idle}, std::pair{"allocated_idle", g.allocated_idle},
          std::pair{"busy", g.allocated - g.allocated_idle}, std::pair{"unhealthy", g.unhealthy}})
      w.Sample({{"pool", pi.name}, {"model", pi.model}, {"pricing", pricing}, {"state", state}},
               value);
  }
  w.Family("chamber_pool_gpus_used", "Sum of GPU utilization per pool.", MetricType::kGauge);
  for (size_t p = 0; p < s.input.pools.size(); ++p)
    w.Sample({{"pool", s.input.pools[p].name}}, v.pools[p].gpus.used);
  w.Family("chamber_cost_per_hour", "Price of every GPU per hour, per pool.", MetricType::kGauge);
  for (size_t p = 0; p < s.input.pools.size(); ++p)
    w.Sample({{"pool", s.input.pools[p].name}, {"currency", s.currency}}, v.pools[p].cost.total);
  w.Family("chamber_idle_cost_per_hour",
           "Price per hour of idle and allocated-but-idle GPUs, per pool.", MetricType::kGauge);
  for (size_t p = 0; p < s.input.pools.size(); ++p)
    w.Sample({{"pool", s.input.pools[p].name}, {"currency", s.currency}}, v.pools[p].cost.idle());

  w.Family("chamber_gpu_utilization", "Utilization (0..1) of each GPU.", MetricType::kGauge);
  for (const fleet::GpuView& g : v.gpus_flat) {
    const fleet::NodeInput& ni = s.input.nodes[g.node];
    const std::string index = std::to_string(g.index);
    w.Sample({{"node", ni.name},
              {"gpu", index},
              {"uuid", ni.gpus[g.index].uuid.str()},
              {"model", ni.gpus[g.index].model.str()}},
             g.utilization);
  }
  w.Family("chamber_gpu_allocated_ratio",
           "Part (0..1) of each GPU held: 1 when a workload holds it whole, else its shares' sum.",
           MetricType::kGauge);
  for (const fleet::GpuView& g : v.gpus_flat) {
    const fleet::NodeInput& ni = s.input.nodes[g.node];
    w.Sample({{"node", ni.name},
              {"gpu", std::to_string(g.index)},
              {"uuid", ni.gpus[g.index].uuid.str()}},
             g.held_milli / static_cast<double>(fleet::kMilliPerGpu));
  }
  // Each share whose pod a node's agent measures, with its labels.
  auto measured_shares = [&](auto&& fn) {
    for (const fleet::GpuView& g : v.gpus_flat) {
      const fleet::NodeInput& ni = s.input.nodes[g.node];
      const fleet::GpuInput& gi = ni.gpus[g.index];
      for (const fleet::GpuShareInput& sh : gi.shares)
        if (sh.memory_used_bytes >= 0 && !sh.pod.empty())
          fn(std::vector<prometheus::Label>{{"node", ni.name},
                                            {"gpu", std::to_string(g.index)},
                                            {"uuid", gi.uuid.str()},
                                            {"pod", sh.pod},
                                            {"queue", s.input.workloads[sh.workload].queue}},
             sh);
    }
  };
  w.Family("chamber_gpu_share_memory_used_bytes",
           "GPU memory a share's pod holds on its GPU, as the node's agent measures its processes.",
           MetricType::kGauge);
  measured_shares(
      [&](const std::vector<prometheus::Label>& labels, const fleet::GpuShareInput& sh) {
        w.Sample(labels, static_cast<double>(sh.memory_used_bytes));
      });
  w.Family("chamber_gpu_share_over_memory",
           "1 while a share's pod holds more GPU memory than it asked for (chamber.io/gpu-memory).",
           MetricType::kGauge);
  measured_shares(
      [&](const std::vector<prometheus::Label>& labels, const fleet::GpuShareInput& sh) {
        w.Sample(labels, sh.over_memory_since > 0 ? 1.0 : 0.0);
      });
  w.Family("chamber_gpu_share_ratio",
           "Part (0..1) of a GPU's compute each workload's shares hold, per GPU and workload.",
           MetricType::kGauge);
  for (const fleet::GpuView& g : v.gpus_flat) {
    const fleet::NodeInput& ni = s.input.nodes[g.node];
    const fleet::GpuInput& gi = ni.gpus[g.index];
    // Several pods of one workload may hold shares of one GPU: one sample each workload.
    std::vector<std::pair<int32_t, int64_t>> by_workload;
    for (const fleet::GpuShareInput& sh : gi.shares) {
      auto it = std::find_if(by_workload.begin(), by_workload.end(),
                             [&](const auto& e) { return e.first == sh.workload; });
      if (it == by_workload.end())
        by_workload.emplace_back(sh.workload, sh.gpu_milli);
      else
        it->second += sh.gpu_milli;
    }
    for (const auto& [workload, milli] : by_workload) {
      const fleet::WorkloadInput& wl = s.input.workloads[workload];
      w.Sample({{"node", ni.name},
                {"gpu", std::to_string(g.index)},
                {"uuid", gi.uuid.str()},
                {"workload", wl.name},
                {"queue", wl.queue}},
               milli / static_cast<double>(fleet::kMilliPerGpu));
    }
  }

  w.Family("chamber_queue_allocated_gpus", "GPUs held per queue.", MetricType::kGauge);
  for (const fleet::QueueInput& q : s.input.queues) w.Sample({{"queue", q.name}}, q.allocated);
  w.Family("chamber_queue_fair_share_gpus", "Fair share per queue, in GPUs.", MetricType::kGauge);
  for (const fleet::QueueInput& q : s.input.queues) w.Sample({{"queue", q.name}}, q.fair_share);
  w.Family("chamber_queue_borrowed_gpus", "GPUs a queue holds beyond its quota.",
           MetricType::kGauge);
  for (const fleet::QueueInput& q : s.input.queues) w.Sample({{"queue", q.name}}, q.borrowed);
  w.Family("chamber_queue_lent_gpus", "Unused quota of a queue that others hold.",
           MetricType::kGauge);
  for (const fleet::QueueInput& q : s.input.queues) w.Sample({{"queue", q.name}}, q.lent);
  w.Family("chamber_queue_pending_workloads", "Waiting workloads per queue.", MetricType::kGauge);
  for (size_t q = 0; q < s.input.queues.size(); ++q)
    w.Sample({{"queue", s.input.queues[q].name}}, v.queues[q].pending_workloads);

  w.Family("chamber_pending_workloads", "Waiting workloads.", MetricType::kGauge);
  w.Sample(v.queue.pending_workloads);
  w.Family("chamber_wait_seconds",
           "Wait of workloads started in the last hour (nearest-rank quantiles).",
           MetricType::kGauge);
  w.Sample({{"quantile", "0.5"}}, v.recent.wait_p50_seconds);
  w.Sample({{"quantile", "0.95"}}, v.recent.wait_p95_seconds);
  w.Family("chamber_preemptions_last_hour", "Preemptions in the last hour.", MetricType::kGauge);
  w.Sample(static_cast<double>(v.recent.preemptions));

  w.Family("chamber_queue_wait_seconds",
           "Wait of a queue's workloads (and its children's) started in the last hour "
           "(nearest-rank quantiles).",
           MetricType::kGauge);
  for (size_t q = 0; q < s.input.queues.size(); ++q) {
    w.Sample({{"queue", s.input.queues[q].name}, {"quantile", "0.5"}},
             v.queues[q].recent.wait_p50_seconds);
    w.Sample({{"queue", s.input.queues[q].name}, {"quantile", "0.95"}},
             v.queues[q].recent.wait_p95_seconds);
  }
  w.Family("chamber_queue_preemptions_last_hour",
           "Preemptions of a queue's workloads (and its children's) in the last hour.",
           MetricType::kGauge);
  for (size_t q = 0; q < s.input.queues.size(); ++q)
    w.Sample({{"queue", s.input.queues[q].name}},
             static_cast<double>(v.queues[q].recent.preemptions));
  w.Family("chamber_queue_lost_gpu_hours_last_hour",
           "GPU-hours lost to preemptions of a queue's workloads (and its children's) in the last "
           "hour.",
           MetricType::kGauge);
  for (size_t q = 0; q < s.input.queues.size(); ++q)
    w.Sample({{"queue", s.input.queues[q].name}}, v.queues[q].recent.gpu_hours_lost);
  w.Family("chamber_pool_wait_seconds",
           "Wait of workloads started in a pool in the last hour (nearest-rank quantiles).",
           MetricType::kGauge);
  for (size_t p = 0; p < s.input.pools.size(); ++p) {
    w.Sample({{"pool", s.input.pools[p].name}, {"quantile", "0.5"}},
             v.pools[p].recent.wait_p50_seconds);
    w.Sample({{"pool", s.input.pools[p].name}, {"quantile", "0.95"}},
             v.pools[p].recent.wait_p95_seconds);
  }
  w.Family("chamber_pool_preemptions_last_hour",
           "Preemptions of workloads running in a pool in the last hour.", MetricType::kGauge);
  for (size_t p = 0; p < s.input.pools.size(); ++p)
    w.Sample({{"pool", s.input.pools[p].name}}, static_cast<double>(v.pools[p].recent.preemptions));

  // Counters by the preempted workload's own queue, every reason of every known queue (0 until
  // the first), then queues that are gone but had preemptions.
  std::vector<std::pair<std::string_view, fleet::LostByReason>> lost;
  for (const fleet::QueueInput& q : s.input.queues) {
    auto it = s.input.preemption_totals.find(q.name);
    lost.emplace_back(q.name,
                      it == s.input.preemption_totals.end() ? fleet::LostByReason{} : it->second);
  }
  for (const auto& total : s.input.preemption_totals)
    if (std::none_of(s.input.queues.begin(), s.input.queues.end(),
                     [&](const fleet::QueueInput& q) { return q.name == total.first; }))
      lost.emplace_back(total.first, total.second);
  w.Family("chamber_preemptions_total",
           "Preemptions since the server started, by the workload's queue and the reason.",
           MetricType::kCounter);
  for (const auto& [queue, by_reason] : lost)
    for (size_t r = 0; r < fleet::kPreemptionReasons; ++r)
      w.Sample({{"queue", queue},
                {"reason", fleet::PreemptionReasonName(static_cast<fleet::PreemptionReason>(r))}},
               static_cast<double>(by_reason[r].preemptions));
  w.Family("chamber_preemption_lost_gpu_hours_total",
           "GPU-hours lost to preemptions since the server started (GPU time since each "
           "workload's last checkpoint or start), by the workload's queue and the reason.",
           MetricType::kCounter);
  for (const auto& [queue, by_reason] : lost)
    for (size_t r = 0; r < fleet::kPreemptionReasons; ++r)
      w.Sample({{"queue", queue},
                {"reason", fleet::PreemptionReasonName(static_cast<fleet::PreemptionReason>(r))}},
               by_reason[r].gpu_hours);

  w.Family("chamber_gpu_hours_total", "GPU-hours since the server started, by kind.",
           MetricType::kCounter);
  w.Sample({{"kind", "capacity"}}, s.totals.capacity_gpu_hours);
  w.Sample({{"kind", "allocated"}}, s.totals.allocated_gpu_hours);
  w.Sample({{"kind", "used"}}, s.totals.used_gpu_hours);
  w.Sample({{"kind", "backfill"}}, s.totals.backfill_gpu_hours);
  w.Family("chamber_cost_total", "Money spent on GPUs since the server started.",
           MetricType::kCounter);
  w.Sample({{"currency", s.currency}}, s.totals.cost);
  w.Family("chamber_idle_cost_total", "Money spent on idle GPUs since the server started.",
           MetricType::kCounter);
  w.Sample({{"currency", s.currency}}, s.totals.idle_cost);
  w.Family("chamber_backfill_savings_total",
           "Price of the GPU-hours backfilled work ran on since the server started.",
           MetricType::kCounter);
  w.Sample({{"currency", s.currency}}, s.totals.backfill_savings);
  w.Family("chamber_efficiency", "Used GPU-hours over capacity or allocated GPU-hours.",
           MetricType::kGauge);
  w.Sample({{"ratio", "used_over_capacity"}}, s.totals.UsedOverCapacity());
  w.Sample({{"ratio", "used_over_allocated"}}, s.totals.UsedOverAllocated());

  w.Family("chamber_scheduling_cycle_seconds", "Duration of the last scheduling cycle.",
           MetricType::kGauge);
  w.Sample(s.cycle_ms / 1000);
  w.Family("chamber_scheduling_cycles_total", "Scheduling cycles run.", MetricType::kCounter);
  w.Sample(static_cast<double>(s.cycles));
  for (size_t i = 0; i < s.backend_metrics.size(); ++i) {
    const BackendMetric& m = s.backend_metrics[i];
    if (i == 0 || s.backend_metrics[i - 1].name != m.name)
      w.Family(m.name, m.help, m.counter ? MetricType::kCounter : MetricType::kGauge);
    std::vector<prometheus::Label> labels;
    labels.reserve(m.labels.size());
    for (const auto& [name, value] : m.labels) labels.push_back({name, value});
    w.Sample(labels, m.value);
  }
  return w.Take();
}

std::shared_ptr<const std::string> Cached(const FleetState& s, const std::string& key,
                                          const std::function<std::string()>& make) {
  {
    std::lock_guard lock(s.cache_mu);
    auto it = s.cache.find(key);
    if (it != s.cache.end()) return it->second;
  }
  auto body = std::make_shared<const std::string>(make());
  std::lock_guard lock(s.cache_mu);
  return s.cache.emplace(key, std::move(body)).first->second;
}

}  // namespace chamber::daemon
