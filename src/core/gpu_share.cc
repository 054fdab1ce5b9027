#include "core/gpu_share.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cstdlib>
#include <limits>
#include <tuple>
#include <utility>

#include <fmt/format.h>

namespace chamber::core {

// ---- MIG ----------------------------------------------------------------------------------------

namespace {

// Placements as `nvidia-smi mig -lgipp` lists them (NVIDIA's MIG user guide): start slots as a
// bit set, and the slots an instance holds. Memory as the profile's name says, in MiB.
constexpr uint8_t kAllStarts = 0b0111'1111;  // 0..6
constexpr uint8_t kEven = 0b0101'0101;       // 0, 2, 4, 6
constexpr uint8_t kEvenTo4 = 0b0001'0101;    // 0, 2, 4
constexpr uint8_t kHalves = 0b0001'0001;     // 0, 4
constexpr uint8_t kZero = 0b0000'0001;       // 0

constexpr std::array<MigProfile, 6> kA100_40{{
    {"1g.5gb", 1, 5 * 1024, 1, kAllStarts},
    {"1g.10gb", 1, 10 * 1024, 2, kEven},
    {"2g.10gb", 2, 10 * 1024, 2, kEvenTo4},
    {"3g.20gb", 3, 20 * 1024, 4, kHalves},
    {"4g.20gb", 4, 20 * 1024, 4, kZero},
    {"7g.40gb", 7, 40 * 1024, 8, kZero},
}};
// A100 80GB and H100 80GB share their profiles and placements.
constexpr std::array<MigProfile, 6> k80{{
    {"1g.10gb", 1, 10 * 1024, 1, kAllStarts},
    {"1g.20gb", 1, 20 * 1024, 2, kEven},
    {"2g.20gb", 2, 20 * 1024, 2, kEvenTo4},
    {"3g.40gb", 3, 40 * 1024, 4, kHalves},
    {"4g.40gb", 4, 40 * 1024, 4, kZero},
    {"7g.80gb", 7, 80 * 1024, 8, kZero},
}};
const MigModel kMigModels[] = {
    {"A100-40GB", kA100_40},
    {"A100-80GB", k80},
    {"H100-80GB", k80},
};

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

}  // namespace

const MigModel* FindMigModel(std::string_view gpu_model) {
  const bool a100 = Contains(gpu_model, "A100"), h100 = Contains(gpu_model, "H100");
  const bool gb40 = Contains(gpu_model, "40GB"), gb80 = Contains(gpu_model, "80GB");
  if (a100 && gb40) return &kMigModels[0];
  if (a100 && gb80) return &kMigModels[1];
  if (h100 && gb80) return &kMigModels[2];
  return nullptr;
}

const MigProfile* FindMigProfile(const MigModel& model, std::string_view profile) {
  for (const MigProfile& p : model.profiles)
    if (p.name == profile) return &p;
  return nullptr;
}

uint8_t MigSlots(const MigProfile& profile, int32_t start) {
  return static_cast<uint8_t>(((1u << profile.size) - 1) << start);
}

int32_t MigFirstStart(const MigProfile& profile, uint8_t used) {
  for (int32_t s = 0; s < 8; ++s)
    if ((profile.starts >> s & 1) != 0 && (MigSlots(profile, s) & used) == 0) return s;
  return -1;
}

// ---- Requests -----------------------------------------------------------------------------------

ShareRequest WholeGpus(int32_t gpus, int64_t cpu_milli) {
  ShareRequest r;
  r.gpus = gpus;
  r.cpu_milli = cpu_milli;
  return r;
}
ShareRequest GpuShare(int32_t gpu_milli, int64_t gpu_memory_mib, int64_t cpu_milli) {
  ShareRequest r;
  r.gpu_milli = gpu_milli;
  r.gpu_memory_mib = gpu_memory_mib;
  r.cpu_milli = cpu_milli;
  return r;
}
ShareRequest MigDevice(std::string profile) {
  ShareRequest r;
  r.mig_profile = std::move(profile);
  return r;
}

Status ValidateShareRequest(const ShareRequest& r) {
  if (r.gpus < 0) return Status::InvalidArgument(fmt::format("gpus: {} is negative", r.gpus));
  if (r.gpus > kMaxSharedGpusPerNode)
    return Status::InvalidArgument(
        fmt::format("gpus: {} is more than a node holds ({})", r.gpus, kMaxSharedGpusPerNode));
  if (r.gpu_milli < 0 || r.gpu_milli >= kMilliPerGpu)
    return Status::InvalidArgument(
        fmt::format("gpu_milli: {} is not in 1..999 (ask for whole GPUs with gpus)", r.gpu_milli));
  if (r.gpu_memory_mib < 0)
    return Status::InvalidArgument(fmt::format("gpu_memory_mib: {} is negative", r.gpu_memory_mib));
  if (r.cpu_milli < 0)
    return Status::InvalidArgument(fmt::format("cpu_milli: {} is negative", r.cpu_milli));
  if (r.memory_bytes < 0)
    return Status::InvalidArgument(fmt::format("memory_bytes: {} is negative", r.memory_bytes));
  if (!r.mig_profile.empty()) {
    if (r.gpus > 0 || r.gpu_milli > 0 || r.gpu_memory_mib > 0)
      return Status::InvalidArgument(fmt::format(
          "mig_profile: \"{}\" comes alone (the request also has gpus: {}, gpu_milli: {}, "
          "gpu_memory_mib: {})",
          r.mig_profile, r.gpus, r.gpu_milli, r.gpu_memory_mib));
    for (const MigModel& m : kMigModels)
      if (FindMigProfile(m, r.mig_profile) != nullptr) return Status::Ok();
    return Status::InvalidArgument(fmt::format(
        "mig_profile: \"{}\" is not a MIG profile of A100 or H100 GPUs", r.mig_profile));
  }
  if (r.gpus > 0 && (r.gpu_milli > 0 || r.gpu_memory_mib > 0))
    return Status::InvalidArgument(fmt::format(
        "gpus: {} with gpu_milli: {} and gpu_memory_mib: {}; a pod asks for whole GPUs or a share "
        "of one, not both",
        r.gpus, r.gpu_milli, r.gpu_memory_mib));
  return Status::Ok();
}

std::string ShareRequestText(const ShareRequest& r) {
  switch (r.kind()) {
    case ShareRequest::Kind::kMig:
      return "MIG " + r.mig_profile;
    case ShareRequest::Kind::kWhole:
      return fmt::format("{} GPU{}", r.gpus, r.gpus == 1 ? "" : "s");
    case ShareRequest::Kind::kCpu:
      return "no GPU";
    case ShareRequest::Kind::kShare:
      break;
  }
  std::string out;
  if (r.gpu_milli > 0) {
    std::string frac = fmt::format("{:03d}", r.gpu_milli);
    while (frac.back() == '0') frac.pop_back();
    out = "0." + frac + " GPU";
  }
  if (r.gpu_memory_mib > 0)
    out += fmt::format("{}{} MiB GPU memory", out.empty() ? "" : " + ", r.gpu_memory_mib);
  return out;
}

// ---- Nodes --------------------------------------------------------------------------------------

std::vector<ShareNodeSpec> UniformShareNodes(int32_t nodes, int32_t gpus, int64_t memory_mib,
                                             std::string model) {
  ShareNodeSpec node;
  node.gpus.assign(static_cast<size_t>(gpus), ShareGpuSpec{memory_mib, std::move(model)});
  return std::vector<ShareNodeSpec>(static_cast<size_t>(nodes), node);
}

ShareCluster::ShareCluster(const std::vector<ShareNodeSpec>& nodes) {
  constexpr int64_t kNoLimit = int64_t{1} << 62;
  first_.reserve(nodes.size() + 1);
  first_.push_back(0);
  for (const ShareNodeSpec& n : nodes) {
    int32_t model = -1;
    if (!n.gpus.empty()) {
      const auto it = std::find(models_.begin(), models_.end(), n.gpus.front().model);
      model = static_cast<int32_t>(it - models_.begin());
      if (it == models_.end()) models_.push_back(n.gpus.front().model);
    }
    model_.push_back(model);
    cpu_.push_back(n.cpu_milli > 0 ? n.cpu_milli : kNoLimit);
    memory_.push_back(n.memory_bytes > 0 ? n.memory_bytes : kNoLimit);
    assert(n.gpus.size() <= kMaxSharedGpusPerNode);
    for (const ShareGpuSpec& g : n.gpus) {
      GpuFree f;
      f.memory_mib = f.total_memory_mib = g.memory_mib;
      f.healthy = g.healthy;
      if (g.mig) f.mig = FindMigModel(g.model);
      if (g.mig && f.mig == nullptr) f.healthy = false;  // MIG mode on a model without a table
      if (f.Shareable()) capacity_milli_ += kMilliPerGpu;
      gpus_.push_back(f);
    }
    first_.push_back(static_cast<int32_t>(gpus_.size()));
  }
  free_milli_ = capacity_milli_;
}

uint64_t ShareCluster::ModelMask(const std::vector<std::string>& models) const {
  if (models.empty()) return 0;
  uint64_t mask = uint64_t{1} << 63;  // matches no node: a list of unknown models allows none
  for (const std::string& m : models) {
    const auto it = std::find(models_.begin(), models_.end(), m);
    const auto id = it - models_.begin();
    if (it != models_.end() && id < 63) mask |= uint64_t{1} << id;
  }
  return mask;
}

Status ShareCluster::Apply(const SharePlacement& p) {
  if (p.node < 0 || p.node >= node_count())
    return Status::InvalidArgument(fmt::format("node: {} is not a node", p.node));
  const size_t first = static_cast<size_t>(first_[static_cast<size_t>(p.node)]);
  const size_t count = gpus(p.node).size();
  // A pod without a GPU names none; every other names GPUs the node has.
  const bool no_gpu = p.mig == nullptr && p.gpu_milli == 0 && p.gpu_memory_mib == 0;
  if ((p.gpu_mask == 0) != no_gpu || (count < 64 && (p.gpu_mask >> count) != 0))
    return Status::InvalidArgument(
        fmt::format("gpu_mask: {:#x} names no GPU or GPUs node {} lacks", p.gpu_mask, p.node));
  const size_t node = static_cast<size_t>(p.node);
  if (p.cpu_milli > cpu_[node] || p.memory_bytes > memory_[node])
    return Status::InvalidArgument(
        fmt::format("cpu_milli: {} and memory_bytes: {} do not fit node {} ({} and {} free)",
                    p.cpu_milli, p.memory_bytes, p.node, cpu_[node], memory_[node]));
  for (uint64_t m = p.gpu_mask; m != 0; m &= m - 1) {
    const GpuFree& g = gpus_[first + static_cast<size_t>(std::countr_zero(m))];
    const int gpu = std::countr_zero(m);
    if (p.mig != nullptr) {
      if (g.mig == nullptr || !g.healthy || std::popcount(p.gpu_mask) != 1 || p.mig_start < 0 ||
          p.mig_start > 7 || (p.mig->starts >> p.mig_start & 1) == 0 ||
          (MigSlots(*p.mig, p.mig_start) & g.mig_used) != 0 ||
          FindMigProfile(*g.mig, p.mig->name) != p.mig)
        return Status::InvalidArgument(fmt::format("mig: {} at slot {} does not fit GPU {}/{}",
                                                   p.mig->name, p.mig_start, p.node, gpu));
    } else if (p.gpu_milli == kMilliPerGpu) {
      if (!g.Shareable() || !g.EntirelyFree())
        return Status::InvalidArgument(
            fmt::format("gpu: {}/{} is not entirely free for a whole-GPU pod", p.node, gpu));
    } else if (std::popcount(p.gpu_mask) != 1 || !g.Fits(p.gpu_milli, p.gpu_memory_mib)) {
      return Status::InvalidArgument(
          fmt::format("gpu_milli: {} and gpu_memory_mib: {} do not fit "
                      "GPU {}/{} ({} and {} free)",
                      p.gpu_milli, p.gpu_memory_mib, p.node, gpu, g.milli, g.memory_mib));
    }
  }
  cpu_[node] -= p.cpu_milli;
  memory_[node] -= p.memory_bytes;
  for (uint64_t m = p.gpu_mask; m != 0; m &= m - 1) {
    GpuFree& g = gpus_[first + static_cast<size_t>(std::countr_zero(m))];
    if (p.mig != nullptr) {
      g.mig_used |= MigSlots(*p.mig, p.mig_start);
    } else if (p.gpu_milli == kMilliPerGpu) {
      g.milli = 0;
      g.memory_mib = 0;
      free_milli_ -= kMilliPerGpu;
    } else {
      g.milli -= p.gpu_milli;
      g.memory_mib -= p.gpu_memory_mib;
      free_milli_ -= p.gpu_milli;
    }
  }
  return Status::Ok();
}

void ShareCluster::Release(const SharePlacement& p) {
  const size_t first = static_cast<size_t>(first_[static_cast<size_t>(p.node)]);
  cpu_[static_cast<size_t>(p.node)] += p.cpu_milli;
  memory_[static_cast<size_t>(p.node)] += p.memory_bytes;
  for (uint64_t m = p.gpu_mask; m != 0; m &= m - 1) {
    GpuFree& g = gpus_[first + static_cast<size_t>(std::countr_zero(m))];
    if (p.mig != nullptr) {
      g.mig_used &= static_cast<uint8_t>(~MigSlots(*p.mig, p.mig_start));
    } else if (p.gpu_milli == kMilliPerGpu) {
      g.milli = kMilliPerGpu;
      g.memory_mib = g.total_memory_mib;
      free_milli_ += kMilliPerGpu;
    } else {
      g.milli += p.gpu_milli;
      g.memory_mib += p.gpu_memory_mib;
      free_milli_ += p.gpu_milli;
    }
    assert(g.milli <= kMilliPerGpu && g.memory_mib <= g.total_memory_mib);
  }
}

// ---- The workload mix ---------------------------------------------------------------------------

WorkloadMix::WorkloadMix(int64_t window, size_t max_classes)
    : window_(std::max<int64_t>(1, window)),
      max_classes_(std::min(max_classes, kMaxMixClasses)),
      ring_(static_cast<size_t>(window_), -1) {}

int32_t WorkloadMix::Find(const ShareRequest& r) const {
  for (size_t i = 0; i < classes_.size(); ++i) {
    const ShareRequest& c = classes_[i].request;
    if (c.gpus == r.gpus && c.gpu_milli == r.gpu_milli && c.gpu_memory_mib == r.gpu_memory_mib &&
        c.cpu_milli == r.cpu_milli && c.memory_bytes == r.memory_bytes &&
        c.gpu_model_mask == r.gpu_model_mask)
      return static_cast<int32_t>(i);
  }
  return -1;
}

void WorkloadMix::Record(const ShareRequest& r) {
  if (r.kind() == ShareRequest::Kind::kMig) return;
  if (recorded_ >= window_) {
    const int32_t old = ring_[next_];
    if (old >= 0) {
      --classes_[static_cast<size_t>(old)].weight;
      --total_;
    } else {
      --untracked_;
    }
  }
  int32_t c = Find(r);
  if (c < 0 && classes_.size() < max_classes_) {
    classes_.push_back({ShareRequest{r.gpus,
                                     r.gpu_milli,
                                     r.gpu_memory_mib,
                                     {},
                                     r.cpu_milli,
                                     r.memory_bytes,
                                     r.gpu_model_mask},
                        0});
    c = static_cast<int32_t>(classes_.size() - 1);
  }
  if (c >= 0) {
    ++classes_[static_cast<size_t>(c)].weight;
    ++total_;
  } else {
    ++untracked_;
  }
  ring_[next_] = c;
  next_ = (next_ + 1) % ring_.size();
  ++recorded_;
}

// ---- Fragmentation ------------------------------------------------------------------------------

NodeFree NodeFreeOf(const ShareCluster& cluster, int32_t node) {
  return {cluster.gpus(node), cluster.free_cpu_milli(node), cluster.free_memory_bytes(node),
          cluster.node_model(node)};
}

namespace {
bool NodeLacks(const NodeFree& node, const ShareRequest& r) {
  return node.cpu_milli < r.cpu_milli || node.memory_bytes < r.memory_bytes ||
         !ShareCluster::ModelAllowed(r.gpu_model_mask, node.model);
}
}  // namespace

int64_t NodeFragmentation(const NodeFree& node, std::span<const MixClass> mix) {
  int64_t entirely_free = 0;
  for (const GpuFree& g : node.gpus) entirely_free += g.Shareable() && g.EntirelyFree() ? 1 : 0;
  int64_t total = 0;
  for (const MixClass& c : mix) {
    int64_t frag = 0;
    for (const GpuFree& g : node.gpus) {
      if (NodeLacks(node, c.request)) {
        frag += g.UsableMilli();
      } else if (c.request.gpus > 0) {
        if (entirely_free < c.request.gpus || !g.EntirelyFree()) frag += g.UsableMilli();
      } else if (!g.Fits(c.request.gpu_milli, c.request.gpu_memory_mib)) {
        frag += g.UsableMilli();
      }
    }
    total += c.weight * frag;
  }
  return total;
}

NodeScorer::NodeScorer(const NodeFree& node, std::span<const MixClass> mix)
    : node_(&node), mix_(mix.first(std::min(mix.size(), kMaxMixClasses))) {
  totals_.cpu = node.cpu_milli;
  totals_.memory = node.memory_bytes;
  for (const GpuFree& g : node.gpus) {
    totals_.free += g.UsableMilli();
    if (g.Shareable() && g.EntirelyFree())
      ++totals_.entirely_free;
    else
      totals_.partial += g.UsableMilli();
    for (size_t t = 0; t < mix_.size(); ++t) unfit_[t] += UnfitMilli(g, t);
  }
  frag_ = Fragmentation(totals_);
}

// The GPU's free compute when share class t cannot use it, else 0 (0 for whole classes).
int64_t NodeScorer::UnfitMilli(const GpuFree& g, size_t t) const {
  const ShareRequest& c = mix_[t].request;
  return c.gpus == 0 && !g.Fits(c.gpu_milli, c.gpu_memory_mib) ? g.UsableMilli() : 0;
}

int64_t NodeScorer::Fragmentation(const Totals& n, const GpuFree* from, const GpuFree* to,
                                  int64_t count) const {
  int64_t total = 0;
  for (size_t t = 0; t < mix_.size(); ++t) {
    const MixClass& c = mix_[t];
    int64_t f = 0;
    if (n.cpu < c.request.cpu_milli || n.memory < c.request.memory_bytes ||
        !ShareCluster::ModelAllowed(c.request.gpu_model_mask, node_->model))
      f = n.free;
    else if (c.request.gpus > 0)
      f = n.entirely_free >= c.request.gpus ? n.partial : n.free;
    else
      f = from == nullptr ? unfit_[t]
                          : unfit_[t] - count * (UnfitMilli(*from, t) - UnfitMilli(*to, t));
    total += c.weight * f;
  }
  return total;
}

NodeScorer::Choice NodeScorer::Best(const ShareRequest& r) const {
  Choice best;
  if (totals_.cpu < r.cpu_milli || totals_.memory < r.memory_bytes ||
      !ShareCluster::ModelAllowed(r.gpu_model_mask, node_->model))
    return best;
  const std::span<const GpuFree> gpus = node_->gpus;
  Totals after = totals_;
  after.cpu -= r.cpu_milli;
  after.memory -= r.memory_bytes;
  if (r.kind() == ShareRequest::Kind::kCpu) {
    best.delta = Fragmentation(after) - frag_;  // only the node's CPU and memory change
    best.tie = totals_.free;
    return best;
  }
  if (r.gpus > 0) {
    if (totals_.entirely_free < r.gpus) return best;
    const GpuFree* free_gpu = nullptr;
    for (const GpuFree& g : gpus)
      if (g.Shareable() && g.EntirelyFree()) {
        free_gpu = &g;
        break;
      }
    GpuFree held = *free_gpu;
    held.milli = 0;
    held.memory_mib = 0;
    after.free -= int64_t{r.gpus} * kMilliPerGpu;
    after.entirely_free -= r.gpus;
    best.delta = Fragmentation(after, free_gpu, &held, r.gpus) - frag_;
    return best;
  }
  int32_t best_left = 0;
  bool best_reserved = false;
  // GPUs in the same state score the same: each state once, at its lowest index.
  std::array<std::tuple<int32_t, int64_t, bool>, kMaxSharedGpusPerNode> seen;
  size_t seen_count = 0;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const GpuFree& g = gpus[i];
    if (!g.Fits(r.gpu_milli, r.gpu_memory_mib)) continue;
    const std::tuple<int32_t, int64_t, bool> state{g.milli, g.memory_mib, g.reserved};
    const auto seen_end = seen.begin() + static_cast<std::ptrdiff_t>(seen_count);
    if (std::find(seen.begin(), seen_end, state) != seen_end) continue;
    if (seen_count < seen.size()) seen[seen_count++] = state;
    GpuFree h = g;
    h.milli -= r.gpu_milli;
    h.memory_mib -= r.gpu_memory_mib;
    Totals a = after;
    a.free -= r.gpu_milli;
    if (g.EntirelyFree()) {
      --a.entirely_free;
      a.partial += h.UsableMilli();
    } else {
      a.partial -= r.gpu_milli;
    }
    const int64_t delta = Fragmentation(a, &g, &h, 1) - frag_;
    if (delta < best.delta ||
        (delta == best.delta &&
         (h.milli < best_left || (h.milli == best_left && g.reserved && !best_reserved)))) {
      best = {delta, static_cast<int32_t>(i)};
      best_left = h.milli;
      best_reserved = g.reserved;
    }
  }
  return best;
}

