// Tiny traces whose metrics are worked out by hand in the comments.
#include "sim/simulator.h"

#include <bit>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "sim/cluster_spec.h"
#include "sim/policy.h"
#include "sim/synthetic.h"
#include "sim/test/sim_test_util.h"

namespace chamber::sim {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

using testing::Cluster;
using testing::Job;
using testing::ModelQuota;
using testing::NodePerModel;
using testing::Policy;

TEST(Simulator, OneJobOnAnIdleCluster) {
  Trace trace;
  trace.jobs.push_back(Job("a", Time(0), hours(1), 1, 1));
  Result<SimMetrics> m = Simulate(Cluster(1, 8), trace, Policy("chamber"), SimOptions{});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->finished, 1);
  EXPECT_DOUBLE_EQ(m->jct_hours.mean, 1.0);
  EXPECT_DOUBLE_EQ(m->wait_hours.mean, 0.0);
  EXPECT_DOUBLE_EQ(m->makespan_hours, 1.0);
  EXPECT_DOUBLE_EQ(m->allocation, 1.0 / 8);  // 1 of 8 GPUs for the whole hour
  EXPECT_DOUBLE_EQ(m->idle_gpu_hours_while_queued, 0.0);
}

// Quotas per GPU model, as chamberd splits them before each cycle (docs/queues.md, "GPU
// models"): queue speech may hold 4 H100s (quota and limit) and 8 A100s; five 4-GPU jobs of 1 h
// at t=0, one 8-GPU node of each model. Each waiting job goes to the first model within quota as
// the running work stands: at the first cycle all five choose H100, whose limit lets a start
// (t=0); at the next cycle (1 s later) H100 is at its quota, so the rest go to A100, where b
// and c start. At 1h a is done: d and e choose H100 and d starts; at 1h+1s b and c are done and
// H100 is at its quota again: e starts on A100. The H100s the queue holds never pass 4.
TEST(Simulator, QuotasPerGpuModelHoldPerModel) {
  Trace trace;
  for (const char* id : {"a", "b", "c", "d", "e"})
    trace.jobs.push_back(Job(id, Time(0), hours(1), 1, 4, "speech"));
  SimOptions options;
  core::Queue q;
  q.name = "speech";
  q.gpu_models = {ModelQuota("H100", 4, 4), ModelQuota("A100", 8)};
  options.queues.push_back(q);
  const std::vector<core::Node> nodes = NodePerModel({"H100", "A100"}, 8);
  std::map<std::string, std::string> started;  // job -> "<seconds> <model>"
  std::map<std::string, std::string> model_of;
  int64_t h100_held = 0, most_h100 = 0;
  const EventSink sink = [&](const SimEvent& e) {
    if (e.kind == EventKind::kStart) {
      const core::Node& n = nodes.at(static_cast<size_t>(e.placements.at(0).node.value));
      model_of[e.job->id] = n.gpus.at(0).model.str();
      started[e.job->id] = std::to_string(e.time.count() / 1000) + " " + model_of[e.job->id];
      if (model_of[e.job->id] == "H100") most_h100 = std::max(most_h100, h100_held += 4);
    }
    if (e.kind == EventKind::kFinish && model_of[e.job->id] == "H100") h100_held -= 4;
  };
  Result<SimMetrics> m = Simulate(nodes, trace, Policy("chamber"), options, sink);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->finished, 5);
  EXPECT_EQ(started, (std::map<std::string, std::string>{{"a", "0 H100"},
                                                         {"b", "1 A100"},
                                                         {"c", "1 A100"},
                                                         {"d", "3600 H100"},
                                                         {"e", "3601 A100"}}));
  EXPECT_EQ(most_h100, 4) << "the H100 limit";
  EXPECT_DOUBLE_EQ(m->makespan_hours, 7201.0 / 3600);

  // Its entitlement is its models' quotas, 12 GPUs: half, beside a queue of quota 12.
  core::Queue other;
  other.name = "other";
  other.res(core::Resource::kGpu).quota = core::Gpus(12);
  options.queues.push_back(other);
  trace.jobs.push_back(Job("x", Time(0), hours(1), 1, 1, "other"));
  m = Simulate(nodes, trace, Policy("chamber"), options);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->queues.size(), 2u);
  EXPECT_EQ(m->queues[0].name, "speech");
  EXPECT_DOUBLE_EQ(m->queues[0].entitlement, 0.5);
}

