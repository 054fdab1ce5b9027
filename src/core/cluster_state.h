// ClusterState: who holds which GPU, CPU and memory on which node during one cycle.
//
// It is the only thing in the engine that changes holdings. Policies read it through a const
// reference; the engine claims and releases through the methods below, which keep three indexes
// in step with the holdings:
//   - nodes bucketed by their number of free GPUs, so best-fit placement is a short scan from
//     the smallest bucket that fits rather than a pass over every node. A bucket is a bitset
//     over node indices and is read in index order, so which of several equally full nodes
//     comes first depends on the holdings alone, never on the order they were claimed in;
//   - free GPUs per topology domain (multi-node NVLink domain, block, zone), so gang placement
//     can pick the tightest domain that can hold the gang;
//   - capacity being released by preemption victims in their grace period, which a preemptor may
//     count on but no one else takes;
//   - shares: the compute (thousandths) and memory (MiB) that pods asking for a share of one GPU
//     hold on each GPU, and the nodes with a shared GPU that has room for more. A GPU holding a
//     share is not free for whole pods, and a GPU held whole takes no share.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "core/decision.h"
#include "core/model.h"

namespace chamber::core {

enum class DomainLevel : int { kNvlink = 0, kBlock = 1, kZone = 2 };
inline constexpr int kNumDomainLevels = 3;

// Facts about a node that do not change within a cycle.
struct NodeFacts {
  int32_t gpu_count = 0;
  uint64_t healthy_mask = 0;  // bit i: GPU i exists, is healthy and is not held externally
  uint64_t failed_mask = 0;   // bit i: GPU i is unhealthy (held externally or not)
  int32_t model_id = -1;      // interned GPU model of the node's GPUs (-1: no GPUs)
  std::array<int32_t, kNumDomainLevels> domain{-1, -1, -1};  // interned domain ids (-1: none)
  uint32_t first_island = 0;  // its NVLink islands: ClusterState::islands()
  uint32_t num_islands = 0;
  uint32_t first_gpu = 0;   // its GPUs' entries in the per-GPU share tables
  bool schedulable = true;  // not cordoned and not rejected as malformed
  uint8_t mig_mask = 0;     // bit p: it advertises MIG devices of profile p
};

// Capacity on one node: free, or (in an overlay) extra.
struct NodeCapacity {
  uint64_t gpu_mask = 0;
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
  int32_t pods = 0;
  // MIG devices per profile (Snapshot::mig_profiles); sums stop at kMaxMigDevices, differences
  // at 0.
  std::array<uint8_t, kMaxMigProfiles> mig{};

  // What one pod of `request` (and `mig`) holds on its GPUs `gpus`.
  static NodeCapacity OfPod(uint64_t gpus, const Resources& request, MigAsk mig = {}) {
    NodeCapacity c{gpus, request.cpu_milli(), request.memory_bytes(), 1};
    if (mig.any()) c.mig[static_cast<size_t>(mig.profile)] = static_cast<uint8_t>(mig.devices);
    return c;
  }
  void Add(const NodeCapacity& o) {
    gpu_mask |= o.gpu_mask;
    cpu_milli += o.cpu_milli;
    memory_bytes += o.memory_bytes;
    pods += o.pods;
    if (AnyMig(o)) {
      for (size_t p = 0; p < mig.size(); ++p)
        mig[p] = static_cast<uint8_t>(std::min(kMaxMigDevices, mig[p] + o.mig[p]));
    }
  }
  void Remove(const NodeCapacity& o) {
    gpu_mask &= ~o.gpu_mask;
    cpu_milli -= o.cpu_milli;
    memory_bytes -= o.memory_bytes;
    pods -= o.pods;
    if (AnyMig(o) && AnyMig(*this)) {
      for (size_t p = 0; p < mig.size(); ++p)
        mig[p] = static_cast<uint8_t>(std::max(0, mig[p] - o.mig[p]));
    }
  }
  // Whether `c` counts any MIG device: one load, not eight (capacities are added up and taken
  // apart in every placement, and most clusters have no MIG devices).
  static bool AnyMig(const NodeCapacity& c) {
    uint64_t bits = 0;
    std::memcpy(&bits, c.mig.data(), sizeof bits);
    return bits != 0;
  }
  // Whether one more pod of `request` (and `mig`) fits.
  bool Fits(const Resources& request, MigAsk mig_ask = {}) const;
  bool HasMig(MigAsk ask) const {
    return !ask.any() || mig[static_cast<size_t>(ask.profile)] >= ask.devices;
  }
};

// What a cycle derives from the snapshot's nodes alone: their facts, interned models and
// topology domains, and the free capacity, buckets and domain totals of a cluster with nothing
// held. Building it reads every node and GPU; a session whose nodes have not changed since the
// last cycle passes the index it built then and the cycle skips that.
class NodeIndex {
 public:
  // Nodes that cannot be used (too many GPUs, negative allocatable) are marked unschedulable
  // and reported in `issues`. `mig_profiles` gives the charge of the nodes' MIG devices; a node
  // advertising a profile beyond them has those devices left out, and is reported.
  explicit NodeIndex(const std::vector<Node>& nodes,
                     const std::vector<MigResource>& mig_profiles = {});