int64_t NodeStrandedMilli(const NodeFree& node, std::span<const MixClass> mix) {
  int64_t entirely_free = 0;
  for (const GpuFree& g : node.gpus) entirely_free += g.Shareable() && g.EntirelyFree() ? 1 : 0;
  int64_t stranded = 0;
  for (const GpuFree& g : node.gpus) {
    if (g.UsableMilli() == 0) continue;
    bool usable = false;
    for (const MixClass& c : mix) {
      if (c.weight <= 0 || c.request.kind() == ShareRequest::Kind::kCpu ||
          NodeLacks(node, c.request))
        continue;
      usable = c.request.gpus > 0 ? g.EntirelyFree() && entirely_free >= c.request.gpus
                                  : g.Fits(c.request.gpu_milli, c.request.gpu_memory_mib);
      if (usable) break;
    }
    if (!usable) stranded += g.UsableMilli();
  }
  return stranded;
}

int64_t StrandedMilli(const ShareCluster& cluster, std::span<const MixClass> mix) {
  int64_t total = 0;
  for (int32_t n = 0; n < cluster.node_count(); ++n)
    total += NodeStrandedMilli(NodeFreeOf(cluster, n), mix);
  return total;
}

// ---- Policies -----------------------------------------------------------------------------------

std::string_view ShareStrategyName(ShareStrategy s) {
  switch (s) {
    case ShareStrategy::kFirstFit:
      return "first-fit";
    case ShareStrategy::kBestFit:
      return "best-fit";
    case ShareStrategy::kFgd:
      return "fgd";
    case ShareStrategy::kChamber:
      return "chamber";
  }
  return "?";
}

