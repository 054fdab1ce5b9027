#include "sim/simulator.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <unordered_map>

#include "common/gpu_share_ask.h"
#include "core/cluster_state.h"
#include "core/engine.h"
#include "core/gpu_model_queues.h"

namespace chamber::sim {

std::string_view EventKindName(EventKind k) {
  switch (k) {
    case EventKind::kSubmit:
      return "submit";
    case EventKind::kStart:
      return "start";
    case EventKind::kPreempt:
      return "preempt";
    case EventKind::kResume:
      return "resume";
    case EventKind::kFinish:
      return "finish";
    case EventKind::kFail:
      return "fail";
  }
  return "unknown";
}

Summary Summarize(std::vector<double> values) {
  Summary s;
  s.count = static_cast<int64_t>(values.size());
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(values.size());
  auto rank = [&](double p) {
    const auto n = static_cast<double>(values.size());
    const auto idx = static_cast<size_t>(std::max(1.0, std::ceil(p * n))) - 1;
    return values[std::min(idx, values.size() - 1)];
  };
  s.p50 = rank(0.50);
  s.p99 = rank(0.99);
  return s;
}

namespace {

constexpr const char* kDefaultQueue = "default";
constexpr const char* kOneQueue = "all";

double Hours(Duration d) { return static_cast<double>(d.count()) / 3.6e6; }

// A job's bucket by the GPU-equivalents (thousandths) it asks for; shares of one GPU are in the
// first.
std::string GangBucket(int64_t milli) {
  if (milli <= core::Gpus(1)) return "1 gpu";
  if (milli <= core::Gpus(8)) return "2-8 gpu";
  if (milli <= core::Gpus(64)) return "9-64 gpu";
  return "65+ gpu";
}

enum class Phase { kFuture, kWaiting, kRunning, kStopping, kDone };

struct JobRun {
  const TraceJob* job = nullptr;
  int64_t gpu_milli_per_pod = 0;  // whole GPUs (x 1,000), a share of one GPU, or MIG charges
  core::MigAsk mig;               // its pods' MIG devices, if any
  // A share of memory alone (docs/sharing.md, "A share of memory alone"): the part of the
  // smallest GPU it may go on, charged while it waits; gpu_milli_per_pod is the part of the GPU
  // it holds once it runs. 0: not such a share.
  int64_t memory_alone_waiting_milli = 0;
  std::string invalid_reason;  // the engine is told it waits as an invalid workload
  int32_t first_unit = 0;
  int32_t units = 0;
  int32_t units_running = 0;
  int32_t queue = -1;         // index into the metrics queues
  int32_t engine_queue = -1;  // index of its queue in the snapshot's
  Phase phase = Phase::kFuture;
  Duration remaining{0};
  Time run_start{0};
  bool started = false;
  uint32_t version = 0;
  double attained_gpu_hours = 0;
  std::vector<Time> preemptions;
};

struct Unit {
  int32_t job = 0;
  int32_t pods = 0;
  int32_t wl = -1;             // index in the snapshot's workloads, -1 when not there
  int64_t gpu_milli_held = 0;  // GPU-equivalents, thousandths
  int32_t usage_queue = -1;    // while it holds GPUs: the queue they count on (UsageQueues())
};

enum class Ev { kSubmit, kFinish, kGraceEnd, kGpuFail, kGpuRepair, kCycle };

// When a running job's last checkpoint is next due to be brought up to date in the snapshot.
struct CheckpointDue {
  Time at;
  int32_t job;
  uint32_t version;  // JobRun::version when it started: a job stopped since has another
  friend bool operator>(const CheckpointDue& x, const CheckpointDue& y) {
    return std::tie(x.at, x.job) > std::tie(y.at, y.job);
  }
};

struct Event {
  Time time;
  uint64_t seq;
  Ev kind;
  int32_t a;  // job, unit or node
  int32_t b;  // version or GPU index
  friend bool operator>(const Event& x, const Event& y) {
    return std::tie(x.time, x.seq) > std::tie(y.time, y.seq);
  }
};

core::Snapshot SnapshotOf(const std::vector<core::Node>& nodes,
                          const std::vector<core::MigResource>& mig_profiles) {
  core::Snapshot s;
  s.nodes = nodes;
  s.mig_profiles = mig_profiles;
  return s;
}

}  // namespace

namespace internal {

class Sim {
 public:
  Sim(const std::vector<core::Node>& nodes, const Trace& trace, const SimPolicy& policy,
      const SimOptions& options, const EventSink& sink, SimCluster::Scheduling scheduling)
      : trace_(trace),
        policy_(policy),
        options_(options),
        sink_(sink),
        scheduling_(scheduling),
        engine_(policy.config, policy.policies),
        session_(engine_, SnapshotOf(nodes, options.mig_profiles)),
        usage_(policy.config.usage_half_life),
        rng_(options.seed) {
    for (const core::Node& n : nodes)
      for (const core::Gpu& g : n.gpus) capacity_ += g.healthy ? 1 : 0;
    capacity_ += options.mig_gpus;
  }

  Status Setup();
  Result<SimMetrics> Run(const std::function<void(double)>& progress);

  // Stepping (SimCluster).
  void AdvanceTo(Time t);
  Time now() const { return now_; }
  const core::Snapshot& PrepareCycle() {
    PrepareCycle(now_);
    return CycleSnapshot();
  }
  void ApplyCycle(const core::CycleResult& result) { ApplyCycle(now_, result); }
  const core::Snapshot& snapshot() const { return session_.snapshot(); }
  const TraceJob& JobOf(size_t w) const { return *jobs_[units_[wl_unit_[w]].job].job; }
  int64_t GpuMilliHeld(size_t w) const { return units_[wl_unit_[w]].gpu_milli_held; }
  bool FailGpu(size_t node, size_t gpu, Duration repair_after);
  void SetUnschedulable(size_t node, bool unschedulable) {
    NodeToChange(node).unschedulable = unschedulable;
    MarkDirty(now_);
  }
  SimMetrics Finalize(Time end);

