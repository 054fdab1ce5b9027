// Saturation mode on traces small enough to work out by hand, and the synthetic openb mix.
#include "sim/saturation.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "sim/cluster_spec.h"
#include "sim/synthetic.h"

namespace chamber::sim {
namespace {

TraceJob Job(std::string id, int32_t gpus, int32_t milli, int32_t pods = 1) {
  TraceJob j;
  j.id = std::move(id);
  j.gpus_per_pod = gpus;
  j.gpu_milli_per_pod = milli;
  j.pods = pods;
  return j;
}

// One node of two GPUs; pods of 0.4, 0.5, 0.6 and 0.5 GPU arrive: 2 GPUs of demand, 100% of
// capacity. Points every 25% (500 thousandths of demand):
//   after 0.4 + 0.5 (900 arrived, past 25%): best fit and first fit hold GPU 0 at 0.9 (0.1 free,
//     too little for any class: stranded 100 / 2000 = 5%), free 1100 = 55%; FGD put the 0.5 on
//     GPU 1 (600 and 500 free, both usable): 55%, stranded 0.
//   after 0.6 (1500 arrived, past 50% and 75%): best fit's 0.6 on GPU 1 (0.1 and 0.4 free: 25%;
//     0.4 fits the 0.4 class: stranded 5%); FGD's on GPU 0 (0 and 0.5 free: 25%, stranded 0).
//   after the last 0.5 (100%): best fit has no room (25%, 5%); FGD fills GPU 1 (0%, 0%).
TEST(Saturation, HandWorkedCurves) {
  Trace trace;
  trace.jobs = {Job("a", 0, 400), Job("b", 0, 500), Job("c", 0, 600), Job("d", 0, 500)};
  SaturationOptions options;
  options.step_permille = 250;
  options.until_permille = 1000;
  const std::vector<core::ShareNodeSpec> nodes = core::UniformShareNodes(1, 2);
  const Result<SaturationArrivals> arrivals =
      MakeSaturationArrivals(trace, core::ShareCluster(nodes), options);
  ASSERT_TRUE(arrivals.ok()) << arrivals.status().message();
  EXPECT_EQ(arrivals->from_trace, 4);
  EXPECT_EQ(arrivals->sampled, 0);

  const std::vector<SaturationPoint> best = {
      {0, 1, 0}, {0.25, 0.55, 0.05}, {0.5, 0.25, 0.05}, {0.75, 0.25, 0.05}, {1, 0.25, 0.05}};
  const std::vector<SaturationPoint> fgd = {
      {0, 1, 0}, {0.25, 0.55, 0}, {0.5, 0.25, 0}, {0.75, 0.25, 0}, {1, 0, 0}};
  for (const std::string policy : {"best-fit", "first-fit", "fgd", "chamber"}) {
    SCOPED_TRACE(policy);
    const Result<SaturationCurve> c = RunSaturation(nodes, *arrivals, policy, options);
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->capacity_milli, 2000);
    EXPECT_EQ(c->arrivals, 4);
    const bool is_fgd = policy == "fgd" || policy == "chamber";
    EXPECT_EQ(c->placed, is_fgd ? 4 : 3);
    EXPECT_EQ(c->unplaced, is_fgd ? 0 : 1);
    ASSERT_EQ(c->points.size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      const SaturationPoint& want = is_fgd ? fgd[i] : best[i];
      EXPECT_DOUBLE_EQ(c->points[i].arrived_demand, want.arrived_demand) << i;
      EXPECT_DOUBLE_EQ(c->points[i].unallocated, want.unallocated) << i;
      EXPECT_DOUBLE_EQ(c->points[i].stranded, want.stranded) << i;
    }
    ASSERT_NE(PointAt(*c, 1000, options), nullptr);
    EXPECT_DOUBLE_EQ(PointAt(*c, 1000, options)->unallocated, is_fgd ? 0.0 : 0.25);
    EXPECT_EQ(PointAt(*c, 1100, options), nullptr);
    EXPECT_EQ(PointAt(*c, 300, options), nullptr);
  }
  EXPECT_EQ(RunSaturation(nodes, *arrivals, "drf", options).status().message(),
            "policy: \"drf\" is not a GPU-sharing policy (first-fit, best-fit, fgd, chamber)");
}

TEST(Saturation, ArrivalsFollowTheTraceThenItsMix) {
  // A 2-pod job of one GPU each and a CPU-only job, on 8 GPUs until 100%: the three pods (the
  // last asking for no GPU), then more drawn from the trace's pods until 8 GPUs have arrived.
  const core::ShareCluster eight(core::UniformShareNodes(1, 8));
  Trace trace;
  trace.jobs = {Job("a", 1, 0, 2), Job("cpu", 0, 0)};
  SaturationOptions options;
  options.until_permille = 1000;
  const Result<SaturationArrivals> a = MakeSaturationArrivals(trace, eight, options);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->from_trace, 3);
  ASSERT_GE(a->requests.size(), 10u);
  EXPECT_EQ(a->requests[2].kind(), core::ShareRequest::Kind::kCpu);
  EXPECT_EQ(a->sampled, static_cast<int64_t>(a->requests.size()) - 3);
  int64_t whole = 0;
  for (const core::ShareRequest& r : a->requests) {
    EXPECT_TRUE(r == core::WholeGpus(1) || r.kind() == core::ShareRequest::Kind::kCpu);
    whole += r.gpus;
  }
  EXPECT_EQ(whole, 8);
  EXPECT_EQ(a->requests.back(), core::WholeGpus(1));  // arrivals stop once demand reaches 8
  // A trace of pods without GPUs brings no demand: refused.
  trace.jobs = {Job("cpu", 0, 0)};
  EXPECT_EQ(MakeSaturationArrivals(trace, eight, options).status().message(),
            "the trace has no pod that asks for a GPU");
  trace.jobs = {Job("a", 1, 0, 2), Job("cpu", 0, 0)};
  // A longer trace stops where demand reaches the end.
  trace.jobs = {Job("a", 4, 0), Job("b", 0, 500), Job("c", 4, 0), Job("d", 8, 0)};
  const Result<SaturationArrivals> b = MakeSaturationArrivals(trace, eight, options);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->from_trace, 3);  // 4 + 0.5 + 4 >= 8
  EXPECT_EQ(b->sampled, 0);
  EXPECT_EQ(b->requests[1], core::GpuShare(500));

  // Sampled: every arrival drawn from the trace's pods (4, 0.5, 4, 8 GPUs), the same for a seed.
  options.sampled = true;
  const Result<SaturationArrivals> c = MakeSaturationArrivals(trace, eight, options);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->from_trace, 0);
  EXPECT_EQ(c->sampled, static_cast<int64_t>(c->requests.size()));
  int64_t demand = 0;
  for (const core::ShareRequest& r : c->requests) {
    EXPECT_TRUE(r == core::WholeGpus(4) || r == core::WholeGpus(8) || r == core::GpuShare(500));
    demand += r.DemandMilli();
  }
  EXPECT_GE(demand, 8000);
  EXPECT_LT(demand - c->requests.back().DemandMilli(), 8000);  // stops at the first to reach it
  EXPECT_EQ(MakeSaturationArrivals(trace, eight, options)->requests, c->requests);
  options.sampled = false;

  // GPU models a pod accepts become the cluster's mask; CPU and memory come along.
  trace.jobs = {Job("m", 1, 0)};
  trace.jobs[0].gpu_models = {"H100-SXM5-80GB"};
  trace.jobs[0].cpu_milli_per_pod = 4000;
  trace.jobs[0].memory_bytes_per_pod = 1 << 30;
  const Result<SaturationArrivals> m = MakeSaturationArrivals(trace, eight, options);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->requests[0].gpu_model_mask, (uint64_t{1} << 63) | 1);
  EXPECT_EQ(m->requests[0].cpu_milli, 4000);
  EXPECT_EQ(m->requests[0].memory_bytes, 1 << 30);

  // A share's GPU memory comes along; a share of memory alone takes the part of the smallest
  // GPU it may go on (docs/traces.md): 20 GiB of a 40 GiB GPU is 500 on a cluster of 40 GiB
  // and 80 GiB GPUs, 250 where its models leave only the 80 GiB one.
  std::vector<core::ShareNodeSpec> mixed = core::UniformShareNodes(1, 1, 40960, "A100-SXM4-40GB");
  mixed.push_back(core::UniformShareNodes(1, 1).front());
  const core::ShareCluster two(mixed);
  trace.jobs = {Job("both", 0, 300), Job("alone", 0, 0), Job("h100", 0, 0), Job("huge", 0, 0)};
  trace.jobs[0].gpu_memory_mib_per_pod = 10240;
  trace.jobs[1].gpu_memory_mib_per_pod = 20480;
  trace.jobs[2].gpu_memory_mib_per_pod = 20480;
  trace.jobs[2].gpu_models = {"H100-SXM5-80GB"};
  const Result<SaturationArrivals> s = MakeSaturationArrivals(trace, two, options);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->requests[0].gpu_milli, 300);
  EXPECT_EQ(s->requests[0].gpu_memory_mib, 10240);
  EXPECT_EQ(s->requests[1].gpu_milli, 500);
  EXPECT_EQ(s->requests[1].gpu_memory_mib, 20480);
  EXPECT_EQ(s->requests[2].gpu_milli, 250);
  trace.jobs[3].gpu_memory_mib_per_pod = 90 * 1024;
  EXPECT_EQ(MakeSaturationArrivals(trace, two, options).status().message(),
            "job huge asks for 92160 MiB of GPU memory alone: no GPU of the cluster it may go on "
            "has that much");
  // MIG devices are refused: saturation mode runs clusters without MIG layouts.
  trace.jobs = {Job("mig", 0, 0)};
  trace.jobs[0].mig_profile = "1g.10gb";
  EXPECT_EQ(MakeSaturationArrivals(trace, two, options).status().message(),
            "job mig asks for MIG devices (1g.10gb); saturation mode runs clusters without MIG "
            "layouts");

  trace.jobs = {Job("cpu", 0, 0)};
  EXPECT_EQ(MakeSaturationArrivals(trace, eight, options).status().message(),
            "the trace has no pod that asks for a GPU");
  options.step_permille = 0;
  EXPECT_FALSE(MakeSaturationArrivals(trace, eight, options).ok());
}

