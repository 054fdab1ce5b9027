// GPU sharing: several pods on one GPU, each holding a share of its compute (thousandths of the
// GPU) and of its memory (MiB), or one of its MIG devices; whole-GPU pods keep exclusive GPUs.
// Every quantity is an exact integer. Placement policies over a set of nodes: first fit, best
// fit, and fragmentation gradient descent (FGD, Weng et al., USENIX ATC 2023), which places a
// pod where it least increases the GPU capacity that the workload mix cannot use. Pods may also
// ask for the node's CPU and memory, which can leave a node's GPUs unusable.
// docs/sharing.md describes the model and what each policy promises.
//
// The policies are a self-contained component (saturation runs, share_bench); the engine scores
// its placements of single shares with NodeScorer (share_scores.h).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/resources.h"

namespace chamber::core {

inline constexpr int kMaxSharedGpusPerNode = 64;

// ---- MIG ----------------------------------------------------------------------------------------

// A MIG profile on one GPU model, as NVIDIA documents its placements: the GPU has 8 memory slots
// (and 7 compute slices); an instance of `size` slots starts at one of `starts` (bit s = slot s)
// and holds slots [start, start + size).
struct MigProfile {
  std::string_view name;  // "3g.40gb"
  int32_t compute_slices = 0;
  int64_t memory_mib = 0;
  int32_t size = 0;
  uint8_t starts = 0;
};

struct MigModel {
  std::string_view gpu_model;  // as the GPU reports it, e.g. "H100-SXM5-80GB"
  std::span<const MigProfile> profiles;
};

// The MIG models Chamber knows: A100 40GB, A100 80GB, H100 80GB. A model matches when its name
// contains "A100" or "H100" and "40GB"/"80GB"; nullptr when it has no MIG table.
const MigModel* FindMigModel(std::string_view gpu_model);
const MigProfile* FindMigProfile(const MigModel& model, std::string_view profile);
// The lowest start where `profile` fits beside the slots already held (`used`, bit s = slot s),
// or -1.
int32_t MigFirstStart(const MigProfile& profile, uint8_t used);
// The slots an instance holds.
uint8_t MigSlots(const MigProfile& profile, int32_t start);

// ---- Requests -----------------------------------------------------------------------------------

// What one pod asks of the GPUs of one node: whole GPUs (exclusive), or a share of one GPU (a
// fraction of its compute, an amount of its memory, or both), or one MIG device, or no GPU at all;
// and of the node's CPU and memory.
struct ShareRequest {
  int32_t gpus = 0;            // whole GPUs, 1..64
  int32_t gpu_milli = 0;       // a share of one GPU's compute, 1..999
  int64_t gpu_memory_mib = 0;  // an amount of one GPU's memory
  std::string mig_profile;     // e.g. "1g.10gb"; without gpus, gpu_milli or gpu_memory_mib
  int64_t cpu_milli = 0;       // of the node
  int64_t memory_bytes = 0;    // of the node
  // The GPU models the pod accepts, as ShareCluster::ModelMask gives them; 0: any.
  uint64_t gpu_model_mask = 0;

  enum class Kind { kWhole, kShare, kMig, kCpu };  // kCpu: no GPU, the node's CPU and memory
  Kind kind() const {
    return !mig_profile.empty()                  ? Kind::kMig
           : gpus > 0                            ? Kind::kWhole
           : gpu_milli > 0 || gpu_memory_mib > 0 ? Kind::kShare
                                                 : Kind::kCpu;
  }
  // GPU compute asked for, in thousandths (whole GPUs count 1,000 each; MIG 0).
  int64_t DemandMilli() const { return gpus > 0 ? int64_t{gpus} * kMilliPerGpu : gpu_milli; }

