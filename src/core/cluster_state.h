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
//     count on but no one else takes.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
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
  int32_t model_id = -1;      // interned GPU model of the node's GPUs (-1: no GPUs)
  std::array<int32_t, kNumDomainLevels> domain{-1, -1, -1};  // interned domain ids (-1: none)
  uint32_t first_island = 0;  // its NVLink islands: ClusterState::islands()
  uint32_t num_islands = 0;
  bool schedulable = true;  // not cordoned and not rejected as malformed
};

// Capacity on one node: free, or (in an overlay) extra.
struct NodeCapacity {
  uint64_t gpu_mask = 0;
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
  int32_t pods = 0;

  // What one pod of `request` holds on its GPUs `gpus`.
  static NodeCapacity OfPod(uint64_t gpus, const Resources& request) {
    return {gpus, request.cpu_milli(), request.memory_bytes(), 1};
  }
  void Add(const NodeCapacity& o) {
    gpu_mask |= o.gpu_mask;
    cpu_milli += o.cpu_milli;
    memory_bytes += o.memory_bytes;
    pods += o.pods;
  }
  void Remove(const NodeCapacity& o) {
    gpu_mask &= ~o.gpu_mask;
    cpu_milli -= o.cpu_milli;
    memory_bytes -= o.memory_bytes;
    pods -= o.pods;
  }
  // Whether one more pod of `request` fits.
  bool Fits(const Resources& request) const;
};

// What a cycle derives from the snapshot's nodes alone: their facts, interned models and
// topology domains, and the free capacity, buckets and domain totals of a cluster with nothing
// held. Building it reads every node and GPU; a session whose nodes have not changed since the
// last cycle passes the index it built then and the cycle skips that.
class NodeIndex {
 public:
  // Nodes that cannot be used (too many GPUs, negative allocatable) are marked unschedulable
  // and reported in `issues`.
  explicit NodeIndex(const std::vector<Node>& nodes);

  size_t size() const { return facts_.size(); }
  const std::vector<SnapshotIssue>& issues() const { return issues_; }

 private:
  friend class ClusterState;
  std::vector<NodeFacts> facts_;
  std::vector<uint64_t> island_masks_;  // every node's islands, side by side
  std::array<std::vector<std::vector<int32_t>>, kNumDomainLevels> domain_nodes_;
  std::vector<std::string> models_;
  std::unordered_map<std::string, int32_t> model_ids_;
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
    const size_t words = bucket_words_;
    size_t word = static_cast<size_t>(from) >> 6;
    if (word >= words) return -1;
    const uint64_t* bits = bucket_bits_.data() + static_cast<size_t>(k) * words;
    uint64_t w = bits[word] & (~uint64_t{0} << (from & 63));
    while (w == 0) {
      if (++word == words) return -1;
      w = bits[word];
    }
    return static_cast<int32_t>(word * 64 + static_cast<size_t>(std::countr_zero(w)));
  }
  // The same, all of them: for tests and explanations.
  std::vector<int32_t> nodes_with_free_gpus(int k) const;

  int num_domains(DomainLevel level) const;
  const std::vector<int32_t>& domain_nodes(DomainLevel level, int32_t domain) const;
  int64_t domain_free_gpus(DomainLevel level, int32_t domain) const;

  // Interned GPU model id, -1 when no node has that model.
  int32_t model_id(std::string_view model) const;
  const std::string& model_name(int32_t id) const { return index_->models_[id]; }

  // Healthy GPUs, CPU and memory of schedulable nodes; and what of it is free now.
  const Resources& capacity() const { return index_->capacity_; }
  const Resources& total_free() const { return total_free_; }

  const std::vector<SnapshotIssue>& issues() const { return index_->issues_; }

  // --- Mutations: the only way holdings change. ---

  // Records a pod the snapshot says is already placed. Unhealthy GPUs may be held (a GPU can fail
  // under running work). Fails, changing nothing, when a GPU is already held by someone else,
  // the node id is out of range, or a GPU index does not exist.
  Status ClaimExisting(const PodPlacement& p, const Resources& request);
  // Claims free capacity for a pod the engine places; the caller has checked that it fits.
  void Claim(const PodPlacement& p, const Resources& request);
  // Holds for a preemptor what of a planned pod's room is free now: its free GPUs among the
  // placement's, and up to the request's CPU and memory. The rest of the room is its victims',
  // on its way back. Held room is no one else's for the rest of the cycle. Returns what it held.
  NodeCapacity Hold(const PodPlacement& p, const Resources& request);
  // Returns a pod's holdings to the free pool (a pod never marked releasing).
  void Release(const PodPlacement& p, const Resources& request);
  // Marks a held pod's capacity as being released by a preemption victim.
  void MarkReleasing(const PodPlacement& p, const Resources& request);
  // Takes back what MarkReleasing recorded for the pod.
  void UnmarkReleasing(const PodPlacement& p, const Resources& request);

  // From BeginJournal on, the state remembers each node's holdings as they were before the
  // node's first change; RollBack returns every node to them and ends the journal. A state
  // kept between cycles runs a cycle's claims and releases this way and drops them after it.
  void BeginJournal() { journaling_ = true; }
  void RollBack();

  // Sanity check used by tests: holdings, buckets and domain totals agree.
  Status CheckInvariants() const;

 private:
  ClusterState(const std::vector<Node>* nodes, std::shared_ptr<const NodeIndex> index);
  void MoveBucket(int32_t node, int from, int to);
  void Journal(int32_t node) {
    if (!journaling_ || journaled_[node]) return;
    journaled_[node] = 1;
    journal_.push_back({node, free_[node], releasing_[node], held_mask_[node]});
  }
  // Scalars rather than a Resources, so that a claim builds none on the stack
  // (docs/benchmarks.md, "Reasons kept out of the code").
  void AdjustFree(int32_t node, uint64_t gpu_add, uint64_t gpu_remove, int64_t cpu_milli,
                  int64_t memory_bytes);

  const std::vector<Node>* nodes_;
  std::shared_ptr<const NodeIndex> index_;
  std::vector<NodeCapacity> free_;
  std::vector<NodeCapacity> releasing_;
  std::vector<uint64_t> held_mask_;  // GPUs held, healthy or not
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
  };
  bool journaling_ = false;
  std::vector<Saved> journal_;
  std::vector<uint8_t> journaled_;  // per node: in journal_
};

}  // namespace chamber::core
