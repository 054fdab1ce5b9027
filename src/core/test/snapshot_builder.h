// A fluent builder for engine snapshots, shared by the engine's tests:
//
//   SnapshotBuilder b;
//   b.Node("n1").Gpus(8).Block("b1");
//   b.Queue("team-a").Quota(8);
//   b.Workload("ml/train", "team-a").Pods(2, 4).Running("n1", 0xff);
//   CycleResult r = Engine().Schedule(b.snapshot());
//
// Names are resolved when a method needs an id (placements name their node). Refs hold the
// builder and an index, so they stay valid while more objects are added.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/model.h"

namespace chamber::core::testing {

inline constexpr int64_t kGi = int64_t{1} << 30;
inline constexpr Time Sec(int64_t s) { return Time{s * 1000}; }
inline constexpr uint64_t Mask(int first, int count) {
  return (count >= 64 ? ~uint64_t{0} : (uint64_t{1} << count) - 1) << first;
}

// The index of MIG profile `name` ("1g.10gb": its compute slices before the "g", of 7) in the
// snapshot's profiles, added on first use.
inline int8_t MigProfileIndex(Snapshot& s, const std::string& name) {
  for (size_t p = 0; p < s.mig_profiles.size(); ++p)
    if (s.mig_profiles[p].name == name) return static_cast<int8_t>(p);
  s.mig_profiles.push_back({name, MigDeviceMilli(std::stoi(name), 7)});
  return static_cast<int8_t>(s.mig_profiles.size() - 1);
}

class SnapshotBuilder {
 public:
  class NodeRef {
   public:
    NodeRef(Snapshot* s, size_t i) : s_(s), i_(i) {}
    Node& get() const { return s_->nodes[i_]; }
    // Replaces the node's GPUs with `n` healthy ones of `model`, all in NVLink island 0.
    NodeRef& Gpus(int n, const std::string& model = "H100") {
      get().gpus.clear();
      for (int g = 0; g < n; ++g)
        get().gpus.push_back({get().name + "-gpu" + std::to_string(g), model, 81920, true, 0, 0});
      return *this;
    }
    NodeRef& Islands(std::initializer_list<int32_t> island_per_gpu) {
      size_t g = 0;
      for (int32_t island : island_per_gpu) get().gpus.at(g++).nvlink_island = island;
      return *this;
    }
    // Every GPU of the node has `mib` MiB of memory (81,920 unless set).
    NodeRef& GpuMemory(int64_t mib) {
      for (Gpu& g : get().gpus) g.memory_mib = mib;
      return *this;
    }
    NodeRef& Cpu(int64_t milli) { return Set(Resource::kCpu, milli); }
    NodeRef& Memory(int64_t bytes) { return Set(Resource::kMemory, bytes); }
    NodeRef& MaxPods(int32_t n) { return get().max_pods = n, *this; }
    // The node advertises `devices` MIG devices of `profile` ("1g.10gb").
    NodeRef& Mig(const std::string& profile, int devices) {
      get().mig_devices[static_cast<size_t>(MigProfileIndex(*s_, profile))] =
          static_cast<uint8_t>(devices);
      return *this;
    }
    NodeRef& Block(std::string b) { return get().topology.block = std::move(b), *this; }
    NodeRef& Zone(std::string z) { return get().topology.zone = std::move(z), *this; }
    NodeRef& Nvlink(std::string d) { return get().topology.nvlink_domain = std::move(d), *this; }
    NodeRef& Label(std::string k, std::string v) {
      Labels labels = *get().labels;
      labels.emplace_back(std::move(k), std::move(v));
      get().labels = std::move(labels);
      return *this;
    }
    NodeRef& Taint(std::string k, std::string v, TaintEffect e = TaintEffect::kNoSchedule) {
      get().taints.push_back({std::move(k), std::move(v), e});
      return *this;
    }
    NodeRef& Unhealthy(std::initializer_list<int> gpus) {
      for (int g : gpus) get().gpus.at(static_cast<size_t>(g)).healthy = false;
      return *this;
    }
    NodeRef& Cordon() { return get().unschedulable = true, *this; }

