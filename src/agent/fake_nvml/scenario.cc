// The fake NVML's scenario parser (scenario.h).
#include "agent/fake_nvml/scenario.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "agent/nvml_api.h"

namespace chamber::fake_nvml {
namespace {

using json = nlohmann::json;

const std::map<std::string, double>& MetricDefaults() {
  static const std::map<std::string, double> kDefaults = {
      {"utilization", 0},
      {"memory_utilization", 0},
      {"sm_active", 0},
      {"tensor_active", 0},
      {"memory_used_mib", 0},
      {"power_w", 70},
      {"temperature_c", 35},
      {"clock_event_reasons", 0},
      {"ecc_volatile_corrected", 0},
      {"ecc_volatile_uncorrected", 0},
      {"ecc_aggregate_corrected", 0},
      {"ecc_aggregate_uncorrected", 0},
      {"remap_corrected_rows", 0},
      {"remap_uncorrected_rows", 0},
      {"remap_pending", 0},
      {"remap_failure", 0},
      {"pcie_replays", 0},
      {"pcie_width", -1},  // -1: the maximum
      {"pcie_gen", -1},
      {"nvlink_errors", 0},
      {"nvlink_active_links", -1},  // -1: all links
      {"recovery_action", 0},
  };
  return kDefaults;
}

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw std::runtime_error(where + ": " + what);
}

// `j` must be an object whose keys are all in `known`; `where` names it, `sep` joins a key to it.
void CheckFields(const json& j, const std::string& where, const std::set<std::string>& known,
                 const char* sep = ".") {
  if (!j.is_object()) Fail(where, "expected an object");
  for (const auto& [key, value] : j.items()) {
    if (!known.count(key)) Fail(where + sep + key, "unknown field");
  }
}

Series ParseSeries(const json& v, const std::string& where) {
  Series s;
  if (v.is_number()) {
    s.points.emplace_back(0, v.get<double>());
    return s;
  }
  if (!v.is_array()) Fail(where, "expected a number or a list of [t, value] pairs");
  for (size_t i = 0; i < v.size(); ++i) {
    const json& p = v[i];
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number()) {
      Fail(where + "[" + std::to_string(i) + "]", "expected [t, value] with two numbers");
    }
    s.points.emplace_back(p[0].get<double>(), p[1].get<double>());
  }
  std::stable_sort(s.points.begin(), s.points.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return s;
}

template <typename T>
T Get(const json& obj, const char* key, T fallback, const std::string& where) {
  if (!obj.contains(key)) return fallback;
  // nlohmann-json converts a float to an integer type with a plain cast, undefined beyond the
  // type's range (1e300 as an int): integer fields take integers only.
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (obj.at(key).is_number_float()) Fail(where + "." + key, "expected an integer");
  }
  try {
    return obj.at(key).get<T>();
  } catch (const json::exception&) {
    Fail(where + "." + key, "has the wrong type");
  }
}

// "mig_devices": [{"index", "uuid", "profile", "name", "memory_total_mib", "gpu_instance_id",
// "compute_instance_id"}, ...], every field optional; or "mig_instances": n for n defaults.
void ParseMigDevices(const json& g, size_t gpu_index, FakeGpu& gpu, const std::string& where) {
  if (g.contains("mig_instances") && g.contains("mig_devices")) {
    Fail(where + ".mig_instances", "give either mig_instances or mig_devices, not both");
  }
  json list = json::array();
  if (g.contains("mig_devices")) {
    list = g["mig_devices"];
    if (!list.is_array()) Fail(where + ".mig_devices", "expected a list");
  } else {
    int count = Get<int>(g, "mig_instances", 0, where);
    if (count < 0 || count > static_cast<int>(kMaxMigDevices)) {
      Fail(where + ".mig_instances", "must be between 0 and 7");
    }
    for (int m = 0; m < count; ++m) list.push_back(json::object());
  }
  if (!list.empty() && gpu.mig_mode != 1) {
    Fail(where + (g.contains("mig_devices") ? ".mig_devices" : ".mig_instances"),
         "MIG devices need \"mig_mode\": 1");
  }
  if (list.size() > kMaxMigDevices) Fail(where + ".mig_devices", "at most 7 MIG devices");
  static const std::set<std::string> kMigKeys = {"index",
                                                 "uuid",
                                                 "profile",
                                                 "name",
                                                 "memory_total_mib",
                                                 "gpu_instance_id",
                                                 "compute_instance_id"};
  std::set<unsigned> indices;
  for (size_t m = 0; m < list.size(); ++m) {
    std::string at = where + ".mig_devices[" + std::to_string(m) + "]";
    const json& d = list[m];
    CheckFields(d, at, kMigKeys);
    FakeMig mig;
    mig.index = Get<unsigned>(d, "index", static_cast<unsigned>(m), at);
    if (mig.index >= kMaxMigDevices) Fail(at + ".index", "must be below 7");
    if (!indices.insert(mig.index).second) Fail(at + ".index", "repeats another MIG device's");
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "MIG-00000000-0000-0000-%04zu-%012u", gpu_index, mig.index);
    mig.uuid = Get<std::string>(d, "uuid", uuid, at);
    std::string profile = Get<std::string>(d, "profile", "1g.10gb", at);
    mig.name = Get<std::string>(d, "name", gpu.name + " MIG " + profile, at);
    mig.memory_total = Get<unsigned long long>(d, "memory_total_mib", 9984, at) << 20;
    mig.gpu_instance_id = Get<unsigned>(d, "gpu_instance_id", mig.index + 1, at);
    mig.compute_instance_id = Get<unsigned>(d, "compute_instance_id", 0, at);
    gpu.migs.push_back(std::move(mig));
  }
}