// A list of GPU models the engine would refuse is refused before the run, named.
TEST(Simulator, RefusesAListOfGpuModelsThatDoesNotRead) {
  Trace trace;
  trace.jobs.push_back(Job("a", Time(0), hours(1), 1, 1));
  SimOptions options;
  core::Queue q;
  q.name = "a";
  q.gpu_models = {ModelQuota("H100", 8, 4)};
  options.queues.push_back(q);
  Result<SimMetrics> m = Simulate(Cluster(1, 8), trace, Policy("chamber"), options);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "queue a: resources.gpu.models[H100].limit 4 gpu is below quota 8 gpu");
  options.queues[0].gpu_models[0].gpu.limit = core::kUnlimited;
  core::Queue child;
  child.name = "b";
  child.parent = "a";
  options.queues.push_back(child);
  m = Simulate(Cluster(1, 8), trace, Policy("chamber"), options);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "queue a: resources.gpu.models: a queue with GPU models holds its work itself and "
            "cannot have child queues");
}

TEST(Simulator, FifoQueuesTheSecondFullNodeJob) {
  // Two 8-GPU jobs at t=0 on one 8-GPU node: a runs 0-1h, b waits 1h and runs 1h-3h.
  Trace trace;
  trace.jobs.push_back(Job("a", Time(0), hours(1), 1, 8));
  trace.jobs.push_back(Job("b", Time(0), hours(2), 1, 8));
  Result<SimMetrics> m = Simulate(Cluster(1, 8), trace, Policy("fifo"), SimOptions{});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->finished, 2);
  EXPECT_DOUBLE_EQ(m->makespan_hours, 3.0);
  EXPECT_DOUBLE_EQ(m->jct_hours.mean, 2.0);  // (1 + 3) / 2
  EXPECT_DOUBLE_EQ(m->wait_hours.mean, 0.5);
  EXPECT_DOUBLE_EQ(m->wait_hours.p50, 0.0);
  EXPECT_DOUBLE_EQ(m->wait_hours.p99, 1.0);
  EXPECT_DOUBLE_EQ(m->allocation, 1.0);  // (8*1 + 8*2) / (8*3)
  EXPECT_DOUBLE_EQ(m->allocation_while_waiting, 1.0);
  EXPECT_DOUBLE_EQ(m->idle_gpu_hours_while_queued, 0.0);
}

TEST(Simulator, SharesOfOneGpuRunSideBySide) {
  // One 2-GPU node. Two half-GPU jobs share GPU 0 from t=0 for 1h, beside each other (the GPU
  // left with the least room). A 2-GPU job of lower priority at t=0 waits: GPU 0 holds shares.
  // A 0.3 job at 30m finds no room on GPU 0 and takes GPU 1, 30m-1h30m; only then is the node
  // whole again: the 2-GPU job runs 1h30m-2h30m. GPU-hours 0.5 + 0.5 + 0.3 + 2 = 3.3 of
  // 2 x 2.5h: allocation 0.66.
  auto share = [](std::string id, Time submit, int32_t milli) {
    TraceJob j = Job(std::move(id), submit, hours(1), 1, 0);
    j.gpu_milli_per_pod = milli;
    return j;
  };
  Trace trace;
  trace.jobs.push_back(share("half-a", Time(0), 500));
  trace.jobs.push_back(share("half-b", Time(0), 500));
  trace.jobs.push_back(Job("whole", Time(0), hours(1), 1, 2, "default", 0));
  trace.jobs.push_back(share("third", Time(minutes(30)), 300));
  std::vector<std::pair<std::string, core::PodPlacement>> starts;
  const EventSink sink = [&](const SimEvent& e) {
    if (e.kind == EventKind::kStart) starts.emplace_back(e.job->id, e.placements.at(0));
  };
  Result<SimMetrics> m = Simulate(Cluster(1, 2), trace, Policy("chamber"), SimOptions{}, sink);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->finished, 4);
  EXPECT_EQ(m->fractional_jobs, 3);
  EXPECT_DOUBLE_EQ(m->makespan_hours, 2.5);
  EXPECT_NEAR(m->allocation, 3.3 / 5, 1e-12);
  const core::NodeId n0{0};
  EXPECT_EQ(starts, (std::vector<std::pair<std::string, core::PodPlacement>>{
                        {"half-a", {n0, 0b01}},
                        {"half-b", {n0, 0b01}},
                        {"third", {n0, 0b10}},
                        {"whole", {n0, 0b11}},
                    }));
}