Result<ShareStrategy> ParseShareStrategy(std::string_view name) {
  if (name == "first-fit") return ShareStrategy::kFirstFit;
  if (name == "best-fit") return ShareStrategy::kBestFit;
  if (name == "fgd") return ShareStrategy::kFgd;
  if (name == "chamber") return ShareStrategy::kChamber;
  return Status::InvalidArgument(fmt::format(
      "policy: \"{}\" is not a GPU-sharing policy (first-fit, best-fit, fgd, chamber)", name));
}

namespace {

uint64_t LowestEntirelyFree(std::span<const GpuFree> gpus, int32_t k) {
  uint64_t mask = 0;
  for (size_t i = 0; i < gpus.size() && k > 0; ++i)
    if (gpus[i].Shareable() && gpus[i].EntirelyFree()) {
      mask |= uint64_t{1} << i;
      --k;
    }
  return k == 0 ? mask : 0;
}

SharePlacement ShareOn(int32_t node, size_t gpu, const ShareRequest& r) {
  return {node, uint64_t{1} << gpu, r.gpu_milli,   r.gpu_memory_mib, nullptr,
          -1,   r.cpu_milli,        r.memory_bytes};
}
SharePlacement WholeOn(int32_t node, uint64_t mask, const ShareRequest& r) {
  return {node, mask, kMilliPerGpu, 0, nullptr, -1, r.cpu_milli, r.memory_bytes};
}
SharePlacement CpuOn(int32_t node, const ShareRequest& r) {
  return {node, 0, 0, 0, nullptr, -1, r.cpu_milli, r.memory_bytes};
}

constexpr int64_t kInfeasible = std::numeric_limits<int64_t>::max();

}  // namespace