void ParseProcesses(const json& g, FakeGpu& gpu, const std::string& where) {
  if (!g.contains("processes")) return;
  const json& list = g["processes"];
  if (!list.is_array()) Fail(where + ".processes", "expected a list");
  static const std::set<std::string> kKeys = {"pid",      "used_memory_mib", "sm_util",
                                              "mem_util", "gpu_instance_id", "compute_instance_id"};
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = where + ".processes[" + std::to_string(i) + "]";
    CheckFields(list[i], at, kKeys);
    FakeProcess p;
    p.pid = Get<unsigned>(list[i], "pid", 0, at);
    if (p.pid == 0) Fail(at + ".pid", "a process needs a pid above 0");
    p.used_memory = Get<unsigned long long>(list[i], "used_memory_mib", 0, at) << 20;
    p.sm_util = Get<int>(list[i], "sm_util", -1, at);
    p.mem_util = Get<int>(list[i], "mem_util", 0, at);
    if (p.sm_util < -1 || p.sm_util > 100) Fail(at + ".sm_util", "must be 0..100");
    if (p.mem_util < 0 || p.mem_util > 100) Fail(at + ".mem_util", "must be 0..100");
    p.gpu_instance_id = Get<unsigned>(list[i], "gpu_instance_id", 0xFFFFFFFFu, at);
    p.compute_instance_id = Get<unsigned>(list[i], "compute_instance_id", 0xFFFFFFFFu, at);
    gpu.processes.push_back(p);
  }
}

}  // namespace

