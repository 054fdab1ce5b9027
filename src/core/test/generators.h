// RapidCheck generators shared by the engine's property tests. Each pick goes through
// RapidCheck, so failing cases shrink.
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/test/snapshot_builder.h"

namespace chamber::core::testing {

inline int Pick(int lo, int hi) { return *rc::gen::inRange(lo, hi + 1); }  // inclusive
// True with the given probability; shrinks towards false, the usual case.
inline bool Chance(int percent) { return *rc::gen::inRange(0, 100) >= 100 - percent; }
template <typename T>
T OneOf(std::vector<T> values) {
  return values[static_cast<size_t>(Pick(0, static_cast<int>(values.size()) - 1))];
}

// min_nodes to max_nodes nodes of 0 to 8 GPUs in up to three blocks over two zones, some in
// multi-node NVLink domains, some with two NVLink islands, an unhealthy GPU, a cordon, a taint
// or a pool label.
inline void GenNodes(SnapshotBuilder& b, int min_nodes, int max_nodes) {
  const int n = Pick(min_nodes, max_nodes);
  const int blocks = Pick(1, 3);
  for (int i = 0; i < n; ++i) {
    const int gpus = OneOf<int>({0, 1, 2, 4, 8, 8, 8});
    auto node = b.Node("n" + std::to_string(i), gpus, Chance(20) ? "A100" : "H100");
    node.Cpu(Pick(8, 128) * 1000).Memory(Pick(32, 1024) * kGi).MaxPods(Pick(2, 110));
    node.Block("b" + std::to_string(Pick(0, blocks - 1))).Zone("z" + std::to_string(Pick(0, 1)));
    if (Chance(15)) node.Nvlink("d" + std::to_string(Pick(0, 1)));
    if (gpus == 8 && Chance(50)) node.Islands({0, 0, 0, 0, 1, 1, 1, 1});
    if (gpus > 0 && Chance(15)) node.Unhealthy({Pick(0, gpus - 1)});
    if (Chance(5)) node.Cordon();
    if (Chance(10)) node.Taint("dedicated", "infer");
    if (Chance(30)) node.Label("pool", Chance(50) ? "a" : "b");
  }
}

// --- Random snapshots for the engine's property tests. ---

inline constexpr Time kNow = Sec(7200);

inline void GenQueues(SnapshotBuilder& b) {
  const int n = Pick(1, 8);
  std::vector<int> depth;
  for (int i = 0; i < n; ++i) {
    std::string parent;
    int d = 1;
    if (i > 0 && Chance(40)) {
      const int p = Pick(0, i - 1);
      if (depth[static_cast<size_t>(p)] < 3) {
        parent = "q" + std::to_string(p);
        d = depth[static_cast<size_t>(p)] + 1;
      }
    }
    depth.push_back(d);
    auto q = b.Queue("q" + std::to_string(i), parent);
    const int quota = Pick(0, 16);
    q.Quota(quota).Weight(OneOf<double>({0.5, 1, 1, 2, 3}));
    if (Chance(30)) q.Limit(quota + Pick(0, 16));
    if (Chance(20)) q.Lending(Pick(0, quota));
    if (Chance(15)) q.Priority(10);
    if (Chance(20)) q.StrictFifo();
    if (Chance(15))
      q.get().preemption.within_queue = OneOf<WithinQueuePreemption>(
          {WithinQueuePreemption::kNever, WithinQueuePreemption::kLowerOrNewerEqualPriority});
    if (Chance(15))
      q.get().preemption.reclaim =
          OneOf<ReclaimPreemption>({ReclaimPreemption::kNever, ReclaimPreemption::kLowerPriority});
    if (Chance(10)) q.get().preemption.delay = Sec(OneOf<int64_t>({60, 3600, 7200}));
    if (Chance(10)) {
      const int cpu_quota = Pick(0, 64) * 1000;
      q.Res(Resource::kCpu, cpu_quota, Chance(50) ? kUnlimited : cpu_quota + Pick(0, 64) * 1000);
    }
    // Occasionally invalid.
    if (Chance(3)) q.Quota(-1);
    if (Chance(3)) q.get().parent = "ghost";
  }
  if (n >= 2 && Chance(5)) {  // a 2-cycle
    b.snapshot().queues[0].parent = "q1";
    b.snapshot().queues[1].parent = "q0";
  }
}

inline std::vector<std::string> LeafQueueNames(const Snapshot& s) {
  std::set<std::string> parents;
  for (const Queue& q : s.queues) parents.insert(q.parent);
  std::vector<std::string> out;
  for (const Queue& q : s.queues)
    if (!parents.contains(q.name)) out.push_back(q.name);
  return out;
}

inline std::string PickQueue(const Snapshot& s) {
  if (Chance(3)) return "ghost";
  if (Chance(10))
    return s.queues[static_cast<size_t>(Pick(0, static_cast<int>(s.queues.size()) - 1))].name;
  const std::vector<std::string> leaves = LeafQueueNames(s);
  if (leaves.empty()) return s.queues.front().name;
  return leaves[static_cast<size_t>(Pick(0, static_cast<int>(leaves.size()) - 1))];
}

inline int32_t PickPriority() { return OneOf<int32_t>({0, 0, 10, 50, 99, 100, 150}); }

// What is still unheld on each node while running work is placed: GPUs neither held whole nor
// shared (healthy or not), cpu, memory and pod slots; and per GPU what shares hold of it.
struct NodeRoom {
  uint64_t gpus = 0;
  int64_t cpu = 0;
  int64_t memory = 0;
  int32_t pods = 0;
  std::vector<int64_t> share_milli;
  std::vector<int64_t> share_memory;
  std::array<int, kMaxMigProfiles> mig{};  // MIG devices per profile
};

inline std::vector<NodeRoom> InitialRoom(const Snapshot& s) {
  std::vector<NodeRoom> room;
  for (const Node& n : s.nodes) {
    const uint64_t all = testing::Mask(0, static_cast<int>(n.gpus.size()));
    room.push_back({all,
                    n.allocatable.cpu_milli(),
                    n.allocatable.memory_bytes(),
                    n.max_pods,
                    std::vector<int64_t>(n.gpus.size(), 0),
                    std::vector<int64_t>(n.gpus.size(), 0),
                    {}});
    for (size_t p = 0; p < n.mig_devices.size(); ++p) room.back().mig[p] = n.mig_devices[p];
  }
  return room;
}

// A share of a GPU, as users ask for them: mostly a quarter to a half, sometimes with memory.
inline int64_t PickShareMilli() { return OneOf<int64_t>({100, 250, 300, 500, 500, 700, 999}); }
inline int64_t PickShareMemory() { return OneOf<int64_t>({0, 0, 0, 4096, 20480, 40960}); }

// The GPU of node `n` a share of `ps` may take beside the shares in `r` (or on a GPU of `r` no
// one holds), or -1.
inline int ShareGpuFor(const Node& node, const NodeRoom& r, const PodSet& ps, bool on_failed) {
  for (size_t g = 0; g < node.gpus.size(); ++g) {
    if (!on_failed && !node.gpus[g].healthy) continue;
    if (r.share_milli[g] == 0 && (r.gpus >> g & 1) == 0) continue;
    if (r.share_milli[g] + ps.request.gpu_milli() > kMilliPerGpu) continue;
    if (ps.gpu_memory_mib > 0 && r.share_memory[g] + ps.gpu_memory_mib > node.gpus[g].memory_mib)
      continue;
    return static_cast<int>(g);
  }
  return -1;
}

inline uint64_t HealthyMask(const Node& n) {
  uint64_t m = 0;
  for (size_t g = 0; g < n.gpus.size(); ++g)
    if (n.gpus[g].healthy) m |= uint64_t{1} << g;
  return m;
}

inline uint64_t LowestBits(uint64_t mask, int count) {
  uint64_t out = 0;
  for (int i = 0; i < count; ++i) {
    const uint64_t bit = mask & (~mask + 1);
    out |= bit;
    mask &= ~bit;
  }
  return out;
}

// Places the first `pods` pods of `w` on random nodes with room, or leaves `room` unchanged and
// returns false. With `on_failed`, a pod may take a GPU that is unhealthy (it failed under the
// work).
inline bool PlaceRunning(const Snapshot& s, std::vector<NodeRoom>& room, Workload& w, int32_t pods,
                         bool on_failed) {
  std::vector<NodeRoom> trial = room;
  w.placements.clear();
  const int nodes = static_cast<int>(s.nodes.size());
  for (size_t i = 0; i < static_cast<size_t>(pods); ++i) {
    const PodSet& ps = *w.PlacementPodSet(i);
    const Resources& req = ps.request;
    const int start = Pick(0, nodes - 1);
    bool placed = false;
    for (int k = 0; k < nodes && !placed; ++k) {
      const size_t n = static_cast<size_t>((start + k) % nodes);
      NodeRoom& r = trial[n];
      const uint64_t usable = r.gpus & (on_failed ? ~uint64_t{0} : HealthyMask(s.nodes[n]));
      const int share_gpu = req.gpu_share() ? ShareGpuFor(s.nodes[n], r, ps, on_failed) : -1;
      if ((req.gpu_share() ? share_gpu < 0 : std::popcount(usable) < req.whole_gpus()) ||
          r.cpu < req.cpu_milli() || r.memory < req.memory_bytes() || r.pods < 1)
        continue;
      if (ps.mig.any()) {
        int& free = r.mig[static_cast<size_t>(ps.mig.profile)];
        if (free < ps.mig.devices) continue;
        free -= ps.mig.devices;
      }
      uint64_t mask = 0;
      if (req.gpu_share()) {
        mask = uint64_t{1} << share_gpu;
        r.share_milli[static_cast<size_t>(share_gpu)] += req.gpu_milli();
        r.share_memory[static_cast<size_t>(share_gpu)] += ps.gpu_memory_mib;
      } else {
        mask = LowestBits(usable, static_cast<int>(req.whole_gpus()));
      }
      r.gpus &= ~mask;
      r.cpu -= req.cpu_milli();
      r.memory -= req.memory_bytes();
      r.pods -= 1;
      w.placements.push_back({NodeId{static_cast<int32_t>(n)}, mask});
      placed = true;
    }
    if (!placed) {
      w.placements.clear();
      return false;
    }
  }
  room = std::move(trial);
  return true;
}

// With `shares`, about half the workloads ask for shares of GPUs instead of whole ones.
inline void GenRunning(SnapshotBuilder& b, std::vector<NodeRoom>& room, int min_running,
                       int max_running, const std::vector<std::string>* queues = nullptr,
                       bool shares = false) {
  const int n = Pick(min_running, max_running);
  for (int i = 0; i < n; ++i) {
    const std::string queue =
        queues != nullptr
            ? (*queues)[static_cast<size_t>(Pick(0, static_cast<int>(queues->size()) - 1))]
            : PickQueue(b.snapshot());
    auto w = b.Workload("run-" + std::to_string(i), queue);
    w.Priority(PickPriority());
    if (shares && Chance(50)) {
      w.Shares(Pick(1, 4), PickShareMilli(), PickShareMemory());
    } else {
      w.Pods(Pick(1, 4), OneOf<int64_t>({0, 1, 1, 2, 4, 8}));
    }
    w.Cpu(Pick(0, 8) * 500).Memory(Pick(0, 16) * kGi);
    if (Chance(10)) w.Pods(Pick(1, 2), OneOf<int64_t>({0, 1, 2}));
    // An elastic gang may run with fewer pods than it has, but at least min-member.
    const int32_t total = w.get().TotalPods();
    int32_t pods = total;
    if (total > 1 && Chance(20)) {
      w.MinMember(Pick(1, total));
      pods = Pick(w.get().min_member, total);
    }
    w.Start(kNow - Sec(Pick(0, 7200)));
    if (Chance(20)) w.Checkpoint(kNow - Sec(Pick(0, 3600)));
    for (int k = Pick(0, 3); k > 0; --k) w.PreemptedAt(kNow - Sec(Pick(0, 7200)));
    if (b.snapshot().nodes.empty() ||
        !PlaceRunning(b.snapshot(), room, w.get(), pods, Chance(10))) {
      b.snapshot().workloads.pop_back();
      continue;
    }
    w.get().state = Chance(10) ? WorkloadState::kPreempting : WorkloadState::kRunning;
  }
}

// With `shares`, about half the workloads ask for shares of GPUs, some beside whole-GPU pods.
inline void GenWaiting(SnapshotBuilder& b, int max_waiting, bool shares = false) {
  const int n = Pick(0, max_waiting);
  for (int i = 0; i < n; ++i) {
    auto w = b.Workload("wait-" + std::to_string(i), PickQueue(b.snapshot()));
    const int count = Chance(50) ? 1 : Pick(2, 8);
    w.Priority(PickPriority()).Submit(Sec(Pick(0, 3600)));
    if (shares && Chance(50)) {
      w.Shares(count, PickShareMilli(), PickShareMemory());
      if (Chance(20)) w.Pods(Pick(1, 2), OneOf<int64_t>({1, 2}));
    } else {
      w.Pods(count, OneOf<int64_t>({0, 1, 1, 2, 4, 8}));
    }
    w.Cpu(Pick(0, 8) * 500).Memory(Pick(0, 16) * kGi);
    if (Chance(10)) w.Selector("pool", "a");
    if (Chance(10)) w.Tolerate("dedicated");
    if (Chance(10)) w.Models({Chance(50) ? "H100" : "A100"});
    if (Chance(10)) w.Pods(Pick(1, 2), OneOf<int64_t>({0, 1, 2}));
    const int total = w.get().TotalPods();
    if (total > 1 && Chance(30)) w.MinMember(Pick(1, total));
    if (Chance(15)) w.Suspended();
    if (w.get().state == WorkloadState::kPending && Chance(8)) {
      w.get().awaited_pods = Pick(1, 4);  // a gang whose last pods do not exist yet
      w.get().min_member = 0;
    }
    if ((w.get().state == WorkloadState::kPending || w.get().state == WorkloadState::kSuspended) &&
        Chance(5)) {
      // A gang whose bind failed: in backoff, or with its backoff just over.
      w.get().bind_retry_at = kNow + Sec(OneOf<int>({-1, 0, 30}));
      w.get().bind_rollbacks = Pick(1, 3);
    }
    if (Chance(2)) w.Cpu(-1);
    if (Chance(2)) w.MinMember(total + 1);
  }
}

inline Snapshot GenSnapshot() {
  SnapshotBuilder b;
  b.Now(kNow);
  GenNodes(b, 1, 40);
  GenQueues(b);
  std::vector<NodeRoom> room = InitialRoom(b.snapshot());
  GenRunning(b, room, 0, 30);
  GenWaiting(b, 30);
  return b.snapshot();
}

// Small clusters whose GPUs have 24 GiB, 80 GiB or unknown memory, queues whose quotas and
// limits may fall on a fraction of a GPU, running whole-GPU pods and shares placed without
// over-committing any GPU, and waiting work mixing shares (with and without memory), gangs of
// shares and whole-GPU pods.
inline Snapshot GenShareSnapshot() {
  SnapshotBuilder b;
  b.Now(kNow);
  GenNodes(b, 1, 12);
  for (Node& n : b.snapshot().nodes) {
    const int64_t memory = OneOf<int64_t>({0, 24576, 81920, 81920});
    for (Gpu& g : n.gpus) g.memory_mib = memory;
    if (Chance(60)) n.max_pods = std::max(n.max_pods, 32);  // room for many small pods
    n.device_plugin_shares = Chance(15);  // no share goes there; whole GPUs still do
    // GPUs reservation pods hold for shares, free or shared as the pods below make them.
    if (Chance(30))
      for (size_t g = 0; g < n.gpus.size(); ++g)
        if (Chance(40)) n.reserved_gpu_mask |= uint64_t{1} << g;
  }
  GenQueues(b);
  for (Queue& q : b.snapshot().queues) {
    QueueResource& gpu = q.res(Resource::kGpu);
    if (Chance(30) && gpu.quota >= 0) gpu.quota += OneOf<int64_t>({250, 500});
    if (Chance(30) && gpu.limit != kUnlimited) gpu.limit += OneOf<int64_t>({250, 500});
  }
  std::vector<NodeRoom> room = InitialRoom(b.snapshot());
  GenRunning(b, room, 0, 20, nullptr, /*shares=*/true);
  GenWaiting(b, 20, /*shares=*/true);
  return b.snapshot();
}

// MIG (docs/sharing.md, "MIG devices in the engine"): three profiles of seven-slice GPUs.
inline const std::vector<std::string>& MigProfileNames() {
  static const std::vector<std::string> names = {"1g.10gb", "3g.40gb", "7g.80gb"};
  return names;
}

// A pod set of `count` pods asking for MIG devices of a random profile, one or two each.
inline void AddMigPods(SnapshotBuilder::WorkloadRef& w, int32_t count) {
  const std::string profile = OneOf<std::string>(MigProfileNames());
  w.Mig(count, profile, profile == "1g.10gb" && Chance(20) ? 2 : 1);
}

// Small clusters where some nodes (with or without whole GPUs) advertise MIG devices of up to
// three profiles, others none; queues whose quotas and limits may fall on a MIG device's charge;
// running whole-GPU pods and MIG pods placed within what each node advertises, at random
// priorities; waiting work mixing MIG pods (single, gangs, beside whole-GPU pod sets), whole GPUs
// and pods that ask for CPU alone.
inline Snapshot GenMigSnapshot() {
  SnapshotBuilder b;
  b.Now(kNow);
  GenNodes(b, 1, 10);
  for (const std::string& p : MigProfileNames()) MigProfileIndex(b.snapshot(), p);
  for (Node& n : b.snapshot().nodes) {
    if (Chance(60)) n.max_pods = std::max(n.max_pods, 32);
    if (!Chance(70)) continue;
    n.mig_devices[0] = static_cast<uint8_t>(Pick(0, 7));
    n.mig_devices[1] = static_cast<uint8_t>(Pick(0, 2));
    n.mig_devices[2] = static_cast<uint8_t>(Pick(0, 1));
  }
  GenQueues(b);
  for (Queue& q : b.snapshot().queues) {
    QueueResource& gpu = q.res(Resource::kGpu);
    if (Chance(30) && gpu.quota >= 0) gpu.quota += OneOf<int64_t>({142, 428, 500});
    if (Chance(30) && gpu.limit != kUnlimited) gpu.limit += OneOf<int64_t>({142, 284, 500});
  }
  std::vector<NodeRoom> room = InitialRoom(b.snapshot());
  GenRunning(b, room, 0, 8);
  for (int i = Pick(0, 16); i > 0; --i) {
    auto w = b.Workload("mig-run-" + std::to_string(i), PickQueue(b.snapshot()));
    AddMigPods(w, Pick(1, 3));
    w.Priority(PickPriority()).Cpu(Pick(0, 4) * 500);
    w.Start(kNow - Sec(Pick(0, 7200)));
    if (b.snapshot().nodes.empty() ||
        !PlaceRunning(b.snapshot(), room, w.get(), w.get().TotalPods(), false)) {
      b.snapshot().workloads.pop_back();
      continue;
    }
    w.get().state = Chance(10) ? WorkloadState::kPreempting : WorkloadState::kRunning;
  }
  for (int i = Pick(0, 16); i > 0; --i) {
    auto w = b.Workload("mig-wait-" + std::to_string(i), PickQueue(b.snapshot()));
    w.Priority(PickPriority()).Submit(Sec(Pick(0, 3600)));
    AddMigPods(w, Chance(60) ? 1 : Pick(2, 6));
    if (Chance(20)) w.Pods(Pick(1, 2), OneOf<int64_t>({0, 1, 2}));
    w.Cpu(Pick(0, 4) * 500);
    if (Chance(10)) w.Selector("pool", "a");
    if (Chance(10)) w.Tolerate("dedicated");
    const int total = w.get().TotalPods();
    if (total > 1 && Chance(30)) w.MinMember(Pick(1, total));
    if (Chance(15)) w.Suspended();
  }
  GenWaiting(b, 6);
  return b.snapshot();
}

}  // namespace chamber::core::testing