   private:
    NodeRef& Set(Resource r, int64_t q) { return get().allocatable[r] = q, *this; }
    Snapshot* s_;
    size_t i_;
  };

  class QueueRef {
   public:
    QueueRef(Snapshot* s, size_t i) : s_(s), i_(i) {}
    Queue& get() const { return s_->queues[i_]; }
    QueueResource& gpu() const { return get().res(Resource::kGpu); }
    QueueRef& Quota(int64_t gpus) { return gpu().quota = InMilli(gpus), *this; }
    QueueRef& Limit(int64_t gpus) { return gpu().limit = InMilli(gpus), *this; }
    QueueRef& Weight(double w) { return gpu().over_quota_weight = w, *this; }
    QueueRef& Lending(int64_t gpus) { return gpu().lending_limit = InMilli(gpus), *this; }
    QueueRef& Res(Resource r, int64_t quota, int64_t limit = kUnlimited) {
      get().res(r).quota = quota;
      get().res(r).limit = limit;
      return *this;
    }
    QueueRef& Priority(int32_t p) { return get().priority = p, *this; }
    QueueRef& StrictFifo() { return get().queueing = QueueingStrategy::kStrictFifo, *this; }
    QueueRef& BestEffort() { return get().queueing = QueueingStrategy::kBestEffort, *this; }
    QueueRef& DecayedUsage(double u) { return get().decayed_usage = u, *this; }

   private:
    // Whole GPUs (or kUnlimited) in the unit of Resource::kGpu.
    static int64_t InMilli(int64_t gpus) { return gpus == kUnlimited ? gpus : Gpus(gpus); }
    Snapshot* s_;
    size_t i_;
  };

  class WorkloadRef {
   public:
    WorkloadRef(SnapshotBuilder* b, size_t i) : b_(b), i_(i) {}
    Workload& get() const { return b_->s_.workloads[i_]; }
    WorkloadId id() const { return WorkloadId{static_cast<int32_t>(i_)}; }
    WorkloadRef& Priority(int32_t p) { return get().priority = p, *this; }
    WorkloadRef& Submit(Time t) { return get().submit_time = t, *this; }
    // Adds a pod set of `count` pods with `gpus` GPUs each. Later calls below apply to it.
    WorkloadRef& Pods(int32_t count, int64_t gpus) {
      PodSet ps;
      ps.name = "ps" + std::to_string(get().pod_sets.size());
      ps.count = count;
      ps.request[Resource::kGpu] = Gpus(gpus);
      get().pod_sets.push_back(std::move(ps));
      return *this;
    }
    // Adds a pod set of `count` pods asking each for `devices` MIG devices of `profile`.
    WorkloadRef& Mig(int32_t count, const std::string& profile, int devices = 1) {
      Pods(count, 0);
      const int8_t p = MigProfileIndex(b_->s_, profile);
      last().mig = {p, static_cast<uint8_t>(devices),
                    static_cast<int16_t>(b_->s_.mig_profiles[static_cast<size_t>(p)].milli)};
      return *this;
    }
    // Adds a pod set of `count` pods asking each for `gpu_milli` thousandths of one GPU (1 to
    // 999) and `memory_mib` of its memory.
    WorkloadRef& Shares(int32_t count, int64_t gpu_milli, int64_t memory_mib = 0) {
      Pods(count, 0);
      last().request[Resource::kGpu] = gpu_milli;
      last().gpu_memory_mib = memory_mib;
      return *this;
    }
    // Each pod counts `milli` thousandths of a GPU against its queue (PodSet::gpu_charge_milli).
    WorkloadRef& Charge(int32_t milli) { return last().gpu_charge_milli = milli, *this; }
    WorkloadRef& Cpu(int64_t milli) { return last().request[Resource::kCpu] = milli, *this; }
    WorkloadRef& Memory(int64_t bytes) { return last().request[Resource::kMemory] = bytes, *this; }
    WorkloadRef& MinMember(int32_t n) { return get().min_member = n, *this; }
    WorkloadRef& Selector(std::string k, std::string v) {
      last().node_selector.emplace_back(std::move(k), std::move(v));
      return *this;
    }
    // Tolerates key=value (or, with an empty value, any value of key) for every effect.
    WorkloadRef& Tolerate(std::string k, std::string v = "") {
      const auto op = v.empty() ? Toleration::Operator::kExists : Toleration::Operator::kEqual;
      std::vector<Toleration> tolerations = *last().tolerations;
      tolerations.push_back({std::move(k), op, std::move(v), std::nullopt});
      last().tolerations = Interned(std::move(tolerations));
      return *this;
    }
    WorkloadRef& Models(std::vector<std::string> m) {
      return last().gpu_models = std::move(m), *this;
    }
    // Places the next pod on `node`'s GPUs in `gpu_mask` and marks the workload running.
    WorkloadRef& Running(const std::string& node, uint64_t gpu_mask) {
      get().state = WorkloadState::kRunning;
      get().placements.push_back({b_->node_id(node), gpu_mask});
      return *this;
    }
    WorkloadRef& Preempting() { return get().state = WorkloadState::kPreempting, *this; }
    WorkloadRef& Suspended() { return get().state = WorkloadState::kSuspended, *this; }
    WorkloadRef& Start(Time t) { return get().start_time = t, *this; }
    WorkloadRef& Checkpoint(Time t) { return get().last_checkpoint_time = t, *this; }
    WorkloadRef& PreemptedAt(Time t) { return get().recent_preemptions.push_back(t), *this; }
    WorkloadRef& Grace(int32_t s) { return get().checkpoint_grace_seconds = s, *this; }

