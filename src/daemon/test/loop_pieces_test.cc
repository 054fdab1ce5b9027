// The pieces the daemon's tick keeps between cycles, each on its own: the WorkloadLedger (waits,
// lost work, borrowing) and the IncidentLog (GPUs out of service); and the fleet input's holders
// of GPUs in MIG mode. daemon_test checks them
// together through the loop over the demo cluster.
#include <gtest/gtest.h>

#include "daemon/fleet_input.h"
#include "daemon/incident_log.h"
#include "daemon/workload_ledger.h"

namespace chamber::daemon {
namespace {

constexpr int64_t kOffset = 1'790'000'000'000;  // Unix ms of snapshot time 0

core::Snapshot TwoWorkloads() {
  core::Snapshot s;
  s.now = core::Time(60'000);
  core::Node n;
  n.name = "node-a";
  n.gpus.resize(2);
  n.gpus[0].uuid = "GPU-a0";
  n.gpus[1].uuid = "GPU-a1";
  s.nodes.push_back(n);
  for (const char* name : {"team/train", "team/notebook"}) {
    core::Workload w;
    w.name = name;
    w.queue = "team";
    w.submit_time = core::Time(15'000);
    s.workloads.push_back(w);
  }
  return s;
}

Observation Observe(const core::Snapshot& s) {
  Observation o;
  o.clock_offset_ms = kOffset;
  o.snapshot = &s;
  o.node_pool = {0};
  return o;
}

core::BindDecision Bind(int32_t workload, bool borrowing) {
  core::BindDecision b;
  b.workload.value = workload;
  b.borrowing = borrowing;
  core::PodAssignment a;
  a.placement.node.value = 0;
  a.placement.gpu_mask = 1;
  b.pods.push_back(a);
  return b;
}

void StartRunning(core::Workload& w) {
  w.state = core::WorkloadState::kRunning;
  w.start_time = core::Time(60'000);
  w.placements = {core::PodPlacement{core::NodeId{0}, 1}};
}

TEST(WorkloadLedgerTest, AFirstStartCountsItsWaitAndABorrowingRunIsShownAsSuch) {
  core::Snapshot s = TwoWorkloads();
  WorkloadLedger ledger(3'600'000);
  core::CycleResult r;
  r.binds.push_back(Bind(0, /*borrowing=*/true));
  ledger.NoteDecisions(s, r);
  StartRunning(s.workloads[0]);
  Observation obs = Observe(s);
  ledger.Record(obs, kOffset + 60'000);
  ASSERT_EQ(ledger.recent_starts().size(), 1u);
  EXPECT_DOUBLE_EQ(ledger.recent_starts()[0].wait_seconds, 45);  // submitted at 15 s, bound at 60
  EXPECT_EQ(ledger.recent_starts()[0].pool, 0);
  const SharedItems<fleet::WorkloadInput> w = ledger.Workloads(obs);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(w[0].borrowing);
  EXPECT_EQ(w[0].started, kOffset + 60'000);
  EXPECT_EQ(w[0].nodes, std::vector<std::string>{"node-a"});
  EXPECT_FALSE(w[1].borrowing);

  // The start leaves the recent window an hour later.
  ledger.NoteDecisions(s, core::CycleResult{});
  ledger.Record(obs, kOffset + 60'000 + 3'600'000);
  EXPECT_TRUE(ledger.recent_starts().empty());
}

TEST(WorkloadLedgerTest, ABorrowingRunStaysShownAsSuchUntilItStops) {
  core::Snapshot s = TwoWorkloads();
  WorkloadLedger ledger(3'600'000);
  core::CycleResult r;
  r.binds.push_back(Bind(0, /*borrowing=*/true));
  r.binds.push_back(Bind(1, /*borrowing=*/false));
  ledger.NoteDecisions(s, r);
  StartRunning(s.workloads[0]);
  StartRunning(s.workloads[1]);
  for (int cycle = 0; cycle < 3; ++cycle) {
    ledger.NoteDecisions(s, core::CycleResult{});
    Observation obs = Observe(s);
    const SharedItems<fleet::WorkloadInput> w = ledger.Workloads(obs);
    EXPECT_TRUE(w[0].borrowing) << cycle;
    EXPECT_FALSE(w[1].borrowing) << cycle;
  }
  // It stops (preempted, back to pending); when it runs again without a new bind decision, it
  // is no longer taken as borrowing.
  s.workloads[0].state = core::WorkloadState::kPending;
  s.workloads[0].placements.clear();
  Observation obs = Observe(s);
  EXPECT_FALSE(ledger.Workloads(obs)[0].borrowing);
  StartRunning(s.workloads[0]);
  obs = Observe(s);
  EXPECT_FALSE(ledger.Workloads(obs)[0].borrowing);
  // A bind that borrows again shows again.
  r.binds = {Bind(0, /*borrowing=*/true)};
  ledger.NoteDecisions(s, r);
  obs = Observe(s);
  EXPECT_TRUE(ledger.Workloads(obs)[0].borrowing);
}

TEST(WorkloadLedgerTest, AnUnchangedWorkloadIsTheLastCyclesItemAndAChangedOneIsNew) {
  core::Snapshot s = TwoWorkloads();
  WorkloadLedger ledger(3'600'000);
  Observation obs = Observe(s);
  const SharedItems<fleet::WorkloadInput> first = ledger.Workloads(obs);
  StartRunning(s.workloads[0]);
  obs = Observe(s);
  const SharedItems<fleet::WorkloadInput> second = ledger.Workloads(obs);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_NE(&second[0], &first[0]);  // it started: a new item
  EXPECT_EQ(second[0].phase, fleet::WorkloadPhase::kRunning);
  EXPECT_EQ(first[0].phase, fleet::WorkloadPhase::kPending);  // the published one unchanged
  EXPECT_EQ(&second[1], &first[1]);                           // unchanged: the same item
  // The snapshot lists them the other way round: found by name.
  std::swap(s.workloads[0], s.workloads[1]);
  obs = Observe(s);
  const SharedItems<fleet::WorkloadInput> third = ledger.Workloads(obs);
  ASSERT_EQ(third.size(), 2u);
  EXPECT_EQ(&third[0], &second[1]);
  EXPECT_EQ(&third[1], &second[0]);
}

TEST(WorkloadLedgerTest, ARunIsPreemptedOnceAndItsLostWorkStartsFromTheClusterRecord) {
  core::Snapshot s = TwoWorkloads();
  StartRunning(s.workloads[0]);
  WorkloadLedger ledger(3'600'000);
  core::CycleResult r;
  core::PreemptDecision p;
  p.workload.value = 0;
  p.reason = core::PreemptReason::kPriority;
  p.gpu_hours_lost = 1.5;
  r.preemptions.push_back(p);
  Observation obs = Observe(s);
  obs.stored_losses = {{.preemptions = 2, .gpu_hours_lost = 4}, {}};
  // The engine names the same run again while the cluster has not acted yet: counted once.
  for (int cycle = 0; cycle < 3; ++cycle) {
    ledger.NoteDecisions(s, r);
    ledger.Record(obs, kOffset + 60'000 + cycle * 1000);
    obs = Observe(s);
    obs.stored_losses = {{.preemptions = 2, .gpu_hours_lost = 4}, {}};
  }
  EXPECT_EQ(ledger.recent_preemptions().size(), 1u);
  const SharedItems<fleet::WorkloadInput> w = ledger.Workloads(obs);
  EXPECT_EQ(w[0].preemption_count, 3);  // two recorded by an earlier leader, one here
  EXPECT_DOUBLE_EQ(w[0].gpu_hours_lost, 5.5);
  ASSERT_EQ(w[0].preemption_history.size(), 1u);
  EXPECT_EQ(w[0].preemption_history[0].reason, fleet::PreemptionReason::kPriority);
  EXPECT_EQ(w[1].preemption_count, 0);

  // Once the workload leaves the snapshot its lost work is forgotten.
  core::Snapshot gone = TwoWorkloads();
  gone.workloads.erase(gone.workloads.begin());
  ledger.NoteDecisions(gone, core::CycleResult{});
  Observation after = Observe(gone);
  ledger.Record(after, kOffset + 70'000);
  ledger.Workloads(after);
  ledger.NoteDecisions(s, core::CycleResult{});
  Observation back = Observe(s);
  ledger.Record(back, kOffset + 80'000);
  EXPECT_EQ(ledger.Workloads(back)[0].preemption_count, 0);
}

TEST(IncidentLogTest, AnUnhealthyGpuOpensAnIncidentDescribedByItsFaultUntilItRecovers) {
  core::Snapshot s = TwoWorkloads();
  IncidentLog log(10);
  s.nodes[0].gpus[1].healthy = false;
  std::unordered_map<std::string, GpuFault> faults;
  log.Observe(s, faults, 1000);
  std::vector<Incident> latest = log.Latest(10);
  ASSERT_EQ(latest.size(), 1u);
  EXPECT_EQ(latest[0].uuid, "GPU-a1");
  EXPECT_EQ(latest[0].message,
            "GPU 1 on node-a is marked unhealthy (no fault evidence reported); excluded from "
            "scheduling");
  faults["GPU-a1"] = GpuFault{.cause = "xid-hardware",
                              .severity = "fatal",
                              .message = "Xid 79 (GPU has fallen off the bus)",
                              .evidence = {}};
  log.Observe(s, faults, 2000);
  latest = log.Latest(10);
  ASSERT_EQ(latest.size(), 1u);
  EXPECT_EQ(latest[0].time_ms, 1000);  // the same incident, now with its fault
  EXPECT_EQ(latest[0].cause, "xid-hardware");
  EXPECT_EQ(latest[0].message, "GPU 1 on node-a: Xid 79 (GPU has fallen off the bus)");
  EXPECT_FALSE(latest[0].resolved_ms);
  s.nodes[0].gpus[1].healthy = true;
  log.Observe(s, faults, 3000);
  EXPECT_EQ(log.Latest(10)[0].resolved_ms, 3000);
}

TEST(IncidentLogTest, OldResolvedIncidentsGoAndOpenOnesStay) {
  core::Snapshot s = TwoWorkloads();
  IncidentLog log(2);
  s.nodes[0].gpus[0].healthy = false;  // open throughout
  for (int64_t t = 0; t < 10; ++t) {
    s.nodes[0].gpus[1].healthy = t % 2 == 1;  // GPU 1 fails and recovers: one incident per pair
    log.Observe(s, {}, t * 1000);
  }
  const std::vector<Incident> all = log.Latest(100);
  EXPECT_LE(all.size(), 4u);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.back().uuid, "GPU-a0");  // the oldest kept is the one still open
  EXPECT_FALSE(all.back().resolved_ms);
  EXPECT_EQ(log.Latest(1).size(), 1u);
}

// A MIG pod's devices are counted on the GPU whose agent names the pod as a device's holder;
// devices no agent names go to the first GPU with a free device of the profile, or, where the
// GPUs' devices are not listed, with room for the charge (docs/sharing.md, "MIG GPUs in the
// fleet view").
TEST(FleetInputTest, MigDevicesAreCountedOnTheGpusTheAgentNamesElseWhereTheyFit) {
  core::Snapshot s;
  s.mig_profiles = {{"1g.10gb", 142}, {"3g.40gb", 428}};
  for (const char* name : {"listed", "unlisted"}) {
    core::Node n;
    n.name = name;
    s.nodes.push_back(n);
  }
  SharedItems<fleet::WorkloadInput> inputs;
  auto add = [&](std::string name, int8_t profile, uint8_t devices, int16_t milli, int node,
                 int pods) {
    core::Workload w;
    w.name = name;
    w.state = core::WorkloadState::kRunning;
    core::PodSet set;
    set.count = pods;
    set.mig = {profile, devices, milli};
    w.pod_sets = {set};
    fleet::WorkloadInput wi;
    wi.name = name;
    for (int p = 0; p < pods; ++p) {
      w.placements.push_back(core::PodPlacement{core::NodeId{node}, 0});
      wi.pods.push_back(name + "-" + std::to_string(p));
    }
    s.workloads.push_back(w);
    inputs.Add(wi);
  };
  add("ns/named", 1, 1, 428, 0, 1);    // its 3g.40gb named on GPU 1
  add("ns/unnamed", 0, 2, 142, 0, 1);  // two 1g.10gb no agent names
  add("ns/wide", 1, 1, 428, 1, 3);     // three 3g.40gb on GPUs whose devices are not listed
  Observation o;
  o.snapshot = &s;
  o.mig_gpus.resize(2);
  auto gpu = [](std::string uuid, std::vector<fleet::MigDeviceInput> devices) {
    fleet::GpuInput g;
    g.uuid = std::move(uuid);
    g.mig_devices = std::move(devices);
    return g;
  };
  o.mig_gpus[0] = {gpu("GPU-0", {{"MIG-0a", "1g.10gb", 0, ""}, {"MIG-0b", "3g.40gb", 0, ""}}),
                   gpu("GPU-1", {{"MIG-1a", "3g.40gb", 0, "ns/named-0"},
                                 {"MIG-1b", "1g.10gb", 0, ""},
                                 {"MIG-1c", "1g.10gb", 0, ""}})};
  o.mig_gpus[1] = {gpu("unlisted/mig-gpu0", {}), gpu("unlisted/mig-gpu1", {})};
  fleet::ActivityTracker activity(0.05);
  std::vector<fleet::NodeInput> nodes = FleetNodes(o, activity, 0);
  MarkHolders(o, inputs, nodes);

  ASSERT_EQ(nodes[0].gpus.size(), 2u);
  EXPECT_TRUE(nodes[0].gpus[0].mig && nodes[0].gpus[1].mig);
  auto held = [](const fleet::GpuInput& g) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const fleet::GpuShareInput& sh : g.shares) out.emplace_back(sh.pod, sh.mig_profile);
    return out;
  };
  using Held = std::vector<std::pair<std::string, std::string>>;
  // GPU 0 has one free 1g.10gb: the first of "unnamed"'s two devices; GPU 1 the other beside
  // "named"'s 3g.40gb, which its agent names.
  EXPECT_EQ(held(nodes[0].gpus[0]), (Held{{"ns/unnamed-0", "1g.10gb"}}));
  EXPECT_EQ(held(nodes[0].gpus[1]), (Held{{"ns/named-0", "3g.40gb"}, {"ns/unnamed-0", "1g.10gb"}}));
  EXPECT_EQ(nodes[0].gpus[0].HeldMilli(), 142);
  EXPECT_EQ(nodes[0].gpus[1].HeldMilli(), 428 + 142);
  // Not listed: two 3g.40gb fit on the first GPU (856), the third goes to the second.
  ASSERT_EQ(nodes[1].gpus.size(), 2u);
  EXPECT_EQ(nodes[1].gpus[0].HeldMilli(), 856);
  EXPECT_EQ(held(nodes[1].gpus[1]), (Held{{"ns/wide-2", "3g.40gb"}}));
  EXPECT_EQ(nodes[1].gpus[1].shares[0].workload, 2);
}

}  // namespace
}  // namespace chamber::daemon
