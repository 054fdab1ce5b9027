#include "core/bench/synthetic.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

namespace chamber::core {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;
constexpr int64_t kMinute = 60 * 1000;
constexpr int64_t kHour = 60 * kMinute;

// Numbers from a std::mt19937_64, whose output the standard fixes bit for bit. The modulo in
// Below is biased by at most n / 2^64, far below anything a benchmark could notice.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : gen_() % n; }
  double Unit() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }  // [0, 1)
  bool Chance(double p) { return Unit() < p; }
  double Between(double lo, double hi) { return lo + (hi - lo) * Unit(); }

 private:
  std::mt19937_64 gen_;
};

std::string Numbered(const char* prefix, int64_t n, int width) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*lld", width, static_cast<long long>(n));
  return prefix + std::string(buf);
}

// Splits `total` into parts proportional to `weights` that sum to exactly `total`: floors
// first, then one more each to the largest remainders (ties to the lower index).
std::vector<int64_t> Apportion(int64_t total, const std::vector<double>& weights) {
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<int64_t> out(weights.size(), 0);
  std::vector<std::pair<double, size_t>> remainder;
  int64_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const double exact = static_cast<double>(total) * weights[i] / sum;
    out[i] = static_cast<int64_t>(exact);
    given += out[i];
    remainder.emplace_back(-(exact - static_cast<double>(out[i])), i);
  }
  std::sort(remainder.begin(), remainder.end());
  for (size_t k = 0; given < total; k = (k + 1) % remainder.size(), ++given)
    ++out[remainder[k].second];
  return out;
}

struct GpuModel {
  const char* name;
  int64_t memory_mib;
  int weight;
};
constexpr std::array<GpuModel, 3> kModels = {
    {{"H100-SXM5-80GB", 81559, 5}, {"A100-SXM4-80GB", 81920, 3}, {"H200-SXM5-141GB", 143771, 2}}};

// Free GPUs per node while running work is laid out, with the nodes that still have room for
// a pod in a list that supports picking one at random in O(1).
// Shares of one GPU as the fragmentation literature's production traces have them: a tenth to
// seven tenths, most below a half; each with an eighth of a one-GPU pod's CPU and memory.
constexpr std::array<int64_t, 8> kShareMilli = {100, 200, 250, 250, 300, 500, 500, 700};
Resources ShareRequest(int64_t milli) { return Resources::OfMilli(milli, 1000, 8 * kGi); }

class Layout {
 public:
  Layout(int32_t nodes, int32_t gpus_per_node, int32_t gpus_per_pod)
      : gpus_per_pod_(gpus_per_pod),
        free_(static_cast<size_t>(nodes),
              gpus_per_node >= 64 ? ~uint64_t{0} : (uint64_t{1} << gpus_per_node) - 1),
        pos_(static_cast<size_t>(nodes), -1) {
    for (int32_t n = 0; n < nodes; ++n) Open(n);
  }

  // Places `pods` pods together if it can, each on the node of the one before when it fits;
  // a new node is one of up to 8 random picks that has room for the rest of the gang, else the
  // last pick. Returns false, changing nothing, when the pods do not fit.
  bool Place(int32_t pods, int32_t gpus_per_node, Rng& rng, std::vector<PodPlacement>* out) {
    out->clear();
    int32_t cur = -1;
    for (int32_t p = 0; p < pods; ++p) {
      if (cur < 0 || std::popcount(free_[cur]) < gpus_per_pod_) {
        const int need = std::min((pods - p) * gpus_per_pod_, gpus_per_node);
        cur = Pick(need, rng);
        if (cur < 0) {
          for (const PodPlacement& pl : *out) Give(pl.node.value, pl.gpu_mask);
          out->clear();
          return false;
        }
      }
      uint64_t mask = 0;
      uint64_t left = free_[cur];
      for (int i = 0; i < gpus_per_pod_; ++i) {
        const uint64_t bit = left & (~left + 1);
        mask |= bit;
        left &= ~bit;
      }
      Take(cur, mask);
      out->push_back({NodeId{cur}, mask});
    }
    return true;
  }