   private:
    PodSet& last() const {
      if (get().pod_sets.empty()) throw std::logic_error("call Pods() first");
      return get().pod_sets.back();
    }
    SnapshotBuilder* b_;
    size_t i_;
  };

  // Time starts at one hour, so work started at 0 is past the default minimum runtime.
  SnapshotBuilder() { s_.now = Sec(3600); }

  SnapshotBuilder& Now(Time t) { return s_.now = t, *this; }

  // A node with `gpus` H100s, 128 cpu, 1Ti memory.
  NodeRef Node(std::string name, int gpus = 8, const std::string& model = "H100") {
    ::chamber::core::Node n;
    n.name = std::move(name);
    n.allocatable = Resources::Of(0, 128000, 1024 * kGi);
    s_.nodes.push_back(std::move(n));
    NodeRef ref(&s_, s_.nodes.size() - 1);
    ref.Gpus(gpus, model);
    return ref;
  }

  QueueRef Queue(std::string name, std::string parent = "") {
    ::chamber::core::Queue q;
    q.name = std::move(name);
    q.parent = std::move(parent);
    s_.queues.push_back(std::move(q));
    return QueueRef(&s_, s_.queues.size() - 1);
  }

  // A pending workload; add its pods with Pods().
  WorkloadRef Workload(std::string name, std::string queue) {
    ::chamber::core::Workload w;
    w.name = std::move(name);
    w.queue = std::move(queue);
    s_.workloads.push_back(std::move(w));
    return WorkloadRef(this, s_.workloads.size() - 1);
  }

  NodeId node_id(const std::string& name) const {
    for (size_t i = 0; i < s_.nodes.size(); ++i)
      if (s_.nodes[i].name == name) return NodeId{static_cast<int32_t>(i)};
    throw std::logic_error("no node " + name);
  }
  WorkloadId id(const std::string& name) const {
    for (size_t i = 0; i < s_.workloads.size(); ++i)
      if (s_.workloads[i].name == name) return WorkloadId{static_cast<int32_t>(i)};
    throw std::logic_error("no workload " + name);
  }

  Snapshot& snapshot() { return s_; }
  const Snapshot& snapshot() const { return s_; }

 private:
  Snapshot s_;
};

}  // namespace chamber::core::testing