 private:
  void Push(Time t, Ev kind, int32_t a, int32_t b) {
    if (kind == Ev::kSubmit || kind == Ev::kFinish || kind == Ev::kGraceEnd) ++live_;
    events_.push({t, seq_++, kind, a, b});
  }
  void Advance(Time t);
  void MarkDirty(Time t);
  // Changes go through the session, which reloads what they touch before the next cycle.
  core::Node& NodeToChange(size_t n) {
    return session_.MutableNode(core::NodeId{static_cast<int32_t>(n)});
  }
  core::Workload& WorkloadToChange(int32_t i) {
    return session_.MutableWorkload(core::WorkloadId{i});
  }
  const std::vector<core::Workload>& workloads() const { return session_.snapshot().workloads; }
  // What the cycle schedules: the session's snapshot; with quotas per GPU model, a copy of it
  // whose queues are split per model and whose work is sent to a model's queue, as chamberd
  // does before every cycle (core/gpu_model_queues.h). The split keeps every workload where it
  // is, so the cycle's decisions name the session's workloads. The copy costs a cycle the
  // kept session's savings; only queue files with models pay it.
  const core::Snapshot& CycleSnapshot() {
    if (!split_models_) return session_.snapshot();
    split_ = session_.snapshot();
    core::SplitGpuModelQueues(split_);
    usage_.Fill(split_.queues);  // each model's own decayed usage, as chamberd keeps it
    return split_;
  }
  // The queues decayed usage is kept for: the snapshot's, or with quotas per GPU model, those
  // of the split (each model its own).
  const std::vector<core::Queue>& UsageQueues() const {
    return split_models_ ? usage_queues_ : session_.snapshot().queues;
  }
  // Fails a healthy GPU at `t` and plans its repair; false when it had failed already.
  bool FailGpuAt(Time t, size_t node, size_t gpu, Duration repair_after);
  void Submit(int32_t j);
  void Cycle(Time t);
  void PrepareCycle(Time t);
  void ApplyCycle(Time t, const core::CycleResult& result);
  void Process(const Event& e);
  bool Stopped() const {
    return done_ == static_cast<int64_t>(jobs_.size()) ||
           (live_ == 0 && running_ == 0 && !cycle_pending_);
  }
  void AddWorkload(int32_t unit, core::WorkloadState state);
  void RemoveWorkload(int32_t unit);
  void StopJob(int32_t j, Time t, bool failure);
  void Release(int32_t unit);
  void Emit(Time t, int32_t j, EventKind kind, std::vector<core::PodPlacement> placements = {},
            std::string reason = {}, const TraceJob* preemptor = nullptr) {
    if (!sink_) return;
    sink_(SimEvent{t, jobs_[j].job, kind, std::move(placements), std::move(reason), preemptor});
  }
  double Exponential(double mean_hours) {
    const double u = std::generate_canonical<double, 53>(rng_);
    return -std::log(1.0 - u) * mean_hours;
  }

  const Trace& trace_;
  const SimPolicy& policy_;
  const SimOptions& options_;
  const EventSink sink_;  // a copy: SimCluster callers may pass a temporary
  const SimCluster::Scheduling scheduling_;
  core::Engine engine_;
  core::EngineSession session_;  // the simulated cluster's snapshot
  // The GPUs shares of memory alone may go on, found at the first such job.
  std::optional<core::ShareableGpuMemories> gpu_memories_;
  bool split_models_ = false;  // some queue has quotas per GPU model (CycleSnapshot)
  core::Snapshot split_;
  std::vector<core::Queue> usage_queues_;  // with split_models_: UsageQueues()
  std::unordered_map<std::string, int32_t> usage_queue_index_;
  core::DecayedUsage usage_;  // each queue's decayed GPU-hours (fairShare.usageHalfLife)
  std::mt19937_64 rng_;
  std::vector<JobRun> jobs_;
  std::vector<Unit> units_;
  std::vector<int32_t> wl_unit_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::priority_queue<CheckpointDue, std::vector<CheckpointDue>, std::greater<>> checkpoints_;
  uint64_t seq_ = 0;
  int64_t live_ = 0;     // queued submit, finish and grace-end events
  int64_t running_ = 0;  // jobs making progress
  bool cycle_pending_ = false;
  Time cycle_at_{0};
  int64_t done_ = 0;  // finished jobs
  Time now_{0};       // the stepped clock (AdvanceTo)