// FGD's kept state: per node its fragmentation under the scored mix; per class of the mix, each
// node's best placement (the least increase of its fragmentation, NodeScorer) and a tournament
// tree over nodes for the least increase, lowest node first. A placement or release recomputes
// only its node.
class SharePlacer::Fgd {
 public:
  Fgd(const ShareCluster& cluster, FgdOptions options, bool by_demand)
      : cluster_(&cluster), options_(options), by_demand_(by_demand) {
    const size_t n = static_cast<size_t>(cluster.node_count());
    frag_.resize(n);
    leaves_ = std::bit_ceil(std::max<size_t>(1, n));
  }

  std::span<const MixClass> scored() const { return scored_; }
  int64_t refreshes() const { return refreshes_; }

  void Refresh(const WorkloadMix& mix) {
    counted_ = mix.classes();
    scored_ = counted_;
    // Weighed by demand, a class counts the GPU thousandths its requests bring. A class asking
    // for no GPU weighs nothing either way: no GPU compute is usable or not to it.
    for (MixClass& c : scored_) {
      if (by_demand_) c.weight *= c.request.DemandMilli();
      if (c.request.kind() == ShareRequest::Kind::kCpu) c.weight = 0;
    }
    scored_total_ = mix.total();
    since_check_ = 0;
    ++refreshes_;
    const size_t k = scored_.size();
    best_.assign(k, std::vector<NodeScorer::Choice>(frag_.size()));
    tree_.assign(k, std::vector<int32_t>(2 * leaves_, -1));
    for (int32_t n = 0; n < static_cast<int32_t>(frag_.size()); ++n) Recompute(n, false);
    for (size_t c = 0; c < k; ++c) {
      std::vector<int32_t>& t = tree_[c];
      for (size_t i = 0; i < frag_.size(); ++i) t[leaves_ + i] = static_cast<int32_t>(i);
      for (size_t i = leaves_ - 1; i >= 1; --i) t[i] = Winner(c, t[2 * i], t[2 * i + 1]);
    }
  }

