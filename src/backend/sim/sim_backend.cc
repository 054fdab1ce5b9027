#include "backend/sim/sim_backend.h"

#include <algorithm>
#include <bit>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/gpu_health_rules.h"
#include "core/gpu_share.h"

namespace chamber::backend {

using daemon::GpuFault;
using daemon::GpuSample;
using daemon::Observation;

namespace {

uint64_t Fnv1a(std::string_view s, uint64_t seed) {
  uint64_t h = 1469598103934665603ULL ^ (seed * 0x9E3779B97F4A7C15ULL);
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

uint64_t Mix(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

double Unit(uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

fleet::Pricing PricingOf(sim::PricingType p) {
  switch (p) {
    case sim::PricingType::kOnDemand:
      return fleet::Pricing::kOnDemand;
    case sim::PricingType::kReserved:
      return fleet::Pricing::kReserved;
    case sim::PricingType::kSpot:
      return fleet::Pricing::kSpot;
  }
  return fleet::Pricing::kOnDemand;
}

RuleEvidence Rule(std::string_view id, GpuSeverity severity, unsigned xid = 0) {
  const HealthRule* rule = FindHealthRule(id);
  return {std::string(id), std::string(SeverityName(severity)),
          rule ? std::string(rule->condition) : std::string(), RuleThreshold(id, {}, xid)};
}

// An Xid incident as the agent opens it: its message, the Xid with its meaning, then `readings`
// and the rule.
GpuFault XidFault(unsigned xid, EvidenceList readings) {
  const XidRule* r = FindXidRule(xid);
  GpuFault f;
  f.cause = "xid-hardware";
  f.severity = std::string(SeverityName(r->severity));
  f.message = fmt::format("Xid {} ({}): {}", xid, r->name, r->meaning);
  f.evidence.push_back(XidEvidence{xid, std::string(r->name), std::string(r->meaning),
                                   std::string(XidClassName(r->cls)), "simulated", std::nullopt});
  for (Evidence& e : readings) f.evidence.push_back(std::move(e));
  f.evidence.push_back(Rule(f.cause, r->severity, xid));
  return f;
}

}  // namespace

GpuFault SimulatedBackend::SimulatedFault(const std::string& uuid, int64_t at_ms, bool nvlink,
                                          uint64_t seed) {
  uint64_t h = Mix(Fnv1a(uuid, seed) ^ static_cast<uint64_t>(at_ms));
  auto next = [&h](uint64_t n) {  // 0..n-1
    h = Mix(h + 0x9E3779B97F4A7C15ULL);
    return h % n;
  };
  uint64_t kind = next(4);
  if (kind == 3 && !nvlink) kind = 1;  // PCIe cards have no NVLink: a memory fault instead
  switch (kind) {
    case 0:
      return XidFault(79, {});
    case 1: {
      // A double-bit burst: a few uncorrectable errors among many corrected ones, a row remap
      // waiting for the reset.
      const uint64_t dbe = 2 + next(8), sbe = 10 + next(200);
      const uint64_t old_dbe = next(3), old_sbe = 100 + next(5000);
      const auto rows = static_cast<unsigned>(1 + next(2));
      return XidFault(48, {EccEvidence{sbe, dbe, old_sbe + sbe, old_dbe + dbe},
                           RowRemapEvidence{static_cast<unsigned>(next(3)), rows, true, false}});
    }
    case 2: {
      // Cooling failed: past the slowdown threshold, clocks held down, close to shutdown.
      const auto slowdown = static_cast<unsigned>(87 + next(3));
      const auto temperature = slowdown + static_cast<unsigned>(1 + next(4));
      GpuFault f;
      f.cause = "thermal-critical";
      f.severity = "unhealthy";
      f.message = fmt::format("temperature {} C within {} C of the shutdown threshold of {} C",
                              temperature, kThermalCriticalMarginC, slowdown + 5);
      f.evidence = {
          ThermalEvidence{
              temperature, slowdown, slowdown + 5, {"sw_thermal_slowdown", "hw_thermal_slowdown"}},
          Rule(f.cause, GpuSeverity::kUnhealthy)};
      return f;
    }
    default: {
      NvLinkCounters link;
      link.link = static_cast<int>(next(18));
      link.replay_errors = 50 + next(2000);
      link.recovery_errors = 1 + next(6);
      link.crc_flit_errors = 5 + next(500);
      return XidFault(74, {NvLinkEvidence{{link}, {}}});
    }
  }
}

namespace {

// A node's GPUs in MIG mode, after its whole GPUs (BuildNodes names those GPU-<node>-<g>), each
// with the pool's layout of devices. NVML measures no utilization of a GPU in MIG mode, so none
// is given.
std::vector<fleet::GpuInput> MigGpusOf(const sim::NodePool& p, const core::Node& node) {
  std::vector<fleet::GpuInput> gpus;
  const core::MigModel* model = core::FindMigModel(p.gpu_model);
  for (int32_t g = p.gpus_per_node - p.mig_gpus; g < p.gpus_per_node; ++g) {
    fleet::GpuInput& gpu = gpus.emplace_back();
    gpu.uuid = "GPU-" + node.name + "-" + std::to_string(g);
    gpu.model = p.gpu_model;
    gpu.memory_total_bytes = p.gpu_memory_bytes;
    gpu.mig = true;
    for (const auto& [name, count] : p.mig_devices) {
      const core::MigProfile* profile = model ? core::FindMigProfile(*model, name) : nullptr;
      for (int32_t k = 0; k < count; ++k)
        gpu.mig_devices.push_back(
            {fmt::format("MIG-{}-{}-{}", node.name, g, gpu.mig_devices.size()), name,
             profile ? profile->memory_mib * 1048576 : 0, ""});
    }
  }
  return gpus;
}

}  // namespace

SimulatedBackend::SimulatedBackend(SimulatedBackendOptions options)
    : options_(std::move(options)) {}

Result<std::unique_ptr<SimulatedBackend>> SimulatedBackend::Create(
    SimulatedBackendOptions options) {
  if (options.step.count() <= 0)
    return Status::InvalidArgument("the simulated step must be positive");
  std::unique_ptr<SimulatedBackend> b(new SimulatedBackend(std::move(options)));
  const SimulatedBackendOptions& o = b->options_;
  CHAMBER_ASSIGN_OR_RETURN(b->policy_, sim::MakePolicy("chamber", o.engine));
  b->sim_options_.queues = o.queues;
  b->sim_options_.gpu_mtbf_hours = o.gpu_mtbf_hours;
  b->sim_options_.repair_time = o.repair_time;
  b->sim_options_.seed = o.seed;
  b->sim_options_.mig_profiles = o.cluster.MigProfiles();
  b->sim_options_.mig_gpus = o.cluster.MigGpus();

  std::map<std::string, int32_t> pool_index;
  for (const sim::NodePool& p : o.cluster.pools) {
    pool_index[p.name] = static_cast<int32_t>(b->pools_.size());
    b->pools_.push_back({p.name, p.gpu_model, PricingOf(p.pricing), p.price_per_gpu_hour});
  }
  const std::vector<core::Node> nodes = sim::BuildNodes(o.cluster);
  for (const core::Node& n : nodes) {
    int32_t pool = -1;
    for (const auto& [k, v] : n.labels)
      if (k == "chamber.io/pool" && pool_index.contains(v)) pool = pool_index[v];
    b->node_pool_.push_back(pool);
    b->mig_gpus_.push_back(pool >= 0 ? MigGpusOf(o.cluster.pools[static_cast<size_t>(pool)], n)
                                     : std::vector<fleet::GpuInput>{});
  }
  CHAMBER_ASSIGN_OR_RETURN(b->cluster_,
                           sim::SimCluster::Create(nodes, o.trace, b->policy_, b->sim_options_, {},
                                                   sim::SimCluster::Scheduling::kExternal));
  return b;
}

Result<const core::Snapshot*> SimulatedBackend::Refresh() {
  // The first refresh shows time 0; every later one moves time on by one step.
  if (started_) cluster_->AdvanceTo(cluster_->now() + options_.step);
  started_ = true;
  const core::Snapshot& snap = cluster_->PrepareCycle();
  // A GPU that turned unhealthy gets its fault; a repaired one loses it.
  std::set<std::string> unhealthy;
  const int64_t now_ms = options_.start_unix_ms + cluster_->now().count();
  for (const core::Node& node : snap.nodes)
    for (const core::Gpu& gpu : node.gpus) {
      if (gpu.healthy) continue;
      unhealthy.insert(gpu.uuid);
      if (!faults_.contains(gpu.uuid))
        faults_[gpu.uuid].fault = SimulatedFault(
            gpu.uuid, now_ms, gpu.model.str().find("SXM") != std::string::npos, options_.seed);
    }
  std::erase_if(faults_, [&](const auto& f) { return !unhealthy.contains(f.first); });
  return &snap;
}

Status SimulatedBackend::Apply(const core::CycleResult& result) {
  // The workloads preempted off a failed GPU, before the cycle moves them.
  const core::Snapshot& snap = cluster_->snapshot();
  for (const core::PreemptDecision& p : result.preemptions) {
    if (p.reason != core::PreemptReason::kHardwareFault) continue;
    const core::Workload& w = snap.workloads[p.workload.index()];
    core::ForEachHeldGpu(snap, w, [&](const core::Node& node, size_t g) {
      auto f = faults_.find(node.gpus[g].uuid);
      if (f == faults_.end()) return;
      std::vector<std::string>& named = f->second.requeued;
      if (std::find(named.begin(), named.end(), w.name) != named.end()) return;
      if (named.size() < kMaxNamedWorkloads) named.push_back(w.name);
      ++f->second.requeued_count;
    });
  }
  cluster_->ApplyCycle(result);
  return Status::Ok();
}

double SimulatedBackend::JobActivity(const std::string& job_id) const {
  const uint64_t h = Mix(Fnv1a(job_id, options_.seed));
  if (Unit(h) < options_.idle_job_fraction) return 0.01 + 0.02 * Unit(Mix(h + 1));
  return 0.55 + 0.42 * Unit(Mix(h + 2));
}

Observation SimulatedBackend::Observe() {
  Observation o;
  o.clock_offset_ms = options_.start_unix_ms;
  const core::Snapshot& snap = cluster_->snapshot();
  o.snapshot = &snap;
  o.pools = pools_;
  o.node_pool = node_pool_;
  o.samples.resize(snap.nodes.size());
  for (size_t n = 0; n < snap.nodes.size(); ++n) o.samples[n].resize(snap.nodes[n].gpus.size());
  o.mig_gpus = mig_gpus_;
  const int64_t minute = cluster_->now().count() / 60000;
  for (size_t w = 0; w < snap.workloads.size(); ++w) {
    const core::Workload& wl = snap.workloads[w];
    if (wl.state != core::WorkloadState::kRunning && wl.state != core::WorkloadState::kPreempting)
      continue;
    const double base = JobActivity(cluster_->JobOf(w).id);
    for (const core::PodPlacement& p : wl.placements) {
      if (!p.node.valid() || p.node.index() >= snap.nodes.size()) continue;
      const core::Node& node = snap.nodes[p.node.index()];
      for (uint64_t mask = p.gpu_mask; mask != 0; mask &= mask - 1) {
        const auto g = static_cast<size_t>(std::countr_zero(mask));
        if (g >= node.gpus.size()) continue;
        const core::Gpu& gpu = node.gpus[g];
        if (!gpu.healthy) continue;
        // Jitter of up to +-0.05, new each simulated minute.
        const double jitter =
            (Unit(Mix(Fnv1a(gpu.uuid.view(), options_.seed) ^ static_cast<uint64_t>(minute))) -
             0.5) *
            0.1;
        GpuSample& s = o.samples[p.node.index()][g];
        s.utilization = std::clamp(base + jitter, 0.0, 1.0);
        const double memory_fraction = base < 0.05 ? 0.1 : 0.3 + 0.6 * base;
        s.memory_used_bytes =
            static_cast<int64_t>(memory_fraction * static_cast<double>(gpu.memory_mib) * 1048576.0);
      }
    }
  }
  // Each fault with what was done: fenced (no Node to taint in the demo), workloads requeued.
  o.gpu_faults.reserve(faults_.size());
  for (const auto& [uuid, f] : faults_) {
    GpuFault out = f.fault;
    ActionEvidence action;
    action.gpu_fenced = true;
    action.workloads_requeued = f.requeued;
    action.workloads_requeued_count = f.requeued_count;
    out.evidence.push_back(std::move(action));
    o.gpu_faults.emplace(uuid, std::move(out));
  }
  return o;
}

Status SimulatedBackend::SetSchedulable(std::string_view node, bool schedulable) {
  const core::Snapshot& snap = cluster_->snapshot();
  for (size_t n = 0; n < snap.nodes.size(); ++n) {
    if (snap.nodes[n].name == node) {
      cluster_->SetUnschedulable(n, !schedulable);
      return Status::Ok();
    }
  }
  return Status::NotFound("no node named \"" + std::string(node) + "\"");
}

}  // namespace chamber::backend