  // Metrics.
  int64_t capacity_ = 0;
  Time last_{0};
  int64_t allocated_ = 0;  // GPU-equivalents held, thousandths
  int64_t waiting_jobs_ = 0;
  double alloc_gpu_ms_ = 0;
  double waiting_ms_ = 0;
  double alloc_while_waiting_gpu_ms_ = 0;
  double idle_while_queued_gpu_ms_ = 0;
  std::vector<int64_t> queue_alloc_;  // per queue, thousandths
  std::vector<double> engine_alloc_;  // GPUs held, per queue of UsageQueues() (decayed usage)
  std::vector<double> queue_gpu_ms_;
  std::vector<double> jct_, wait_;
  std::map<std::string, std::vector<double>> jct_by_prio_, wait_by_prio_, jct_by_gang_,
      wait_by_gang_;
  std::vector<double> cycle_ms_;
  SimMetrics m_;
  std::vector<std::string> queue_names_;
  // Time series: the point being filled.
  Duration series_step_{0};
  Time series_next_{0};
  double series_alloc_ms_ = 0, series_wait_ms_ = 0;
  std::vector<double> series_queue_ms_;
};

Status Sim::Setup() {
  // Quotas per GPU model: each cycle splits the queues as chamberd does (CycleSnapshot), so a
  // list the engine would refuse is refused here, named.
  std::set<std::string> parents;  // queues with child queues
  for (const core::Queue& q : options_.queues) parents.insert(q.parent);
  for (const core::Queue& q : options_.queues) {
    if (q.gpu_models.empty()) continue;
    if (std::string e = core::CheckGpuModels(q); !e.empty())
      return Status::InvalidArgument("queue " + q.name + ": " + e);
    if (parents.contains(q.name))
      return Status::InvalidArgument("queue " + q.name +
                                     ": resources.gpu.models: a queue with GPU models holds its "
                                     "work itself and cannot have child queues");
    split_models_ = policy_.quotas && !policy_.one_queue;
  }
  // Queues the engine sees.
  std::vector<core::Queue>& queues = session_.MutableQueues();
  if (policy_.one_queue) {
    core::Queue q;
    q.name = kOneQueue;
    queues.push_back(q);
  } else if (options_.queues.empty()) {
    core::Queue q;
    q.name = kDefaultQueue;
    queues.push_back(q);
  } else {
    queues = options_.queues;
    if (!policy_.quotas) {
      for (core::Queue& q : queues) {
        for (core::Resource r : core::kAllResources) {
          q.res(r) = core::QueueResource{};
          q.res(r).over_quota_weight = 1;
        }
        q.gpu_models.clear();
      }
    }
  }
  // Metrics are per trace queue, whatever the engine sees.
  std::map<std::string, int32_t> metric_queue;
  auto queue_of = [&](const std::string& name) {
    auto [it, inserted] = metric_queue.try_emplace(name, static_cast<int32_t>(queue_names_.size()));
    if (inserted) queue_names_.push_back(name);
    return it->second;
  };
  std::set<std::string> known;
  for (const core::Queue& q : options_.queues) known.insert(q.name);
  std::map<std::string, int32_t> engine_queue;  // the first of a name, as the engine finds it
  for (size_t i = 0; i < queues.size(); ++i)
    engine_queue.try_emplace(queues[i].name, static_cast<int32_t>(i));

  jobs_.resize(trace_.jobs.size());
  for (size_t j = 0; j < trace_.jobs.size(); ++j) {
    const TraceJob& t = trace_.jobs[j];
    JobRun& r = jobs_[j];
    r.job = &t;
    const std::string queue = options_.queues.empty() ? kDefaultQueue : t.queue;
    if (!options_.queues.empty() && !known.contains(queue))
      return Status::InvalidArgument("job " + t.id + " names queue \"" + t.queue +
                                     "\", which the queue file does not define");
    if (parents.contains(queue))
      return Status::InvalidArgument("job " + t.id + " names queue \"" + t.queue +
                                     "\", which has child queues; jobs go to leaf queues");
    r.queue = queue_of(queue);
    r.engine_queue = policy_.one_queue ? 0 : engine_queue.at(queue);
    // A trace job asks for whole GPUs per pod or for a share of one GPU (the readers allow no
    // other shape); the engine places shares beside each other.
    r.gpu_milli_per_pod = core::Gpus(t.gpus_per_pod);
    if (t.gpu_milli_per_pod > 0) {
      r.gpu_milli_per_pod = t.gpu_milli_per_pod;
      ++m_.fractional_jobs;
    } else if (t.gpu_memory_mib_per_pod > 0) {
      // Charged, while it waits, as on the smallest GPU it may go on: never less than it holds.
      if (!gpu_memories_) gpu_memories_.emplace(session_.snapshot().nodes);
      core::PodSet ask;
      ask.gpu_memory_mib = t.gpu_memory_mib_per_pod;
      ask.gpu_models = t.gpu_models;
      r.memory_alone_waiting_milli =
          gpu_share::MemoryShareMilli(t.gpu_memory_mib_per_pod, gpu_memories_->SmallestFor(ask));
      if (r.memory_alone_waiting_milli == 0) {
        r.memory_alone_waiting_milli = 999;  // waits, invalid, holding nothing
        r.invalid_reason = "asks for " + std::to_string(t.gpu_memory_mib_per_pod) +
                           " MiB of GPU memory alone: no GPU it may go on has that much memory "
                           "(a pool's GPU memory is its gpuMemory in the cluster file)";
      }
      r.gpu_milli_per_pod = r.memory_alone_waiting_milli;
      ++m_.fractional_jobs;
    }
    if (!t.mig_profile.empty()) {
      const auto& profiles = options_.mig_profiles;
      auto it = std::find_if(profiles.begin(), profiles.end(),
                             [&](const core::MigResource& m) { return m.name == t.mig_profile; });
      if (it == profiles.end())
        return Status::InvalidArgument("job " + t.id + " asks for MIG devices of profile " +
                                       t.mig_profile + ", which no pool's MIG layout has");
      r.mig.profile = static_cast<int8_t>(it - profiles.begin());
      r.mig.devices =
          static_cast<uint8_t>(std::clamp<int32_t>(t.mig_devices_per_pod, 1, core::kMaxMigDevices));
      r.mig.milli = static_cast<int16_t>(it->milli);
      r.gpu_milli_per_pod = r.mig.charge();  // charged as GPU-equivalents
      ++m_.fractional_jobs;
    }
    r.remaining = t.duration;
    r.first_unit = static_cast<int32_t>(units_.size());
    r.units = policy_.per_pod ? std::max(1, t.pods) : 1;
    for (int32_t u = 0; u < r.units; ++u)
      units_.push_back({static_cast<int32_t>(j), policy_.per_pod ? 1 : std::max(1, t.pods), -1, 0});
  }
  queue_alloc_.assign(queue_names_.size(), 0);
  if (split_models_) {
    // The queues per GPU model are the same at every cycle: decayed usage is kept for each.
    core::Snapshot lanes;
    lanes.queues = session_.snapshot().queues;
    core::SplitGpuModelQueues(lanes);
    usage_queues_ = std::move(lanes.queues);
    for (size_t i = 0; i < usage_queues_.size(); ++i)
      usage_queue_index_.try_emplace(usage_queues_[i].name, static_cast<int32_t>(i));
  }
  engine_alloc_.assign(UsageQueues().size(), 0);
  usage_.Advance(Time(0), UsageQueues(), engine_alloc_);  // starts its clock
  queue_gpu_ms_.assign(queue_names_.size(), 0);
  series_queue_ms_.assign(queue_names_.size(), 0);

  for (size_t j = 0; j < jobs_.size(); ++j)
    Push(trace_.jobs[j].submit, Ev::kSubmit, static_cast<int32_t>(j), 0);
  if (options_.gpu_mtbf_hours > 0) {
    const std::vector<core::Node>& nodes = session_.snapshot().nodes;
    for (size_t n = 0; n < nodes.size(); ++n)
      for (size_t g = 0; g < nodes[n].gpus.size(); ++g)
        Push(Time(static_cast<int64_t>(Exponential(options_.gpu_mtbf_hours) * 3.6e6)), Ev::kGpuFail,
             static_cast<int32_t>(n), static_cast<int32_t>(g));
  }
  // Series resolution: the trace's submit span plus its longest job, split into points.
  Duration span{0};
  for (const TraceJob& t : trace_.jobs) span = std::max(span, t.submit + t.duration);
  if (options_.horizon.count() > 0) span = options_.horizon;
  series_step_ =
      Duration(std::max<int64_t>(1000, span.count() / std::max(1, options_.series_points)));
  series_next_ = series_step_;
  return Status::Ok();
}

void Sim::Advance(Time t) {
  // What each queue held since last_ counts towards its decayed usage.
  if (usage_.enabled() && last_ < t) usage_.Advance(t, UsageQueues(), engine_alloc_);
  while (last_ < t) {
    const Time until = std::min(t, series_next_);
    const auto dt = static_cast<double>((until - last_).count());
    alloc_gpu_ms_ += core::GpusOf(allocated_) * dt;
    series_alloc_ms_ += core::GpusOf(allocated_) * dt;
    series_wait_ms_ += static_cast<double>(waiting_jobs_) * dt;
    if (waiting_jobs_ > 0) {
      waiting_ms_ += dt;
      alloc_while_waiting_gpu_ms_ += core::GpusOf(allocated_) * dt;
      idle_while_queued_gpu_ms_ +=
          core::GpusOf(std::max<int64_t>(0, core::Gpus(capacity_) - allocated_)) * dt;
    }
    for (size_t q = 0; q < queue_alloc_.size(); ++q) {
      queue_gpu_ms_[q] += core::GpusOf(queue_alloc_[q]) * dt;
      series_queue_ms_[q] += core::GpusOf(queue_alloc_[q]) * dt;
    }
    last_ = until;
    if (last_ == series_next_) {
      const auto step = static_cast<double>(series_step_.count());
      SeriesPoint p;
      p.hours = Hours(last_);
      p.allocated_gpus = series_alloc_ms_ / step;
      p.waiting_jobs = series_wait_ms_ / step;
      for (double& q : series_queue_ms_) {
        p.queue_gpus.push_back(q / step);
        q = 0;
      }
      series_alloc_ms_ = series_wait_ms_ = 0;
      m_.series.push_back(std::move(p));
      series_next_ += series_step_;
    }
  }
}

void Sim::MarkDirty(Time t) {
  if (scheduling_ == SimCluster::Scheduling::kExternal) return;  // the caller cycles
  const int64_t period = std::max<int64_t>(1, policy_.config.cycle_period.count());
  const Time at = Time((t.count() + period - 1) / period * period);
  if (!cycle_pending_ || at < cycle_at_) {
    cycle_pending_ = true;
    cycle_at_ = at;
    Push(at, Ev::kCycle, 0, 0);
  }
}

void Sim::AddWorkload(int32_t u, core::WorkloadState state) {
  Unit& unit = units_[u];
  const JobRun& r = jobs_[unit.job];
  const TraceJob& t = *r.job;
  core::Workload w;
  w.name = policy_.per_pod ? t.id + "/" + std::to_string(u - r.first_unit) : t.id;
  w.queue = policy_.one_queue ? kOneQueue : (options_.queues.empty() ? kDefaultQueue : t.queue);
  w.priority = policy_.ignore_priority ? 0 : t.priority;
  if (policy_.attained_service) w.priority = AttainedServicePriority(r.attained_gpu_hours);
  // Pods of one job are created one after another, so per-pod scheduling interleaves jobs
  // submitted together, as kube-scheduler sees them.
  w.submit_time = t.submit + (policy_.per_pod ? Duration(u - r.first_unit) : Duration(0));
  w.state = state;
  w.recent_preemptions = r.preemptions;
  core::PodSet ps;
  ps.count = unit.pods;
  ps.request = core::Resources::OfMilli(r.mig.any() ? 0 : r.gpu_milli_per_pod, t.cpu_milli_per_pod,
                                        t.memory_bytes_per_pod);
  ps.mig = r.mig;
  ps.gpu_models = t.gpu_models;
  ps.gpu_memory_mib = t.gpu_memory_mib_per_pod;
  if (r.memory_alone_waiting_milli > 0) {
    ps.gpu_memory_only = true;
    ps.request[core::Resource::kGpu] = r.memory_alone_waiting_milli;
  }
  ps.invalid_reason = r.invalid_reason;
  w.pod_sets.push_back(std::move(ps));
  unit.wl = session_.AddWorkload(std::move(w)).value;
  wl_unit_.push_back(u);
}

void Sim::RemoveWorkload(int32_t u) {
  const int32_t i = units_[u].wl;
  if (i < 0) return;
  const auto last = static_cast<int32_t>(workloads().size()) - 1;
  session_.RemoveWorkload(core::WorkloadId{i});  // the last workload takes its index
  if (i != last) {
    wl_unit_[i] = wl_unit_[last];
    units_[wl_unit_[i]].wl = i;
  }
  wl_unit_.pop_back();
  units_[u].wl = -1;
}

void Sim::Submit(int32_t j) {
  JobRun& r = jobs_[j];
  r.phase = Phase::kWaiting;
  ++waiting_jobs_;
  for (int32_t u = r.first_unit; u < r.first_unit + r.units; ++u)
    AddWorkload(u, core::WorkloadState::kPending);
  Emit(r.job->submit, j, EventKind::kSubmit);
}

void Sim::Release(int32_t u) {
  Unit& unit = units_[u];
  allocated_ -= unit.gpu_milli_held;
  queue_alloc_[jobs_[unit.job].queue] -= unit.gpu_milli_held;
  if (unit.usage_queue >= 0) engine_alloc_[unit.usage_queue] -= core::GpusOf(unit.gpu_milli_held);
  unit.gpu_milli_held = 0;
  unit.usage_queue = -1;
}

// A running job stops (preempted or hit by a failure): progress since the last checkpoint is lost.
void Sim::StopJob(int32_t j, Time t, bool failure) {
  JobRun& r = jobs_[j];
  if (r.phase != Phase::kRunning) return;
  const Duration progress = t - r.run_start;
  Duration saved = progress;
  if (options_.checkpoint_interval.count() > 0) {
    saved = Duration(progress.count() / options_.checkpoint_interval.count() *
                     options_.checkpoint_interval.count());
  } else {
    saved = Duration(0);
  }
  if (progress >= r.remaining) saved = r.remaining;  // it was finishing anyway
  const double gpus = core::GpusOf(r.gpu_milli_per_pod) * r.job->pods;
  const double lost = gpus * Hours(progress - saved);
  (failure ? m_.gpu_hours_lost_failures : m_.gpu_hours_lost_preemption) += lost;
  r.attained_gpu_hours += gpus * Hours(progress);
  r.remaining -= saved;
  r.remaining += options_.restart_overhead;
  r.phase = Phase::kStopping;
  --running_;
  ++r.version;  // its finish event no longer counts
  ++waiting_jobs_;
}

void Sim::Cycle(Time t) {
  PrepareCycle(t);
  const auto begin = std::chrono::steady_clock::now();
  // The simulator reads decisions only: why work waits is not asked for.
  const core::CycleOptions cycle{.explain = false};
  const core::CycleResult result = split_models_ ? engine_.Schedule(CycleSnapshot(), cycle)
                                   : options_.fresh_cycles ? session_.ScheduleAfresh(cycle)
                                                           : session_.Schedule(cycle);
  cycle_ms_.push_back(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count());
  ApplyCycle(t, result);
}

void Sim::PrepareCycle(Time t) {
  session_.SetNow(t);
  // Each queue's recent use, as chamberd keeps it: what its work held since the last cycle.
  // (Advance() keeps it up to date with every change of what each queue holds.)
  if (usage_.enabled()) {
    std::vector<core::Queue> queues = session_.snapshot().queues;
    if (usage_.Fill(queues)) session_.MutableQueues() = std::move(queues);
  }
  // A running job's last checkpoint, as of `t`, for the jobs that passed one since the last
  // cycle: the rest keep theirs.
  while (!checkpoints_.empty() && checkpoints_.top().at <= t) {
    const CheckpointDue due = checkpoints_.top();
    checkpoints_.pop();
    const JobRun& r = jobs_[due.job];
    if (r.phase != Phase::kRunning || r.version != due.version) continue;  // stopped since
    const int64_t interval = options_.checkpoint_interval.count();
    const Time last = r.run_start + Duration((t - r.run_start).count() / interval * interval);
    for (int32_t u = r.first_unit; u < r.first_unit + r.units; ++u) {
      if (units_[u].wl < 0 || workloads()[units_[u].wl].state != core::WorkloadState::kRunning)
        continue;
      WorkloadToChange(units_[u].wl).last_checkpoint_time = last;
    }
    checkpoints_.push({last + Duration(interval), due.job, due.version});
  }
  // LAS: priorities from the service attained so far, which grows with every running moment.
  if (policy_.attained_service) {
    for (size_t i = 0; i < workloads().size(); ++i) {
      const JobRun& r = jobs_[units_[wl_unit_[i]].job];
      double attained = r.attained_gpu_hours;
      if (r.phase == Phase::kRunning)
        attained += core::GpusOf(r.gpu_milli_per_pod) * r.job->pods * Hours(t - r.run_start);
      const int32_t priority = AttainedServicePriority(attained);
      if (workloads()[i].priority != priority)
        WorkloadToChange(static_cast<int32_t>(i)).priority = priority;
    }
  }
}

void Sim::ApplyCycle(Time t, const core::CycleResult& result) {
  // Preemptions first: the decisions refer to workload indices, which removal would move.
  for (const core::PreemptDecision& p : result.preemptions) {
    const int32_t u = wl_unit_[p.workload.index()];
    const int32_t j = units_[u].job;
    core::Workload& w = WorkloadToChange(p.workload.value);
    w.state = core::WorkloadState::kPreempting;
    const bool fault = p.reason == core::PreemptReason::kHardwareFault;
    JobRun& r = jobs_[j];
    const bool was_running = r.phase == Phase::kRunning;
    StopJob(j, t, fault);
    if (!fault) {
      r.preemptions.push_back(t);
      w.recent_preemptions = r.preemptions;
    }
    if (was_running || !fault) ++m_.preemptions;
    const TraceJob* preemptor =
        p.preemptor.valid() ? jobs_[units_[wl_unit_[p.preemptor.index()]].job].job : nullptr;
    Emit(t, j, fault ? EventKind::kFail : EventKind::kPreempt, {},
         std::string(core::PreemptReasonName(p.reason)), preemptor);
    Push(t + Duration(int64_t{p.grace_seconds} * 1000), Ev::kGraceEnd, u, 0);
  }

  auto start = [&](core::WorkloadId wid, const std::vector<core::PodAssignment>& pods,
                   bool resume) {
    const int32_t u = wl_unit_[wid.index()];
    Unit& unit = units_[u];
    JobRun& r = jobs_[unit.job];
    core::Workload& w = WorkloadToChange(wid.value);
    w.state = core::WorkloadState::kRunning;
    w.start_time = t;
    w.last_checkpoint_time.reset();
    w.placements.clear();
    for (const core::PodAssignment& a : pods) w.placements.push_back(a.placement);
    if (r.memory_alone_waiting_milli > 0) {
      // Charged from now on by the GPUs it holds (by the smallest of them, for a gang).
      int64_t held = 0;
      for (const core::PodAssignment& a : pods) {
        const core::Node& n = session_.snapshot().nodes[a.placement.node.index()];
        const auto g = static_cast<size_t>(std::countr_zero(a.placement.gpu_mask));
        held = std::max(held,
                        gpu_share::MemoryShareMilli(r.job->gpu_memory_mib_per_pod,
                                                    g < n.gpus.size() ? n.gpus[g].memory_mib : 0));
      }
      if (held > 0) {
        // A job of pods scheduled one by one: the largest part any of its pods holds.
        r.gpu_milli_per_pod = r.units_running > 0 ? std::max(r.gpu_milli_per_pod, held) : held;
        w.pod_sets.front().request[core::Resource::kGpu] = held;
        // As chamberd's next cycle would, the next one sees the room the smaller charge leaves.
        if (held != r.memory_alone_waiting_milli) MarkDirty(t + Duration(1));
      }
    }
    int64_t milli = 0;
    for (const core::PodAssignment& a : pods) {
      const core::PodSet& set = w.pod_sets[a.pod_set];
      milli += core::HeldGpuMilli(a.placement, set.request) + set.mig.charge();
    }
    unit.gpu_milli_held = milli;
    allocated_ += milli;
    queue_alloc_[r.queue] += milli;
    // Its queue's, or with quotas per GPU model the queue of the model it was sent to.
    unit.usage_queue = r.engine_queue;
    if (split_models_)
      if (auto it = usage_queue_index_.find(split_.workloads[wid.index()].queue);
          it != usage_queue_index_.end())
        unit.usage_queue = it->second;
    engine_alloc_[unit.usage_queue] += core::GpusOf(milli);
    if (++r.units_running < r.units) return;  // a gang starts when all its pods run
    const bool first = !r.started;
    r.started = true;
    r.phase = Phase::kRunning;
    r.run_start = t;
    if (options_.checkpoint_interval.count() > 0) checkpoints_.push({t, unit.job, r.version});
    ++running_;
    --waiting_jobs_;
    if (first) {
      const double wait = Hours(t - r.job->submit);
      wait_.push_back(wait);
      wait_by_prio_[r.job->priority >= core::kReservedPriority ? "reserved" : "elastic"].push_back(
          wait);
      wait_by_gang_[GangBucket(r.gpu_milli_per_pod * r.job->pods)].push_back(wait);
    }
    std::vector<core::PodPlacement> all;
    for (int32_t v = r.first_unit; v < r.first_unit + r.units; ++v)
      for (const core::PodPlacement& p : workloads()[units_[v].wl].placements) all.push_back(p);
    Emit(t, unit.job, resume || !first ? EventKind::kResume : EventKind::kStart, std::move(all));
    Push(t + r.remaining, Ev::kFinish, unit.job, static_cast<int32_t>(r.version));
  };
  for (const core::BindDecision& b : result.binds) start(b.workload, b.pods, false);
  for (const core::ResumeDecision& b : result.resumes) start(b.workload, b.pods, true);

  // Waiting work may become placeable as time alone passes: when running work outgrows its
  // minimum runtime and may be preempted, or (LAS) as attained service lowers priorities. Plan
  // a cycle for the first such moment; otherwise the next event brings the next cycle.
  if (result.stats.pending > 0) {
    Time next = Time::max();
    if (policy_.attained_service && running_ > 0 && options_.recheck_interval.count() > 0)
      next = t + options_.recheck_interval;
    // With quotas per GPU model, where waiting work goes depends on what runs (CycleSnapshot):
    // work that started changes that, so the next cycle comes one period later, as chamberd's.
    if (split_models_ && (!result.binds.empty() || !result.resumes.empty()))
      next = std::min(next, t + policy_.config.cycle_period);
    if (policy_.config.reclaim_enabled || policy_.config.priority_preemption_enabled) {
      for (const core::Workload& w : workloads()) {
        if (w.state != core::WorkloadState::kRunning || w.reserved()) continue;
        const Time ripe = w.start_time + policy_.config.min_runtime;
        if (ripe > t && ripe < next) next = ripe;
      }
    }
    if (next != Time::max()) MarkDirty(next);
  }
  ++m_.cycles;
}

void Sim::Process(const Event& e) {
  if (e.kind == Ev::kSubmit || e.kind == Ev::kFinish || e.kind == Ev::kGraceEnd) --live_;
  Advance(e.time);
  switch (e.kind) {
    case Ev::kSubmit:
      Submit(e.a);
      MarkDirty(e.time);
      break;
    case Ev::kFinish: {
      JobRun& r = jobs_[e.a];
      if (r.phase != Phase::kRunning || static_cast<uint32_t>(e.b) != r.version) break;
      r.phase = Phase::kDone;
      --running_;
      r.attained_gpu_hours +=
          core::GpusOf(r.gpu_milli_per_pod) * r.job->pods * Hours(e.time - r.run_start);
      for (int32_t u = r.first_unit; u < r.first_unit + r.units; ++u) {
        Release(u);
        RemoveWorkload(u);
      }
      const double jct = Hours(e.time - r.job->submit);
      jct_.push_back(jct);
      jct_by_prio_[r.job->priority >= core::kReservedPriority ? "reserved" : "elastic"].push_back(
          jct);
      jct_by_gang_[GangBucket(r.gpu_milli_per_pod * r.job->pods)].push_back(jct);
      ++done_;
      Emit(e.time, e.a, EventKind::kFinish);
      MarkDirty(e.time);
      break;
    }
    case Ev::kGraceEnd: {
      Unit& unit = units_[e.a];
      if (unit.wl < 0) break;
      if (workloads()[unit.wl].state != core::WorkloadState::kPreempting) break;
      Release(e.a);
      core::Workload& w = WorkloadToChange(unit.wl);
      w.placements.clear();
      w.state = policy_.per_pod ? core::WorkloadState::kPending : core::WorkloadState::kSuspended;
      if (const int64_t waiting = jobs_[unit.job].memory_alone_waiting_milli; waiting > 0)
        w.pod_sets.front().request[core::Resource::kGpu] = waiting;  // as it waits again
      --jobs_[unit.job].units_running;
      MarkDirty(e.time);
      break;
    }
    case Ev::kGpuFail:
      FailGpuAt(e.time, static_cast<size_t>(e.a), static_cast<size_t>(e.b), options_.repair_time);
      break;
    case Ev::kGpuRepair: {
      NodeToChange(static_cast<size_t>(e.a)).gpus[e.b].healthy = true;
      ++capacity_;
      if (options_.gpu_mtbf_hours > 0)
        Push(e.time + Duration(static_cast<int64_t>(Exponential(options_.gpu_mtbf_hours) * 3.6e6)),
             Ev::kGpuFail, e.a, e.b);
      MarkDirty(e.time);
      break;
    }
    case Ev::kCycle:
      if (cycle_pending_ && e.time == cycle_at_) {
        cycle_pending_ = false;
        Cycle(e.time);
      }
      break;
  }
}

bool Sim::FailGpu(size_t node, size_t gpu, Duration repair_after) {
  return FailGpuAt(now_, node, gpu, repair_after);
}

bool Sim::FailGpuAt(Time t, size_t node, size_t gpu, Duration repair_after) {
  if (!session_.snapshot().nodes[node].gpus[gpu].healthy) return false;
  NodeToChange(node).gpus[gpu].healthy = false;
  --capacity_;
  ++m_.gpu_failures;
  Push(t + repair_after, Ev::kGpuRepair, static_cast<int32_t>(node), static_cast<int32_t>(gpu));
  MarkDirty(t);
  return true;
}

void Sim::AdvanceTo(Time t) {
  if (t < now_) return;
  while (!events_.empty() && events_.top().time <= t) {
    const Event e = events_.top();
    events_.pop();
    now_ = e.time;
    Process(e);
  }
  now_ = t;
  Advance(t);
}

Result<SimMetrics> Sim::Run(const std::function<void(double)>& progress) {
  const auto wall_begin = std::chrono::steady_clock::now();
  CHAMBER_RETURN_IF_ERROR(Setup());
  const auto total = static_cast<int64_t>(jobs_.size());
  auto last_progress = wall_begin;
  Time end{0};
  while (!events_.empty()) {
    const Event e = events_.top();
    if (options_.horizon.count() > 0 && e.time > options_.horizon) break;
    // Stop when every job finished, or when nothing runs, nothing is due and no cycle is
    // pending: what still waits can never be placed (only failures and repairs would follow).
    if (Stopped()) break;
    events_.pop();
    end = e.time;
    now_ = e.time;
    Process(e);
    if (progress) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_progress > std::chrono::milliseconds(200)) {
        progress(total == 0 ? 1.0 : static_cast<double>(done_) / static_cast<double>(total));
        last_progress = now;
      }
    }
  }
  if (options_.horizon.count() > 0 && end < options_.horizon && done_ < total)
    end = options_.horizon;
  Advance(end);
  m_ = Finalize(end);
  m_.run_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_begin).count();
  if (progress) progress(1.0);
  return m_;
}