  // Called after the mix recorded a request: refreshes the scores when they are stale.
  void MaybeRefresh(const WorkloadMix& mix, int32_t request_class) {
    if (refreshes_ == 0 ||
        (request_class >= 0 && static_cast<size_t>(request_class) >= scored_.size())) {
      Refresh(mix);
      return;
    }
    if (++since_check_ < options_.check_every) return;
    since_check_ = 0;
    // L1 distance between the shares, in thousandths.
    const int64_t w = mix.total(), s = scored_total_;
    if (w == 0 || s == 0) return;
    int64_t distance = 0;
    for (size_t c = 0; c < mix.classes().size(); ++c) {
      const int64_t now = mix.classes()[c].weight;
      const int64_t then = c < counted_.size() ? counted_[c].weight : 0;
      distance += std::abs(now * s - then * w);
    }
    if (distance * kMilliPerGpu > options_.refresh_drift_milli * w * s) Refresh(mix);
  }

  std::optional<SharePlacement> Choose(const ShareRequest& r, int32_t request_class) const {
    if (request_class >= 0 && static_cast<size_t>(request_class) < scored_.size()) {
      const size_t c = static_cast<size_t>(request_class);
      const int32_t n = tree_[c][1];
      if (n < 0 || best_[c][static_cast<size_t>(n)].delta == NodeScorer::kNoPlacement)
        return std::nullopt;
      return Build(r, n, best_[c][static_cast<size_t>(n)]);
    }
    // A request outside the scored mix: every node, once.
    int32_t node = -1;
    NodeScorer::Choice best;
    for (int32_t n = 0; n < static_cast<int32_t>(frag_.size()); ++n) {
      const NodeFree free = NodeFreeOf(*cluster_, n);
      const NodeScorer::Choice b = NodeScorer(free, scored_).Best(r);
      if (std::pair(b.delta, b.tie) < std::pair(best.delta, best.tie)) {
        best = b;
        node = n;
      }
    }
    if (node < 0) return std::nullopt;
    return Build(r, node, best);
  }