  friend bool operator==(const ShareRequest&, const ShareRequest&) = default;
};

ShareRequest WholeGpus(int32_t gpus, int64_t cpu_milli = 0);
ShareRequest GpuShare(int32_t gpu_milli, int64_t gpu_memory_mib = 0, int64_t cpu_milli = 0);
ShareRequest MigDevice(std::string profile);

// Errors name the field and its value: "gpu_milli: 1500 is not in 1..999 (ask for whole GPUs
// with gpus)".
Status ValidateShareRequest(const ShareRequest& r);
// "0.25 GPU", "2 GPUs", "MIG 3g.40gb", "no GPU"
std::string ShareRequestText(const ShareRequest& r);

// ---- Nodes and their free state -----------------------------------------------------------------

struct ShareGpuSpec {
  int64_t memory_mib = 81920;
  std::string model = "H100-SXM5-80GB";
  bool mig = false;     // MIG mode: serves MIG requests only
  bool healthy = true;  // false: never used, not capacity
};
// A node's GPUs share one model for the model constraint (GPU 0's).
struct ShareNodeSpec {
  std::vector<ShareGpuSpec> gpus;
  int64_t cpu_milli = 0;     // 0: no limit
  int64_t memory_bytes = 0;  // 0: no limit
};
// `nodes` nodes of `gpus` identical GPUs each.
std::vector<ShareNodeSpec> UniformShareNodes(int32_t nodes, int32_t gpus,
                                             int64_t memory_mib = 81920,
                                             std::string model = "H100-SXM5-80GB");

struct GpuFree {
  int32_t milli = kMilliPerGpu;
  int64_t memory_mib = 0;
  int64_t total_memory_mib = 0;
  uint8_t mig_used = 0;           // MIG GPUs: slots held
  const MigModel* mig = nullptr;  // MIG GPUs: the profile table; nullptr otherwise
  bool healthy = true;
  // A reservation pod holds it for shares (Node::reserved_gpu_mask): between GPUs a share
  // would leave equally, it goes on such a one.
  bool reserved = false;
  bool Shareable() const { return healthy && mig == nullptr; }
  bool EntirelyFree() const {
    return milli == kMilliPerGpu && memory_mib == total_memory_mib && mig_used == 0;
  }
  // Free compute that whole and share requests may use.
  int32_t UsableMilli() const { return Shareable() ? milli : 0; }
  // Whether a share of `gpu_milli` and `gpu_memory_mib` fits what is free.
  bool Fits(int32_t gpu_milli, int64_t gpu_memory_mib) const {
    return Shareable() && milli >= gpu_milli && memory_mib >= gpu_memory_mib;
  }
};

// Where one pod went: a node and its GPUs (bit i = GPU i), what it holds on a shared GPU, or the
// MIG instance's start slot.
struct SharePlacement {
  int32_t node = -1;
  uint64_t gpu_mask = 0;
  int32_t gpu_milli = 0;  // per GPU in gpu_mask: 1,000 for whole GPUs
  int64_t gpu_memory_mib = 0;
  const MigProfile* mig = nullptr;
  int32_t mig_start = -1;
  int64_t cpu_milli = 0;  // of the node
  int64_t memory_bytes = 0;
  friend bool operator==(const SharePlacement&, const SharePlacement&) = default;
};

// The free state of every GPU of every node.
class ShareCluster {
 public:
  explicit ShareCluster(const std::vector<ShareNodeSpec>& nodes);

  int32_t node_count() const { return static_cast<int32_t>(first_.size()) - 1; }
  std::span<const GpuFree> gpus(int32_t node) const {
    return {gpus_.data() + first_[static_cast<size_t>(node)],
            static_cast<size_t>(first_[static_cast<size_t>(node) + 1] -
                                first_[static_cast<size_t>(node)])};
  }
  // The node's free CPU and memory (a node without a limit has a very large amount).
  int64_t free_cpu_milli(int32_t node) const { return cpu_[static_cast<size_t>(node)]; }
  int64_t free_memory_bytes(int32_t node) const { return memory_[static_cast<size_t>(node)]; }
  bool NodeFits(int32_t node, const ShareRequest& r) const {
    return free_cpu_milli(node) >= r.cpu_milli && free_memory_bytes(node) >= r.memory_bytes &&
           ModelAllowed(r.gpu_model_mask, model_[static_cast<size_t>(node)]);
  }
  // The node's GPU model as an index into the cluster's models (-1 without GPUs).
  int32_t node_model(int32_t node) const { return model_[static_cast<size_t>(node)]; }
  // The mask of the named models (0 for an empty list: any model). Names the cluster lacks, and
  // models beyond the first 63, match no node.
  uint64_t ModelMask(const std::vector<std::string>& models) const;
  static bool ModelAllowed(uint64_t mask, int32_t model) {
    return mask == 0 || (model >= 0 && model < 63 && ((mask >> model) & 1) != 0);
  }
  // Checks that the placement fits what is free, then takes it.
  Status Apply(const SharePlacement& p);
  // Gives back what Apply took (the placement must be one that was applied).
  void Release(const SharePlacement& p);