  size_t size() const { return facts_.size(); }
  const std::vector<SnapshotIssue>& issues() const { return issues_; }

 private:
  friend class ClusterState;
  std::vector<NodeFacts> facts_;
  std::vector<uint64_t> island_masks_;  // every node's islands, side by side
  size_t num_gpus_ = 0;                 // every node's GPUs, side by side
  std::array<std::vector<std::vector<int32_t>>, kNumDomainLevels> domain_nodes_;
  std::vector<std::string> models_;
  std::unordered_map<std::string, int32_t> model_ids_;
  std::array<int32_t, kMaxMigProfiles> mig_milli_{};  // per profile: a device's charge
  std::array<std::vector<int32_t>, kMaxMigProfiles> mig_nodes_;
  Resources capacity_;
  std::vector<SnapshotIssue> issues_;
  // The holdings-dependent state of ClusterState, with nothing held.
  std::vector<NodeCapacity> free_;
  int max_gpus_ = 0;
  std::vector<uint64_t> bucket_bits_;  // ClusterState::bucket_bits_
  std::vector<int32_t> bucket_size_;
  std::array<std::vector<int64_t>, kNumDomainLevels> domain_free_;
};

class ClusterState {
 public:
  // Facts and indexes from the snapshot's nodes: `index` when that was built from as many
  // nodes, else built here. Holdings start empty.
  explicit ClusterState(const Snapshot& snapshot, std::shared_ptr<const NodeIndex> index = {});
  // The same nodes with nothing held: shares this state's facts and indexes.
  ClusterState WithNothingHeld() const;

  size_t num_nodes() const { return index_->facts_.size(); }
  const Node& node(NodeId n) const { return (*nodes_)[n.index()]; }
  const NodeFacts& facts(NodeId n) const { return index_->facts_[n.index()]; }
  // The node's NVLink islands, as GPU masks in order of island id.
  std::span<const uint64_t> islands(NodeId n) const {
    const NodeFacts& f = facts(n);
    return std::span<const uint64_t>(index_->island_masks_).subspan(f.first_island, f.num_islands);
  }
  const NodeCapacity& free(NodeId n) const { return free_[n.index()]; }
  const NodeCapacity& releasing(NodeId n) const { return releasing_[n.index()]; }
  int free_gpus(NodeId n) const;
  int max_gpus_per_node() const { return index_->max_gpus_; }

  // Schedulable nodes with exactly `k` free GPUs, 0 <= k <= max_gpus_per_node(), in index
  // order: the first at or after node `from`, or -1 when there is none.
  int32_t NextWithFreeGpus(int k, int32_t from) const {
    if (bucket_size_[k] == 0) return -1;
    return NextBit(bucket_bits_.data() + static_cast<size_t>(k) * bucket_words_, from);
  }
  // The same, all of them: for tests and explanations.
  std::vector<int32_t> nodes_with_free_gpus(int k) const;
  // Schedulable nodes that advertise MIG devices of `profile`, in index order.
  const std::vector<int32_t>& nodes_with_mig(int profile) const {
    return index_->mig_nodes_[static_cast<size_t>(profile)];
  }

