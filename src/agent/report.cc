#include "agent/report.h"

#include <array>
#include <functional>
#include <set>

#include <fmt/format.h>

#include "agent/nvml_api.h"
#include "common/prometheus_text.h"

namespace chamber::agent {

using nlohmann::json;

namespace {

template <typename T>
json Opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

// Which container holds which GPU, as an info metric to join on `uuid`: per-GPU series keep
// their identity when pods come and go, and a GPU shared by several pods is one series each.
void RenderPodMetrics(prometheus::TextWriter& w, const AgentSnapshot& snap) {
  namespace pm = chamber::prometheus;
  const PodAttribution& a = snap.pod_attribution;
  w.Family("chamber_agent_pod_resources_up",
           "1 when the last List on the kubelet's pod-resources API succeeded, 0 when it failed.",
           pm::MetricType::kGauge);
  if (a.state != AttributionState::kDisabled) {
    w.Sample(a.state == AttributionState::kAvailable ? 1 : 0);
  }
  w.Family("chamber_gpu_pod_info",
           "The container the kubelet assigned a GPU (or MIG instance) to; always 1.",
           pm::MetricType::kGauge);
  // gpu, uuid, mig_uuid, resource, namespace, pod, container; a set, since time-sliced replicas
  // of one GPU in one container would otherwise repeat a series.
  std::set<std::array<std::string, 7>> rows;
  for (const GpuInfo& g : snap.inventory.gpus) {
    auto held = a.by_gpu.find(g.uuid);
    if (held == a.by_gpu.end()) continue;
    for (const DeviceAssignment& d : held->second) {
      rows.insert({std::to_string(g.index), g.uuid, d.mig_uuid, d.resource_name, d.namespace_name,
                   d.pod, d.container});
    }
  }
  for (const DeviceAssignment& d : a.unmatched) {
    rows.insert({"", d.device_id, "", d.resource_name, d.namespace_name, d.pod, d.container});
  }
  for (const auto& r : rows) {
    std::vector<pm::Label> labels;
    if (!r[0].empty()) labels.push_back({"gpu", r[0]});
    labels.push_back({"uuid", r[1]});
    if (!r[2].empty()) labels.push_back({"mig_uuid", r[2]});
    labels.insert(labels.end(),
                  {{"resource", r[3]}, {"namespace", r[4]}, {"pod", r[5]}, {"container", r[6]}});
    w.Sample(labels, 1);
  }
}

json MigJson(const MigInstance& m) {
  return {{"index", m.index},
          {"uuid", m.uuid},
          {"name", m.name},
          {"profile", m.profile},
          {"memory_total_bytes", Opt(m.memory_total_bytes)},
          {"gpu_instance_id", Opt(m.gpu_instance_id)},
          {"compute_instance_id", Opt(m.compute_instance_id)}};
}

}  // namespace

json InventoryJson(const Inventory& inv) {
  json gpus = json::array();
  for (const GpuInfo& g : inv.gpus) {
    json mig_devices = json::array();
    for (const MigInstance& m : g.mig) mig_devices.push_back(MigJson(m));
    gpus.push_back({
        {"index", g.index},
        {"uuid", g.uuid},
        {"name", g.name},
        {"memory_total_bytes", g.memory_total_bytes},
        {"pci_bus_id", g.pci_bus_id},
        {"mig",
         {{"enabled", Opt(g.mig_enabled)},
          {"instances", g.mig.size()},
          {"devices", std::move(mig_devices)}}},
        {"nvlink", {{"links", g.nvlinks_total}, {"active", g.nvlinks_active}}},
        {"gpm_supported", g.gpm_supported},
        {"temperature_thresholds",
         {{"slowdown_c", Opt(g.temperature_slowdown_c)},
          {"shutdown_c", Opt(g.temperature_shutdown_c)}}},
        {"features", g.features},
    });
  }
  return {
      {"nvml",
       {{"loaded", inv.nvml_loaded},
        {"library", inv.nvml_library},
        {"error", inv.nvml_error.empty() ? json(nullptr) : json(inv.nvml_error)},
        {"initialized_at", inv.nvml_loaded ? json(inv.nvml_initialized_at) : json(nullptr)},
        {"missing_functions", inv.missing_functions},
        {"xid_events", inv.xid_events}}},
      {"driver_version", inv.driver_version},
      {"cuda_driver_version", inv.cuda_driver_version},
      {"gpu_count", inv.gpus.size()},
      {"gpus", gpus},
  };
}

json SampleJson(const GpuSample& s) {
  json j = {
      {"index", s.index},
      {"uuid", s.uuid},
      {"time", s.time},
      {"lost", s.lost},
      {"utilization",
       {{"source", UtilizationSourceName(s.utilization_source)},
        {"gpu_percent", Opt(s.gpu_utilization)},
        {"memory_percent", Opt(s.memory_utilization)},
        {"sm_active_percent", Opt(s.sm_active)},
        {"tensor_active_percent", Opt(s.tensor_active)}}},
      {"memory_used_bytes", Opt(s.memory_used_bytes)},
      {"memory_total_bytes", Opt(s.memory_total_bytes)},
      {"power_watts", Opt(s.power_watts)},
      {"temperature_c", Opt(s.temperature_c)},
      {"pcie",
       {{"replays", Opt(s.pcie_replays)},
        {"width_current", Opt(s.pcie_width_current)},
        {"width_max", Opt(s.pcie_width_max)},
        {"gen_current", Opt(s.pcie_gen_current)},
        {"gen_max", Opt(s.pcie_gen_max)}}},
      {"ecc",
       {{"volatile_corrected", Opt(s.ecc_volatile_corrected)},
        {"volatile_uncorrected", Opt(s.ecc_volatile_uncorrected)},
        {"aggregate_corrected", Opt(s.ecc_aggregate_corrected)},
        {"aggregate_uncorrected", Opt(s.ecc_aggregate_uncorrected)}}},
      {"recovery_action", Opt(s.recovery_action)},
  };
  if (s.clock_event_reasons) {
    json names = json::array();
    for (const ClockEventReason& r : ClockEventReasons()) {
      if (*s.clock_event_reasons & r.bit) names.push_back(r.name);
    }
    j["clock_event_reasons"] = {{"mask", *s.clock_event_reasons}, {"active", names}};
  } else {
    j["clock_event_reasons"] = nullptr;
  }
  if (s.remap) {
    j["remapped_rows"] = {{"corrected", s.remap->corrected_rows},
                          {"uncorrected", s.remap->uncorrected_rows},
                          {"pending", s.remap->pending},
                          {"failure", s.remap->failure}};
  } else {
    j["remapped_rows"] = nullptr;
  }
  json links = json::array();
  for (const NvLinkSample& l : s.nvlinks) {
    links.push_back({{"link", l.link},
                     {"active", l.active},
                     {"replay_errors", l.replay_errors},
                     {"recovery_errors", l.recovery_errors},
                     {"crc_flit_errors", l.crc_flit_errors},
                     {"crc_data_errors", l.crc_data_errors}});
  }
  j["nvlinks"] = links;
  if (s.processes) {
    json processes = json::array();
    for (const GpuProcess& p : *s.processes) {
      processes.push_back({{"pid", p.pid},
                           {"used_memory_bytes", Opt(p.used_memory_bytes)},
                           {"sm_percent", Opt(p.sm_percent)},
                           {"memory_percent", Opt(p.memory_percent)},
                           {"gpu_instance_id", Opt(p.gpu_instance_id)},
                           {"compute_instance_id", Opt(p.compute_instance_id)},
                           {"pod_uid", p.pod_uid.empty() ? json(nullptr) : json(p.pod_uid)}});
    }
    j["processes"] = processes;
  } else {
    j["processes"] = nullptr;
  }
  return j;
}

json IncidentJson(const GpuIncident& i) {
  return {
      {"id", i.id},
      {"gpu_index", i.gpu_index},
      {"gpu_uuid", i.gpu_uuid},
      {"pci_bus_id", i.pci_bus_id},
      {"cause", i.cause},
      {"severity", SeverityName(i.severity)},
      {"xid", Opt(i.xid)},
      {"message", i.message},
      {"evidence", EvidenceListJson(i.evidence)},
      {"opened_at", i.opened_at},
      {"last_seen", i.last_seen},
      {"closed_at", Opt(i.closed_at)},
      {"occurrences", i.occurrences},
  };
}

namespace {

json AssignmentJson(const DeviceAssignment& d) {
  return {{"namespace", d.namespace_name},
          {"pod", d.pod},
          {"container", d.container},
          {"resource", d.resource_name},
          {"device_id", d.device_id},
          {"mig_uuid", d.mig_uuid.empty() ? json(nullptr) : json(d.mig_uuid)}};
}

json PodResourcesJson(const PodAttribution& a) {
  json unmatched = json::array();
  for (const DeviceAssignment& d : a.unmatched) unmatched.push_back(AssignmentJson(d));
  return {{"state", AttributionStateName(a.state)},
          {"error", a.error.empty() ? json(nullptr) : json(a.error)},
          {"updated_at", a.updated_at > 0 ? json(a.updated_at) : json(nullptr)},
          {"unmatched", unmatched}};
}

}  // namespace

json ReportJson(const AgentSnapshot& snap) {
  json samples = json::array();
  for (const GpuSample& s : snap.samples) {
    json sample = SampleJson(s);
    json pods = json::array();
    auto held = snap.pod_attribution.by_gpu.find(s.uuid);
    if (held != snap.pod_attribution.by_gpu.end()) {
      for (const DeviceAssignment& d : held->second) pods.push_back(AssignmentJson(d));
    }
    sample["pods"] = pods;
    samples.push_back(std::move(sample));
  }
  json open = json::array();
  for (const GpuIncident& i : snap.open_incidents) open.push_back(IncidentJson(i));
  json closed = json::array();
  for (const GpuIncident& i : snap.recently_closed) closed.push_back(IncidentJson(i));
  json health = json::object();
  for (const auto& [uuid, sev] : snap.gpu_severity) health[uuid] = SeverityName(sev);
  return {
      {"kind", kReportKind},        {"node", snap.node},
      {"time", snap.time},          {"inventory", InventoryJson(snap.inventory)},
      {"labels", snap.labels},      {"samples", samples},
      {"health", health},           {"incidents", open},
      {"closed_incidents", closed}, {"pod_resources", PodResourcesJson(snap.pod_attribution)},
  };
}

std::string RenderMetrics(const AgentSnapshot& snap) {
  namespace pm = chamber::prometheus;
  pm::TextWriter w;
  const Inventory& inv = snap.inventory;
  w.Family("chamber_agent_nvml_up", "1 when NVML is loaded and initialized.",
           pm::MetricType::kGauge);
  w.Sample(inv.nvml_loaded ? 1 : 0);
  w.Family("chamber_agent_gpus", "GPUs found on this node.", pm::MetricType::kGauge);
  w.Sample(static_cast<double>(inv.gpus.size()));
  w.Family("chamber_agent_nvml_missing_function",
           "NVML functions this driver lacks (1 per function).", pm::MetricType::kGauge);
  for (const std::string& f : inv.missing_functions) w.Sample({{"function", f}}, 1);
  w.Family("chamber_agent_push_total", "Reports pushed to chamberd, by result.",
           pm::MetricType::kCounter);
  w.Sample({{"result", "success"}}, static_cast<double>(snap.push_success));
  w.Sample({{"result", "failure"}}, static_cast<double>(snap.push_failure));

  w.Family("chamber_gpu_info", "GPU identity; always 1.", pm::MetricType::kGauge);
  for (const GpuInfo& g : inv.gpus) {
    std::string index = std::to_string(g.index);
    w.Sample({{"gpu", index},
              {"uuid", g.uuid},
              {"model", g.name},
              {"pci_bus_id", g.pci_bus_id},
              {"driver_version", inv.driver_version}},
             1);
  }
  // MIG devices under their parent GPU; an id NVML did not report is left out of the labels.
  w.Family("chamber_gpu_mig_info", "MIG device identity, under its parent GPU; always 1.",
           pm::MetricType::kGauge);
  for (const GpuInfo& g : inv.gpus) {
    std::string index = std::to_string(g.index);
    for (const MigInstance& m : g.mig) {
      // Labels are views: the strings they show must outlive the Sample call.
      std::string mig_index = std::to_string(m.index);
      std::string gi = m.gpu_instance_id ? std::to_string(*m.gpu_instance_id) : "";
      std::string ci = m.compute_instance_id ? std::to_string(*m.compute_instance_id) : "";
      std::vector<pm::Label> labels = {{"gpu", index},
                                       {"uuid", g.uuid},
                                       {"mig_index", mig_index},
                                       {"mig_uuid", m.uuid},
                                       {"profile", m.profile}};
      if (m.gpu_instance_id) labels.push_back({"gpu_instance_id", gi});
      if (m.compute_instance_id) labels.push_back({"compute_instance_id", ci});
      w.Sample(labels, 1);
    }
  }
  w.Family("chamber_gpu_mig_memory_total_bytes", "Memory of a MIG device.", pm::MetricType::kGauge);
  for (const GpuInfo& g : inv.gpus) {
    std::string index = std::to_string(g.index);
    for (const MigInstance& m : g.mig) {
      if (!m.memory_total_bytes) continue;
      w.Sample({{"gpu", index}, {"uuid", g.uuid}, {"mig_uuid", m.uuid}},
               static_cast<double>(*m.memory_total_bytes));
    }
  }

  // One family per quantity; each sample labelled with the GPU's index and UUID.
  struct Gauge {
    const char* name;
    const char* help;
    pm::MetricType type;
  };
  auto family = [&](const Gauge& g, auto value_of) {
    w.Family(g.name, g.help, g.type);
    for (const GpuSample& s : snap.samples) {
      std::string index = std::to_string(s.index);
      value_of(s, [&](std::vector<pm::Label> extra, double v) {
        std::vector<pm::Label> labels = {{"gpu", index}, {"uuid", s.uuid}};
        labels.insert(labels.end(), extra.begin(), extra.end());
        w.Sample(labels, v);
      });
    }
  };
  using Emit = std::function<void(std::vector<pm::Label>, double)>;
  family({"chamber_gpu_lost", "1 when the GPU fell off the bus (GPU_IS_LOST).",
          pm::MetricType::kGauge},
         [](const GpuSample& s, const Emit& emit) { emit({}, s.lost ? 1 : 0); });
  family({"chamber_gpu_utilization_ratio",
          "GPU utilization, 0-1; source=gpm is SM activity, source=coarse the share of time a "
          "kernel ran.",
          pm::MetricType::kGauge},
         [](const GpuSample& s, const Emit& emit) {
           if (s.utilization_source == UtilizationSource::kGpm && s.sm_active) {
             emit({{"source", "gpm"}}, *s.sm_active / 100);
           } else if (s.gpu_utilization) {
             emit({{"source", "coarse"}}, *s.gpu_utilization / 100);
           }
         });
  family({"chamber_gpu_sm_active_ratio", "Share of SMs busy (GPM, Hopper and newer), 0-1.",
          pm::MetricType::kGauge},
         [](const GpuSample& s, const Emit& emit) {
           if (s.sm_active) emit({}, *s.sm_active / 100);
         });
  family({"chamber_gpu_tensor_active_ratio",
          "Share of time tensor cores were busy (GPM, Hopper and newer), 0-1.",
          pm::MetricType::kGauge},
         [](const GpuSample& s, const Emit& emit) {
           if (s.tensor_active) emit({}, *s.tensor_active / 100);
         });
  family({"chamber_gpu_memory_used_bytes", "GPU memory in use.", pm::MetricType::kGauge},
         [](const GpuSample& s, const Emit& emit) {
           if (s.memory_used_bytes) emit({}, static_cast<double>(*s.memory_used_bytes));
         });
  family({"chamber_gpu_memory_total_bytes", "GPU memory in total.", pm::MetricType::kGauge},
         [](const GpuSample& s, const Emit& emit) {
           if (s.memory_total_bytes) emit({}, static_cast<double>(*s.memory_total_bytes));
         });
  family({"chamber_gpu_power_watts", "Power draw.", pm::MetricType::kGauge},
         [](const GpuSample& s, const Emit& emit) {
           if (s.power_watts) emit({}, *s.power_watts);
         });
  family({"chamber_gpu_temperature_celsius", "GPU die temperature.", pm::MetricType::kGauge},
         [](const GpuSample& s, const Emit& emit) {
           if (s.temperature_c) emit({}, *s.temperature_c);
         });
  family({"chamber_gpu_clock_event_active",
          "1 while the clock event reason holds the clocks (throttle reasons).",
          pm::MetricType::kGauge},
         [](const GpuSample& s, const Emit& emit) {
           if (!s.clock_event_reasons) return;
           for (const ClockEventReason& r : ClockEventReasons()) {
             emit({{"reason", r.name}}, (*s.clock_event_reasons & r.bit) ? 1 : 0);
           }
         });
  family({"chamber_gpu_ecc_errors_total", "ECC errors; counter=volatile since driver load.",
          pm::MetricType::kCounter},
         [](const GpuSample& s, const Emit& emit) {
           auto one = [&](const char* type, const char* counter,
                          const std::optional<std::uint64_t>& v) {
             if (v) emit({{"type", type}, {"counter", counter}}, static_cast<double>(*v));
           };
           one("corrected", "volatile", s.ecc_volatile_corrected);
           one("uncorrected", "volatile", s.ecc_volatile_uncorrected);
           one("corrected", "aggregate", s.ecc_aggregate_corrected);
           one("uncorrected", "aggregate", s.ecc_aggregate_uncorrected);
         });
  family({"chamber_gpu_remapped_rows", "Rows remapped for ECC errors, by cause.",
          pm::MetricType::kGauge},
         [](const GpuSample& s, const Emit& emit) {
           if (!s.remap) return;
           emit({{"cause", "corrected"}}, s.remap->corrected_rows);
           emit({{"cause", "uncorrected"}}, s.remap->uncorrected_rows);
         });
  family({"chamber_gpu_row_remap_pending", "1 while a row remap waits for a GPU reset.",
          pm::MetricType::kGauge},
         [](const GpuSample& s, const Emit& emit) {
           if (s.remap) emit({}, s.remap->pending ? 1 : 0);
         });
  family({"chamber_gpu_row_remap_failure", "1 when row remapping failed.", pm::MetricType::kGauge},
         [](const GpuSample& s, const Emit& emit) {
           if (s.remap) emit({}, s.remap->failure ? 1 : 0);
         });
  family({"chamber_gpu_pcie_replays_total", "PCIe replay counter.", pm::MetricType::kCounter},
         [](const GpuSample& s, const Emit& emit) {
           if (s.pcie_replays) emit({}, *s.pcie_replays);
         });
  family({"chamber_gpu_pcie_link_width", "PCIe link width (lanes).", pm::MetricType::kGauge},
         [](const GpuSample& s, const Emit& emit) {
           if (s.pcie_width_current) emit({{"kind", "current"}}, *s.pcie_width_current);
           if (s.pcie_width_max) emit({{"kind", "max"}}, *s.pcie_width_max);
         });
  family({"chamber_gpu_pcie_link_generation", "PCIe link generation.", pm::MetricType::kGauge},
         [](const GpuSample& s, const Emit& emit) {
           if (s.pcie_gen_current) emit({{"kind", "current"}}, *s.pcie_gen_current);
           if (s.pcie_gen_max) emit({{"kind", "max"}}, *s.pcie_gen_max);
         });
  family(
      {"chamber_gpu_nvlink_active", "1 while the NVLink link is active.", pm::MetricType::kGauge},
      [](const GpuSample& s, const Emit& emit) {
        for (const NvLinkSample& l : s.nvlinks) {
          std::string link = std::to_string(l.link);
          emit({{"link", link}}, l.active ? 1 : 0);
        }
      });
  family(
      {"chamber_gpu_nvlink_errors_total", "NVLink error counters, by link and counter.",
       pm::MetricType::kCounter},
      [](const GpuSample& s, const Emit& emit) {
        for (const NvLinkSample& l : s.nvlinks) {
          std::string link = std::to_string(l.link);
          emit({{"link", link}, {"counter", "replay"}}, static_cast<double>(l.replay_errors));
          emit({{"link", link}, {"counter", "recovery"}}, static_cast<double>(l.recovery_errors));
          emit({{"link", link}, {"counter", "crc_flit"}}, static_cast<double>(l.crc_flit_errors));
          emit({{"link", link}, {"counter", "crc_data"}}, static_cast<double>(l.crc_data_errors));
        }
      });
  family({"chamber_gpu_recovery_action",
          "The driver's recovery action: 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 "
          "drain and reset.",
          pm::MetricType::kGauge},
         [](const GpuSample& s, const Emit& emit) {
           if (s.recovery_action) emit({}, *s.recovery_action);
         });

  w.Family("chamber_gpu_xid_events_total", "Xid events seen since the agent started.",
           pm::MetricType::kCounter);
  for (const auto& [key, count] : snap.xid_counts) {
    std::string gpu = std::to_string(key.first);
    std::string xid = std::to_string(key.second);
    w.Sample({{"gpu", gpu}, {"xid", xid}}, static_cast<double>(count));
  }
  w.Family("chamber_gpu_health",
           "Worst open incident severity: 0 healthy, 1 degraded, 2 unhealthy, 3 fatal.",
           pm::MetricType::kGauge);
  for (const GpuInfo& g : inv.gpus) {
    auto it = snap.gpu_severity.find(g.uuid);
    Severity sev = it == snap.gpu_severity.end() ? Severity::kHealthy : it->second;
    std::string index = std::to_string(g.index);
    w.Sample({{"gpu", index}, {"uuid", g.uuid}}, static_cast<double>(sev));
  }
  RenderPodMetrics(w, snap);
  w.Family("chamber_agent_incidents_open", "Open health incidents, by severity and cause.",
           pm::MetricType::kGauge);
  std::map<std::pair<std::string, std::string>, int> open;
  for (const GpuIncident& i : snap.open_incidents) {
    ++open[{std::string(SeverityName(i.severity)), i.cause}];
  }
  for (const auto& [key, n] : open) {
    w.Sample({{"severity", key.first}, {"cause", key.second}}, n);
  }
  return w.Take();
}

}  // namespace chamber::agent