std::unique_ptr<Scenario> ParseScenario(std::string_view text, const std::string& path) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number too large
    Fail(path, std::string("invalid JSON: ") + e.what());
  }
  if (!doc.is_object()) Fail(path, "the scenario must be a JSON object");
  static const std::set<std::string> kTop = {"driver_version", "cuda_driver_version",
                                             "missing_functions", "gpus", "events"};
  CheckFields(doc, path, kTop, ": ");
  auto sc = std::make_unique<Scenario>();
  sc->driver_version = Get<std::string>(doc, "driver_version", sc->driver_version, path);
  sc->cuda_driver_version = Get<int>(doc, "cuda_driver_version", sc->cuda_driver_version, path);
  for (const std::string& f : Get<std::vector<std::string>>(doc, "missing_functions", {}, path)) {
    sc->missing.insert(f);
  }
  json gpus = doc.value("gpus", json::array());
  if (!gpus.is_array()) Fail(path + ": gpus", "expected a list");
  static const std::set<std::string> kGpuKeys = {"uuid",
                                                 "name",
                                                 "memory_total_mib",
                                                 "pci_bus_id",
                                                 "pcie_max_width",
                                                 "pcie_max_gen",
                                                 "temperature_slowdown_c",
                                                 "temperature_shutdown_c",
                                                 "nvlinks",
                                                 "gpm",
                                                 "ecc",
                                                 "remapped_rows",
                                                 "mig_mode",
                                                 "mig_instances",
                                                 "mig_devices",
                                                 "lost_at",
                                                 "metrics",
                                                 "processes"};
  for (size_t i = 0; i < gpus.size(); ++i) {
    std::string where = path + ": gpus[" + std::to_string(i) + "]";
    const json& g = gpus[i];
    CheckFields(g, where, kGpuKeys);
    FakeGpu gpu;
    gpu.handle.index = static_cast<int>(i);
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "GPU-00000000-0000-0000-0000-%012zu", i);
    gpu.uuid = Get<std::string>(g, "uuid", uuid, where);
    gpu.name = Get<std::string>(g, "name", "NVIDIA H100 80GB HBM3", where);
    gpu.memory_total = Get<unsigned long long>(g, "memory_total_mib", 81559, where) << 20;
    char bus[32];
    std::snprintf(bus, sizeof bus, "00000000:%02zX:00.0", 0x18 + i * 0x10);
    gpu.pci_bus_id = Get<std::string>(g, "pci_bus_id", bus, where);
    gpu.pcie_max_width = Get<unsigned>(g, "pcie_max_width", 16, where);
    gpu.pcie_max_gen = Get<unsigned>(g, "pcie_max_gen", 5, where);
    gpu.temperature_slowdown_c = Get<int>(g, "temperature_slowdown_c", 90, where);
    gpu.temperature_shutdown_c = Get<int>(g, "temperature_shutdown_c", 95, where);
    gpu.nvlinks = Get<int>(g, "nvlinks", 0, where);
    if (gpu.nvlinks < 0 || gpu.nvlinks > NVML_NVLINK_MAX_LINKS) {
      Fail(where + ".nvlinks", "must be between 0 and 18");
    }
    gpu.gpm = Get<bool>(g, "gpm", false, where);
    gpu.ecc = Get<bool>(g, "ecc", true, where);
    gpu.remap = Get<bool>(g, "remapped_rows", true, where);
    gpu.mig_mode = Get<int>(g, "mig_mode", -1, where);
    ParseMigDevices(g, i, gpu, where);
    ParseProcesses(g, gpu, where);
    gpu.lost_at = Get<double>(g, "lost_at", -1, where);
    for (const auto& [name, fallback] : MetricDefaults()) {
      gpu.metrics[name].points.emplace_back(0, fallback);
    }
    if (g.contains("metrics")) {
      if (!g["metrics"].is_object()) Fail(where + ".metrics", "expected an object");
      for (const auto& [name, value] : g["metrics"].items()) {
        if (!MetricDefaults().count(name)) Fail(where + ".metrics." + name, "unknown metric");
        gpu.metrics[name] = ParseSeries(value, where + ".metrics." + name);
      }
    }
    sc->gpus.push_back(std::move(gpu));
  }
  // Handles point into the scenario, so they are set once the GPUs stay where they are.
  for (size_t i = 0; i < sc->gpus.size(); ++i) {
    for (size_t m = 0; m < sc->gpus[i].migs.size(); ++m) {
      sc->gpus[i].migs[m].handle = {static_cast<int>(i), static_cast<int>(m)};
    }
  }
  json events = doc.value("events", json::array());
  if (!events.is_array()) Fail(path + ": events", "expected a list");
  for (size_t i = 0; i < events.size(); ++i) {
    std::string where = path + ": events[" + std::to_string(i) + "]";
    const json& e = events[i];
    if (!e.is_object() || !e.contains("xid")) Fail(where, "expected {\"t\", \"gpu\", \"xid\"}");
    FakeEvent ev;
    ev.t = Get<double>(e, "t", 0, where);
    ev.gpu = Get<int>(e, "gpu", 0, where);
    ev.xid = Get<unsigned>(e, "xid", 0, where);
    if (ev.gpu < 0 || static_cast<size_t>(ev.gpu) >= sc->gpus.size()) {
      Fail(where + ".gpu", "no such GPU");
    }
    sc->events.push_back(ev);
  }
  std::stable_sort(sc->events.begin(), sc->events.end(),
                   [](const FakeEvent& a, const FakeEvent& b) { return a.t < b.t; });
  return sc;
}

std::unique_ptr<Scenario> LoadScenario(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open the scenario file");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParseScenario(text, path);
}

}  // namespace chamber::fake_nvml