// Shares of memory alone (docs/sharing.md, "A share of memory alone"; docs/traces.md): node
// `a100` has one 40 GiB GPU, node `h100` one 80 GiB GPU. A whole-GPU job kept to the A100
// runs there from t=0 for 1h. At 1m shares of 20 GiB and 60 GiB arrive. Waiting, each is
// charged as on the smallest GPU it may go on: 20 GiB of the 40 GiB A100 is 500 thousandths,
// 60 GiB (only the H100 has that much) 750. The 20 GiB share goes on the H100, the only GPU
// with room, and holds 250 from its start; the 60 GiB share does not fit beside the 500 it was
// placed with in that cycle, and starts at the next (1 s on), beside the 250 it holds now.
// GPU-hours: 1 + 0.25 + 0.75 = 2 of the 2 GPUs' capacity over the run.
TEST(Simulator, SharesOfMemoryAloneAreChargedByTheGpuTheyRunOn) {
  ClusterSpec spec;
  for (const auto& [model, gib] : {std::pair<std::string, int64_t>{"A100-SXM4-40GB", 40},
                                   std::pair<std::string, int64_t>{"H100-SXM5-80GB", 80}}) {
    NodePool p;
    p.name = model.substr(0, 4) == "A100" ? "a100" : "h100";
    p.gpus_per_node = 1;
    p.gpu_model = model;
    p.gpu_memory_bytes = gib << 30;
    spec.pools.push_back(p);
  }
  auto memory = [](std::string id, int64_t gib) {
    TraceJob j = Job(std::move(id), Time(minutes(1)), hours(1), 1, 0);
    j.gpu_memory_mib_per_pod = gib * 1024;
    return j;
  };
  Trace trace;
  trace.jobs.push_back(Job("whole", Time(0), hours(1), 1, 1));
  trace.jobs.back().gpu_models = {"A100-SXM4-40GB"};
  trace.jobs.push_back(memory("m20", 20));
  trace.jobs.push_back(memory("m60", 60));
  std::map<std::string, std::pair<Time, core::PodPlacement>> starts;
  const EventSink sink = [&](const SimEvent& e) {
    if (e.kind == EventKind::kStart) starts[e.job->id] = {e.time, e.placements.at(0)};
  };
  Result<SimMetrics> m = Simulate(BuildNodes(spec), trace, Policy("chamber"), SimOptions{}, sink);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->finished, 3);
  EXPECT_EQ(m->fractional_jobs, 2);
  const core::PodPlacement on_h100{core::NodeId{1}, 0b1};
  ASSERT_EQ(starts.size(), 3u);
  EXPECT_EQ(starts["m20"], std::make_pair(Time(minutes(1)), on_h100));
  EXPECT_EQ(starts["m60"], std::make_pair(Time(minutes(1) + seconds(1)), on_h100));
  EXPECT_NEAR(m->allocation * 2 * m->makespan_hours, 2.0, 1e-9);

  // Memory no GPU it may go on has: the job waits, invalid, and never runs.
  trace.jobs[2].gpu_memory_mib_per_pod = 100 * 1024;
  starts.clear();
  m = Simulate(BuildNodes(spec), trace, Policy("chamber"), SimOptions{}, sink);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->finished, 2);
  EXPECT_FALSE(starts.contains("m60"));
}