 private:
  int32_t Pick(int need, Rng& rng) const {
    if (open_.empty()) return -1;
    int32_t pick = -1;
    for (int t = 0; t < 8; ++t) {
      pick = open_[rng.Below(open_.size())];
      if (std::popcount(free_[pick]) >= need) break;
    }
    return pick;
  }
  void Open(int32_t n) {
    if (pos_[n] >= 0 || std::popcount(free_[n]) < gpus_per_pod_) return;
    pos_[n] = static_cast<int32_t>(open_.size());
    open_.push_back(n);
  }
  void Close(int32_t n) {
    if (pos_[n] < 0 || std::popcount(free_[n]) >= gpus_per_pod_) return;
    const int32_t last = open_.back();
    open_[pos_[n]] = last;
    pos_[last] = pos_[n];
    open_.pop_back();
    pos_[n] = -1;
  }
  void Take(int32_t n, uint64_t mask) {
    free_[n] &= ~mask;
    Close(n);
  }
  void Give(int32_t n, uint64_t mask) {
    free_[n] |= mask;
    Open(n);
  }

  int32_t gpus_per_pod_;
  std::vector<uint64_t> free_;
  std::vector<int32_t> pos_;  // index in open_, -1 when not there
  std::vector<int32_t> open_;
};

struct Team {
  std::string name;
  int64_t quota = 0;
  int64_t running = 0;  // GPUs held by generated running work
  bool lender = true;   // churn mode: even teams lend, odd teams borrow
};

// A team drawn with probability proportional to quota, among those `eligible`.
template <typename Eligible>
int32_t DrawTeam(const std::vector<Team>& teams, Rng& rng, Eligible eligible) {
  int64_t total = 0;
  for (const Team& t : teams)
    if (eligible(t)) total += t.quota;
  if (total <= 0) return -1;
  int64_t x = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(total)));
  for (size_t i = 0; i < teams.size(); ++i) {
    if (!eligible(teams[i])) continue;
    if (x < teams[i].quota) return static_cast<int32_t>(i);
    x -= teams[i].quota;
  }
  return -1;
}

}  // namespace

std::string ValidateSyntheticSpec(const SyntheticSpec& s) {
  if (s.nodes < 1) return "nodes must be at least 1";
  if (s.gpus_per_node < 1 || s.gpus_per_node > kMaxGpusPerNode)
    return "gpus per node must be between 1 and " + std::to_string(kMaxGpusPerNode);
  if (s.nodes_per_block < 1) return "nodes per block must be at least 1";
  if (s.zones < 1) return "zones must be at least 1";
  if (s.nvlink_domain_nodes < 0) return "NVLink domain size must not be negative";
  if (s.gpu_models < 1 || s.gpu_models > static_cast<int32_t>(kModels.size()))
    return "GPU models must be between 1 and " + std::to_string(kModels.size());
  if (s.queues < 1) return "queues must be at least 1";
  if (s.churn && s.queues < 2) return "churn needs at least 2 queues (a lender and a borrower)";
  if (s.teams_per_department < 1) return "teams per department must be at least 1";
  if (s.pods < 0) return "pods must not be negative";
  if (s.gang_size < 1) return "gang size must be at least 1";
  if (s.gpus_per_pod < 1 || s.gpus_per_pod > s.gpus_per_node)
    return "GPUs per pod must be between 1 and the GPUs per node";
  if (!(s.running_fraction >= 0 && s.running_fraction <= 1))
    return "running fraction must be between 0 and 1";
  if (!(s.pinned_model_fraction >= 0 && s.pinned_model_fraction <= 1))
    return "pinned model fraction must be between 0 and 1";
  return {};
}

