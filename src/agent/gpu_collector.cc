#include "agent/gpu_collector.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string_view>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace chamber::agent {

const char* UtilizationSourceName(UtilizationSource source) {
  switch (source) {
    case UtilizationSource::kGpm:
      return "gpm";
    case UtilizationSource::kCoarse:
      return "coarse";
    case UtilizationSource::kNone:
      break;
  }
  return "none";
}

struct GpuCollector::Device {
  nvmlDevice_t handle = nullptr;
  GpuInfo info;
  nvmlGpmSample_t gpm_previous = nullptr;
  nvmlGpmSample_t gpm_current = nullptr;
  bool gpm_primed = false;
  unsigned long long last_process_sample_us = 0;  // newest per-process sample seen
  // The pod of each process of the last sample, so that a cgroup is read once per process.
  std::map<unsigned, std::string> pod_uids;
};

GpuCollector::GpuCollector(std::unique_ptr<NvmlLibrary> nvml, std::string proc_root)
    : nvml_(std::move(nvml)), proc_root_(std::move(proc_root)) {}

GpuCollector::~GpuCollector() {
  for (auto& d : devices_) {
    if (nvml_->gpm_sample_free != nullptr) {
      if (d->gpm_previous) nvml_->gpm_sample_free(d->gpm_previous);
      if (d->gpm_current) nvml_->gpm_sample_free(d->gpm_current);
    }
  }
  if (event_set_ != nullptr && nvml_->event_set_free != nullptr) nvml_->event_set_free(event_set_);
}