// The metrics as of `end`, up to which Advance has run. Leaves the running state untouched, so
// a stepped cluster may be asked again later.
SimMetrics Sim::Finalize(Time end) {
  SimMetrics saved = m_;
  const auto total = static_cast<int64_t>(jobs_.size());
  const int64_t done = done_;
  m_.policy = policy_.name;
  m_.capacity_gpus = 0;
  for (const core::Node& n : session_.snapshot().nodes)
    m_.capacity_gpus += static_cast<int64_t>(n.gpus.size());
  m_.capacity_gpus += options_.mig_gpus;
  m_.jobs = total;
  m_.finished = done;
  m_.unfinished = total - done;
  m_.makespan_hours = Hours(end);
  const double capacity_ms =
      static_cast<double>(m_.capacity_gpus) * static_cast<double>(end.count());
  m_.allocation = capacity_ms > 0 ? alloc_gpu_ms_ / capacity_ms : 0;
  m_.allocation_while_waiting =
      waiting_ms_ > 0
          ? alloc_while_waiting_gpu_ms_ / (static_cast<double>(m_.capacity_gpus) * waiting_ms_)
          : 0;
  m_.idle_gpu_hours_while_queued = idle_while_queued_gpu_ms_ / 3.6e6;
  m_.jct_hours = Summarize(jct_);
  m_.wait_hours = Summarize(wait_);
  for (auto& [k, v] : jct_by_prio_) m_.jct_by_priority[k] = Summarize(v);
  for (auto& [k, v] : wait_by_prio_) m_.wait_by_priority[k] = Summarize(v);
  for (auto& [k, v] : jct_by_gang_) m_.jct_by_gang[k] = Summarize(v);
  for (auto& [k, v] : wait_by_gang_) m_.wait_by_gang[k] = Summarize(v);
  m_.cycle_ms = Summarize(cycle_ms_);

  // Shares against entitlement: quota over total quota when queues have quotas, else equal.
  double total_ms = 0;
  for (double q : queue_gpu_ms_) total_ms += q;
  double total_quota = 0;
  std::vector<double> quota(queue_names_.size(), 0);
  for (size_t q = 0; q < queue_names_.size(); ++q)
    for (const core::Queue& spec : options_.queues)
      if (spec.name == queue_names_[q]) {
        // A queue with quotas per GPU model is entitled to their sum.
        int64_t milli = spec.res(core::Resource::kGpu).quota;
        if (!spec.gpu_models.empty()) {
          milli = 0;
          for (const core::GpuModelQuota& m : spec.gpu_models) milli += m.gpu.quota;
        }
        quota[q] = core::GpusOf(milli);
      }
  for (double v : quota) total_quota += v;
  double sum = 0, sum_sq = 0;
  for (size_t q = 0; q < queue_names_.size(); ++q) {
    QueueMetrics qm;
    qm.name = queue_names_[q];
    qm.gpu_hours = queue_gpu_ms_[q] / 3.6e6;
    qm.share = total_ms > 0 ? queue_gpu_ms_[q] / total_ms : 0;
    qm.entitlement =
        total_quota > 0 ? quota[q] / total_quota : 1.0 / static_cast<double>(queue_names_.size());
    if (qm.entitlement > 0) {
      const double x = qm.share / qm.entitlement;
      sum += x;
      sum_sq += x * x;
    }
    m_.queues.push_back(std::move(qm));
  }
  size_t n_entitled = 0;
  for (const QueueMetrics& q : m_.queues) n_entitled += q.entitlement > 0 ? 1 : 0;
  m_.jain_index = sum_sq > 0 ? sum * sum / (static_cast<double>(n_entitled) * sum_sq) : 1;
  SimMetrics out = std::move(m_);
  m_ = std::move(saved);
  return out;
}

}  // namespace internal