  // Shareable GPUs' compute (healthy, not MIG): all of it, and what is free.
  int64_t CapacityMilli() const { return capacity_milli_; }
  int64_t FreeMilli() const { return free_milli_; }

 private:
  std::vector<GpuFree> gpus_;
  std::vector<int32_t> first_;  // node i's GPUs are [first_[i], first_[i + 1])
  std::vector<int64_t> cpu_, memory_;
  std::vector<int32_t> model_;
  std::vector<std::string> models_;
  int64_t capacity_milli_ = 0;
  int64_t free_milli_ = 0;
};

// ---- The workload mix ---------------------------------------------------------------------------

// One class of request and its weight (how many recent requests were of it). Requests for no GPU
// are classes too, so that placers can index them; they weigh nothing in the measures below.
struct MixClass {
  ShareRequest request;  // whole or share; MIG requests are not part of the mix
  int64_t weight = 0;
  friend bool operator==(const MixClass&, const MixClass&) = default;
};

inline constexpr size_t kMaxMixClasses = 64;

// The mix of recent requests, learned as they arrive: a bounded histogram of request classes
// over the last `window` requests. A request of a new class when `max_classes` (at most
// kMaxMixClasses) are known is counted as untracked.
class WorkloadMix {
 public:
  explicit WorkloadMix(int64_t window = 10'000, size_t max_classes = 64);
  void Record(const ShareRequest& r);
  const std::vector<MixClass>& classes() const { return classes_; }
  int64_t total() const { return total_; }
  int64_t untracked() const { return untracked_; }
  int64_t recorded() const { return recorded_; }
  // Index of the request's class, or -1.
  int32_t Find(const ShareRequest& r) const;

 private:
  int64_t window_;
  size_t max_classes_;
  std::vector<MixClass> classes_;
  std::vector<int32_t> ring_;  // class of each of the last `window` requests
  size_t next_ = 0;
  int64_t total_ = 0;
  int64_t untracked_ = 0;
  int64_t recorded_ = 0;
};

// A node's free state for the measures below: its GPUs, and its free CPU and memory.
struct NodeFree {
  std::span<const GpuFree> gpus;
  int64_t cpu_milli = int64_t{1} << 62;
  int64_t memory_bytes = int64_t{1} << 62;
  int32_t model = -1;
};
NodeFree NodeFreeOf(const ShareCluster& cluster, int32_t node);

// FGD's measure, recomputed in full: the GPU compute (thousandths) free on the node that a task
// drawn from the mix could not use, weighted by the classes' weights (so in thousandths times
// weight). For a class whose CPU, memory or GPU model the node lacks: all of the node's free
// compute. Else,
// for a share class: the free compute of each GPU that cannot hold it; for a class of k whole
// GPUs: the free compute of GPUs that are not entirely free, or of all GPUs when fewer than k are
// entirely free.
int64_t NodeFragmentation(const NodeFree& node, std::span<const MixClass> mix);

// FGD's measure of one node, kept so that each placement on it is scored in time proportional to
// the mix's classes (at most kMaxMixClasses): its free compute, the free compute of its GPUs that
// are not entirely free, how many are, and per share class the free compute of the GPUs that
// cannot hold it. A placement changes one GPU (or k entirely free ones) and the node's CPU and
// memory. The node and mix must outlive the scorer.
class NodeScorer {
 public:
  static constexpr int64_t kNoPlacement = std::numeric_limits<int64_t>::max();
  NodeScorer(const NodeFree& node, std::span<const MixClass> mix);
  int64_t fragmentation() const { return frag_; }
  struct Choice {
    int64_t delta = kNoPlacement;  // the increase of the node's fragmentation
    int32_t gpu = -1;              // a share: the GPU
    // Between nodes of equal delta, the lower goes first: for a pod without GPUs, the node's
    // free GPU compute (it goes where it leaves the fewest GPUs short of CPU); else 0.
    int64_t tie = 0;
  };
  // The least increase a placement of `r` (whole GPUs, a share or no GPU) on the node makes; for
  // a share, ties go to the GPU left with the least free compute, then to a reserved one, then
  // the lowest index.
  // kNoPlacement when `r` does not fit the node (its CPU, memory or GPU model, or no GPU with
  // room).
  Choice Best(const ShareRequest& r) const;