  // After the node's GPUs, CPU or memory changed.
  void Recompute(int32_t n, bool update_trees = true) {
    const NodeFree free = NodeFreeOf(*cluster_, n);
    const NodeScorer scorer(free, scored_);
    frag_[static_cast<size_t>(n)] = scorer.fragmentation();
    for (size_t c = 0; c < scored_.size(); ++c) {
      best_[c][static_cast<size_t>(n)] = scorer.Best(scored_[c].request);
      if (update_trees) {
        std::vector<int32_t>& t = tree_[c];
        for (size_t i = (leaves_ + static_cast<size_t>(n)) / 2; i >= 1; i /= 2)
          t[i] = Winner(c, t[2 * i], t[2 * i + 1]);
      }
    }
  }

  int64_t Kept(int32_t n) const { return frag_[static_cast<size_t>(n)]; }

 private:
  int32_t Winner(size_t c, int32_t a, int32_t b) const {
    if (a < 0) return b;
    if (b < 0) return a;
    const NodeScorer::Choice& ca = best_[c][static_cast<size_t>(a)];
    const NodeScorer::Choice& cb = best_[c][static_cast<size_t>(b)];
    return std::tuple(cb.delta, cb.tie, b) < std::tuple(ca.delta, ca.tie, a) ? b : a;
  }