Result<std::unique_ptr<SimCluster>> SimCluster::Create(const std::vector<core::Node>& nodes,
                                                       const Trace& trace, const SimPolicy& policy,
                                                       const SimOptions& options,
                                                       const EventSink& events,
                                                       Scheduling scheduling) {
  auto sim = std::make_unique<internal::Sim>(nodes, trace, policy, options, events, scheduling);
  CHAMBER_RETURN_IF_ERROR(sim->Setup());
  return std::unique_ptr<SimCluster>(new SimCluster(std::move(sim)));
}

SimCluster::SimCluster(std::unique_ptr<internal::Sim> sim) : sim_(std::move(sim)) {}
SimCluster::~SimCluster() = default;
void SimCluster::AdvanceTo(Time t) { sim_->AdvanceTo(t); }
Time SimCluster::now() const { return sim_->now(); }
const core::Snapshot& SimCluster::PrepareCycle() { return sim_->PrepareCycle(); }
void SimCluster::ApplyCycle(const core::CycleResult& result) { sim_->ApplyCycle(result); }
const core::Snapshot& SimCluster::snapshot() const { return sim_->snapshot(); }
const TraceJob& SimCluster::JobOf(size_t workload) const { return sim_->JobOf(workload); }
int64_t SimCluster::GpuMilliHeld(size_t workload) const { return sim_->GpuMilliHeld(workload); }
bool SimCluster::FailGpu(size_t node, size_t gpu, Duration repair_after) {
  return sim_->FailGpu(node, gpu, repair_after);
}
void SimCluster::SetUnschedulable(size_t node, bool unschedulable) {
  sim_->SetUnschedulable(node, unschedulable);
}
SimMetrics SimCluster::Metrics() { return sim_->Finalize(sim_->now()); }

Result<SimMetrics> Simulate(const std::vector<core::Node>& nodes, const Trace& trace,
                            const SimPolicy& policy, const SimOptions& options,
                            const EventSink& events, const std::function<void(double)>& progress) {
  internal::Sim sim(nodes, trace, policy, options, events, SimCluster::Scheduling::kInternal);
  return sim.Run(progress);
}

}  // namespace chamber::sim