Snapshot MakeSyntheticCluster(const SyntheticSpec& spec) {
  Rng rng(spec.seed);
  Snapshot snap;
  snap.now = Time{30LL * 24 * kHour};
  const int64_t capacity = int64_t{spec.nodes} * spec.gpus_per_node;

  // Nodes: one GPU model per block, blocks spread evenly over the zones.
  const int32_t blocks = (spec.nodes + spec.nodes_per_block - 1) / spec.nodes_per_block;
  int model_weights = 0;
  for (int m = 0; m < spec.gpu_models; ++m) model_weights += kModels[m].weight;
  std::vector<int> block_model(static_cast<size_t>(blocks));
  for (int& bm : block_model) {
    int x = static_cast<int>(rng.Below(static_cast<uint64_t>(model_weights)));
    bm = 0;
    while (x >= kModels[bm].weight) x -= kModels[bm++].weight;
  }
  snap.nodes.resize(static_cast<size_t>(spec.nodes));
  for (int32_t i = 0; i < spec.nodes; ++i) {
    Node& node = snap.nodes[i];
    const int32_t block = i / spec.nodes_per_block;
    const GpuModel& model = kModels[block_model[block]];
    node.name = Numbered("node-", i, 5);
    node.topology.block = Numbered("block-", block, 3);
    node.topology.zone = Numbered("zone-", int64_t{block} * spec.zones / blocks, 2);
    if (spec.nvlink_domain_nodes > 0) {
      node.topology.nvlink_domain =
          node.topology.block +
          Numbered("-nvl-", (i % spec.nodes_per_block) / spec.nvlink_domain_nodes, 2);
    }
    node.labels = Labels{{"topology.kubernetes.io/zone", node.topology.zone},
                         {"chamber.dev/block", node.topology.block},
                         {"nvidia.com/gpu.product", model.name}};
    // 16 cores and 128 GiB per GPU, double what a pod asks per GPU: GPUs run out first.
    node.allocatable = Resources::Of(0, int64_t{spec.gpus_per_node} * 16000,
                                     int64_t{spec.gpus_per_node} * 128 * kGi);
    node.gpus.resize(static_cast<size_t>(spec.gpus_per_node));
    for (int32_t g = 0; g < spec.gpus_per_node; ++g) {
      Gpu& gpu = node.gpus[g];
      gpu.uuid = "GPU-" + node.name + "-" + std::to_string(g);
      gpu.model = model.name;
      gpu.memory_mib = model.memory_mib;
      gpu.nvlink_island = 0;  // one NVSwitch per node, as on HGX boards
      gpu.pcie_domain = g * 2 / spec.gpus_per_node;
    }
  }

  // Queues: departments split the capacity, their teams split the department's share.
  const int32_t departments =
      (spec.queues + spec.teams_per_department - 1) / spec.teams_per_department;
  std::vector<double> dept_weight(static_cast<size_t>(departments));
  for (double& w : dept_weight) w = rng.Between(0.5, 1.5);
  const std::vector<int64_t> dept_quota = Apportion(capacity, dept_weight);
  std::vector<Team> teams;
  for (int32_t d = 0; d < departments; ++d) {
    Queue dept;
    dept.name = Numbered("dept-", d, 2);
    dept.res(Resource::kGpu).quota = Gpus(dept_quota[d]);
    snap.queues.push_back(dept);
    const int32_t first = d * spec.teams_per_department;
    const int32_t last = std::min(spec.queues, first + spec.teams_per_department);
    std::vector<double> team_weight(static_cast<size_t>(last - first));
    for (double& w : team_weight) w = rng.Between(0.5, 1.5);
    const std::vector<int64_t> team_quota = Apportion(dept_quota[d], team_weight);
    for (int32_t t = first; t < last; ++t) {
      Queue q;
      q.name = Numbered("team-", t, 3);
      q.parent = dept.name;
      QueueResource& gpu = q.res(Resource::kGpu);
      gpu.quota = Gpus(team_quota[t - first]);
      const bool lender = t % 2 == 0;
      if (t % 3 == 0 && gpu.quota > 0 && !(spec.churn && !lender)) gpu.limit = 2 * gpu.quota;
      snap.queues.push_back(q);
      teams.push_back({q.name, team_quota[t - first], 0, lender});
    }
  }

  // Workloads: the running ones first, laid out on the nodes, then the waiting ones.
  const int32_t gang = spec.gang_size;
  const int64_t gpus_per_workload = int64_t{gang} * spec.gpus_per_pod;
  const int64_t workloads = spec.pods / gang;
  const int64_t running_target =
      std::min<int64_t>(std::llround(static_cast<double>(workloads) * spec.running_fraction),
                        capacity / gpus_per_workload);
  const Resources pod_request = Resources::Of(spec.gpus_per_pod, int64_t{spec.gpus_per_pod} * 8000,
                                              int64_t{spec.gpus_per_pod} * 64 * kGi);
  auto make = [&](int32_t team) {
    Workload w;
    w.queue = teams[team].name;
    PodSet ps;
    ps.name = "worker";
    ps.count = gang;
    ps.request = pod_request;
    w.pod_sets.push_back(std::move(ps));
    return w;
  };
  auto pin_some = [&](Workload& w, int model) {
    if (rng.Chance(spec.pinned_model_fraction)) w.pod_sets[0].gpu_models = {kModels[model].name};
  };

  Layout layout(spec.nodes, spec.gpus_per_node, spec.gpus_per_pod);
  std::vector<PodPlacement> placed;
  int64_t running = 0;
  for (; running < running_target; ++running) {
    // Steady: within quota everywhere. Churn: lenders up to a quarter of quota, borrowers the rest.
    int32_t team = DrawTeam(teams, rng, [](const Team&) { return true; });
    auto room = [&](const Team& t) {
      const int64_t cap = spec.churn ? (t.lender ? t.quota / 4 : capacity) : t.quota;
      return t.running + gpus_per_workload <= cap;
    };
    if (!room(teams[team])) {
      team = spec.churn ? DrawTeam(teams, rng, [&](const Team& t) { return !t.lender; })
                        : DrawTeam(teams, rng, room);
      if (team < 0) break;
    }
    if (!layout.Place(gang, spec.gpus_per_node, rng, &placed)) break;
    Team& t = teams[team];
    const bool within_quota = t.running + gpus_per_workload <= t.quota;
    // With shares in churn mode, the GPUs a running workload would hold are filled with shares
    // of its team instead, each a workload of its own.
    const bool share_out = spec.shares && spec.churn && gang == 1 && spec.gpus_per_pod == 1;
    for (int64_t used = 0;;) {
      Workload w = make(team);
      if (share_out) {
        const int64_t milli = kShareMilli[rng.Below(kShareMilli.size())];
        if (used + milli > kMilliPerGpu) break;
        used += milli;
        w.pod_sets[0].request = ShareRequest(milli);
      }
      w.state = WorkloadState::kRunning;
      w.placements = placed;
      if (within_quota && rng.Chance(0.15)) {
        w.priority = kReservedPriority;
      } else {
        w.priority = spec.churn && !t.lender && rng.Chance(0.5) ? 0 : 50;
      }
      // 3% started under a minute ago (too young to preempt), the rest up to three days ago.
      const int64_t age = rng.Chance(0.03)
                              ? static_cast<int64_t>(rng.Below(kMinute))
                              : 5 * kMinute + static_cast<int64_t>(rng.Below(72 * kHour));
      w.start_time = snap.now - Duration{age};
      w.submit_time = w.start_time - Duration{static_cast<int64_t>(rng.Below(10 * kMinute))};
      if (rng.Chance(0.5)) w.last_checkpoint_time = w.start_time + Duration{age / 2};
      const std::string& model = snap.nodes[placed.front().node.index()].gpus.front().model;
      const bool one_model = std::all_of(placed.begin(), placed.end(), [&](const PodPlacement& p) {
        return snap.nodes[p.node.index()].gpus.front().model == model;
      });
      if (one_model) {
        for (int m = 0; m < spec.gpu_models; ++m)
          if (model == kModels[m].name) pin_some(w, m);
      }
      snap.workloads.push_back(std::move(w));
      if (!share_out) break;
    }
    t.running += gpus_per_workload;
  }
  for (int64_t i = running; i < workloads; ++i) {
    // Steady: anywhere by quota. Churn: lenders only, so their work reclaims.
    const int32_t team =
        DrawTeam(teams, rng, [&](const Team& t) { return !spec.churn || t.lender; });
    Workload w = make(team);
    if (spec.churn) {
      const double x = rng.Unit();
      w.priority = x < 0.1 ? kReservedPriority : x < 0.55 ? 50 : 0;
    } else {
      w.priority = rng.Chance(0.6) ? 0 : 50;
    }
    w.submit_time = snap.now - Duration{static_cast<int64_t>(rng.Below(kHour))};
    pin_some(w, static_cast<int>(rng.Below(static_cast<uint64_t>(spec.gpu_models))));
    if (spec.shares)
      w.pod_sets[0].request = ShareRequest(kShareMilli[rng.Below(kShareMilli.size())]);
    snap.workloads.push_back(std::move(w));
  }

  // Mix running and waiting work, as an informer's list would, then lay the workloads out anew
  // in that order: a daemon builds its snapshot in one pass, so each workload's pod sets and
  // placements sit in memory in workload order, not in the order they were generated here.
  std::vector<size_t> order(snap.workloads.size());
  std::iota(order.begin(), order.end(), 0);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
  std::vector<Workload> mixed;
  mixed.reserve(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    mixed.push_back(snap.workloads[order[i]]);  // a copy: fresh allocations, in order
    mixed.back().name = mixed.back().queue + Numbered("/job-", static_cast<int64_t>(i), 6);
  }
  snap.workloads = std::move(mixed);
  return snap;
}

}  // namespace chamber::core