  SharePlacement Build(const ShareRequest& r, int32_t n, const NodeScorer::Choice& b) const {
    if (r.kind() == ShareRequest::Kind::kCpu) return CpuOn(n, r);
    if (r.gpus > 0) return WholeOn(n, LowestEntirelyFree(cluster_->gpus(n), r.gpus), r);
    return ShareOn(n, static_cast<size_t>(b.gpu), r);
  }

  const ShareCluster* cluster_;
  FgdOptions options_;
  bool by_demand_ = false;
  std::vector<MixClass> counted_;  // the mix as counted when the scores were computed
  std::vector<MixClass> scored_;   // the weights the scores use
  int64_t scored_total_ = 0;
  int64_t since_check_ = 0;
  int64_t refreshes_ = 0;
  std::vector<int64_t> frag_;  // per node, under the scored mix
  size_t leaves_ = 1;
  std::vector<std::vector<NodeScorer::Choice>> best_;  // [class][node]
  std::vector<std::vector<int32_t>> tree_;             // [class]: tournament tree, root at 1
};

SharePlacer::SharePlacer(ShareStrategy strategy, const std::vector<ShareNodeSpec>& nodes,
                         FgdOptions options)
    : strategy_(strategy), cluster_(nodes), mix_(options.window, options.max_classes) {
  if (strategy_ == ShareStrategy::kFgd || strategy_ == ShareStrategy::kChamber)
    fgd_ = std::make_unique<Fgd>(cluster_, options, strategy_ == ShareStrategy::kChamber);
}

SharePlacer::~SharePlacer() = default;

std::span<const MixClass> SharePlacer::scored_mix() const {
  return fgd_ ? fgd_->scored() : std::span<const MixClass>();
}
int64_t SharePlacer::KeptFragmentation(int32_t node) const { return fgd_ ? fgd_->Kept(node) : 0; }
int64_t SharePlacer::refreshes() const { return fgd_ ? fgd_->refreshes() : 0; }

std::optional<SharePlacement> SharePlacer::Place(const ShareRequest& r) {
  if (r.kind() == ShareRequest::Kind::kMig) return PlaceMig(r);
  std::optional<SharePlacement> p;
  if (fgd_) {
    mix_.Record(r);
    const int32_t c = mix_.Find(r);
    fgd_->MaybeRefresh(mix_, c);
    p = fgd_->Choose(r, c);
  } else {
    p = strategy_ == ShareStrategy::kFirstFit ? FirstFit(r) : BestFit(r);
  }
  if (!p) return std::nullopt;
  // A policy's choice always fits; Apply checks it all the same, and a choice it refuses is not
  // taken.
  if (const Status s = cluster_.Apply(*p); !s.ok()) {
    assert(false && "a share policy chose a placement that does not fit");
    return std::nullopt;
  }
  if (fgd_) fgd_->Recompute(p->node);
  return p;
}