// MIG devices from the cluster's layout: one node whose one GPU in MIG mode holds two 3g.40gb.
// Two 3g.40gb servers run from t=0 for 1h; a third waits for a device, 1h-2h. Each is charged
// 0.428 GPU: 3 x 0.428 GPU-hours of capacity 2 GPUs (one whole, one in MIG mode) x 2h.
TEST(Simulator, MigDevicesOfTheLayoutRunOneServerEach) {
  ClusterSpec spec;
  NodePool p;
  p.name = "n";
  p.gpus_per_node = 2;
  p.gpu_model = "A100-SXM4-80GB";
  p.mig_gpus = 1;
  p.mig_devices = {{"3g.40gb", 2}};
  spec.pools.push_back(p);
  auto server = [](std::string id) {
    TraceJob j = Job(std::move(id), Time(0), hours(1), 1, 0);
    j.mig_profile = "3g.40gb";
    j.mig_devices_per_pod = 1;
    return j;
  };
  Trace trace;
  for (const char* id : {"a", "b", "c"}) trace.jobs.push_back(server(id));
  SimOptions options;
  options.mig_profiles = spec.MigProfiles();
  options.mig_gpus = 1;
  std::vector<std::pair<std::string, Time>> starts;
  const EventSink sink = [&](const SimEvent& e) {
    if (e.kind != EventKind::kStart) return;
    starts.emplace_back(e.job->id, e.time);
    EXPECT_EQ(e.placements.at(0).gpu_mask, 0u) << "a MIG pod holds no whole GPU";
  };
  Result<SimMetrics> m = Simulate(BuildNodes(spec), trace, Policy("chamber"), options, sink);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->finished, 3);
  EXPECT_EQ(m->capacity_gpus, 2);
  EXPECT_DOUBLE_EQ(m->makespan_hours, 2);
  EXPECT_NEAR(m->allocation, 3 * 0.428 / 4, 1e-12);
  ASSERT_EQ(starts.size(), 3u);
  EXPECT_EQ(starts[0].second, Time(0));
  EXPECT_EQ(starts[1].second, Time(0));
  EXPECT_EQ(starts[2].second, Time(hours(1)));

  // A profile no layout has is an error, named.
  trace.jobs[2].mig_profile = "1g.10gb";
  m = Simulate(BuildNodes(spec), trace, Policy("chamber"), options);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "job c asks for MIG devices of profile 1g.10gb, which no pool's MIG layout has");
}

TEST(Simulator, KubeDefaultDeadlocksGangsThatChamberRunsInTurn) {
  // Two 2-pod x 4-GPU jobs on two 4-GPU nodes. Pod by pod, a/0 and b/0 take one node each and
  // both jobs wait forever for their second pod; as gangs, a runs and then b.
  Trace trace;
  trace.jobs.push_back(Job("a", Time(0), hours(1), 2, 4));
  trace.jobs.push_back(Job("b", Time(0), hours(1), 2, 4));
  Result<SimMetrics> kube = Simulate(Cluster(2, 4), trace, Policy("kube-default"), SimOptions{});
  ASSERT_TRUE(kube.ok()) << kube.status().ToString();
  EXPECT_EQ(kube->finished, 0);
  EXPECT_EQ(kube->unfinished, 2);

  Result<SimMetrics> chamber = Simulate(Cluster(2, 4), trace, Policy("chamber"), SimOptions{});
  ASSERT_TRUE(chamber.ok());
  EXPECT_EQ(chamber->finished, 2);
  EXPECT_DOUBLE_EQ(chamber->makespan_hours, 2.0);
}

TEST(Simulator, ReclaimPreemptsTheBorrowerAndAccountsLostWork) {
  // Queue a owns the node (quota 8); b borrows it at t=0 for a 10h job. a submits an 8-GPU 1h
  // job at 2h10m: b is reclaimed (grace 30s) having checkpointed at 2h, so it loses 10 minutes
  // on 8 GPUs = 1.333 GPU-hours. a runs 2h10m30s-3h10m30s; b resumes at 3h10m30s with 8h of
  // work left plus 60s restart overhead, and finishes at 11h11m30s.
  std::vector<core::Queue> queues(2);
  queues[0].name = "a";
  queues[0].res(core::Resource::kGpu).quota = core::Gpus(8);
  queues[1].name = "b";
  Trace trace;
  trace.jobs.push_back(Job("b-job", Time(0), hours(10), 1, 8, "b"));
  trace.jobs.push_back(Job("a-job", hours(2) + minutes(10), hours(1), 1, 8, "a"));
  SimOptions options;
  options.queues = queues;
  std::vector<SimEvent> events;
  Result<SimMetrics> m = Simulate(Cluster(1, 8), trace, Policy("chamber"), options,
                                  [&](const SimEvent& e) { events.push_back(e); });
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->finished, 2);
  EXPECT_EQ(m->preemptions, 1);
  EXPECT_NEAR(m->gpu_hours_lost_preemption, 8.0 * 10 / 60, 1e-9);
  const double end = 11 + 11.0 / 60 + 30.0 / 3600;
  EXPECT_NEAR(m->makespan_hours, end, 1e-9);
  EXPECT_NEAR(m->wait_by_priority.at("elastic").p99, 30.0 / 3600, 1e-9);  // a waited the grace

  std::vector<std::string> seen;
  for (const SimEvent& e : events)
    seen.push_back(e.job->id + ":" + std::string(EventKindName(e.kind)));
  const std::vector<std::string> expected = {"b-job:submit",  "b-job:start", "a-job:submit",
                                             "b-job:preempt", "a-job:start", "a-job:finish",
                                             "b-job:resume",  "b-job:finish"};
  EXPECT_EQ(seen, expected);
  for (const SimEvent& e : events)
    if (e.kind == EventKind::kPreempt) {
      ASSERT_NE(e.preemptor, nullptr);
      EXPECT_EQ(e.preemptor->id, "a-job");
      EXPECT_EQ(e.reason, "Reclaim");
    }
}

