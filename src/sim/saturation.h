// Saturation mode, as the GPU-fragmentation literature evaluates packing (Weng et al., USENIX ATC
// 2023): pods arrive one after another and never finish; each is placed by a GPU-sharing policy
// or left unplaced, and arrivals go on until the demand that has arrived reaches a multiple of
// the cluster's capacity. Along the way, at steps of arrived demand, the run records how much GPU
// capacity is unallocated and how much of that is stranded (free but too fragmented for any
// request of the workload's mix).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "core/gpu_share.h"
#include "core/model.h"
#include "sim/trace/trace.h"

namespace chamber::sim {

struct SaturationOptions {
  int64_t until_permille = 1300;  // stop once arrived demand reaches 130% of capacity
  int64_t step_permille = 50;     // a point every 5% of capacity
  uint64_t seed = 1;              // for arrivals drawn from the trace's pods
  bool sampled = false;           // every arrival drawn from the trace's pods, none in order
};

// The pods that arrive, in order: one request per pod of the trace (jobs in trace order; a
// fraction of a GPU as a share, else whole GPUs, with the pod's CPU, memory and accepted GPU
// models; a pod without GPUs asks for its CPU and memory alone), then, while arrived demand is
// short of `until_permille` of the cluster's capacity, requests drawn with the seed from the
// trace's own pods (`sampled` counts those). With options.sampled, every arrival is drawn.
struct SaturationArrivals {
  std::vector<core::ShareRequest> requests;
  int64_t from_trace = 0;
  int64_t sampled = 0;
};
Result<SaturationArrivals> MakeSaturationArrivals(const Trace& trace,
                                                  const core::ShareCluster& cluster,
                                                  const SaturationOptions& options);

struct SaturationPoint {
  double arrived_demand = 0;  // the step: arrived GPU demand over capacity
  double unallocated = 0;     // free GPU capacity over capacity, once demand reached the step
  double stranded = 0;        // free capacity no request class of the arrivals can use
  friend bool operator==(const SaturationPoint&, const SaturationPoint&) = default;
};

struct SaturationCurve {
  std::string policy;
  int64_t capacity_milli = 0;
  int64_t arrivals = 0;
  int64_t placed = 0;
  int64_t unplaced = 0;
  std::vector<SaturationPoint> points;  // at 0, step, 2 * step, ... until
};

// The GPUs, CPU and memory of the simulator's nodes (unhealthy GPUs and those held outside stay
// out).
std::vector<core::ShareNodeSpec> ShareNodesOf(const std::vector<core::Node>& nodes);

// One policy over the arrivals. `policy` is first-fit, best-fit, fgd or chamber (FGD weighed by
// demand).
Result<SaturationCurve> RunSaturation(const std::vector<core::ShareNodeSpec>& nodes,
                                      const SaturationArrivals& arrivals, const std::string& policy,
                                      const SaturationOptions& options);

// The point at `permille` of capacity (exactly a step), or nullptr.
const SaturationPoint* PointAt(const SaturationCurve& c, int64_t permille,
                               const SaturationOptions& options);

struct SaturationInfo {
  std::string trace;
  std::string cluster;
  int64_t from_trace = 0;
  int64_t sampled = 0;
};
nlohmann::json SaturationToJson(const SaturationInfo& info,
                                const std::vector<SaturationCurve>& curves);
std::string SaturationTable(const SaturationInfo& info, const std::vector<SaturationCurve>& curves);
// One self-contained HTML page with the two curves per policy (html_report.cc).
std::string SaturationHtml(const SaturationInfo& info, const std::vector<SaturationCurve>& curves);

}  // namespace chamber::sim
