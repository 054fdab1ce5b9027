#include "core/engine.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/cluster_state.h"
#include "core/cycle.h"
#include "core/loaded_work.h"

namespace chamber::core {

std::string_view PreemptReasonName(PreemptReason r) {
  switch (r) {
    case PreemptReason::kReclaim:
      return "Reclaim";
    case PreemptReason::kPriority:
      return "Priority";
    case PreemptReason::kHardwareFault:
      return "HardwareFault";
  }
  return "Unknown";
}

std::string_view PendingReasonName(PendingReason r) {
  switch (r) {
    case PendingReason::kInvalidWorkload:
      return "InvalidWorkload";
    case PendingReason::kQueueNotFound:
      return "QueueNotFound";
    case PendingReason::kQueueInvalid:
      return "QueueInvalid";
    case PendingReason::kNotLeafQueue:
      return "NotLeafQueue";
    case PendingReason::kOverQueueLimit:
      return "OverQueueLimit";
    case PendingReason::kOverQuota:
      return "OverQuota";
    case PendingReason::kLendingLimit:
      return "LendingLimit";
    case PendingReason::kFairShare:
      return "FairShare";
    case PendingReason::kPreemptionNotAllowed:
      return "PreemptionNotAllowed";
    case PendingReason::kNoNodeFits:
      return "NoNodeFits";
    case PendingReason::kWaitingForPreemption:
      return "WaitingForPreemption";
    case PendingReason::kBlockedByQueueHead:
      return "BlockedByQueueHead";
    case PendingReason::kWaitingForPods:
      return "WaitingForPods";
    case PendingReason::kBindBackoff:
      return "BindBackoff";
  }
  return "Unknown";
}

namespace {
const PendingExplanation& NoExplanation() {
  static const PendingExplanation none;
  return none;
}
}  // namespace

const std::string& PendingDecision::message() const {
  return (explanation ? *explanation : NoExplanation()).message;
}

const std::vector<std::string>& PendingDecision::details() const {
  return (explanation ? *explanation : NoExplanation()).details;
}

std::string ValidateWorkload(const Workload& w, const std::vector<MigResource>* mig_profiles) {
  if (w.pod_sets.empty()) return "workload has no pods";
  int64_t total = 0;
  for (size_t i = 0; i < w.pod_sets.size(); ++i) {
    const PodSet& ps = w.pod_sets[i];
    // Built only for an error: every workload is validated every cycle.
    auto where = [&] {
      return "pod set " + (ps.name.empty() ? std::to_string(i) : ps.name) + ": ";
    };
    if (ps.count <= 0) return where() + "count must be positive, got " + std::to_string(ps.count);
    if (!ps.invalid_reason.empty()) return where() + ps.invalid_reason;
    if (ps.request.AnyNegative())
      return where() + "negative request (" + FormatResources(ps.request) + ")";
    if (ps.request.gpu_milli() % kMilliPerGpu != 0 && !ps.request.gpu_share())
      return where() + "requests " + FormatGpus(ps.request.gpu_milli()) +
             " GPUs per pod; a pod asks for whole GPUs or a share of one (less than 1)";
    if (ps.gpu_memory_mib < 0)
      return where() + "GPU memory " + std::to_string(ps.gpu_memory_mib) +
             " MiB per pod must not be negative";
    if (ps.gpu_memory_mib > 0 && !ps.request.gpu_share())
      return where() + "asks for " + std::to_string(ps.gpu_memory_mib) +
             " MiB of GPU memory with " + FormatGpus(ps.request.gpu_milli()) +
             " GPUs; GPU memory is asked for with a share of one GPU";
    if (ps.mig.profile >= 0 || ps.mig.devices != 0) {
      const auto p = static_cast<size_t>(ps.mig.profile);
      if (ps.mig.profile < 0 || (mig_profiles != nullptr && p >= mig_profiles->size()) ||
          ps.mig.profile >= kMaxMigProfiles)
        return where() + "asks for MIG devices of profile " + std::to_string(ps.mig.profile) +
               ", which the snapshot does not name";
      const std::string name =
          mig_profiles != nullptr ? (*mig_profiles)[p].name : "#" + std::to_string(ps.mig.profile);
      if (ps.mig.devices < 1)
        return where() + "asks for " + std::to_string(ps.mig.devices) + " MIG " + name +
               " devices per pod; 1 to " + std::to_string(kMaxMigDevices);
      if (ps.request.gpu_milli() != 0 || ps.gpu_memory_mib != 0)
        return where() + "asks for MIG " + name + " devices with " +
               FormatGpus(ps.request.gpu_milli()) +
               " GPUs; a pod asks for MIG devices, whole GPUs or a share of one";
      if (mig_profiles != nullptr && ps.mig.milli != (*mig_profiles)[p].milli)
        return where() + "charges " + std::to_string(ps.mig.milli) + " thousandths per MIG " +
               name + " device; the profile's charge is " +
               std::to_string((*mig_profiles)[p].milli);
    }
    if (ps.request.whole_gpus() > kMaxGpusPerNode)
      return where() + "requests " + std::to_string(ps.request.whole_gpus()) +
             " GPUs per pod; a node has at most " + std::to_string(kMaxGpusPerNode);
    total += ps.count;
  }
  if (w.min_member < 0) return "min-member must not be negative";
  if (w.awaited_pods < 0) return "awaited pods must not be negative";
  if (w.bind_rollbacks < 0) return "bind rollbacks must not be negative";
  if (w.min_member > total)
    return "min-member " + std::to_string(w.min_member) + " exceeds the workload's " +
           std::to_string(total) + " pods";
  return {};
}

Policies DefaultPolicies() {
  return {std::make_shared<WaterFillingFairShare>(), std::make_shared<TopologyBinPacking>(),
          std::make_shared<MinimalVictimSelector>()};
}

Engine::Engine(EngineConfig config, Policies policies, EngineTuning tuning)
    : config_(std::move(config)), policies_(std::move(policies)), tuning_(tuning) {}

CycleResult Engine::Schedule(const Snapshot& snapshot, const CycleOptions& options) const {
  Cycle cycle(snapshot, config_, policies_, tuning_, /*keep=*/false, /*node_index=*/nullptr);
  cycle.work().LoadAll();
  return cycle.Run(options);
}

class EngineSession::Impl {
 public:
  Impl(const Engine& engine, Snapshot snapshot)
      : engine_(engine), snap_(std::move(snapshot)), loaded_(snap_.workloads.size(), 0) {}

