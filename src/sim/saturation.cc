#include "sim/saturation.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include <fmt/format.h>

#include "common/gpu_share_ask.h"

namespace chamber::sim {

Result<SaturationArrivals> MakeSaturationArrivals(const Trace& trace,
                                                  const core::ShareCluster& cluster,
                                                  const SaturationOptions& options) {
  const int64_t capacity_milli = cluster.CapacityMilli();
  if (options.step_permille <= 0 || options.until_permille < options.step_permille)
    return Status::InvalidArgument(
        fmt::format("saturation steps: step {} and until {} (per mille of capacity) need 0 < "
                    "step <= until",
                    options.step_permille, options.until_permille));
  if (capacity_milli <= 0)
    return Status::InvalidArgument("the cluster has no GPU that pods can share");
  SaturationArrivals out;
  std::vector<core::ShareRequest> pods;
  for (const TraceJob& j : trace.jobs) {
    if (!j.mig_profile.empty())
      return Status::InvalidArgument("job " + j.id + " asks for MIG devices (" + j.mig_profile +
                                     "); saturation mode runs clusters without MIG layouts");
    core::ShareRequest r;
    if (j.gpu_milli_per_pod > 0 && j.gpu_milli_per_pod < core::kMilliPerGpu)
      r.gpu_milli = j.gpu_milli_per_pod;
    else if (j.gpu_milli_per_pod >= core::kMilliPerGpu)
      r.gpus = (j.gpu_milli_per_pod + core::kMilliPerGpu - 1) / core::kMilliPerGpu;
    else
      r.gpus = j.gpus_per_pod;
    r.cpu_milli = j.cpu_milli_per_pod;
    r.memory_bytes = j.memory_bytes_per_pod;
    r.gpu_model_mask = cluster.ModelMask(j.gpu_models);
    if (j.gpu_memory_mib_per_pod > 0 && j.gpus_per_pod == 0) {
      r.gpu_memory_mib = j.gpu_memory_mib_per_pod;
      // A share of memory alone takes the part of the smallest GPU it may go on, as the engine
      // charges it while it waits (docs/sharing.md, "A share of memory alone").
      if (r.gpu_milli == 0) {
        int64_t smallest = 0;
        for (int32_t n = 0; n < cluster.node_count(); ++n) {
          if (!core::ShareCluster::ModelAllowed(r.gpu_model_mask, cluster.node_model(n))) continue;
          for (const core::GpuFree& g : cluster.gpus(n))
            if (g.Shareable() && g.total_memory_mib >= r.gpu_memory_mib &&
                (smallest == 0 || g.total_memory_mib < smallest))
              smallest = g.total_memory_mib;
        }
        if (smallest == 0)
          return Status::InvalidArgument(
              "job " + j.id + " asks for " + std::to_string(r.gpu_memory_mib) +
              " MiB of GPU memory alone: no GPU of the cluster it may go on has that much");
        r.gpu_milli = static_cast<int32_t>(gpu_share::MemoryShareMilli(r.gpu_memory_mib, smallest));
      }
    }
    if (Status s = core::ValidateShareRequest(r); !s.ok())
      return Status::InvalidArgument("job " + j.id + ": " + s.message());
    for (int32_t p = 0; p < std::max(1, j.pods); ++p) pods.push_back(r);
  }
  if (std::none_of(pods.begin(), pods.end(),
                   [](const core::ShareRequest& r) { return r.DemandMilli() > 0; }))
    return Status::InvalidArgument("the trace has no pod that asks for a GPU");
  const int64_t until = options.until_permille * capacity_milli;  // in milli x 1000
  int64_t arrived = 0;
  for (const core::ShareRequest& r : pods) {
    if (options.sampled || arrived * 1000 >= until) break;
    out.requests.push_back(r);
    arrived += r.DemandMilli();
    ++out.from_trace;
  }
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<size_t> pick(0, pods.size() - 1);
  while (arrived * 1000 < until) {
    out.requests.push_back(pods[pick(rng)]);
    arrived += out.requests.back().DemandMilli();
    ++out.sampled;
  }
  return out;
}

std::vector<core::ShareNodeSpec> ShareNodesOf(const std::vector<core::Node>& nodes) {
  std::vector<core::ShareNodeSpec> out;
  out.reserve(nodes.size());
  for (const core::Node& n : nodes) {
    core::ShareNodeSpec s;
    s.cpu_milli = n.allocatable.cpu_milli();
    s.memory_bytes = n.allocatable.memory_bytes();
    for (size_t g = 0; g < n.gpus.size() && g < core::kMaxSharedGpusPerNode; ++g) {
      core::ShareGpuSpec gpu;
      gpu.memory_mib = n.gpus[g].memory_mib;
      gpu.model = n.gpus[g].model;
      gpu.healthy = n.gpus[g].healthy && !n.unschedulable && ((n.external_gpu_mask >> g) & 1) == 0;
      s.gpus.push_back(std::move(gpu));
    }
    out.push_back(std::move(s));
  }
  return out;
}

Result<SaturationCurve> RunSaturation(const std::vector<core::ShareNodeSpec>& nodes,
                                      const SaturationArrivals& arrivals, const std::string& policy,
                                      const SaturationOptions& options) {
  CHAMBER_ASSIGN_OR_RETURN(const core::ShareStrategy strategy, core::ParseShareStrategy(policy));
  core::SharePlacer placer(strategy, nodes);
  SaturationCurve c;
  c.policy = policy;
  c.capacity_milli = placer.cluster().CapacityMilli();
  if (c.capacity_milli <= 0)
    return Status::InvalidArgument("the cluster has no GPU that pods can share");
  // The stranded share is measured against every request class that arrives and asks for GPU
  // compute, by its count.
  std::vector<core::MixClass> mix;
  for (const core::ShareRequest& r : arrivals.requests) {
    if (r.kind() == core::ShareRequest::Kind::kCpu) continue;
    auto it = std::find_if(mix.begin(), mix.end(),
                           [&](const core::MixClass& m) { return m.request == r; });
    if (it == mix.end())
      mix.push_back({r, 1});
    else
      ++it->weight;
  }
  const double cap = static_cast<double>(c.capacity_milli);
  const int64_t steps = options.until_permille / options.step_permille;
  int64_t next = 0, arrived = 0;
  auto record = [&] {
    while (next <= steps && arrived * 1000 >= next * options.step_permille * c.capacity_milli) {
      c.points.push_back({static_cast<double>(next * options.step_permille) / 1000.0,
                          static_cast<double>(placer.cluster().FreeMilli()) / cap,
                          static_cast<double>(core::StrandedMilli(placer.cluster(), mix)) / cap});
      ++next;
    }
  };
  record();
  for (const core::ShareRequest& r : arrivals.requests) {
    if (next > steps) break;
    arrived += r.DemandMilli();
    ++c.arrivals;
    if (placer.Place(r))
      ++c.placed;
    else
      ++c.unplaced;
    record();
  }
  return c;
}

const SaturationPoint* PointAt(const SaturationCurve& c, int64_t permille,
                               const SaturationOptions& options) {
  if (permille % options.step_permille != 0) return nullptr;
  const size_t i = static_cast<size_t>(permille / options.step_permille);
  return i < c.points.size() ? &c.points[i] : nullptr;
}

nlohmann::json SaturationToJson(const SaturationInfo& info,
                                const std::vector<SaturationCurve>& curves) {
  nlohmann::json policies = nlohmann::json::array();
  for (const SaturationCurve& c : curves) {
    nlohmann::json points = nlohmann::json::array();
    for (const SaturationPoint& p : c.points)
      points.push_back({{"arrivedDemand", p.arrived_demand},
                        {"unallocated", p.unallocated},
                        {"stranded", p.stranded}});
    policies.push_back({{"policy", c.policy},
                        {"arrivals", c.arrivals},
                        {"placed", c.placed},
                        {"unplaced", c.unplaced},
                        {"points", std::move(points)}});
  }
  return {{"trace", info.trace},
          {"cluster", info.cluster},
          {"saturation",
           {{"capacityGpus",
             curves.empty() ? int64_t{0} : curves.front().capacity_milli / core::kMilliPerGpu},
            {"arrivalsFromTrace", info.from_trace},
            {"arrivalsSampled", info.sampled},
            {"policies", std::move(policies)}}}};
}

std::string SaturationTable(const SaturationInfo& info,
                            const std::vector<SaturationCurve>& curves) {
  std::string out = fmt::format("trace: {}\ncluster: {}\n", info.trace, info.cluster);
  if (curves.empty()) return out;
  out += fmt::format(
      "saturation: pods arrive and never finish; {} from the trace, {} drawn from its mix; "
      "capacity {:g} GPUs\n\n",
      info.from_trace, info.sampled, static_cast<double>(curves.front().capacity_milli) / 1000.0);
  out += fmt::format("{:>8}", "arrived");
  for (const SaturationCurve& c : curves) out += fmt::format("  {:>22}", c.policy);
  out += fmt::format("\n{:>8}", "demand");
  for (size_t i = 0; i < curves.size(); ++i)
    out += fmt::format("  {:>22}", "unallocated / stranded");
  out += "\n";
  const size_t n = curves.front().points.size();
  for (size_t p = 0; p < n; ++p) {
    const double x = curves.front().points[p].arrived_demand;
    // Every 10% of capacity, and the last point.
    const long tenths = std::lround(x * 100);
    if (tenths % 10 != 0 && p + 1 != n) continue;
    out += fmt::format("{:>7.0f}%", x * 100);
    for (const SaturationCurve& c : curves) {
      if (p < c.points.size())
        out += fmt::format("  {:>10.1f}% / {:>7.1f}%", c.points[p].unallocated * 100,
                           c.points[p].stranded * 100);
      else
        out += fmt::format("  {:>22}", "-");
    }
    out += "\n";
  }
  out += "\npods placed / unplaced:";
  for (const SaturationCurve& c : curves)
    out += fmt::format("  {} {} / {}", c.policy, c.placed, c.unplaced);
  out += "\n";
  return out;
}

}  // namespace chamber::sim