  int num_domains(DomainLevel level) const;
  const std::vector<int32_t>& domain_nodes(DomainLevel level, int32_t domain) const;
  int64_t domain_free_gpus(DomainLevel level, int32_t domain) const;

  // Interned GPU model id, -1 when no node has that model.
  int32_t model_id(std::string_view model) const;
  const std::string& model_name(int32_t id) const { return index_->models_[id]; }

  // Healthy GPUs, CPU and memory of schedulable nodes; and what of it is free now, GPUs in
  // GPU-equivalents: free GPUs count 1,000 each, the compute left beside the shares on a
  // healthy shared GPU counts too, and so does each MIG device, by its charge.
  const Resources& capacity() const { return index_->capacity_; }
  const Resources& total_free() const { return total_free_; }

  // --- Shares of GPUs ---

  // GPUs of the node that hold shares (bit i = GPU i); none of them is in free().gpu_mask.
  uint64_t shared_mask(NodeId n) const { return shared_mask_[n.index()]; }
  // Those of them a share may still go beside: healthy, and not held for a preemptor that takes
  // the GPU whole once its shares are gone (Hold).
  uint64_t share_open_mask(NodeId n) const {
    const size_t i = n.index();
    return shared_mask_[i] & index_->facts_[i].healthy_mask & ~held_mask_[i];
  }
  // Compute (thousandths) and memory (MiB) that shares hold on GPU `g` of node `n`.
  int32_t share_milli(NodeId n, int g) const { return share_milli_[GpuSlot(n, g)]; }
  int64_t share_memory_mib(NodeId n, int g) const { return share_memory_[GpuSlot(n, g)]; }
  // GPU `g`'s memory, MiB (0: unknown, so no share that asks for memory fits there).
  int64_t gpu_memory_mib(NodeId n, int g) const { return node(n).gpus[g].memory_mib; }
  // Whether a share of `milli` thousandths and `memory_mib` MiB fits beside the shares already
  // on GPU `g` (which must be in share_open_mask()).
  bool ShareFits(NodeId n, int g, int64_t milli, int64_t memory_mib) const {
    const size_t slot = GpuSlot(n, g);
    return share_milli_[slot] + milli <= kMilliPerGpu &&
           (memory_mib == 0 || share_memory_[slot] + memory_mib <= gpu_memory_mib(n, g));
  }
  // Shared GPUs are indexed by the compute left beside their shares, in buckets of
  // kShareBucketWidth thousandths: bucket b holds free compute [b * width, (b + 1) * width).
  static constexpr int64_t kShareBucketWidth = 16;
  static constexpr int kShareBuckets = static_cast<int>((kMilliPerGpu - 1) / kShareBucketWidth) + 1;
  static int ShareBucket(int64_t free_milli) {
    return static_cast<int>(free_milli / kShareBucketWidth);
  }
  // Schedulable nodes with a GPU in share_open_mask() whose free compute is in `bucket`, in index
  // order: the first at or after node `from`, or -1. A best fit for a share reads the buckets
  // from the share's own up, and stops in the first that holds a GPU it fits on.
  int32_t NextWithShareRoom(int bucket, int32_t from) const {
    return NextBit(share_bucket_bits_.data() + static_cast<size_t>(bucket) * bucket_words_, from);
  }
  // The same over every bucket: any open shared GPU with compute left.
  int32_t NextWithShareRoom(int32_t from) const;

  const std::vector<SnapshotIssue>& issues() const { return index_->issues_; }

  // --- Mutations: the only way holdings change. ---

