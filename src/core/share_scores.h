// Fragmentation-aware placement of shares in the engine (docs/sharing.md, "Where a share goes"):
// where a single pod asking for a share of one GPU goes on free capacity, and each pod of a gang
// of such pods, given the gang's pods before it (ChooseInGang). The cycle's mix is the
// GPU requests of the snapshot's pods, running and waiting, each class weighed by the GPU demand
// it brings (the `chamber` sharing policy's weights, gpu_share.h); a share goes to the node and
// GPU where it least increases that node's fragmentation under the mix (NodeScorer), then to the
// GPU it leaves the least room on, then to a GPU a reservation pod holds, then to the lowest node.
//
// For each shape of share pod set asked about (its share, GPU memory, CPU, memory and node
// constraints), each node's best placement and a tournament tree over nodes are kept: built on
// first use, and brought up to date with the nodes the state reports changed
// (ClusterState::TrackChanges) when the shape is next asked about, so a choice costs one node's
// scores per node changed since the shape's last choice and a walk up its tree for each.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/cluster_state.h"
#include "core/gpu_share.h"
#include "core/model.h"
#include "core/placement.h"

namespace chamber::core {

// The classes of GPU request (whole GPUs, or a share with its GPU memory; with the pod's CPU and
// memory) of every pod set of the snapshot that asks for GPUs, not MIG devices, each weighed by
// its pods times the GPU thousandths each asks for; the `max_classes` heaviest, heaviest first
// (ties: in order of first appearance).
std::vector<MixClass> SnapshotShareMix(const Snapshot& snapshot, size_t max_classes = 32);

// A node's GPUs as the sharing model sees them: a free GPU entirely free, an open shared GPU
// with the compute and memory its shares leave, any other GPU (held whole, closed to shares,
// failed) unusable, each marked reserved as its node's reserved_gpu_mask says; the node's free
// CPU and memory, none when it has no pod slot left.
struct StateNodeFree {
  std::vector<GpuFree> gpus;
  NodeFree node;
};
void FillNodeFree(const ClusterState& state, int32_t node, StateNodeFree& out);

class ShareScores {
 public:
  ShareScores(const ClusterState& state, std::vector<MixClass> mix);

  struct Spot {
    int32_t node = -1;
    int gpu = -1;
  };
  // Where a pod of `ps` (a share of one GPU) least increases fragmentation, among the nodes
  // `filter` (FeasibilityCache::For, whose id is `filter_id`) allows; nullopt when none has room.
  std::optional<Spot> Choose(const PodSet& ps, int32_t filter_id,
                             std::span<const NodeFilter> filter);
  // Where the next pod of a gang, of `ps` (a share of one GPU), least increases fragmentation
  // given what the gang's try `a` on this state has taken so far: a node the try uses is scored
  // with the try's pods on it, and wins an equal increase over one it does not use (the gang
  // stays together where that costs nothing); then the ties of Choose. Leaves the shape's
  // scores as they were.
  std::optional<Spot> ChooseInGang(const PodSet& ps, int32_t filter_id,
                                   std::span<const NodeFilter> filter, const GangAttempt& a);

  std::span<const MixClass> mix() const { return mix_; }
  size_t shapes() const { return shapes_.size(); }

 private:
  struct Best {
    int64_t delta = NodeScorer::kNoPlacement;
    int32_t left = 0;  // compute left on the GPU after the share
    int32_t gpu = -1;
    bool reserved = false;  // a reservation pod holds the GPU (Node::reserved_gpu_mask)
  };
  struct Shape {
    ShareRequest request;
    int32_t filter_id = -1;
    std::span<const NodeFilter> filter;
    std::vector<Best> best;     // per node
    std::vector<int32_t> tree;  // tournament tree over nodes, root at 1
    // Nodes changed since the shape's scores were last brought up to date, each once.
    std::vector<int32_t> pending;
    std::vector<uint8_t> pending_flag;
  };
  // A node's free state and its scorer under the mix, kept until the node changes: the shapes
  // asked about share it.
  struct Scored {
    bool valid = false;
    StateNodeFree free;
    std::optional<NodeScorer> scorer;
  };
  const Scored& ScoredNode(int32_t node);
  Best Score(const Scored& scored, const Shape& shape, int32_t node) const;
  static bool Better(const Best& a, int32_t an, const Best& b, int32_t bn);
  int32_t Winner(const Shape& shape, int32_t a, int32_t b) const;
  void Update(Shape& shape, int32_t node);
  // Notes the nodes the state changed since the last call as pending for every shape.
  void NoteChanges();
  // Brings the shape's scores up to date with its pending nodes: a shape not asked about again
  // pays nothing for later changes.
  void Refresh(Shape& shape);
  // The shape of `ps` under `filter`, brought up to date with the state, or made from it.
  Shape& ShapeFor(const PodSet& ps, int32_t filter_id, std::span<const NodeFilter> filter);

  const ClusterState* state_;
  std::vector<MixClass> mix_;
  size_t leaves_ = 1;
  std::vector<Shape> shapes_;
  std::vector<Scored> nodes_;  // per node; never resized, so each scorer's node stays in place
};

}  // namespace chamber::core