// Which of a-next and b-next, submitted together `gap` after a's 10-hour run of the whole
// 8-GPU node ended, starts first. b runs one GPU from then on; each next job wants the other 7.
std::string FirstAfterAHeavyPast(Duration half_life, Duration gap) {
  std::vector<core::Queue> queues(2);
  queues[0].name = "a";
  queues[1].name = "b";
  Trace trace;
  trace.jobs.push_back(Job("a-past", Time(0), hours(10), 1, 8, "a"));
  trace.jobs.push_back(Job("b-small", Time(0) + hours(10), hours(100), 1, 1, "b"));
  trace.jobs.push_back(Job("a-next", Time(0) + hours(10) + gap, hours(1), 1, 7, "a"));
  trace.jobs.push_back(Job("b-next", Time(0) + hours(10) + gap, hours(1), 1, 7, "b"));
  core::EngineConfig config;
  config.usage_half_life = half_life;
  Result<SimPolicy> policy = MakePolicy("chamber", config);
  EXPECT_TRUE(policy.ok());
  SimOptions options;
  options.queues = queues;
  std::string first;
  Result<SimMetrics> m = Simulate(Cluster(1, 8), trace, *policy, options, [&](const SimEvent& e) {
    if (e.kind == EventKind::kStart && e.job->id.ends_with("-next") && first.empty())
      first = e.job->id;
  });
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->finished, 4);
  return first;
}

TEST(Simulator, DecayedUsageHandsTiesToTheQueueWithTheLighterPastAndFades) {
  // Without decay a's clean slate wins: b holds a GPU, a nothing (and a sorts first).
  EXPECT_EQ(FirstAfterAHeavyPast(Duration(0), hours(2)), "a-next");
  // With a 2-hour half-life, a's 80 GPU-hours count: one half-life later its recent use (about
  // half the cluster) outweighs b's one GPU, and b goes first.
  EXPECT_EQ(FirstAfterAHeavyPast(hours(2), hours(2)), "b-next");
  // Ten half-lives later a's past has faded to a thousandth of the cluster: a first again.
  EXPECT_EQ(FirstAfterAHeavyPast(hours(2), hours(20)), "a-next");
}