TEST(Saturation, ReportsGiveEveryPoint) {
  SaturationCurve c;
  c.policy = "fgd";
  c.capacity_milli = 16000;
  c.arrivals = 3;
  c.placed = 2;
  c.unplaced = 1;
  c.points = {{0, 1, 0}, {0.5, 0.5, 0.125}, {1, 0.0625, 0.0625}};
  const nlohmann::json j = SaturationToJson({"t", "c", 3, 0}, {c});
  EXPECT_EQ(j.at("saturation").at("capacityGpus"), 16);
  const nlohmann::json& p = j.at("saturation").at("policies").at(0);
  EXPECT_EQ(p.at("policy"), "fgd");
  EXPECT_EQ(p.at("unplaced"), 1);
  EXPECT_EQ(p.at("points").at(1).at("stranded"), 0.125);
  EXPECT_EQ(p.at("points").at(2).at("unallocated"), 0.0625);
  const std::string table = SaturationTable({"t", "c", 3, 0}, {c});
  EXPECT_NE(table.find("    100%         6.2% /     6.2%"), std::string::npos) << table;
  EXPECT_NE(table.find("     50%        50.0% /    12.5%"), std::string::npos) << table;
  const std::string html = SaturationHtml({"t", "c", 3, 0}, {c});
  EXPECT_NE(html.find("<h2>Stranded GPU capacity</h2>"), std::string::npos);
  EXPECT_NE(html.find("<td>6.2%</td><td>6.2%</td>"), std::string::npos) << html;
  EXPECT_EQ(std::count(html.begin(), html.end(), '\n') > 10, true);
  EXPECT_NE(html.find("<polyline"), std::string::npos);
}