  const Snapshot& snapshot() const { return snap_; }

  void SetNow(Time now) { snap_.now = now; }

  Node& MutableNode(NodeId n) {
    node_index_.reset();
    Rebuild();
    return snap_.nodes[n.index()];
  }

  std::vector<Queue>& MutableQueues() {
    Rebuild();
    return snap_.queues;
  }

  WorkloadId AddWorkload(Workload w) {
    const WorkloadId id{static_cast<int32_t>(snap_.workloads.size())};
    snap_.workloads.push_back(std::move(w));
    loaded_.push_back(0);
    if (cycle_) {
      cycle_->work().AddSlot();
      dirty_.push_back(id);
    }
    return id;
  }

  Workload& MutableWorkload(WorkloadId w) {
    Unload(w);
    return snap_.workloads[w.index()];
  }

  void RemoveWorkload(WorkloadId w) {
    const WorkloadId last{static_cast<int32_t>(snap_.workloads.size()) - 1};
    Unload(w);
    Unload(last);
    if (w != last) snap_.workloads[w.index()] = std::move(snap_.workloads[last.index()]);
    snap_.workloads.pop_back();
    loaded_.pop_back();
    if (cycle_) cycle_->work().PopSlot();  // `last`'s records, unloaded; w's are loaded again
  }

  CycleResult ScheduleAfresh(const CycleOptions& options) {
    Cycle cycle(snap_, engine_.config_, engine_.policies_, engine_.tuning_, /*keep=*/false,
                NodeIndexFor());
    cycle.work().LoadAll();
    return cycle.Run(options);
  }