TEST(Simulator, QueueSharesAndJainIndexByHand) {
  // Three 4-GPU nodes; queues a, b, c with quotas 4, 2, 2 and d with none. Nothing waits (at
  // most 9 of 12 GPUs are asked for at once), so every job runs from its submission:
  //
  //   job  queue  GPUs  runs   GPU-hours
  //   a1   a      4     0-2h   8
  //   b1   b      2     0-1h   2
  //   c1   c      1     0-3h   3
  //   c2   c      1     1h-4h  3
  //   d1   d      1     0-2h   2
  //
  // 18 GPU-hours: a 8/18 = 4/9, b 1/9, c 6/18 = 1/3, d 1/9. Entitlement is a quota's share of
  // all quota (8): a 1/2, b 1/4, c 1/4, d 0. Share over entitlement: a 8/9, b 4/9, c 12/9; d has
  // no entitlement and stays out of Jain's index, (sum x)^2 / (n sum x^2) with n = 3:
  // (24/9)^2 / (3 (64 + 16 + 144) / 81) = 576/672 = 6/7.
  // Without quotas each queue is entitled to 1/4 and x = 16/9, 4/9, 12/9, 4/9:
  // 4^2 / (4 (256 + 16 + 144 + 16) / 81) = 1296/1728 = 3/4.
  // Shares are per trace queue whatever the engine sees, so fifo (one engine queue) agrees.
  std::vector<core::Queue> queues(4);
  const char* names[] = {"a", "b", "c", "d"};
  const int64_t quotas[] = {4, 2, 2, 0};
  for (size_t i = 0; i < 4; ++i) {
    queues[i].name = names[i];
    queues[i].res(core::Resource::kGpu).quota = core::Gpus(quotas[i]);
  }
  Trace trace;
  trace.jobs.push_back(Job("a1", Time(0), hours(2), 1, 4, "a"));
  trace.jobs.push_back(Job("b1", Time(0), hours(1), 1, 2, "b"));
  trace.jobs.push_back(Job("c1", Time(0), hours(3), 1, 1, "c"));
  trace.jobs.push_back(Job("d1", Time(0), hours(2), 1, 1, "d"));
  trace.jobs.push_back(Job("c2", hours(1), hours(3), 1, 1, "c"));

  struct Expected {
    double gpu_hours, share, entitlement;
  };
  auto check = [&](const char* policy, const std::vector<core::Queue>& with,
                   const std::vector<Expected>& expected, double jain) {
    SCOPED_TRACE(std::string(policy) + (with[0].res(core::Resource::kGpu).quota > 0
                                            ? " with quotas"
                                            : " without quotas"));
    SimOptions options;
    options.queues = with;
    Result<SimMetrics> m = Simulate(Cluster(3, 4), trace, Policy(policy), options);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->finished, 5);
    EXPECT_DOUBLE_EQ(m->wait_hours.mean, 0.0);  // the premise: nothing waits
    EXPECT_DOUBLE_EQ(m->makespan_hours, 4.0);
    EXPECT_NEAR(m->allocation, 18.0 / (12 * 4), 1e-12);
    ASSERT_EQ(m->queues.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      SCOPED_TRACE(names[i]);
      EXPECT_EQ(m->queues[i].name, names[i]);  // in order of first submission
      EXPECT_NEAR(m->queues[i].gpu_hours, expected[i].gpu_hours, 1e-9);
      EXPECT_NEAR(m->queues[i].share, expected[i].share, 1e-12);
      EXPECT_NEAR(m->queues[i].entitlement, expected[i].entitlement, 1e-12);
    }
    EXPECT_NEAR(m->jain_index, jain, 1e-12);
  };
  const std::vector<Expected> with_quotas = {
      {8, 4.0 / 9, 0.5}, {2, 1.0 / 9, 0.25}, {6, 1.0 / 3, 0.25}, {2, 1.0 / 9, 0}};
  check("chamber", queues, with_quotas, 6.0 / 7);
  check("fifo", queues, with_quotas, 6.0 / 7);

  std::vector<core::Queue> no_quotas = queues;
  for (core::Queue& q : no_quotas) q.res(core::Resource::kGpu).quota = 0;
  const std::vector<Expected> equal_split = {
      {8, 4.0 / 9, 0.25}, {2, 1.0 / 9, 0.25}, {6, 1.0 / 3, 0.25}, {2, 1.0 / 9, 0.25}};
  check("chamber", no_quotas, equal_split, 3.0 / 4);
}

TEST(Simulator, GpuFailuresStopWorkAndEveryJobStillFinishes) {
  Trace trace;
  for (int i = 0; i < 20; ++i)
    trace.jobs.push_back(Job("j" + std::to_string(i), minutes(i), hours(3), 1, 4));
  SimOptions options;
  options.gpu_mtbf_hours = 20;  // per GPU: 16 GPUs fail about every 1.25 h together
  options.repair_time = hours(1);
  options.seed = 7;
  Result<SimMetrics> m = Simulate(Cluster(2, 8), trace, Policy("chamber"), options);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->finished, 20);
  EXPECT_GT(m->gpu_failures, 0);
  EXPECT_GT(m->gpu_hours_lost_failures, 0);
}

