#include "core/cluster_state.h"

#include <algorithm>
#include <bit>

namespace chamber::core {
namespace {

int Popcount(uint64_t m) { return std::popcount(m); }

uint64_t MaskOfCount(int n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

}  // namespace

NodeIndex::NodeIndex(const std::vector<Node>& nodes, const std::vector<MigResource>& mig_profiles) {
  const size_t n = nodes.size();
  facts_.resize(n);
  free_.resize(n);
  for (size_t p = 0; p < mig_profiles.size() && p < mig_milli_.size(); ++p)
    mig_milli_[p] = std::clamp<int32_t>(mig_profiles[p].milli, 0, kMilliPerGpu);

  int max_gpus = 0;
  std::array<std::unordered_map<std::string, int32_t>, kNumDomainLevels> domain_ids;
  // Nodes of one pool come together: a node's model and domains are compared with the last
  // node's before their names are hashed.
  std::string_view last_model;
  int32_t last_model_id = -1;
  std::array<std::string_view, kNumDomainLevels> last_domain;
  std::array<int32_t, kNumDomainLevels> last_domain_id{-1, -1, -1};
  std::vector<int32_t> island_ids;
  for (size_t i = 0; i < n; ++i) {
    const Node& node = nodes[i];
    NodeFacts& f = facts_[i];
    f.schedulable = !node.unschedulable;
    f.first_gpu = static_cast<uint32_t>(num_gpus_);
    if (node.gpus.size() > static_cast<size_t>(kMaxGpusPerNode)) {
      issues_.push_back({"node " + node.name,
                         "has " + std::to_string(node.gpus.size()) + " GPUs; at most " +
                             std::to_string(kMaxGpusPerNode) + " are supported, node ignored"});
      f.schedulable = false;
      continue;
    }
    if (node.allocatable.cpu_milli() < 0 || node.allocatable.memory_bytes() < 0 ||
        node.max_pods < 0) {
      issues_.push_back({"node " + node.name, "negative allocatable resources, node ignored"});
      f.schedulable = false;
      continue;
    }
    f.gpu_count = static_cast<int32_t>(node.gpus.size());
    num_gpus_ += node.gpus.size();
    // Islands in order of their ids: a node has few, so a sorted small vector, not a map. All
    // nodes' islands lie side by side in island_masks_, so building them allocates nothing
    // per node.
    island_ids.clear();
    f.first_island = static_cast<uint32_t>(island_masks_.size());
    for (int g = 0; g < f.gpu_count; ++g) {
      const Gpu& gpu = node.gpus[g];
      if (gpu.healthy && (node.external_gpu_mask >> g & 1) == 0) f.healthy_mask |= uint64_t{1} << g;
      if (!gpu.healthy) f.failed_mask |= uint64_t{1} << g;
      const auto at = std::lower_bound(island_ids.begin(), island_ids.end(), gpu.nvlink_island);
      const auto k = at - island_ids.begin();
      if (at == island_ids.end() || *at != gpu.nvlink_island) {
        island_ids.insert(at, gpu.nvlink_island);
        island_masks_.insert(island_masks_.begin() + f.first_island + k, 0);
      }
      island_masks_[f.first_island + k] |= uint64_t{1} << g;
    }
    f.num_islands = static_cast<uint32_t>(island_ids.size());
    if (!node.gpus.empty() || !node.mig_model.empty()) {
      const std::string& model =
          node.gpus.empty() ? node.mig_model.str() : node.gpus.front().model.str();
      if (last_model_id < 0 || model != last_model) {
        auto [it, inserted] = model_ids_.try_emplace(model, static_cast<int32_t>(models_.size()));
        if (inserted) models_.push_back(model);
        last_model = model;
        last_model_id = it->second;
      }
      f.model_id = last_model_id;
    }
    const std::array<const std::string*, kNumDomainLevels> names = {
        &node.topology.nvlink_domain, &node.topology.block, &node.topology.zone};
    for (int level = 0; level < kNumDomainLevels; ++level) {
      const std::string& name = *names[level];
      if (name.empty()) continue;
      if (last_domain_id[level] < 0 || name != last_domain[level]) {
        auto [it, inserted] =
            domain_ids[level].try_emplace(name, static_cast<int32_t>(domain_nodes_[level].size()));
        if (inserted) {
          domain_nodes_[level].emplace_back();
          domain_free_[level].push_back(0);
        }
        last_domain[level] = name;
        last_domain_id[level] = it->second;
      }
      f.domain[level] = last_domain_id[level];
    }
    free_[i] = NodeCapacity{f.healthy_mask, node.allocatable.cpu_milli(),
                            node.allocatable.memory_bytes(), node.max_pods};
    for (size_t p = 0; p < node.mig_devices.size(); ++p) {
      if (node.mig_devices[p] == 0) continue;
      if (p < mig_profiles.size()) {
        free_[i].mig[p] = node.mig_devices[p];
        f.mig_mask |= static_cast<uint8_t>(1u << p);
      } else {
        issues_.push_back(
            {"node " + node.name, "advertises " + std::to_string(node.mig_devices[p]) +
                                      " MIG devices of profile " + std::to_string(p) +
                                      ", which the snapshot does not name; left out"});
      }
    }
    max_gpus = std::max(max_gpus, f.gpu_count);
  }

  max_gpus_ = max_gpus;
  const size_t words = (n + 63) / 64;
  bucket_bits_.assign((static_cast<size_t>(max_gpus) + 1) * words, 0);
  bucket_size_.assign(static_cast<size_t>(max_gpus) + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const NodeFacts& f = facts_[i];
    if (!f.schedulable) continue;
    const int k = Popcount(free_[i].gpu_mask);
    bucket_bits_[static_cast<size_t>(k) * words + i / 64] |= uint64_t{1} << (i % 64);
    ++bucket_size_[k];
    for (int level = 0; level < kNumDomainLevels; ++level) {
      if (f.domain[level] < 0) continue;
      domain_nodes_[level][f.domain[level]].push_back(static_cast<int32_t>(i));
      domain_free_[level][f.domain[level]] += k;
    }
    int64_t mig = 0;
    for (size_t p = 0; p < mig_milli_.size(); ++p) {
      mig += int64_t{free_[i].mig[p]} * mig_milli_[p];
      if ((f.mig_mask >> p & 1) != 0) mig_nodes_[p].push_back(static_cast<int32_t>(i));
    }
    capacity_ += Resources::OfMilli(Gpus(k) + mig, free_[i].cpu_milli, free_[i].memory_bytes);
  }
}

namespace {

std::shared_ptr<const NodeIndex> IndexFor(const Snapshot& snapshot,
                                          std::shared_ptr<const NodeIndex> index) {
  if (index && index->size() == snapshot.nodes.size()) return index;
  return std::make_shared<const NodeIndex>(snapshot.nodes, snapshot.mig_profiles);
}

}  // namespace

ClusterState::ClusterState(const Snapshot& snapshot, std::shared_ptr<const NodeIndex> index)
    : ClusterState(&snapshot.nodes, &snapshot.mig_profiles, IndexFor(snapshot, std::move(index))) {}

ClusterState ClusterState::WithNothingHeld() const {
  return ClusterState(nodes_, mig_profiles_, index_);
}

ClusterState::ClusterState(const std::vector<Node>* nodes,
                           const std::vector<MigResource>* mig_profiles,
                           std::shared_ptr<const NodeIndex> index)
    : nodes_(nodes),
      mig_profiles_(mig_profiles),
      index_(std::move(index)),
      free_(index_->free_),
      releasing_(index_->facts_.size()),
      held_mask_(index_->facts_.size(), 0),
      shared_mask_(index_->facts_.size(), 0),
      share_milli_(index_->num_gpus_, 0),
      share_memory_(index_->num_gpus_, 0),
      share_bucket_bits_(static_cast<size_t>(kShareBuckets) * ((index_->facts_.size() + 63) / 64),
                         0),
      node_share_buckets_(index_->facts_.size(), 0),
      bucket_words_((index_->facts_.size() + 63) / 64),
      bucket_bits_(index_->bucket_bits_),
      bucket_size_(index_->bucket_size_),
      domain_free_(index_->domain_free_),
      total_free_(index_->capacity_),
      journaled_(index_->facts_.size(), 0) {}

int ClusterState::free_gpus(NodeId n) const { return Popcount(free_[n.index()].gpu_mask); }

int ClusterState::num_domains(DomainLevel level) const {
  return static_cast<int>(index_->domain_nodes_[static_cast<int>(level)].size());
}

const std::vector<int32_t>& ClusterState::domain_nodes(DomainLevel level, int32_t domain) const {
  return index_->domain_nodes_[static_cast<int>(level)][static_cast<size_t>(domain)];
}

int64_t ClusterState::domain_free_gpus(DomainLevel level, int32_t domain) const {
  return domain_free_[static_cast<int>(level)][static_cast<size_t>(domain)];
}

int32_t ClusterState::model_id(std::string_view model) const {
  auto it = index_->model_ids_.find(std::string(model));
  return it == index_->model_ids_.end() ? -1 : it->second;
}

std::vector<int32_t> ClusterState::nodes_with_free_gpus(int k) const {
  std::vector<int32_t> out;
  for (int32_t n = NextWithFreeGpus(k, 0); n >= 0; n = NextWithFreeGpus(k, n + 1)) out.push_back(n);
  return out;
}

// The caller has checked that the node is schedulable (bucketed).
void ClusterState::MoveBucket(int32_t node, int from, int to) {
  if (from == to) return;
  const size_t word = static_cast<size_t>(node) / 64;
  const uint64_t bit = uint64_t{1} << (node % 64);
  bucket_bits_[static_cast<size_t>(from) * bucket_words_ + word] &= ~bit;
  bucket_bits_[static_cast<size_t>(to) * bucket_words_ + word] |= bit;
  --bucket_size_[from];
  ++bucket_size_[to];
}

// Changes a node's free capacity and keeps the bucket, domain and cluster totals in step.
void ClusterState::AdjustFree(int32_t node, uint64_t gpu_add, uint64_t gpu_remove,
                              int64_t cpu_milli, int64_t memory_bytes) {
  if (tracking_ && changed_flag_[static_cast<size_t>(node)] == 0) {
    changed_flag_[static_cast<size_t>(node)] = 1;
    changed_.push_back(node);
  }
  NodeCapacity& f = free_[node];
  const int before = Popcount(f.gpu_mask);
  f.gpu_mask = (f.gpu_mask | gpu_add) & ~gpu_remove;
  f.cpu_milli += cpu_milli;
  f.memory_bytes += memory_bytes;
  const int after = Popcount(f.gpu_mask);
  const NodeFacts& facts = index_->facts_[node];
  if (!facts.schedulable) return;
  MoveBucket(node, before, after);
  for (int level = 0; level < kNumDomainLevels; ++level) {
    if (facts.domain[level] >= 0) domain_free_[level][facts.domain[level]] += after - before;
  }
  total_free_[Resource::kGpu] += Gpus(after - before);
  total_free_[Resource::kCpu] += cpu_milli;
  total_free_[Resource::kMemory] += memory_bytes;
}

void ClusterState::AdjustMig(int32_t node, int profile, int delta) {
  if (profile < 0 || delta == 0) return;
  uint8_t& free = free_[node].mig[static_cast<size_t>(profile)];
  const int after = std::clamp(free + delta, 0, kMaxMigDevices);
  if (index_->facts_[node].schedulable)
    total_free_[Resource::kGpu] += int64_t{after - free} * mig_milli(profile);
  free = static_cast<uint8_t>(after);
}

int64_t ClusterState::FreeMigMilli(int32_t node) const {
  int64_t milli = 0;
  for (size_t p = 0; p < free_[node].mig.size(); ++p)
    milli += int64_t{free_[node].mig[p]} * index_->mig_milli_[p];
  return milli;
}

Status ClusterState::ClaimExisting(const PodPlacement& p, const Resources& request,
                                   int64_t memory_mib, MigAsk mig) {
  if (!p.node.valid() || p.node.index() >= index_->facts_.size()) {
    return Status::InvalidArgument("placement names node index " + std::to_string(p.node.value) +
                                   ", which does not exist");
  }
  const size_t i = p.node.index();
  const NodeFacts& f = index_->facts_[i];
  if ((p.gpu_mask & ~MaskOfCount(f.gpu_count)) != 0) {
    return Status::InvalidArgument("placement on node " + node(p.node).name +
                                   " names a GPU index the node does not have");
  }
  if (mig.any()) {
    const std::string profile = static_cast<size_t>(mig.profile) < mig_profiles_->size()
                                    ? (*mig_profiles_)[static_cast<size_t>(mig.profile)].name
                                    : "#" + std::to_string(mig.profile);
    if (p.gpu_mask != 0) {
      return Status::InvalidArgument("placement on node " + node(p.node).name + " holds " +
                                     std::to_string(Popcount(p.gpu_mask)) +
                                     " GPUs for a pod that asks for MIG devices (" + profile + ")");
    }
    const int free = free_[i].mig[static_cast<size_t>(mig.profile)];
    if (free < mig.devices) {
      return Status::FailedPrecondition(
          "node " + node(p.node).name + ": MIG " + profile + ": pods would hold " +
          std::to_string(node(p.node).mig_devices[static_cast<size_t>(mig.profile)] - free +
                         mig.devices) +
          " devices of the " +
          std::to_string(node(p.node).mig_devices[static_cast<size_t>(mig.profile)]) +
          " it advertises");
    }
    Claim(p, request, 0, mig);
    return Status::Ok();
  }
  if (request.gpu_share()) {
    if (Popcount(p.gpu_mask) != 1) {
      return Status::InvalidArgument("placement on node " + node(p.node).name + " holds " +
                                     std::to_string(Popcount(p.gpu_mask)) +
                                     " GPUs for a pod that asks for a share of one (" +
                                     FormatGpus(request.gpu_milli()) + " GPU)");
    }
    const int g = std::countr_zero(p.gpu_mask);
    const std::string gpu = "GPU " + std::to_string(g) + " of node " + node(p.node).name;
    if ((held_mask_[i] & p.gpu_mask) != 0)
      return Status::FailedPrecondition(gpu + " is held whole; a share cannot sit beside it");
    const size_t slot = GpuSlot(p.node, g);
    if (share_milli_[slot] + request.gpu_milli() > kMilliPerGpu) {
      return Status::FailedPrecondition(gpu + ": shares would hold " +
                                        FormatGpus(share_milli_[slot] + request.gpu_milli()) +
                                        " of its compute, more than all of it");
    }
    const int64_t memory = gpu_memory_mib(p.node, g);
    if (memory_mib > 0 && memory > 0 && share_memory_[slot] + memory_mib > memory) {
      return Status::FailedPrecondition(gpu + ": shares would hold " +
                                        std::to_string(share_memory_[slot] + memory_mib) +
                                        " MiB of its " + std::to_string(memory) + " MiB of memory");
    }
    Claim(p, request, memory_mib);
    return Status::Ok();
  }
  if (((held_mask_[i] | shared_mask_[i]) & p.gpu_mask) != 0) {
    return Status::FailedPrecondition("GPU already held on node " + node(p.node).name);
  }
  if (Gpus(Popcount(p.gpu_mask)) != request.gpu_milli()) {
    return Status::InvalidArgument("placement on node " + node(p.node).name + " holds " +
                                   std::to_string(Popcount(p.gpu_mask)) +
                                   " GPUs for a pod that requests " +
                                   FormatGpus(request.gpu_milli()));
  }
  Claim(p, request);
  return Status::Ok();
}

void ClusterState::Claim(const PodPlacement& p, const Resources& request, int64_t gpu_memory_mib,
                         MigAsk mig) {
  const int32_t i = p.node.value;
  Journal(i);
  free_[i].pods -= 1;
  if (mig.any()) AdjustMig(i, mig.profile, -mig.devices);
  if (request.gpu_share()) {
    ClaimShare(i, p.gpu_mask, request, gpu_memory_mib);
    return;
  }
  held_mask_[i] |= p.gpu_mask;
  AdjustFree(i, 0, p.gpu_mask, -request.cpu_milli(), -request.memory_bytes());
}

NodeCapacity ClusterState::Hold(const PodPlacement& p, const Resources& request,
                                int64_t gpu_memory_mib, MigAsk mig) {
  const int32_t i = p.node.value;
  const NodeCapacity& f = free_[i];
  if (request.gpu_share()) {
    // A share on room free now is claimed. One that counts on room its victims release holds
    // what is free of it as a whole pod does, and closes its GPU to other shares.
    const int g = std::countr_zero(p.gpu_mask);
    const bool room = (f.gpu_mask & p.gpu_mask) != 0
                          ? gpu_memory_mib <= node(p.node).gpus[g].memory_mib
                          : (share_open_mask(p.node) & p.gpu_mask) != 0 &&
                                ShareFits(p.node, g, request.gpu_milli(), gpu_memory_mib);
    if (room && f.Fits(request)) {
      Claim(p, request, gpu_memory_mib);
      return NodeCapacity::OfPod(p.gpu_mask, request);
    }
  }
  NodeCapacity held{
      p.gpu_mask & f.gpu_mask, std::clamp<int64_t>(f.cpu_milli, 0, request.cpu_milli()),
      std::clamp<int64_t>(f.memory_bytes, 0, request.memory_bytes()), f.pods > 0 ? 1 : 0};
  Journal(i);
  if (mig.any()) {
    const auto p_index = static_cast<size_t>(mig.profile);
    held.mig[p_index] = std::min<uint8_t>(f.mig[p_index], static_cast<uint8_t>(mig.devices));
    AdjustMig(i, mig.profile, -held.mig[p_index]);
  }
  if (const uint64_t closing = p.gpu_mask & shared_mask_[i]; closing != 0) {
    JournalShares(i);  // the node's share room changes: RollBack recounts it
    const int64_t room_before = ShareRoomMilli(i);
    held_mask_[i] |= closing;
    if (index_->facts_[i].schedulable)
      total_free_[Resource::kGpu] += ShareRoomMilli(i) - room_before;
    UpdateShareRoom(i);
  }
  held_mask_[i] |= held.gpu_mask;
  free_[i].pods -= held.pods;
  AdjustFree(i, 0, held.gpu_mask, -held.cpu_milli, -held.memory_bytes);
  return held;
}

void ClusterState::Release(const PodPlacement& p, const Resources& request, int64_t gpu_memory_mib,
                           MigAsk mig) {
  const int32_t i = p.node.value;
  Journal(i);
  free_[i].pods += 1;
  if (mig.any()) AdjustMig(i, mig.profile, mig.devices);
  if (request.gpu_share()) {
    ReleaseShare(i, p.gpu_mask, request, gpu_memory_mib);
    return;
  }
  held_mask_[i] &= ~p.gpu_mask;
  // Only healthy GPUs return to the free pool.
  const uint64_t back = p.gpu_mask & index_->facts_[i].healthy_mask;
  AdjustFree(i, back, 0, request.cpu_milli(), request.memory_bytes());
}

void ClusterState::JournalShares(int32_t node) {
  if (!journaling_ || (journaled_[node] & kJournaledShares) != 0) return;
  journaled_[node] |= kJournaledShares;
  const NodeFacts& f = index_->facts_[node];
  for (int g = 0; g < f.gpu_count; ++g) {
    const uint32_t slot = f.first_gpu + static_cast<uint32_t>(g);
    share_journal_.push_back({node, slot, share_milli_[slot], share_memory_[slot]});
  }
}

// A share is taken on a healthy GPU that is free or already shared (the caller checked that it
// fits), or recorded on whatever GPU it already holds (ClaimExisting: a GPU may have failed).
void ClusterState::ClaimShare(int32_t node, uint64_t gpu, const Resources& request,
                              int64_t gpu_memory_mib) {
  JournalShares(node);
  const int64_t room_before = ShareRoomMilli(node);
  const size_t slot = GpuSlot(NodeId{node}, std::countr_zero(gpu));
  share_milli_[slot] += static_cast<int32_t>(request.gpu_milli());
  share_memory_[slot] += gpu_memory_mib;
  shared_mask_[node] |= gpu;
  AdjustFree(node, 0, gpu, -request.cpu_milli(), -request.memory_bytes());
  if (index_->facts_[node].schedulable)
    total_free_[Resource::kGpu] += ShareRoomMilli(node) - room_before;
  UpdateShareRoom(node);
}

void ClusterState::ReleaseShare(int32_t node, uint64_t gpu, const Resources& request,
                                int64_t gpu_memory_mib) {
  JournalShares(node);
  const int64_t room_before = ShareRoomMilli(node);
  const size_t slot = GpuSlot(NodeId{node}, std::countr_zero(gpu));
  share_milli_[slot] -= static_cast<int32_t>(request.gpu_milli());
  share_memory_[slot] -= gpu_memory_mib;
  uint64_t back = 0;
  if (share_milli_[slot] == 0) {  // the last share left: a healthy GPU is free again
    shared_mask_[node] &= ~gpu;
    back = gpu & index_->facts_[node].healthy_mask & ~held_mask_[node];
  }
  AdjustFree(node, back, 0, request.cpu_milli(), request.memory_bytes());
  if (index_->facts_[node].schedulable)
    total_free_[Resource::kGpu] += ShareRoomMilli(node) - room_before;
  UpdateShareRoom(node);
}

int64_t ClusterState::ShareRoomMilli(int32_t node) const {
  const NodeFacts& f = index_->facts_[node];
  if (!f.schedulable) return 0;
  int64_t room = 0;
  for (uint64_t m = share_open_mask(NodeId{node}); m != 0; m &= m - 1)
    room += kMilliPerGpu - share_milli_[f.first_gpu + static_cast<uint32_t>(std::countr_zero(m))];
  return room;
}

uint64_t ClusterState::ShareBucketsOf(int32_t node) const {
  const NodeFacts& f = index_->facts_[node];
  uint64_t buckets = 0;
  if (!f.schedulable) return 0;
  for (uint64_t m = share_open_mask(NodeId{node}); m != 0; m &= m - 1) {
    const int64_t free =
        kMilliPerGpu - share_milli_[f.first_gpu + static_cast<uint32_t>(std::countr_zero(m))];
    if (free > 0) buckets |= uint64_t{1} << ShareBucket(free);
  }
  return buckets;
}

void ClusterState::UpdateShareRoom(int32_t node) {
  const uint64_t buckets = ShareBucketsOf(node);
  const uint64_t changed = buckets ^ node_share_buckets_[node];
  if (changed == 0) return;
  node_share_buckets_[node] = buckets;
  const size_t word = static_cast<size_t>(node) / 64;
  const uint64_t bit = uint64_t{1} << (node % 64);
  for (uint64_t m = changed; m != 0; m &= m - 1)
    share_bucket_bits_[static_cast<size_t>(std::countr_zero(m)) * bucket_words_ + word] ^= bit;
}

int32_t ClusterState::NextWithShareRoom(int32_t from) const {
  for (size_t n = static_cast<size_t>(std::max(from, 0)); n < node_share_buckets_.size(); ++n)
    if (node_share_buckets_[n] != 0) return static_cast<int32_t>(n);
  return -1;
}

void ClusterState::MarkReleasing(const PodPlacement& p, const Resources& request, MigAsk mig) {
  Journal(p.node.value);
  NodeCapacity& r = releasing_[p.node.index()];
  r.Add(NodeCapacity::OfPod(0, {}, mig));  // the pod and its MIG devices
  if (!request.gpu_share()) r.gpu_mask |= p.gpu_mask & index_->facts_[p.node.index()].healthy_mask;
  r.cpu_milli += request.cpu_milli();
  r.memory_bytes += request.memory_bytes();
}

void ClusterState::UnmarkReleasing(const PodPlacement& p, const Resources& request, MigAsk mig) {
  Journal(p.node.value);
  NodeCapacity& r = releasing_[p.node.index()];
  r.Remove(NodeCapacity::OfPod(0, {}, mig));            // the pod and its MIG devices
  if (!request.gpu_share()) r.gpu_mask &= ~p.gpu_mask;  // held pods' GPUs do not overlap
  r.cpu_milli -= request.cpu_milli();
  r.memory_bytes -= request.memory_bytes();
}

void ClusterState::RollBack() {
  // A node's share tables were journaled together, after the node itself (Claim and Release
  // journal the node first). Its share room leaves the free total as it is now and comes back
  // as it was, once the node's masks are restored too.
  auto each_share_node = [&](auto&& fn) {
    for (size_t k = 0; k < share_journal_.size(); ++k)
      if (k == 0 || share_journal_[k].node != share_journal_[k - 1].node)
        fn(share_journal_[k].node);
  };
  each_share_node([&](int32_t n) { total_free_[Resource::kGpu] -= ShareRoomMilli(n); });
  for (const SavedShare& saved : share_journal_) {
    share_milli_[saved.slot] = saved.milli;
    share_memory_[saved.slot] = saved.memory_mib;
  }
  for (auto it = journal_.rbegin(); it != journal_.rend(); ++it) {
    const int32_t n = it->node;
    const NodeCapacity& now = free_[n];
    AdjustFree(n, it->free.gpu_mask & ~now.gpu_mask, now.gpu_mask & ~it->free.gpu_mask,
               it->free.cpu_milli - now.cpu_milli, it->free.memory_bytes - now.memory_bytes);
    free_[n].pods = it->free.pods;
    if (NodeCapacity::AnyMig(now) || NodeCapacity::AnyMig(it->free)) {
      for (size_t p = 0; p < now.mig.size(); ++p)
        AdjustMig(n, static_cast<int>(p), it->free.mig[p] - now.mig[p]);
    }
    releasing_[n] = it->releasing;
    held_mask_[n] = it->held;
    shared_mask_[n] = it->shared;
    journaled_[n] = 0;
  }
  each_share_node([&](int32_t n) {
    total_free_[Resource::kGpu] += ShareRoomMilli(n);
    UpdateShareRoom(n);
  });
  share_journal_.clear();
  journal_.clear();
  journaling_ = false;
}

Status ClusterState::CheckInvariants() const {
  Resources free_sum;
  std::array<std::vector<int64_t>, kNumDomainLevels> domain_sum;
  for (int level = 0; level < kNumDomainLevels; ++level)
    domain_sum[level].assign(domain_free_[level].size(), 0);
  std::vector<int32_t> bucket_sum(bucket_size_.size(), 0);
  for (size_t i = 0; i < index_->facts_.size(); ++i) {
    const NodeFacts& f = index_->facts_[i];
    const NodeCapacity& fr = free_[i];
    const std::string& name = (*nodes_)[i].name;
    if ((fr.gpu_mask & (held_mask_[i] | shared_mask_[i])) != 0)
      return Status::Internal("node " + name + ": a GPU is both free and held");
    for (int g = 0; g < f.gpu_count; ++g) {
      const size_t slot = f.first_gpu + static_cast<size_t>(g);
      const int64_t memory = (*nodes_)[i].gpus[g].memory_mib;
      if (share_milli_[slot] < 0 || share_milli_[slot] > kMilliPerGpu || share_memory_[slot] < 0 ||
          (memory > 0 && share_memory_[slot] > memory))
        return Status::Internal("node " + name + ": GPU " + std::to_string(g) +
                                " holds shares beyond its compute or memory");
      if ((share_milli_[slot] > 0) != ((shared_mask_[i] >> g & 1) != 0))
        return Status::Internal("node " + name + ": shared-GPU mask out of step");
    }
    const uint64_t buckets = ShareBucketsOf(static_cast<int32_t>(i));
    bool in_step = buckets == node_share_buckets_[i];
    for (int b = 0; b < kShareBuckets; ++b)
      in_step &= ((share_bucket_bits_[static_cast<size_t>(b) * bucket_words_ + i / 64] >> (i % 64) &
                   1) != 0) == ((buckets >> b & 1) != 0);
    if (!in_step) return Status::Internal("node " + name + ": share-room index out of step");
    if ((fr.gpu_mask & ~f.healthy_mask) != 0)
      return Status::Internal("node " + name + ": an unhealthy GPU is free");
    const int k = f.schedulable ? Popcount(fr.gpu_mask) : -1;  // -1: in no bucket
    for (int b = 0; b <= max_gpus_per_node(); ++b) {
      const bool in =
          (bucket_bits_[static_cast<size_t>(b) * bucket_words_ + i / 64] >> (i % 64) & 1) != 0;
      if (in != (b == k)) return Status::Internal("node " + name + ": free-GPU bucket out of step");
      bucket_sum[b] += in ? 1 : 0;
    }
    if (!f.schedulable) continue;
    free_sum += Resources::OfMilli(
        Gpus(k) + ShareRoomMilli(static_cast<int32_t>(i)) + FreeMigMilli(static_cast<int32_t>(i)),
        fr.cpu_milli, fr.memory_bytes);
    for (int level = 0; level < kNumDomainLevels; ++level)
      if (f.domain[level] >= 0) domain_sum[level][f.domain[level]] += k;
  }
  if (bucket_sum != bucket_size_) return Status::Internal("free-GPU bucket sizes out of step");
  if (!(free_sum == total_free_)) return Status::Internal("cluster free total out of step");
  for (int level = 0; level < kNumDomainLevels; ++level)
    if (domain_sum[level] != domain_free_[level])
      return Status::Internal("domain free totals out of step");
  return Status::Ok();
}

}  // namespace chamber::core