  // A pod of `request` asking for a share of one GPU (request.gpu_share()) holds that share of
  // the one GPU its placement names, and `gpu_memory_mib` of that GPU's memory; any other pod
  // holds its placement's GPUs whole. A pod asking for MIG devices (`mig`) holds that many of
  // its node's devices of the profile, and no GPU of `gpus`: the kubelet chooses the devices.
  //
  // Records a pod the snapshot says is already placed. Unhealthy GPUs may be held (a GPU can fail
  // under running work). Fails, changing nothing, when a GPU is already held by someone else (a
  // share beside a pod holding it whole, or beyond the GPU's compute or known memory), the node
  // id is out of range, or a GPU index does not exist.
  Status ClaimExisting(const PodPlacement& p, const Resources& request, int64_t gpu_memory_mib = 0,
                       MigAsk mig = {});
  // Claims free capacity for a pod the engine places; the caller has checked that it fits.
  void Claim(const PodPlacement& p, const Resources& request, int64_t gpu_memory_mib = 0,
             MigAsk mig = {});
  // Holds for a preemptor what of a planned pod's room is free now: its free GPUs among the
  // placement's, and up to the request's CPU and memory. The rest of the room is its victims',
  // on its way back. Held room is no one else's for the rest of the cycle. Returns what it held.
  // A GPU of the placement that holds shares (all of them leaving) takes no more shares. A share
  // planned on room free now is claimed; one that counts on room its victims' shares release
  // holds its node's free CPU and memory as a whole pod does, and its GPU takes no more shares.
  NodeCapacity Hold(const PodPlacement& p, const Resources& request, int64_t gpu_memory_mib = 0,
                    MigAsk mig = {});
  // Returns a pod's holdings to the free pool (a pod never marked releasing).
  void Release(const PodPlacement& p, const Resources& request, int64_t gpu_memory_mib = 0,
               MigAsk mig = {});
  // Marks a held pod's capacity as being released by a preemption victim. A share's GPU is not
  // marked: it comes back only once the pod is gone.
  void MarkReleasing(const PodPlacement& p, const Resources& request, MigAsk mig = {});
  // Takes back what MarkReleasing recorded for the pod.
  void UnmarkReleasing(const PodPlacement& p, const Resources& request, MigAsk mig = {});

  // The charge of one MIG device of `profile` (Snapshot::mig_profiles), thousandths of a GPU.
  int32_t mig_milli(int profile) const { return index_->mig_milli_[static_cast<size_t>(profile)]; }
  // The snapshot's MIG profiles.
  const std::vector<MigResource>& mig_profiles() const { return *mig_profiles_; }

  // From BeginJournal on, the state remembers each node's holdings as they were before the
  // node's first change; RollBack returns every node to them and ends the journal. A state
  // kept between cycles runs a cycle's claims and releases this way and drops them after it.
  void BeginJournal() { journaling_ = true; }
  void RollBack();

  // Sanity check used by tests: holdings, buckets and domain totals agree.
  Status CheckInvariants() const;

  // Indexes kept over the state behind a const reference (the share scores of placement) follow
  // it through this log: once TrackChanges was called, every node whose free capacity or shares
  // change (claims, holds, releases, roll-backs) is noted, once until it is next taken.
  void TrackChanges() const {
    if (!tracking_) changed_flag_.assign(free_.size(), 0);
    tracking_ = true;
  }
  // Calls fn(node) for each node changed since the last call, and forgets them.
  template <class Fn>
  void TakeChanged(Fn&& fn) const {
    for (const int32_t n : changed_) {
      changed_flag_[static_cast<size_t>(n)] = 0;
      fn(n);
    }
    changed_.clear();
  }