TEST(Simulator, SameSeedSameResult) {
  Trace trace;
  for (int i = 0; i < 50; ++i)
    trace.jobs.push_back(Job("j" + std::to_string(i), minutes(7 * i), minutes(40 + i), 1 + i % 3,
                             1 + i % 4, "default", i % 5 == 0 ? 150 : 10));
  SimOptions options;
  options.gpu_mtbf_hours = 50;
  auto run = [&] {
    Result<SimMetrics> m = Simulate(Cluster(3, 8), trace, Policy("chamber"), options);
    EXPECT_TRUE(m.ok());
    m->run_seconds = 0;
    m->cycle_ms = {};
    return *m;
  };
  const SimMetrics a = run(), b = run();
  EXPECT_EQ(a.finished, b.finished);
  EXPECT_EQ(a.preemptions, b.preemptions);
  EXPECT_EQ(a.gpu_failures, b.gpu_failures);
  EXPECT_DOUBLE_EQ(a.jct_hours.mean, b.jct_hours.mean);
  EXPECT_DOUBLE_EQ(a.allocation, b.allocation);
}

TEST(Simulator, UnknownQueueIsAnError) {
  std::vector<core::Queue> queues(1);
  queues[0].name = "a";
  Trace trace;
  trace.jobs.push_back(Job("x", Time(0), hours(1), 1, 1, "typo"));
  SimOptions options;
  options.queues = queues;
  Result<SimMetrics> m = Simulate(Cluster(1, 8), trace, Policy("chamber"), options);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("job x names queue \"typo\""), std::string::npos);
}

TEST(Simulator, EveryPolicyRunsAndFinishesAFeasibleTrace) {
  Trace trace;
  for (int i = 0; i < 40; ++i)
    trace.jobs.push_back(Job("j" + std::to_string(i), minutes(5 * i), minutes(30 + 3 * i),
                             i % 7 == 0 ? 2 : 1, 1 + i % 8, i % 2 ? "a" : "b",
                             i % 9 == 0 ? 150 : 10));
  std::vector<core::Queue> queues(2);
  queues[0].name = "a";
  queues[0].res(core::Resource::kGpu).quota = core::Gpus(8);
  queues[1].name = "b";
  queues[1].res(core::Resource::kGpu).quota = core::Gpus(8);
  SimOptions options;
  options.queues = queues;
  for (std::string_view name : PolicyNames()) {
    Result<SimPolicy> p = MakePolicy(name, core::EngineConfig{});
    ASSERT_TRUE(p.ok());
    Result<SimMetrics> m = Simulate(Cluster(2, 8), trace, *p, options);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status().ToString();
    EXPECT_EQ(m->policy, name);
    if (name != "kube-default") {
      EXPECT_EQ(m->finished, 40) << name;
    }
    EXPECT_GT(m->allocation, 0) << name;
    EXPECT_LE(m->allocation, 1.0 + 1e-9) << name;
  }
}

// The simulated cluster keeps its state between cycles (EngineSession); every policy, with
// failures and repairs, gangs, reservations and reclaim, decides event for event as cycles that
// load the whole snapshot afresh.
// Runs `trace` under every policy twice, in a kept session and in fresh cycles, and expects
// both to write the same event log; `observe` (if set) sees every event of the kept runs.
// Returns the kept runs' preemptions.
int64_t ExpectKeptStateDecidesAsFreshCycles(const std::vector<core::Node>& nodes,
                                            const Trace& trace, SimOptions options,
                                            const EventSink& observe = nullptr) {
  int64_t preemptions = 0;
  for (std::string_view name : PolicyNames()) {
    auto run = [&](bool fresh) {
      std::ostringstream log;
      options.fresh_cycles = fresh;
      const EventSink sink = [&](const SimEvent& e) {
        log << e.time.count() << ' ' << e.job->id << ' ' << EventKindName(e.kind) << ' ' << e.reason
            << ' ' << (e.preemptor ? e.preemptor->id : "-");
        for (const core::PodPlacement& p : e.placements)
          log << ' ' << p.node.value << ':' << p.gpu_mask;
        log << '\n';
        if (observe && !fresh) observe(e);
      };
      Result<SimMetrics> m = Simulate(nodes, trace, *MakePolicy(name, {}), options, sink);
      EXPECT_TRUE(m.ok()) << name << ": " << m.status().ToString();
      if (m.ok() && !fresh) preemptions += m->preemptions;
      return log.str();
    };
    const std::string kept = run(false);
    const std::string fresh = run(true);
    EXPECT_GT(kept.size(), 0u);
    EXPECT_TRUE(kept == fresh) << name << ": the event logs differ";
  }
  return preemptions;
}

