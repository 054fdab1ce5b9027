// The daemon loop over the demo's simulated cluster: every number checked here comes from the
// engine, the simulator and the fleet model together.
#include "daemon/daemon.h"

#include <unistd.h>

#include <bit>
#include <filesystem>
#include <map>
#include <numbers>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "backend/sim/demo_cluster.h"
#include "daemon/api_json.h"

namespace chamber::daemon {
namespace {

using backend::DemoCluster;
using backend::DemoClusterOptions;
using backend::DemoScaleForGpus;
using backend::kDemoClusterGpus;
using backend::SimulatedBackend;
using backend::SimulatedBackendOptions;

constexpr int64_t kStart = 1'790'000'040'000;  // Unix ms, on a whole minute

struct Fixture {
  SimulatedBackend* backend = nullptr;
  std::unique_ptr<Daemon> daemon;
};

Fixture MakeDaemon(std::unique_ptr<fleet::HistoryStore> history = nullptr, uint64_t seed = 7,
                   const core::EngineConfig& engine = {}) {
  DemoClusterOptions o;
  o.seed = seed;
  o.start_unix_ms = kStart;
  o.gpu_mtbf_hours = 0;  // faults only where a test injects them
  SimulatedBackendOptions bo = DemoCluster(o);
  bo.engine = engine;
  auto b = SimulatedBackend::Create(std::move(bo));
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  Fixture f;
  f.backend = b->get();
  DaemonOptions options;
  options.engine = engine;
  f.daemon = std::make_unique<Daemon>(std::move(b).value(), options, std::move(history));
  return f;
}

TEST(DaemonTest, FirstTickPublishesTheFleet) {
  Fixture f = MakeDaemon();
  EXPECT_EQ(f.daemon->state()->version, 0u);
  ASSERT_TRUE(f.daemon->Tick().ok());
  auto s = f.daemon->state();
  EXPECT_EQ(s->version, 1u);
  EXPECT_EQ(s->time_ms, kStart);
  EXPECT_EQ(s->mode, "demo");
  EXPECT_TRUE(s->simulated);
  EXPECT_EQ(s->view.gpus.capacity, 264);
  ASSERT_EQ(s->input.pools.size(), 3u);
  EXPECT_EQ(s->input.pools[0].name, "h100");
  EXPECT_EQ(s->input.pools[2].pricing, fleet::Pricing::kSpot);
  EXPECT_NEAR(s->view.cost.total, 128 * 3.90 + 96 * 1.60 + 40 * 0.75, 1e-9);
  EXPECT_EQ(s->input.nodes.size(), 38u);
  EXPECT_EQ(s->input.queues.size(), 4u);
  EXPECT_EQ(s->totals.since, kStart);
}

int64_t Gpus(const SimulatedBackendOptions& b) {
  int64_t gpus = 0;
  for (const sim::NodePool& p : b.cluster.pools) gpus += int64_t{p.count} * p.gpus_per_node;
  return gpus;
}

TEST(DemoClusterTest, ScaleGrowsPoolsQuotasAndWorkInProportion) {
  DemoClusterOptions o;
  o.load = 1;
  const SimulatedBackendOptions base = DemoCluster(o);
  EXPECT_EQ(Gpus(base), kDemoClusterGpus);
  // 12,000 synthetic jobs, 1,680 notebooks, each one pod on a quarter or a half of an L40S,
  // and 504 inference servers, each one pod on one MIG device of an A100.
  EXPECT_EQ(base.trace.jobs.size(), 12000u + 1680u + 504u);
  std::map<int32_t, int> notebooks;
  std::map<std::string, int> inference;
  for (const sim::TraceJob& j : base.trace.jobs) {
    if (j.id.starts_with("inference-")) {
      ++inference[j.mig_profile];
      EXPECT_EQ(j.pods, 1);
      EXPECT_EQ(j.mig_devices_per_pod, 1);
      EXPECT_EQ(j.gpus_per_pod + j.gpu_milli_per_pod, 0);
      EXPECT_TRUE(j.queue == "recsys" || j.queue == "llm-training") << j.queue;
    }
    if (!j.id.starts_with("notebook-")) continue;
    ++notebooks[j.gpu_milli_per_pod];
    EXPECT_EQ(j.pods, 1);
    EXPECT_EQ(j.gpus_per_pod, 0);
    EXPECT_EQ(j.gpu_models, std::vector<std::string>{"L40S-48GB"});
    EXPECT_TRUE(j.queue == "research" || j.queue == "vision") << j.queue;
    EXPECT_GE(j.duration, std::chrono::hours(1));
    EXPECT_LT(j.duration, std::chrono::hours(4));
  }
  EXPECT_EQ(notebooks.size(), 2u);
  EXPECT_EQ(notebooks[250] + notebooks[500], 1680);
  EXPECT_GT(notebooks[250], notebooks[500]);  // two in three are quarters
  EXPECT_EQ(inference.size(), 3u);
  EXPECT_GT(inference["1g.10gb"], inference["3g.40gb"]);  // half are 1g.10gb, a fifth 3g.40gb
  // The last GPU of each A100 node is in MIG mode: its devices, not it, are the node's.
  const sim::NodePool& a100 = base.cluster.pools[1];
  EXPECT_EQ(a100.mig_gpus, 1);
  EXPECT_EQ(base.cluster.MigProfiles().size(), 3u);

  o.scale = DemoScaleForGpus(10000);
  o.load = 0.1;  // a tenth of the work keeps the test fast; jobs scale with both
  const SimulatedBackendOptions big = DemoCluster(o);
  ASSERT_EQ(big.cluster.pools.size(), 3u);
  EXPECT_EQ(big.cluster.pools[0].count, 606);  // 16 x 37.88
  EXPECT_EQ(big.cluster.pools[1].count, 455);  // 12 x 37.88
  EXPECT_EQ(big.cluster.pools[2].count, 379);  // 10 x 37.88
  EXPECT_EQ(Gpus(big), 10004);
  int64_t quotas = 0;
  for (const core::Queue& q : big.queues) quotas += q.res(core::Resource::kGpu).quota;
  EXPECT_EQ(big.queues[0].res(core::Resource::kGpu).quota, core::Gpus(4242));  // 112 x 37.88
  EXPECT_EQ(quotas, core::Gpus(9999));
  EXPECT_EQ(big.trace.jobs.size(), 45454u + 6363u + 1909u);  // (12,000 + 1,680 + 504) x 3.788
  // Every team still gets work.
  std::map<std::string, int> per_queue;
  for (const sim::TraceJob& j : big.trace.jobs) ++per_queue[j.queue];
  EXPECT_EQ(per_queue.size(), 4u);

  // The smallest cluster keeps one node of each pool, and no job asks for more than a quarter.
  o.scale = DemoScaleForGpus(20);
  const SimulatedBackendOptions small = DemoCluster(o);
  EXPECT_EQ(Gpus(small), 20);
  int64_t largest = 0;
  for (const sim::TraceJob& j : small.trace.jobs)
    largest = std::max<int64_t>(largest, int64_t{j.pods} * j.gpus_per_pod);
  EXPECT_GT(largest, 1);
  EXPECT_LE(largest, 5);
}

TEST(DaemonTest, LongerStepsMoveTheClockFurther) {
  Fixture f = MakeDaemon();
  ASSERT_TRUE(f.daemon->Tick().ok());
  ASSERT_TRUE(f.daemon->Tick().ok());
  EXPECT_EQ(f.daemon->state()->time_ms, kStart + 30'000);
  f.backend->set_step(std::chrono::minutes(5));
  ASSERT_TRUE(f.daemon->Tick().ok());
  EXPECT_EQ(f.daemon->state()->time_ms, kStart + 30'000 + 300'000);
}

TEST(DaemonTest, FleetAgreesWithTheSimulatedCluster) {
  Fixture f = MakeDaemon();
  for (int i = 0; i < 240; ++i) ASSERT_TRUE(f.daemon->Tick().ok());  // two simulated hours
  auto s = f.daemon->state();
  EXPECT_EQ(s->time_ms, kStart + 239 * 30'000);
  const core::Snapshot& snap = f.backend->cluster().snapshot();
  int64_t held = 0;
  for (size_t w = 0; w < snap.workloads.size(); ++w) held += f.backend->cluster().GpuMilliHeld(w);
  EXPECT_GT(held, 0);
  // GPU-equivalents: whole GPUs, and the notebooks' shares of L40S GPUs.
  const double held_gpus = static_cast<double>(held) / core::kMilliPerGpu;
  EXPECT_NEAR(s->view.gpus.allocated, held_gpus, 1e-9);
  double queue_allocated = 0, queue_held = 0;
  for (const fleet::QueueInput& q : s->input.queues) queue_allocated += q.allocated;
  for (const fleet::QueueView& q : s->view.queues) queue_held += q.allocated_gpus;
  EXPECT_NEAR(queue_allocated, held_gpus, 1e-9);
  EXPECT_NEAR(queue_held, held_gpus, 1e-9);
  EXPECT_GT(s->view.gpus.shared, 0);
  EXPECT_NEAR(s->view.gpus.allocated + s->view.gpus.idle + s->view.gpus.unhealthy, 264, 1e-9);
  // Capacity GPU-hours: 264 GPUs for 239 steps of 30 s.
  EXPECT_NEAR(s->totals.capacity_gpu_hours, 264.0 * 239 * 30 / 3600, 1e-9);
  EXPECT_GT(s->totals.used_gpu_hours, 0);
  EXPECT_LE(s->totals.used_gpu_hours, s->totals.allocated_gpu_hours);
  EXPECT_GT(s->view.running_workloads, 0);
  // Pending work carries the engine's reasons and queue positions.
  int pending_with_reason = 0;
  for (const fleet::WorkloadInput& w : s->input.workloads)
    if (w.phase == fleet::WorkloadPhase::kPending && !w.pending->reason.empty() &&
        w.pending->queue_position > 0)
      ++pending_with_reason;
  EXPECT_EQ(
      pending_with_reason, s->view.queue.pending_workloads - [&] {
        int suspended = 0;
        for (const auto& w : s->input.workloads)
          suspended += w.phase == fleet::WorkloadPhase::kSuspended;
        return suspended;
      }());
}

// With a usage half-life, the demo keeps each queue's decayed GPU-hours (the simulator
// integrates what each queue held) and the API shows them; without one, none.
TEST(DaemonTest, DecayedUsageReachesTheQueuesApi) {
  core::EngineConfig decay;
  decay.usage_half_life = std::chrono::hours(1);
  Fixture on = MakeDaemon(nullptr, 7, decay), off = MakeDaemon();
  for (int i = 0; i < 120; ++i) {  // an hour in 30 s steps
    ASSERT_TRUE(on.daemon->Tick().ok());
    ASSERT_TRUE(off.daemon->Tick().ok());
  }
  const nlohmann::json with = QueuesJson(*on.daemon->state());
  const nlohmann::json without = QueuesJson(*off.daemon->state());
  double total = 0;
  for (const auto& q : with["queues"]) {
    const double u = q["decayed_gpu_hours"].get<double>();
    // No more than holding its GPUs now for the whole hour without decay, and something when
    // it holds GPUs.
    EXPECT_GE(u, 0) << q.dump();
    EXPECT_LE(u, 264.0) << q.dump();
    if (q["allocated"].get<double>() > 0) {
      EXPECT_GT(u, 0) << q.dump();
    }
    total += u;
  }
  // At most the whole cluster for an hour, decayed: 264 * (1 / ln 2) * (1 - 1/2).
  EXPECT_GT(total, 0);
  EXPECT_LE(total, 264 / std::numbers::ln2 / 2 + 1e-6);
  for (const auto& q : without["queues"]) EXPECT_EQ(q["decayed_gpu_hours"], 0.0) << q.dump();
}

// The demo's backend, keeping what the engine decided in each cycle: the test's own account of
// every preemption and first start, to check the daemon's figures against.
class RecordingBackend : public ClusterBackend {
 public:
  struct Preempted {
    int64_t time_ms;
    std::string queue;
    std::string reason;
    double gpu_hours_lost;
    int32_t node;
  };
  struct Started {
    int64_t time_ms;
    std::string queue;
    double wait_seconds;
    int32_t node;
  };

  explicit RecordingBackend(std::unique_ptr<SimulatedBackend> inner) : inner_(std::move(inner)) {}
  SimulatedBackend& inner() { return *inner_; }
  const std::vector<Preempted>& preempted() const { return preempted_; }
  const std::vector<Started>& started() const { return started_; }

  std::string_view mode() const override { return inner_->mode(); }
  bool simulated_time() const override { return inner_->simulated_time(); }
  Result<const core::Snapshot*> Refresh() override {
    auto r = inner_->Refresh();
    if (r.ok()) snap_ = *r;
    return r;
  }
  Status Apply(const core::CycleResult& result) override {
    const int64_t now = kStart + snap_->now.count();
    for (const core::PreemptDecision& p : result.preemptions) {
      const core::Workload& w = snap_->workloads[p.workload.index()];
      preempted_.push_back({now, w.queue, std::string(core::PreemptReasonName(p.reason)),
                            p.gpu_hours_lost, w.placements.at(0).node.value});
      ever_preempted_.insert(w.name);
    }
    for (const core::BindDecision& b : result.binds) {
      const core::Workload& w = snap_->workloads[b.workload.index()];
      if (!w.recent_preemptions.empty() || ever_preempted_.contains(w.name)) continue;
      started_.push_back({now, w.queue,
                          static_cast<double>((snap_->now - w.submit_time).count()) / 1000,
                          b.pods.at(0).placement.node.value});
    }
    return inner_->Apply(result);
  }
  Observation Observe() override { return inner_->Observe(); }
  Status SetSchedulable(std::string_view node, bool schedulable) override {
    return inner_->SetSchedulable(node, schedulable);
  }

 private:
  std::unique_ptr<SimulatedBackend> inner_;
  const core::Snapshot* snap_ = nullptr;
  std::vector<Preempted> preempted_;
  std::vector<Started> started_;
  std::set<std::string> ever_preempted_;
};

double MetricValue(const std::string& page, const std::string& series) {
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  ADD_FAILURE() << "no sample " << series;
  return -1;
}

// Three simulated hours of the demo, with a GPU failing under a running workload: every
// preemption the engine decided reaches the queues' totals, the Prometheus counters and the last
// hour's figures per queue and pool, and the waits of the last hour's first starts give each
// queue's and pool's percentiles.
TEST(DaemonTest, DemoFillsWaitsAndLostWorkPerQueueAndPool) {
  DemoClusterOptions o;
  o.seed = 7;
  o.start_unix_ms = kStart;
  o.gpu_mtbf_hours = 0;
  o.load = 4;  // enough work that reclaim and priority preemption both happen
  auto sim = SimulatedBackend::Create(DemoCluster(o));
  ASSERT_TRUE(sim.ok());
  auto owned = std::make_unique<RecordingBackend>(std::move(sim).value());
  RecordingBackend& rec = *owned;
  Daemon daemon(std::move(owned), DaemonOptions{}, nullptr);
  auto hardware_faults = [&] {
    return std::count_if(rec.preempted().begin(), rec.preempted().end(),
                         [](const auto& p) { return p.reason == "HardwareFault"; });
  };
  for (int i = 0; i < 360; ++i) {
    ASSERT_TRUE(daemon.Tick().ok());
    // From tick 300, fail a GPU that a running workload holds (not reserved; the one started
    // last, which is the likeliest to run on) until the engine preempts one for it: a job may
    // end on its own before the next cycle sees the fault.
    if (i >= 300 && i < 310 && hardware_faults() == 0) {
      const auto state = daemon.state();
      const fleet::FleetView& v = state->view;
      const fleet::GpuView* held = nullptr;
      for (const fleet::GpuView& g : v.gpus_flat) {
        if (g.workload < 0 || g.state == fleet::GpuState::kUnhealthy) continue;
        const fleet::WorkloadInput& w = state->input.workloads[g.workload];
        if (w.phase != fleet::WorkloadPhase::kRunning || w.reserved) continue;
        if (held == nullptr || w.started > state->input.workloads[held->workload].started)
          held = &g;
      }
      ASSERT_NE(held, nullptr);
      ASSERT_TRUE(
          rec.inner().FailGpu(static_cast<size_t>(held->node), static_cast<size_t>(held->index)));
    }
  }
  const auto s = daemon.state();
  const int64_t since = s->time_ms - 3600 * 1000;
  const std::string page = MetricsPage(*s);
  const nlohmann::json queues = QueuesJson(*s)["queues"];
  const nlohmann::json fleet = FleetJson(*s);

  std::map<std::string, int> reasons;
  for (const auto& p : rec.preempted()) ++reasons[p.reason];
  EXPECT_GT(reasons["Reclaim"], 0);
  EXPECT_GT(reasons["Priority"], 0);
  EXPECT_GT(reasons["HardwareFault"], 0);

  auto pool_of = [&](int32_t node) { return s->input.nodes.at(static_cast<size_t>(node)).pool; };
  int64_t total = 0;
  for (const nlohmann::json& q : queues) {
    const std::string name = q["name"];
    SCOPED_TRACE(name);
    int64_t count = 0, recent = 0;
    double lost = 0, recent_lost = 0;
    std::vector<double> waits;
    for (const char* reason : {"Reclaim", "Priority", "HardwareFault"}) {
      int64_t n = 0;
      double h = 0;
      for (const auto& p : rec.preempted()) {
        if (p.queue != name || p.reason != reason) continue;
        ++n;
        h += p.gpu_hours_lost;
        if (p.time_ms > since) {
          ++recent;
          recent_lost += p.gpu_hours_lost;
        }
      }
      const std::string labels = "{queue=\"" + name + "\",reason=\"" + reason + "\"}";
      EXPECT_EQ(MetricValue(page, "chamber_preemptions_total" + labels), n);
      EXPECT_NEAR(MetricValue(page, "chamber_preemption_lost_gpu_hours_total" + labels), h, 1e-9);
      EXPECT_EQ(q["preemptions_by_reason"][reason]["preemptions"], n);
      EXPECT_NEAR(q["preemptions_by_reason"][reason]["gpu_hours_lost"].get<double>(), h, 1e-9);
      count += n;
      lost += h;
    }
    for (const auto& st : rec.started())
      if (st.queue == name && st.time_ms > since) waits.push_back(st.wait_seconds);
    EXPECT_EQ(q["preemptions_total"], count);
    EXPECT_NEAR(q["gpu_hours_lost_total"].get<double>(), lost, 1e-9);
    EXPECT_EQ(q["preemptions_last_hour"], recent);
    EXPECT_NEAR(q["gpu_hours_lost_last_hour"].get<double>(), recent_lost, 1e-9);
    EXPECT_EQ(q["started_last_hour"], waits.size());
    EXPECT_GT(waits.size(), 0u);
    EXPECT_EQ(q["wait_p50_seconds"], fleet::Percentile(waits, 0.5));
    EXPECT_EQ(q["wait_p95_seconds"], fleet::Percentile(waits, 0.95));
    const std::string label = "{queue=\"" + name + "\"";
    EXPECT_EQ(MetricValue(page, "chamber_queue_wait_seconds" + label + ",quantile=\"0.95\"}"),
              fleet::Percentile(waits, 0.95));
    EXPECT_EQ(MetricValue(page, "chamber_queue_preemptions_last_hour" + label + "}"), recent);
    EXPECT_NEAR(MetricValue(page, "chamber_queue_lost_gpu_hours_last_hour" + label + "}"),
                recent_lost, 1e-9);
    total += count;
  }
  EXPECT_EQ(total, static_cast<int64_t>(rec.preempted().size()));
  EXPECT_GT(total, 0);

  for (size_t p = 0; p < s->input.pools.size(); ++p) {
    const nlohmann::json& pool = fleet["pools"][p];
    SCOPED_TRACE(pool["name"].get<std::string>());
    std::vector<double> waits;
    for (const auto& st : rec.started())
      if (st.time_ms > since && pool_of(st.node) == static_cast<int32_t>(p))
        waits.push_back(st.wait_seconds);
    int64_t recent = 0;
    for (const auto& pr : rec.preempted())
      recent += pr.time_ms > since && pool_of(pr.node) == static_cast<int32_t>(p);
    EXPECT_EQ(pool["started_last_hour"], waits.size());
    EXPECT_EQ(pool["wait_p50_seconds"], fleet::Percentile(waits, 0.5));
    EXPECT_EQ(pool["wait_p95_seconds"], fleet::Percentile(waits, 0.95));
    EXPECT_EQ(pool["preemptions_last_hour"], recent);
    const std::string label = "{pool=\"" + pool["name"].get<std::string>() + "\"";
    EXPECT_EQ(MetricValue(page, "chamber_pool_wait_seconds" + label + ",quantile=\"0.5\"}"),
              fleet::Percentile(waits, 0.5));
    EXPECT_EQ(MetricValue(page, "chamber_pool_preemptions_last_hour" + label + "}"), recent);
  }

  // Each workload still in the cluster carries what its own preemptions lost.
  std::map<std::string, std::pair<int64_t, double>> by_workload;
  for (const fleet::WorkloadInput& w : s->input.workloads)
    if (w.preemption_count > 0) by_workload[w.name] = {w.preemption_count, w.gpu_hours_lost};
  EXPECT_FALSE(by_workload.empty());
  for (const auto& [name, figures] : by_workload) {
    const std::optional<WorkloadMatch> m = FindWorkload(*s, name);
    ASSERT_TRUE(m);
    const nlohmann::json w = WorkloadDetailJson(*s, *m)["workload"];
    EXPECT_EQ(w["preemption_count"], figures.first);
    double sum = 0;
    for (const nlohmann::json& p : w["preemption_history"])
      sum += p["gpu_hours_lost"].get<double>();
    if (figures.first <= 10) {
      EXPECT_EQ(w["preemption_history"].size(), static_cast<size_t>(figures.first)) << name;
      EXPECT_NEAR(sum, figures.second, 1e-9) << name;
    }
  }
}

TEST(DaemonTest, SameSeedSameFleet) {
  Fixture a = MakeDaemon(nullptr, 3), b = MakeDaemon(nullptr, 3);
  for (int i = 0; i < 60; ++i) {
    ASSERT_TRUE(a.daemon->Tick().ok());
    ASSERT_TRUE(b.daemon->Tick().ok());
  }
  EXPECT_EQ(a.daemon->state()->view.gpus, b.daemon->state()->view.gpus);
  EXPECT_EQ(GpusJson(*a.daemon->state()), GpusJson(*b.daemon->state()));
}

TEST(ApiJsonTest, DirectGpusBodyMatchesTheJsonDocument) {
  Fixture f = MakeDaemon();
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(f.daemon->Tick().ok());
  ASSERT_TRUE(f.backend->FailGpu(2, 1));
  ASSERT_TRUE(f.daemon->Tick().ok());
  const auto s = f.daemon->state();
  const std::string body = GpusBody(*s);
  const nlohmann::json parsed = nlohmann::json::parse(body);
  EXPECT_EQ(parsed, GpusJson(*s));  // numbers compare by value: 0 == 0.0
  ASSERT_EQ(parsed["gpus"].size(), 264u);
  // The part of each busy GPU held adds up to the fleet's busy GPU-equivalents (allocated GPUs
  // that failed count as unhealthy, not busy); a shared GPU's part is its shares' sum.
  double busy = 0, failed_held = 0;
  int shared = 0, mig = 0, mig_held = 0;
  for (const auto& g : parsed["gpus"]) {
    if (g["state"] == "busy") busy += g["allocated"].get<double>();
    if (g["state"] == "unhealthy") failed_held += g["allocated"].get<double>();
    mig += g["mig"].get<bool>() ? 1 : 0;
    if (g["shares"].empty()) continue;
    if (g["mig"].get<bool>()) {
      // A GPU in MIG mode: its shares are MIG devices of its layout, each charged its slices.
      ++mig_held;
      EXPECT_EQ(g["mig_devices"].size(), 4u) << g.dump();
      for (const auto& sh : g["shares"]) {
        const std::string profile = sh["mig_profile"];
        EXPECT_EQ(std::llround(sh["gpu_fraction"].get<double>() * 1000), profile == "1g.10gb" ? 142
                                                                         : profile == "2g.20gb"
                                                                             ? 285
                                                                             : 428)
            << sh.dump();
      }
    } else {
      ++shared;
    }
    EXPECT_TRUE(g["workload"].is_null()) << g.dump();
    int64_t sum = 0;
    for (const auto& sh : g["shares"]) {
      sum += std::llround(sh["gpu_fraction"].get<double>() * 1000);
      auto w =
          std::find_if(s->input.workloads.begin(), s->input.workloads.end(),
                       [&](const fleet::WorkloadInput& wi) { return wi.name == sh["workload"]; });
      ASSERT_NE(w, s->input.workloads.end()) << sh.dump();
      EXPECT_EQ(sh["queue"], (*w).queue);
      EXPECT_EQ((*w).phase, fleet::WorkloadPhase::kRunning);
    }
    EXPECT_EQ(std::llround(g["allocated"].get<double>() * 1000), sum) << g.dump();
  }
  EXPECT_GT(shared, 0);
  EXPECT_EQ(shared, s->view.gpus.shared);
  EXPECT_EQ(mig, 12);  // the last GPU of each of the 12 A100 nodes
  EXPECT_EQ(mig, s->view.gpus.mig);
  EXPECT_GT(mig_held, 0);  // inference servers on MIG devices

  // Prometheus: each GPU's held part, and per GPU and workload the part its shares hold.
  const std::string page = MetricsPage(*s);
  EXPECT_EQ(MetricValue(page, "chamber_gpus_shared"), shared);
  EXPECT_EQ(MetricValue(page, "chamber_gpus_mig"), mig);
  for (const auto& g : parsed["gpus"]) {
    const std::string gpu = "node=\"" + g["node"].get<std::string>() + "\",gpu=\"" +
                            std::to_string(g["index"].get<int>()) + "\",uuid=\"" +
                            g["uuid"].get<std::string>() + "\"";
    EXPECT_EQ(MetricValue(page, "chamber_gpu_allocated_ratio{" + gpu + "}"),
              g["allocated"].get<double>());
    std::map<std::pair<std::string, std::string>, double> by_workload;
    for (const auto& sh : g["shares"])
      by_workload[{sh["workload"], sh["queue"]}] += sh["gpu_fraction"].get<double>();
    for (const auto& [wq, part] : by_workload)
      EXPECT_NEAR(MetricValue(page, "chamber_gpu_share_ratio{" + gpu + ",workload=\"" + wq.first +
                                        "\",queue=\"" + wq.second + "\"}"),
                  part, 1e-9);
  }
  // One sample per GPU and workload holding shares of it, and no more.
  size_t samples = 0, pairs = 0;
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);)
    samples += line.starts_with("chamber_gpu_share_ratio{");
  for (const auto& g : parsed["gpus"]) {
    std::set<std::string> workloads;
    for (const auto& sh : g["shares"]) workloads.insert(sh["workload"].get<std::string>());
    pairs += workloads.size();
  }
  EXPECT_EQ(samples, pairs);
  EXPECT_NEAR(busy, s->view.gpus.allocated - s->view.gpus.allocated_idle - failed_held, 1e-9);
}

TEST(DaemonTest, GpuFaultBecomesAnIncidentAndResolves) {
  Fixture f = MakeDaemon();
  ASSERT_TRUE(f.daemon->Tick().ok());
  ASSERT_TRUE(f.backend->FailGpu(0, 3));
  ASSERT_TRUE(f.daemon->Tick().ok());
  auto s = f.daemon->state();
  ASSERT_EQ(s->incidents.size(), 1u);
  EXPECT_EQ(s->incidents[0].node, "h100-0");
  EXPECT_EQ(s->incidents[0].gpu_index, 3);
  EXPECT_FALSE(s->incidents[0].resolved_ms);
  // It says which fault: the simulated one, as an agent would have reported it.
  const GpuFault fault =
      SimulatedBackend::SimulatedFault("GPU-h100-0-3", s->time_ms, /*nvlink=*/true, 7);
  EXPECT_EQ(s->incidents[0].cause, fault.cause);
  EXPECT_EQ(s->incidents[0].severity, fault.severity);
  EXPECT_EQ(s->incidents[0].message, "GPU 3 on h100-0: " + fault.message);
  ASSERT_EQ(s->incidents[0].evidence.size(), fault.evidence.size() + 1);
  EXPECT_TRUE(
      std::equal(fault.evidence.begin(), fault.evidence.end(), s->incidents[0].evidence.begin()));
  EXPECT_TRUE(std::get<ActionEvidence>(s->incidents[0].evidence.back()).gpu_fenced);
  EXPECT_EQ(s->view.gpus.unhealthy, 1);
  EXPECT_EQ(s->view.gpus_flat[3].state, fleet::GpuState::kUnhealthy);
  EXPECT_EQ(HealthJson(*s)["fenced_gpus"][0]["uuid"], "GPU-h100-0-3");
  // Repaired 45 simulated minutes later (90 steps of 30 s).
  for (int i = 0; i < 90; ++i) ASSERT_TRUE(f.daemon->Tick().ok());
  s = f.daemon->state();
  ASSERT_EQ(s->incidents.size(), 1u);
  EXPECT_TRUE(s->incidents[0].resolved_ms);
  EXPECT_EQ(s->view.gpus.unhealthy, 0);
}

// The demo's faults are the kinds real GPUs have, with the evidence chamber-agent reports for
// them: an Xid 79, a double-bit ECC burst, a GPU close to its shutdown temperature, an NVLink
// error.
TEST(SimulatedFaultTest, EachKindCarriesTheEvidenceAnAgentReports) {
  std::set<std::string> kinds;
  for (int64_t t = 0; t < 400; ++t) {
    const GpuFault f = SimulatedBackend::SimulatedFault("GPU-h100-0-0", kStart + t * 60'000,
                                                        /*nvlink=*/true, 7);
    ASSERT_GE(f.evidence.size(), 2u);
    const auto& rule = std::get<RuleEvidence>(f.evidence.back());
    EXPECT_EQ(rule.rule, f.cause);
    EXPECT_EQ(rule.severity, f.severity);
    EXPECT_FALSE(rule.condition.empty());
    if (f.cause == "thermal-critical") {
      kinds.insert("thermal");
      EXPECT_EQ(f.severity, "unhealthy");
      ASSERT_EQ(f.evidence.size(), 2u);
      const auto& th = std::get<ThermalEvidence>(f.evidence[0]);
      EXPECT_GT(*th.temperature_c, *th.slowdown_c);
      EXPECT_LT(*th.temperature_c, *th.shutdown_c);
      EXPECT_EQ(th.clock_event_reasons,
                (std::vector<std::string>{"sw_thermal_slowdown", "hw_thermal_slowdown"}));
      EXPECT_GE(*th.temperature_c + 5, *th.shutdown_c);
      EXPECT_EQ(f.message, "temperature " + std::to_string(*th.temperature_c) +
                               " C within 5 C of the shutdown threshold of " +
                               std::to_string(*th.shutdown_c) + " C");
      EXPECT_EQ(rule.threshold, "3 consecutive samples within 5 C of the shutdown temperature");
      continue;
    }
    ASSERT_EQ(f.cause, "xid-hardware");
    const auto& xid = std::get<XidEvidence>(f.evidence[0]);
    EXPECT_EQ(xid.source, "simulated");
    EXPECT_EQ(xid.xid_class, "hardware");
    EXPECT_EQ(rule.threshold, "Xid " + std::to_string(xid.xid) + " is a hardware Xid, " +
                                  f.severity + " in the Xid table");
    kinds.insert("xid " + std::to_string(xid.xid));
    if (xid.xid == 79) {
      EXPECT_EQ(f.message,
                "Xid 79 (GPU has fallen off the bus): the GPU is no longer reachable over PCIe");
      EXPECT_EQ(f.severity, "fatal");
      EXPECT_EQ(f.evidence.size(), 2u);
    } else if (xid.xid == 48) {
      EXPECT_EQ(xid.name, "Double-bit ECC error");
      EXPECT_EQ(f.severity, "fatal");
      ASSERT_EQ(f.evidence.size(), 4u);
      const auto& ecc = std::get<EccEvidence>(f.evidence[1]);
      EXPECT_GE(*ecc.volatile_double_bit, 2u);
      EXPECT_GE(*ecc.aggregate_double_bit, *ecc.volatile_double_bit);
      EXPECT_GT(*ecc.volatile_single_bit, 0u);
      const auto& remap = std::get<RowRemapEvidence>(f.evidence[2]);
      EXPECT_TRUE(remap.pending);
      EXPECT_GE(remap.double_bit_rows, 1u);
    } else {
      ASSERT_EQ(xid.xid, 74u);
      EXPECT_EQ(xid.name, "NVLink error");
      EXPECT_EQ(f.severity, "unhealthy");
      ASSERT_EQ(f.evidence.size(), 3u);
      const auto& links = std::get<NvLinkEvidence>(f.evidence[1]);
      ASSERT_EQ(links.links.size(), 1u);
      EXPECT_GT(links.links[0].replay_errors, 0u);
      EXPECT_GT(links.links[0].crc_flit_errors, 0u);
    }
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"thermal", "xid 48", "xid 74", "xid 79"}));
  // PCIe cards have no NVLink to fail.
  for (int64_t t = 0; t < 200; ++t) {
    const GpuFault f =
        SimulatedBackend::SimulatedFault("GPU-l40s-0-0", kStart + t * 60'000, false, 7);
    const auto* xid = FindEvidence<XidEvidence>(f.evidence);
    EXPECT_TRUE(!xid || xid->xid != 74);
  }
  // The same GPU failing at the same time is the same fault.
  EXPECT_EQ(SimulatedBackend::SimulatedFault("GPU-a", 5, true, 1).evidence,
            SimulatedBackend::SimulatedFault("GPU-a", 5, true, 1).evidence);
}

TEST(DaemonTest, SimulatedFaultNamesTheWorkloadsItRequeued) {
  Fixture f = MakeDaemon();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(f.daemon->Tick().ok());
  // A GPU a running workload holds.
  const core::Snapshot& snap = f.backend->cluster().snapshot();
  std::string workload;
  size_t node = 0, gpu = 0;
  for (const core::Workload& w : snap.workloads) {
    if (w.state != core::WorkloadState::kRunning || w.placements.empty()) continue;
    const core::PodPlacement& p = w.placements[0];
    if (!p.node.valid() || p.gpu_mask == 0) continue;
    workload = w.name;
    node = p.node.index();
    gpu = static_cast<size_t>(std::countr_zero(p.gpu_mask));
    break;
  }
  ASSERT_FALSE(workload.empty());
  ASSERT_TRUE(f.backend->FailGpu(node, gpu));
  ASSERT_TRUE(f.daemon->Tick().ok());
  auto s = f.daemon->state();
  ASSERT_EQ(s->incidents.size(), 1u);
  const auto& action = std::get<ActionEvidence>(s->incidents[0].evidence.back());
  EXPECT_TRUE(action.gpu_fenced);
  EXPECT_EQ(action.taint, "") << "the demo has no Node to taint";
  EXPECT_EQ(action.workloads_requeued, std::vector<std::string>{workload});
  EXPECT_EQ(action.workloads_requeued_count, 1);
  // The API shows the incident's evidence as typed objects.
  const nlohmann::json j = HealthJson(*s)["incidents"][0];
  EXPECT_EQ(j["evidence"].back()["workloads_requeued"], nlohmann::json::array({workload}));
  EXPECT_EQ(j["evidence"], EvidenceListJson(s->incidents[0].evidence));
  EXPECT_EQ(j["cause"], s->incidents[0].cause);
}

TEST(ApiJsonTest, HealthIncidentCarriesCauseSeverityAndTypedEvidence) {
  FleetState s;
  s.time_ms = kStart;
  Incident i;
  i.time_ms = kStart;
  i.node = "gpu-7";
  i.gpu_index = 1;
  i.uuid = "GPU-1";
  i.cause = "ecc-uncorrectable";
  i.severity = "unhealthy";
  i.message = "GPU 1 on gpu-7: 4 uncorrectable ECC errors since the driver loaded";
  ActionEvidence a;
  a.gpu_fenced = true;
  a.taint = "NoSchedule";
  a.workloads_requeued = {"team-a/train"};
  a.workloads_requeued_count = 1;
  i.evidence = {EccEvidence{12, 4, 17, 4}, a};
  s.incidents.push_back(i);
  Incident unknown;
  unknown.time_ms = kStart;
  unknown.node = "gpu-8";
  unknown.resolved_ms = kStart + 1000;
  s.incidents.push_back(unknown);
  const nlohmann::json j = HealthJson(s)["incidents"];
  EXPECT_EQ(j[0], nlohmann::json::parse(R"({
    "time": "2026-09-21T14:14:00Z", "node": "gpu-7", "gpu_index": 1, "uuid": "GPU-1",
    "kind": "gpu_unhealthy", "cause": "ecc-uncorrectable", "severity": "unhealthy",
    "message": "GPU 1 on gpu-7: 4 uncorrectable ECC errors since the driver loaded",
    "evidence": [
      {"type": "ecc", "volatile_single_bit": 12, "volatile_double_bit": 4,
       "aggregate_single_bit": 17, "aggregate_double_bit": 4},
      {"type": "action", "gpu_fenced": true, "taint": "NoSchedule", "breaker_held": false,
       "workloads_requeued": ["team-a/train"], "workloads_requeued_count": 1}],
    "resolved": false, "resolved_time": null})"));
  EXPECT_TRUE(j[1]["cause"].is_null());
  EXPECT_TRUE(j[1]["severity"].is_null());
  EXPECT_EQ(j[1]["evidence"], nlohmann::json::array());
}

TEST(DaemonTest, CordonAndUncordon) {
  Fixture f = MakeDaemon();
  ASSERT_TRUE(f.daemon->Tick().ok());
  ASSERT_TRUE(f.daemon->SetSchedulable("l40s-2", false).ok());
  ASSERT_TRUE(f.daemon->Tick().ok());
  auto s = f.daemon->state();
  const auto& nodes = s->input.nodes;
  auto it =
      std::find_if(nodes.begin(), nodes.end(), [](const auto& n) { return n.name == "l40s-2"; });
  ASSERT_NE(it, nodes.end());
  EXPECT_FALSE(it->schedulable);
  EXPECT_EQ(HealthJson(*s)["fenced_nodes"], nlohmann::json::array({"l40s-2"}));
  EXPECT_EQ(f.daemon->SetSchedulable("nope", false).code(), StatusCode::kNotFound);
}

TEST(DaemonTest, WritesHistory) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("chamber-daemon-history-" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    auto store = fleet::HistoryStore::Open(path.string());
    ASSERT_TRUE(store.ok());
    Fixture f = MakeDaemon(std::move(store).value());
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(f.daemon->Tick().ok());  // 4.5 minutes
    auto series =
        f.daemon->history()->Read("gpus_capacity", "cluster", kStart / 1000, kStart / 1000 + 3600);
    ASSERT_TRUE(series.ok());
    ASSERT_EQ(series->points.size(), 5u);  // minutes 0..4
    for (const auto& p : series->points) EXPECT_EQ(p.value, 264);
    auto cat = f.daemon->history()->Catalogue();
    ASSERT_TRUE(cat.ok());
    EXPECT_NE(std::find(cat->scopes.begin(), cat->scopes.end(), "pool:h100"), cat->scopes.end());
    EXPECT_NE(std::find(cat->scopes.begin(), cat->scopes.end(), "queue:vision"), cat->scopes.end());
  }
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + "-wal");
  std::filesystem::remove(path.string() + "-shm");
}

}  // namespace
}  // namespace chamber::daemon