TEST(SyntheticOpenb, OnTheOpenbNodesChamberLeavesLessUnallocatedThanFgdAndBestFit) {
  // The openb cluster's GPU nodes: 1,213 nodes, 6,212 GPUs, each node with its CPU.
  const Result<ClusterSpec> spec = LoadClusterSpec(CHAMBER_SIM_EXAMPLES "/openb-nodes.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const std::vector<core::ShareNodeSpec> nodes = ShareNodesOf(BuildNodes(*spec));
  ASSERT_EQ(nodes.size(), 1213u);
  EXPECT_EQ(spec->TotalGpus(), 6212);
  EXPECT_EQ(nodes.front().cpu_milli, 96'000);  // the first pool: 549 nodes of 8 G2s, 96 cores
  EXPECT_EQ(nodes.front().gpus.size(), 8u);
  // Seed 1 of share_bench's saturation run: arrivals until demand reaches capacity.
  SyntheticSpec synthetic;
  synthetic.profile = SyntheticSpec::Profile::kOpenb;
  synthetic.jobs = 6212 * 2;
  SaturationOptions options;
  options.until_permille = 1000;
  const Result<SaturationArrivals> arrivals =
      MakeSaturationArrivals(GenerateSyntheticTrace(synthetic), core::ShareCluster(nodes), options);
  ASSERT_TRUE(arrivals.ok());
  std::map<std::string, double> unallocated;
  for (const std::string policy : {"best-fit", "fgd", "chamber"}) {
    const Result<SaturationCurve> c = RunSaturation(nodes, *arrivals, policy, options);
    ASSERT_TRUE(c.ok());
    unallocated[policy] = PointAt(*c, 1000, options)->unallocated;
  }
  // docs/simulator.md's figures (medians of five seeds): best fit 11.97%, FGD 5.77%, chamber
  // 5.22%, at most half of best fit's.
  EXPECT_LE(unallocated["chamber"], unallocated["best-fit"] * 0.5)
      << unallocated["chamber"] << " against " << unallocated["best-fit"];
  EXPECT_LT(unallocated["chamber"], unallocated["fgd"]);
  EXPECT_LT(unallocated["fgd"], unallocated["best-fit"]);
  EXPECT_GT(unallocated["chamber"], 0.027);  // the floor of any policy on this mix
}

TEST(SyntheticOpenb, DrawsTheSharingMix) {
  SyntheticSpec spec;
  spec.profile = SyntheticSpec::Profile::kOpenb;
  spec.jobs = 40'000;
  const Trace t = GenerateSyntheticTrace(spec);
  ASSERT_EQ(t.jobs.size(), 40'000u);
  // Each shape: a share or whole GPUs, with its CPU and memory.
  using Shape = std::tuple<int32_t, int32_t, int64_t, int64_t>;
  std::map<Shape, int64_t> counts;
  for (const TraceJob& j : t.jobs) {
    EXPECT_EQ(j.pods, 1);
    EXPECT_FALSE(j.gpus_per_pod > 0 && j.gpu_milli_per_pod > 0) << j.id;
    ++counts[{j.gpu_milli_per_pod, j.gpus_per_pod, j.cpu_milli_per_pod,
              j.memory_bytes_per_pod >> 20}];
  }
  // The openb trace's shapes: 7,728 pods, 2,868 of them asking for a share of a GPU and 1,026
  // for no GPU.
  ASSERT_EQ(SharingMixPods(), 7728);
  int64_t share_pods = 0, cpu_pods = 0, drawn = 0;
  for (const SharingMixEntry& e : SharingMix()) {
    if (e.gpu_milli > 0) share_pods += e.pods;
    if (e.gpu_milli == 0 && e.gpus == 0) cpu_pods += e.pods;
    const int64_t got = counts[{e.gpu_milli, e.gpus, e.cpu_milli, e.memory_mib}];
    drawn += got;
    const double want = static_cast<double>(e.pods) / 7728.0;
    EXPECT_NEAR(static_cast<double>(got) / 40'000.0, want, 0.006)
        << e.gpu_milli << " " << e.gpus << " " << e.cpu_milli;
  }
  EXPECT_EQ(share_pods, 2868);
  EXPECT_EQ(cpu_pods, 1026);
  EXPECT_EQ(drawn, 40'000);  // every job has one of the shapes
  EXPECT_EQ(GenerateSyntheticTrace(spec).jobs, GenerateSyntheticTrace(spec).jobs);  // seeded
}

}  // namespace
}  // namespace chamber::sim