  CycleResult Schedule(const CycleOptions& options) {
    // A placement that cannot be recorded is reported in workload order, and a change to one
    // workload may settle another's conflict: with such a snapshot each cycle loads afresh.
    if (cycle_ && cycle_->work().HasIssues()) Rebuild();
    // A workload loaded in bind backoff is loaded again once its time has come: nothing else
    // about it changes then.
    if (cycle_) {
      std::erase_if(backoff_, [&](WorkloadId w) {
        if (w.index() >= snap_.workloads.size()) return true;
        if (snap_.workloads[w.index()].bind_retry_at > snap_.now) return false;
        Unload(w);
        return true;
      });
    }
    if (cycle_) {
      LoadedWork::QueueLookup lookup;
      for (WorkloadId w : dirty_) {
        if (w.index() >= snap_.workloads.size() || loaded_[w.index()]) continue;
        loaded_[w.index()] = 1;
        if (!cycle_->work().Load(w, lookup)) {
          Rebuild();
          break;
        }
        NoteBackoff(w);
      }
      dirty_.clear();
    }
    if (!cycle_) {
      cycle_ = std::make_unique<Cycle>(snap_, engine_.config_, engine_.policies_, engine_.tuning_,
                                       /*keep=*/true, NodeIndexFor());
      cycle_->work().LoadAll();
      loaded_.assign(snap_.workloads.size(), 1);
      backoff_.clear();
      for (size_t i = 0; i < snap_.workloads.size(); ++i)
        NoteBackoff(WorkloadId{static_cast<int32_t>(i)});
    }
    return cycle_->Run(options);
  }

 private:
  // What the nodes derive, built again only after a node changed.
  std::shared_ptr<const NodeIndex> NodeIndexFor() {
    if (!node_index_ || node_index_->size() != snap_.nodes.size())
      node_index_ = std::make_shared<const NodeIndex>(snap_.nodes, snap_.mig_profiles);
    return node_index_;
  }
  void Rebuild() {
    cycle_.reset();
    dirty_.clear();
  }
  void NoteBackoff(WorkloadId w) {
    if (snap_.workloads[w.index()].bind_retry_at > snap_.now) backoff_.push_back(w);
  }
  // Before the workload changes: its part leaves the loaded state, to be loaded again as it
  // is at the next cycle.
  void Unload(WorkloadId w) {
    if (!cycle_ || !loaded_[w.index()]) return;
    if (cycle_->work().HasIssues()) {  // what it claimed is not known: load everything afresh
      Rebuild();
      return;
    }
    cycle_->work().Unload(w);
    loaded_[w.index()] = 0;
    dirty_.push_back(w);
  }

  const Engine& engine_;
  Snapshot snap_;
  std::shared_ptr<const NodeIndex> node_index_;  // null: built at the next cycle
  std::unique_ptr<Cycle> cycle_;                 // null: built and loaded at the next cycle
  std::vector<uint8_t> loaded_;                  // per workload: its part is in cycle_
  std::vector<WorkloadId> dirty_;                // unloaded or added since the last cycle
  std::vector<WorkloadId> backoff_;              // loaded while in bind backoff
};

EngineSession::EngineSession(const Engine& engine, Snapshot snapshot)
    : impl_(std::make_unique<Impl>(engine, std::move(snapshot))) {}
EngineSession::~EngineSession() = default;
const Snapshot& EngineSession::snapshot() const { return impl_->snapshot(); }
CycleResult EngineSession::ScheduleAfresh(const CycleOptions& options) {
  return impl_->ScheduleAfresh(options);
}
void EngineSession::SetNow(Time now) { impl_->SetNow(now); }
Node& EngineSession::MutableNode(NodeId n) { return impl_->MutableNode(n); }
std::vector<Queue>& EngineSession::MutableQueues() { return impl_->MutableQueues(); }
WorkloadId EngineSession::AddWorkload(Workload w) { return impl_->AddWorkload(std::move(w)); }
Workload& EngineSession::MutableWorkload(WorkloadId w) { return impl_->MutableWorkload(w); }
void EngineSession::RemoveWorkload(WorkloadId w) { impl_->RemoveWorkload(w); }
CycleResult EngineSession::Schedule(const CycleOptions& options) {
  return impl_->Schedule(options);
}

}  // namespace chamber::core