namespace {

// Tracks one sample's queries: the first GPU_IS_LOST marks the GPU lost.
struct Query {
  GpuSample& sample;
  bool ok(nvmlReturn_t rc) {
    if (rc == NVML_ERROR_GPU_IS_LOST) sample.lost = true;
    return rc == NVML_SUCCESS;
  }
};

std::string CudaVersionText(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

// Total memory of a GPU or MIG device handle, newest query first.
std::optional<std::uint64_t> MemoryTotal(NvmlLibrary& n, nvmlDevice_t h) {
  if (n.device_get_memory_info_v2) {
    nvmlMemory_v2_t m{};
    m.version = nvmlMemory_v2;
    if (n.device_get_memory_info_v2(h, &m) == NVML_SUCCESS) return m.total;
  } else if (n.device_get_memory_info) {
    nvmlMemory_t m{};
    if (n.device_get_memory_info(h, &m) == NVML_SUCCESS) return m.total;
  }
  return std::nullopt;
}

// The MIG devices of a MIG-enabled GPU. Handle indices run up to the GPU's maximum MIG device
// count and may have gaps (NVML_ERROR_NOT_FOUND), so every index is asked.
std::vector<MigInstance> DiscoverMig(NvmlLibrary& n, nvmlDevice_t parent) {
  std::vector<MigInstance> out;
  unsigned max_mig = 0;
  if (!n.device_get_max_mig_device_count || !n.device_get_mig_device_handle_by_index ||
      n.device_get_max_mig_device_count(parent, &max_mig) != NVML_SUCCESS) {
    return out;
  }
  for (unsigned i = 0; i < max_mig; ++i) {
    nvmlDevice_t h = nullptr;
    if (n.device_get_mig_device_handle_by_index(parent, i, &h) != NVML_SUCCESS) continue;
    MigInstance m;
    m.index = static_cast<int>(i);
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (n.device_get_uuid && n.device_get_uuid(h, buf, sizeof buf) == NVML_SUCCESS) m.uuid = buf;
    std::memset(buf, 0, sizeof buf);
    if (n.device_get_name && n.device_get_name(h, buf, sizeof buf) == NVML_SUCCESS) m.name = buf;
    m.profile = MigProfileFromName(m.name);
    m.memory_total_bytes = MemoryTotal(n, h);
    unsigned id = 0;
    if (n.device_get_gpu_instance_id && n.device_get_gpu_instance_id(h, &id) == NVML_SUCCESS) {
      m.gpu_instance_id = id;
    }
    if (n.device_get_compute_instance_id &&
        n.device_get_compute_instance_id(h, &id) == NVML_SUCCESS) {
      m.compute_instance_id = id;
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

std::string MigProfileFromName(const std::string& name) {
  constexpr std::string_view kMarker = " MIG ";
  size_t at = name.rfind(kMarker);
  return at == std::string::npos ? std::string() : name.substr(at + kMarker.size());
}

Inventory GpuCollector::Discover(double now) {
  Inventory inv;
  inv.nvml_loaded = true;
  inv.nvml_library = nvml_->path();
  inv.nvml_initialized_at = now;
  inv.missing_functions = nvml_->MissingFunctions();
  NvmlLibrary& n = *nvml_;

  char text[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (n.system_get_driver_version && n.system_get_driver_version(text, sizeof text) == 0) {
    inv.driver_version = text;
  }
  int cuda = 0;
  if (n.system_get_cuda_driver_version && n.system_get_cuda_driver_version(&cuda) == 0) {
    inv.cuda_driver_version = CudaVersionText(cuda);
  }
  unsigned count = 0;
  if (nvmlReturn_t rc = n.device_get_count(&count); rc != NVML_SUCCESS) {
    spdlog::error("nvmlDeviceGetCount failed: {}", n.ErrorString(rc));
    count = 0;
  }
  devices_.clear();
  for (unsigned i = 0; i < count; ++i) {
    auto d = std::make_unique<Device>();
    GpuInfo& g = d->info;
    g.index = static_cast<int>(i);
    if (nvmlReturn_t rc = n.device_get_handle_by_index(i, &d->handle); rc != NVML_SUCCESS) {
      spdlog::error("GPU {}: nvmlDeviceGetHandleByIndex failed: {}", i, n.ErrorString(rc));
      g.features["handle"] = false;
      devices_.push_back(std::move(d));
      continue;
    }
    nvmlDevice_t h = d->handle;
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (n.device_get_uuid && n.device_get_uuid(h, buf, sizeof buf) == NVML_SUCCESS) g.uuid = buf;
    std::memset(buf, 0, sizeof buf);
    if (n.device_get_name && n.device_get_name(h, buf, sizeof buf) == NVML_SUCCESS) g.name = buf;
    g.memory_total_bytes = MemoryTotal(n, h).value_or(0);
    nvmlPciInfo_t pci{};
    if (n.device_get_pci_info && n.device_get_pci_info(h, &pci) == NVML_SUCCESS) {
      g.pci_bus_id = pci.busId;
    }
    unsigned current = 0, pending = 0;
    if (n.device_get_mig_mode && n.device_get_mig_mode(h, &current, &pending) == NVML_SUCCESS) {
      g.mig_enabled = current == NVML_DEVICE_MIG_ENABLE;
      if (current == NVML_DEVICE_MIG_ENABLE) g.mig = DiscoverMig(n, h);
    }
    if (n.device_get_nvlink_state) {
      for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
        nvmlEnableState_t active = NVML_FEATURE_DISABLED;
        if (n.device_get_nvlink_state(h, link, &active) != NVML_SUCCESS) continue;
        ++g.nvlinks_total;
        if (active == NVML_FEATURE_ENABLED) g.nvlinks_active.push_back(static_cast<int>(link));
      }
    }
    g.features["nvlink"] = g.nvlinks_total > 0;
    if (n.gpm_query_device_support && n.gpm_sample_alloc && n.gpm_sample_get && n.gpm_metrics_get &&
        n.gpm_sample_free) {
      nvmlGpmSupport_t support{};
      support.version = NVML_GPM_SUPPORT_VERSION;
      if (n.gpm_query_device_support(h, &support) == NVML_SUCCESS && support.isSupportedDevice) {
        g.gpm_supported = n.gpm_sample_alloc(&d->gpm_previous) == NVML_SUCCESS &&
                          n.gpm_sample_alloc(&d->gpm_current) == NVML_SUCCESS;
      }
    }
    g.features["gpm"] = g.gpm_supported;
    if (n.device_get_temperature_threshold) {
      unsigned c = 0;
      if (n.device_get_temperature_threshold(h, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &c) ==
          NVML_SUCCESS)
        g.temperature_slowdown_c = c;
      if (n.device_get_temperature_threshold(h, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, &c) ==
          NVML_SUCCESS)
        g.temperature_shutdown_c = c;
    }
    devices_.push_back(std::move(d));
  }
  // A first sample settles which features each GPU supports, and primes GPM.
  for (auto& d : devices_) {
    if (d->handle == nullptr) continue;
    GpuSample s = Sample(d->info.index, now);
    GpuInfo& g = d->info;
    g.features["utilization"] = s.gpu_utilization.has_value() || g.gpm_supported;
    g.features["memory"] = s.memory_used_bytes.has_value();
    g.features["power"] = s.power_watts.has_value();
    g.features["temperature"] = s.temperature_c.has_value();
    g.features["temperature_thresholds"] =
        s.temperature_c.has_value() && g.temperature_slowdown_c.has_value();
    g.features["clock_event_reasons"] = s.clock_event_reasons.has_value();
    g.features["ecc"] = s.ecc_volatile_uncorrected.has_value();
    g.features["remapped_rows"] = s.remap.has_value();
    g.features["pcie_replays"] = s.pcie_replays.has_value();
    g.features["pcie_link"] = s.pcie_width_max.has_value() && s.pcie_gen_max.has_value();
    g.features["recovery_action"] = s.recovery_action.has_value();
    if (s.lost) spdlog::error("GPU {} ({}) is lost: NVML answers GPU_IS_LOST", g.index, g.uuid);
  }
  for (auto& d : devices_) inv.gpus.push_back(d->info);
  return inv;
}

GpuSample GpuCollector::Sample(int index, double now) {
  GpuSample s;
  s.index = index;
  s.time = now;
  if (index < 0 || static_cast<size_t>(index) >= devices_.size()) return s;
  Device& d = *devices_[static_cast<size_t>(index)];
  s.uuid = d.info.uuid;
  if (d.handle == nullptr) return s;
  nvmlDevice_t h = d.handle;
  NvmlLibrary& n = *nvml_;
  Query q{s};

  if (n.device_get_utilization_rates) {
    nvmlUtilization_t u{};
    if (q.ok(n.device_get_utilization_rates(h, &u))) {
      s.gpu_utilization = u.gpu;
      s.memory_utilization = u.memory;
      s.utilization_source = UtilizationSource::kCoarse;
    }
  }
  if (d.info.gpm_supported) {
    if (q.ok(n.gpm_sample_get(h, d.gpm_current))) {
      if (d.gpm_primed) {
        nvmlGpmMetricsGet_t mg{};
        mg.version = NVML_GPM_METRICS_GET_VERSION;
        mg.numMetrics = 2;
        mg.sample1 = d.gpm_previous;
        mg.sample2 = d.gpm_current;
        mg.metrics[0].metricId = NVML_GPM_METRIC_SM_UTIL;
        mg.metrics[1].metricId = NVML_GPM_METRIC_ANY_TENSOR_UTIL;
        if (q.ok(n.gpm_metrics_get(&mg))) {
          if (mg.metrics[0].nvmlReturn == NVML_SUCCESS) s.sm_active = mg.metrics[0].value;
          if (mg.metrics[1].nvmlReturn == NVML_SUCCESS) s.tensor_active = mg.metrics[1].value;
          if (s.sm_active) s.utilization_source = UtilizationSource::kGpm;
        }
      }
      std::swap(d.gpm_previous, d.gpm_current);
      d.gpm_primed = true;
    }
  }
  if (n.device_get_memory_info_v2) {
    nvmlMemory_v2_t m{};
    m.version = nvmlMemory_v2;
    if (q.ok(n.device_get_memory_info_v2(h, &m))) {
      s.memory_used_bytes = m.used;
      s.memory_total_bytes = m.total;
    }
  } else if (n.device_get_memory_info) {
    nvmlMemory_t m{};
    if (q.ok(n.device_get_memory_info(h, &m))) {
      s.memory_used_bytes = m.used;
      s.memory_total_bytes = m.total;
    }
  }
  unsigned u = 0;
  if (n.device_get_power_usage && q.ok(n.device_get_power_usage(h, &u))) {
    s.power_watts = u / 1000.0;
  }
  if (n.device_get_temperature && q.ok(n.device_get_temperature(h, NVML_TEMPERATURE_GPU, &u))) {
    s.temperature_c = u;
  }
  unsigned long long ull = 0;
  if (n.device_get_clock_event_reasons && q.ok(n.device_get_clock_event_reasons(h, &ull))) {
    s.clock_event_reasons = ull;
  }
  if (n.device_get_total_ecc_errors) {
    auto ecc = [&](nvmlMemoryErrorType_t type, nvmlEccCounterType_t counter,
                   std::optional<std::uint64_t>& out) {
      unsigned long long v = 0;
      if (q.ok(n.device_get_total_ecc_errors(h, type, counter, &v))) out = v;
    };
    ecc(NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, s.ecc_volatile_corrected);
    ecc(NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, s.ecc_volatile_uncorrected);
    ecc(NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC, s.ecc_aggregate_corrected);
    ecc(NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, s.ecc_aggregate_uncorrected);
  }
  if (n.device_get_remapped_rows) {
    unsigned corr = 0, unc = 0, pending = 0, failure = 0;
    if (q.ok(n.device_get_remapped_rows(h, &corr, &unc, &pending, &failure))) {
      s.remap = RemapSample{corr, unc, pending != 0, failure != 0};
    }
  }
  if (n.device_get_pcie_replay_counter && q.ok(n.device_get_pcie_replay_counter(h, &u))) {
    s.pcie_replays = u;
  }
  auto uint_query = [&](nvml_fn::DeviceGetUint* fn, std::optional<unsigned>& out) {
    unsigned v = 0;
    if (fn && q.ok(fn(h, &v))) out = v;
  };
  uint_query(n.device_get_curr_pcie_link_width, s.pcie_width_current);
  uint_query(n.device_get_max_pcie_link_width, s.pcie_width_max);
  uint_query(n.device_get_curr_pcie_link_generation, s.pcie_gen_current);
  uint_query(n.device_get_max_pcie_link_generation, s.pcie_gen_max);
  if (d.info.HasNvLink() && n.device_get_nvlink_state) {
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      nvmlEnableState_t active = NVML_FEATURE_DISABLED;
      if (!q.ok(n.device_get_nvlink_state(h, link, &active))) continue;
      NvLinkSample l;
      l.link = static_cast<int>(link);
      l.active = active == NVML_FEATURE_ENABLED;
      if (n.device_get_nvlink_error_counter) {
        auto counter = [&](nvmlNvLinkErrorCounter_t c, std::uint64_t& out) {
          unsigned long long v = 0;
          if (q.ok(n.device_get_nvlink_error_counter(h, link, c, &v))) out = v;
        };
        counter(NVML_NVLINK_ERROR_DL_REPLAY, l.replay_errors);
        counter(NVML_NVLINK_ERROR_DL_RECOVERY, l.recovery_errors);
        counter(NVML_NVLINK_ERROR_DL_CRC_FLIT, l.crc_flit_errors);
        counter(NVML_NVLINK_ERROR_DL_CRC_DATA, l.crc_data_errors);
      }
      s.nvlinks.push_back(l);
    }
  }
  if (n.device_get_compute_running_processes) SampleProcesses(d, q.sample);
  if (n.device_get_field_values) {
    nvmlFieldValue_t fv{};
    fv.fieldId = NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;
    if (q.ok(n.device_get_field_values(h, 1, &fv)) && fv.nvmlReturn == NVML_SUCCESS) {
      s.recovery_action = fv.value.uiVal;
    } else if (fv.nvmlReturn == NVML_ERROR_GPU_IS_LOST) {
      s.lost = true;
    }
  }
  return s;
}

void GpuCollector::SampleProcesses(Device& d, GpuSample& s) {
  NvmlLibrary& n = *nvml_;
  Query q{s};
  // Asked with no room first; processes that start between the calls are why a few spare
  // places and one more try.
  std::vector<nvmlProcessInfo_t> infos;
  unsigned count = 0;
  nvmlReturn_t rc = n.device_get_compute_running_processes(d.handle, &count, nullptr);
  for (int attempt = 0; attempt < 3 && rc == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
    infos.resize(count + 4);
    count = static_cast<unsigned>(infos.size());
    rc = n.device_get_compute_running_processes(d.handle, &count, infos.data());
  }
  if (!q.ok(rc)) return;
  infos.resize(std::min<size_t>(count, infos.size()));
  std::vector<GpuProcess> out;
  std::map<unsigned, std::string> pod_uids;
  for (const nvmlProcessInfo_t& p : infos) {
    GpuProcess g;
    g.pid = p.pid;
    if (p.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) g.used_memory_bytes = p.usedGpuMemory;
    if (p.gpuInstanceId != 0xFFFFFFFFu) g.gpu_instance_id = p.gpuInstanceId;
    if (p.computeInstanceId != 0xFFFFFFFFu) g.compute_instance_id = p.computeInstanceId;
    auto known = d.pod_uids.find(p.pid);
    g.pod_uid = known != d.pod_uids.end() ? known->second : PodUidOfProcess(proc_root_, p.pid);
    pod_uids.emplace(p.pid, g.pod_uid);
    out.push_back(std::move(g));
  }
  d.pod_uids = std::move(pod_uids);
  if (n.device_get_process_utilization && !out.empty()) {
    unsigned samples = 0;
    rc = n.device_get_process_utilization(d.handle, nullptr, &samples, d.last_process_sample_us);
    std::vector<nvmlProcessUtilizationSample_t> u;
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE || rc == NVML_SUCCESS) {
      u.resize(samples);
      rc = samples == 0 ? NVML_ERROR_NOT_FOUND
                        : n.device_get_process_utilization(d.handle, u.data(), &samples,
                                                           d.last_process_sample_us);
    }
    if (q.ok(rc)) {
      u.resize(std::min<size_t>(samples, u.size()));
      // The newest sample of each process.
      for (GpuProcess& g : out) {
        const nvmlProcessUtilizationSample_t* newest = nullptr;
        for (const nvmlProcessUtilizationSample_t& x : u) {
          if (x.pid == g.pid && (newest == nullptr || x.timeStamp > newest->timeStamp)) newest = &x;
        }
        if (newest != nullptr) {
          g.sm_percent = newest->smUtil;
          g.memory_percent = newest->memUtil;
        }
      }
      for (const nvmlProcessUtilizationSample_t& x : u)
        d.last_process_sample_us = std::max(d.last_process_sample_us, x.timeStamp);
    }
  }
  s.processes = std::move(out);
}

std::string PodUidOfProcess(const std::string& proc_root, unsigned pid) {
  std::ifstream in(proc_root + "/" + std::to_string(pid) + "/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    // cgroupfs: ".../kubepods/burstable/pod<uid>/<container>"; systemd:
    // ".../kubepods-burstable-pod<uid with '_' for '-'>.slice/...".
    for (size_t at = line.find("pod"); at != std::string::npos; at = line.find("pod", at + 1)) {
      if (at + 3 + 36 > line.size()) break;
      std::string uid = line.substr(at + 3, 36);
      bool ok = true;
      for (size_t i = 0; i < uid.size() && ok; ++i) {
        char& c = uid[i];
        const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash && c == '_') c = '-';
        ok = dash ? c == '-' : std::isxdigit(static_cast<unsigned char>(c)) != 0;
      }
      const bool ends = at + 39 == line.size() || line[at + 39] == '/' || line[at + 39] == '.';
      if (ok && ends) return uid;
    }
  }
  return "";
}

bool GpuCollector::RegisterXidEvents() {
  NvmlLibrary& n = *nvml_;
  if (!n.event_set_create || !n.device_register_events || !n.event_set_wait) {
    spdlog::warn(
        "NVML event sets are unavailable in this driver: Xid events come only from the "
        "kernel log read at start");
    return false;
  }
  if (nvmlReturn_t rc = n.event_set_create(&event_set_); rc != NVML_SUCCESS) {
    spdlog::warn("nvmlEventSetCreate failed: {}", n.ErrorString(rc));
    event_set_ = nullptr;
    return false;
  }
  int registered = 0;
  for (auto& d : devices_) {
    if (d->handle == nullptr) continue;
    nvmlReturn_t rc =
        n.device_register_events(d->handle, nvmlEventTypeXidCriticalError, event_set_);
    if (rc == NVML_SUCCESS) {
      ++registered;
    } else {
      spdlog::warn("GPU {}: cannot register for Xid events: {}", d->info.index, n.ErrorString(rc));
    }
  }
  return registered > 0;
}

std::optional<XidEvent> GpuCollector::WaitXid(unsigned timeout_ms, double (*now)()) {
  if (event_set_ == nullptr) return std::nullopt;
  nvmlEventData_t data{};
  nvmlReturn_t rc = nvml_->event_set_wait(event_set_, &data, timeout_ms);
  if (rc != NVML_SUCCESS || (data.eventType & nvmlEventTypeXidCriticalError) == 0) {
    return std::nullopt;
  }
  XidEvent e;
  e.xid = static_cast<unsigned>(data.eventData);
  e.time = now();
  e.source = "nvml-event";
  for (auto& d : devices_) {
    if (d->handle == data.device) {
      e.gpu_index = d->info.index;
      e.gpu_uuid = d->info.uuid;
      e.pci_bus_id = d->info.pci_bus_id;
    }
  }
  return e;
}

std::string SanitizeLabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    out.push_back(ok ? c : '-');
  }
  if (out.size() > 63) out.resize(63);
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  while (!out.empty() && !alnum(out.back())) out.pop_back();
  size_t start = 0;
  while (start < out.size() && !alnum(out[start])) ++start;
  return out.substr(start);
}