void SharePlacer::Release(const SharePlacement& p) {
  cluster_.Release(p);
  if (fgd_) fgd_->Recompute(p.node);
}

std::optional<SharePlacement> SharePlacer::PlaceMig(const ShareRequest& r) {
  // First fit: the first MIG GPU with room. Best fit and FGD: the one left with the fewest free
  // slots (MIG GPUs hold no shares, so they do not change the fragmentation FGD measures).
  std::optional<SharePlacement> best;
  int best_left = 9;
  for (int32_t n = 0; n < cluster_.node_count(); ++n) {
    if (!cluster_.NodeFits(n, r)) continue;
    const std::span<const GpuFree> gpus = cluster_.gpus(n);
    for (size_t i = 0; i < gpus.size(); ++i) {
      const GpuFree& g = gpus[i];
      if (g.mig == nullptr || !g.healthy) continue;
      const MigProfile* profile = FindMigProfile(*g.mig, r.mig_profile);
      if (profile == nullptr) continue;
      const int32_t start = MigFirstStart(*profile, g.mig_used);
      if (start < 0) continue;
      const int left =
          8 - std::popcount(static_cast<unsigned>(g.mig_used | MigSlots(*profile, start)));
      if (left < best_left) {
        best =
            SharePlacement{n, uint64_t{1} << i, 0, 0, profile, start, r.cpu_milli, r.memory_bytes};
        best_left = left;
        if (strategy_ == ShareStrategy::kFirstFit) break;
      }
    }
    if (best && strategy_ == ShareStrategy::kFirstFit) break;
  }
  if (!best || !cluster_.Apply(*best).ok()) return std::nullopt;
  if (fgd_) fgd_->Recompute(best->node);  // the node's CPU and memory changed
  return best;
}

std::optional<SharePlacement> SharePlacer::FirstFit(const ShareRequest& r) const {
  for (int32_t n = 0; n < cluster_.node_count(); ++n) {
    if (!cluster_.NodeFits(n, r)) continue;
    if (r.kind() == ShareRequest::Kind::kCpu) return CpuOn(n, r);
    const std::span<const GpuFree> gpus = cluster_.gpus(n);
    if (r.gpus > 0) {
      if (const uint64_t mask = LowestEntirelyFree(gpus, r.gpus); mask != 0)
        return WholeOn(n, mask, r);
      continue;
    }
    for (size_t i = 0; i < gpus.size(); ++i)
      if (gpus[i].Fits(r.gpu_milli, r.gpu_memory_mib)) return ShareOn(n, i, r);
  }
  return std::nullopt;
}

std::optional<SharePlacement> SharePlacer::BestFit(const ShareRequest& r) const {
  std::optional<SharePlacement> best;
  std::pair<int64_t, int64_t> best_left{kInfeasible, kInfeasible};
  for (int32_t n = 0; n < cluster_.node_count(); ++n) {
    if (!cluster_.NodeFits(n, r)) continue;
    if (r.kind() == ShareRequest::Kind::kCpu) {
      // The node left with the least free CPU, then memory.
      const std::pair<int64_t, int64_t> left{cluster_.free_cpu_milli(n) - r.cpu_milli,
                                             cluster_.free_memory_bytes(n) - r.memory_bytes};
      if (left < best_left) {
        best_left = left;
        best = CpuOn(n, r);
      }
      continue;
    }
    const std::span<const GpuFree> gpus = cluster_.gpus(n);
    if (r.gpus > 0) {
      // The node left with the least free compute.
      const uint64_t mask = LowestEntirelyFree(gpus, r.gpus);
      if (mask == 0) continue;
      int64_t free = 0;
      for (const GpuFree& g : gpus) free += g.UsableMilli();
      const std::pair<int64_t, int64_t> left{free - int64_t{r.gpus} * kMilliPerGpu, 0};
      if (left < best_left) {
        best_left = left;
        best = WholeOn(n, mask, r);
      }
      continue;
    }
    // The GPU left with the least free compute, then the least free memory.
    for (size_t i = 0; i < gpus.size(); ++i) {
      const GpuFree& g = gpus[i];
      if (!g.Fits(r.gpu_milli, r.gpu_memory_mib)) continue;
      const std::pair<int64_t, int64_t> left{g.milli - r.gpu_milli,
                                             g.memory_mib - r.gpu_memory_mib};
      if (left < best_left) {
        best_left = left;
        best = ShareOn(n, i, r);
      }
    }
  }
  return best;
}

}  // namespace chamber::core