TEST(Simulator, KeptStateDecidesAsFreshCycles) {
  SyntheticSpec spec;
  spec.jobs = 600;
  spec.teams = 3;
  spec.span = hours(12);
  spec.max_gpus = 16;
  spec.seed = 7;
  const Trace trace = GenerateSyntheticTrace(spec);
  std::vector<core::Queue> queues(3);
  for (int t = 0; t < 3; ++t) {
    queues[t].name = "team-" + std::to_string(t);
    queues[t].res(core::Resource::kGpu).quota = core::Gpus(8);
  }
  queues[2].queueing = core::QueueingStrategy::kStrictFifo;
  SimOptions options;
  options.queues = queues;
  options.gpu_mtbf_hours = 300;
  options.repair_time = hours(1);
  const int64_t preemptions = ExpectKeptStateDecidesAsFreshCycles(Cluster(3, 8), trace, options);
  EXPECT_GT(preemptions, 0);  // reclaim, priority and failures were exercised
}

// Shares with GPU memory, and shares of memory alone whose charge changes when they start and
// again when they stop, on GPUs of 40 GiB and 80 GiB: a kept session decides as fresh cycles
// do, under every policy, through reclaim, priority preemption and GPU failures; and every
// share with memory starts on a GPU with at least that much.
TEST(Simulator, KeptStateDecidesAsFreshCyclesWithSharesOfMemory) {
  SyntheticSpec spec;
  spec.profile = SyntheticSpec::Profile::kOpenb;
  spec.jobs = 500;
  spec.teams = 3;
  spec.span = hours(6);
  spec.seed = 11;
  Trace trace = GenerateSyntheticTrace(spec);
  int64_t memory_alone = 0;
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    TraceJob& j = trace.jobs[i];
    if (j.gpus_per_pod > 0 || j.gpu_milli_per_pod == 0) continue;
    if (i % 3 == 0) {
      j.gpu_memory_mib_per_pod = int64_t{j.gpu_milli_per_pod} * 40;  // 0.5 of 80 GiB: 20,000 MiB
      j.gpu_milli_per_pod = 0;
      ++memory_alone;
    } else if (i % 3 == 1) {
      j.gpu_memory_mib_per_pod = 10240;
    }
  }
  ASSERT_GT(memory_alone, 20);
  ClusterSpec cluster;
  for (const auto& [model, gib] : {std::pair<std::string, int64_t>{"A100-SXM4-40GB", 40},
                                   std::pair<std::string, int64_t>{"H100-SXM5-80GB", 80}}) {
    NodePool p;
    p.name = model;
    p.count = 2;
    p.gpus_per_node = 4;
    p.gpu_model = model;
    p.gpu_memory_bytes = gib << 30;
    cluster.pools.push_back(p);
  }
  const std::vector<core::Node> nodes = BuildNodes(cluster);
  std::vector<core::Queue> queues(3);
  for (int t = 0; t < 3; ++t) {
    queues[t].name = "team-" + std::to_string(t);
    queues[t].res(core::Resource::kGpu).quota = core::Gpus(2) + 500;
  }
  SimOptions options;
  options.queues = queues;
  options.gpu_mtbf_hours = 200;
  options.repair_time = hours(1);
  int64_t started_alone = 0;
  const int64_t preemptions =
      ExpectKeptStateDecidesAsFreshCycles(nodes, trace, options, [&](const SimEvent& e) {
        if (e.kind != EventKind::kStart || e.job->gpu_memory_mib_per_pod == 0) return;
        for (const core::PodPlacement& p : e.placements) {
          const core::Node& n = nodes[p.node.index()];
          const auto g = static_cast<size_t>(std::countr_zero(p.gpu_mask));
          ASSERT_LT(g, n.gpus.size());
          EXPECT_GE(n.gpus[g].memory_mib, e.job->gpu_memory_mib_per_pod) << e.job->id;
          if (e.job->gpu_milli_per_pod == 0) ++started_alone;
        }
      });
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(started_alone, 0);
}

TEST(Policy, UnknownNameListsTheKnownOnes) {
  Result<SimPolicy> p = MakePolicy("sjf", core::EngineConfig{});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("known: chamber, fifo, kube-default, drf, las, quota"),
            std::string::npos);
}

TEST(Summary, NearestRankPercentiles) {
  const Summary s = Summarize({5, 1, 3, 2, 4});
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.p50, 3);
  EXPECT_DOUBLE_EQ(s.p99, 5);
}

}  // namespace
}  // namespace chamber::sim