std::map<std::string, std::string> NodeLabels(const Inventory& inventory) {
  std::map<std::string, std::string> labels;
  labels["chamber.io/gpu.count"] = std::to_string(inventory.gpus.size());
  if (inventory.gpus.empty()) return labels;
  std::string model = inventory.gpus.front().name;
  std::uint64_t memory = inventory.gpus.front().memory_total_bytes;
  for (const GpuInfo& g : inventory.gpus) {
    if (g.name != model) model = "mixed";
    memory = std::min(memory, g.memory_total_bytes);
  }
  labels["chamber.io/gpu.model"] = SanitizeLabelValue(model);
  labels["chamber.io/gpu.memory"] = std::to_string(memory / (1024 * 1024));
  if (!inventory.driver_version.empty()) {
    labels["chamber.io/gpu.driver"] = SanitizeLabelValue(inventory.driver_version);
  }
  return labels;
}

std::optional<PciAddress> ParsePciAddress(const std::string& text) {
  PciAddress a;
  unsigned function = 0;
  int consumed = 0;
  // "domain:bus:device" with an optional ".function".
  if (std::sscanf(text.c_str(), "%x:%x:%x%n", &a.domain, &a.bus, &a.device, &consumed) != 3) {
    return std::nullopt;
  }
  std::string rest = text.substr(static_cast<size_t>(consumed));
  if (!rest.empty() && std::sscanf(rest.c_str(), ".%x", &function) != 1) return std::nullopt;
  return a;
}

}  // namespace chamber::agent