 private:
  struct Totals {
    int64_t free = 0;     // usable compute of every GPU
    int64_t partial = 0;  // of the GPUs that are not entirely free
    int32_t entirely_free = 0;
    int64_t cpu = 0;
    int64_t memory = 0;
  };
  int64_t UnfitMilli(const GpuFree& g, size_t t) const;
  // The fragmentation at `t`, with `count` GPUs of state `from` changed to `to`, when given.
  int64_t Fragmentation(const Totals& t, const GpuFree* from = nullptr, const GpuFree* to = nullptr,
                        int64_t count = 0) const;

  const NodeFree* node_;
  std::span<const MixClass> mix_;
  Totals totals_;
  std::array<int64_t, kMaxMixClasses> unfit_{};
  int64_t frag_ = 0;
};
// Free compute (thousandths) on the node that no class of the mix (with weight > 0) can use.
int64_t NodeStrandedMilli(const NodeFree& node, std::span<const MixClass> mix);
int64_t StrandedMilli(const ShareCluster& cluster, std::span<const MixClass> mix);

// ---- Placement policies -------------------------------------------------------------------------

enum class ShareStrategy {
  kFirstFit,  // the lowest-numbered node and GPU that fit
  kBestFit,   // the GPU (node, for whole GPUs) left with the least free after the placement
  kFgd,       // the placement that increases the node's fragmentation the least
  // FGD with each class of the mix weighed by the GPU demand its requests bring (count times
  // GPU thousandths), not by their count: capacity a placement leaves unusable to a 1-GPU class
  // weighs as much as it turns away, however few pods ask for it.
  kChamber,
};
std::string_view ShareStrategyName(ShareStrategy s);
// "first-fit", "best-fit", "fgd", "chamber".
Result<ShareStrategy> ParseShareStrategy(std::string_view name);

struct FgdOptions {
  int64_t window = 10'000;  // requests the mix remembers
  size_t max_classes = 64;
  // The per-node scores follow the learned mix: they are recomputed when the mix's shares have
  // moved by more than this (L1 distance, in thousandths), checked every `check_every` requests,
  // and at once when a request of a class the scores do not know arrives.
  int64_t refresh_drift_milli = 50;
  int64_t check_every = 256;
};

// Places requests one at a time on a ShareCluster it owns, and releases them.
class SharePlacer {
 public:
  SharePlacer(ShareStrategy strategy, const std::vector<ShareNodeSpec>& nodes,
              FgdOptions options = {});
  ~SharePlacer();
  SharePlacer(const SharePlacer&) = delete;
  SharePlacer& operator=(const SharePlacer&) = delete;

  // Chooses a place for the request and takes it; nullopt when nothing fits. The request must be
  // valid (ValidateShareRequest). FGD records it in its mix first.
  std::optional<SharePlacement> Place(const ShareRequest& r);
  void Release(const SharePlacement& p);

  ShareStrategy strategy() const { return strategy_; }
  const ShareCluster& cluster() const { return cluster_; }
  // FGD: the mix it learned, and the mix its node scores are computed for (for kChamber each
  // class weighed by its demand).
  const WorkloadMix& mix() const { return mix_; }
  std::span<const MixClass> scored_mix() const;
  // FGD: the node's fragmentation as kept incrementally, under scored_mix().
  int64_t KeptFragmentation(int32_t node) const;
  int64_t refreshes() const;

 private:
  std::optional<SharePlacement> PlaceMig(const ShareRequest& r);
  std::optional<SharePlacement> FirstFit(const ShareRequest& r) const;
  std::optional<SharePlacement> BestFit(const ShareRequest& r) const;

  class Fgd;
  ShareStrategy strategy_;
  ShareCluster cluster_;
  WorkloadMix mix_;
  std::unique_ptr<Fgd> fgd_;
};

}  // namespace chamber::core