 private:
  ClusterState(const std::vector<Node>* nodes, const std::vector<MigResource>* mig_profiles,
               std::shared_ptr<const NodeIndex> index);
  // The first bit set at or after `from` among the bucket_words_ words from `bits` (a bitset
  // over node indices), or -1.
  int32_t NextBit(const uint64_t* bits, int32_t from) const {
    const size_t words = bucket_words_;
    size_t word = static_cast<size_t>(from) >> 6;
    if (from < 0 || word >= words) return -1;
    uint64_t w = bits[word] & (~uint64_t{0} << (from & 63));
    while (w == 0) {
      if (++word == words) return -1;
      w = bits[word];
    }
    return static_cast<int32_t>(word * 64 + static_cast<size_t>(std::countr_zero(w)));
  }
  size_t GpuSlot(NodeId n, int g) const {
    return index_->facts_[n.index()].first_gpu + static_cast<size_t>(g);
  }
  void MoveBucket(int32_t node, int from, int to);
  void Journal(int32_t node) {
    if (!journaling_ || (journaled_[node] & kJournaledNode) != 0) return;
    journaled_[node] |= kJournaledNode;
    journal_.push_back({node, free_[node], releasing_[node], held_mask_[node], shared_mask_[node]});
  }
  // Before a node's shares first change under the journal: its GPUs' share tables.
  void JournalShares(int32_t node);
  void ClaimShare(int32_t node, uint64_t gpu, const Resources& request, int64_t gpu_memory_mib);
  void ReleaseShare(int32_t node, uint64_t gpu, const Resources& request, int64_t gpu_memory_mib);
  // The compute left beside the shares on the node's open shared GPUs (0 when unschedulable),
  // and the node's bits in the share buckets, brought in step with the share tables.
  int64_t ShareRoomMilli(int32_t node) const;
  // The share buckets the node belongs in, as its share tables stand (bit b = bucket b).
  uint64_t ShareBucketsOf(int32_t node) const;
  void UpdateShareRoom(int32_t node);
  // Scalars rather than a Resources, so that a claim builds none on the stack
  // (docs/benchmarks.md, "Reasons kept out of the code").
  void AdjustFree(int32_t node, uint64_t gpu_add, uint64_t gpu_remove, int64_t cpu_milli,
                  int64_t memory_bytes);
  // Changes the node's free MIG devices of `profile` by `delta`, and the free total with them.
  void AdjustMig(int32_t node, int profile, int delta);
  // The charge of the node's free MIG devices, thousandths of a GPU.
  int64_t FreeMigMilli(int32_t node) const;

  const std::vector<Node>* nodes_;
  const std::vector<MigResource>* mig_profiles_;
  std::shared_ptr<const NodeIndex> index_;
  std::vector<NodeCapacity> free_;
  std::vector<NodeCapacity> releasing_;
  // GPUs held whole, healthy or not; a GPU also in shared_mask_ is held for a preemptor (one
  // taking it whole once its shares are gone, or a share counting on room its leaving shares
  // release) and takes no other share.
  std::vector<uint64_t> held_mask_;
  std::vector<uint64_t> shared_mask_;  // GPUs holding shares, healthy or not
  std::vector<int32_t> share_milli_;   // per GPU (NodeFacts::first_gpu): compute shares hold
  std::vector<int64_t> share_memory_;  // per GPU: memory shares hold, MiB
  // Per share bucket b, bucket_words_ words from b * bucket_words_: bit n set when schedulable
  // node n has an open shared GPU whose free compute is in bucket b; and per node its buckets.
  std::vector<uint64_t> share_bucket_bits_;
  std::vector<uint64_t> node_share_buckets_;
  // Per free-GPU count k, bucket_words_ words from k * bucket_words_: bit n set when schedulable
  // node n has exactly k free GPUs. Unschedulable nodes are in none.
  size_t bucket_words_ = 0;
  std::vector<uint64_t> bucket_bits_;
  std::vector<int32_t> bucket_size_;  // nodes per bucket
  std::array<std::vector<int64_t>, kNumDomainLevels> domain_free_;
  Resources total_free_;
  struct Saved {
    int32_t node;
    NodeCapacity free;
    NodeCapacity releasing;
    uint64_t held;
    uint64_t shared;
  };
  struct SavedShare {
    int32_t node;
    uint32_t slot;
    int32_t milli;
    int64_t memory_mib;
  };
  static constexpr uint8_t kJournaledNode = 1;
  static constexpr uint8_t kJournaledShares = 2;
  bool journaling_ = false;
  std::vector<Saved> journal_;
  std::vector<SavedShare> share_journal_;
  std::vector<uint8_t> journaled_;  // per node: kJournaledNode, kJournaledShares
  // TrackChanges: the nodes changed since TakeChanged, and a flag per node for those listed.
  mutable bool tracking_ = false;
  mutable std::vector<int32_t> changed_;
  mutable std::vector<uint8_t> changed_flag_;
};

}  // namespace chamber::core
