// The GPU-sharing model: MIG placements, request validation, the cluster's free state, the
// workload mix, fragmentation, and the three placement policies on hand-worked cases; FGD's kept
// fragmentation and its choices against full recomputation on random sequences.
#include "core/gpu_share.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace chamber::core {
namespace {

// ---- MIG ----

TEST(Mig, ModelsAreFoundByName) {
  ASSERT_NE(FindMigModel("H100-SXM5-80GB"), nullptr);
  EXPECT_EQ(FindMigModel("H100-SXM5-80GB")->gpu_model, "H100-80GB");
  EXPECT_EQ(FindMigModel("NVIDIA-A100-SXM4-40GB")->gpu_model, "A100-40GB");
  EXPECT_EQ(FindMigModel("A100-PCIE-80GB")->gpu_model, "A100-80GB");
  EXPECT_EQ(FindMigModel("Tesla-T4"), nullptr);
  EXPECT_EQ(FindMigModel("A10"), nullptr);
}

TEST(Mig, H100PlacementsFollowNvidiasTable) {
  const MigModel& h100 = *FindMigModel("H100-SXM5-80GB");
  const MigProfile& g7 = *FindMigProfile(h100, "7g.80gb");
  const MigProfile& g4 = *FindMigProfile(h100, "4g.40gb");
  const MigProfile& g3 = *FindMigProfile(h100, "3g.40gb");
  const MigProfile& g2 = *FindMigProfile(h100, "2g.20gb");
  const MigProfile& g1 = *FindMigProfile(h100, "1g.10gb");
  const MigProfile& g1m = *FindMigProfile(h100, "1g.20gb");
  EXPECT_EQ(FindMigProfile(h100, "1g.5gb"), nullptr);  // an A100 40GB profile
  EXPECT_EQ(g7.compute_slices, 7);
  EXPECT_EQ(g3.memory_mib, 40 * 1024);

  EXPECT_EQ(MigFirstStart(g7, 0), 0);
  EXPECT_EQ(MigFirstStart(g7, 0b1000'0000), -1);  // 7g needs all 8 slots
  // 4g.40gb at 0 leaves slots 4..7: a 3g.40gb at 4, or 2g + 1g + 1g.
  const uint8_t after4 = MigSlots(g4, 0);
  EXPECT_EQ(after4, 0b0000'1111);
  EXPECT_EQ(MigFirstStart(g4, after4), -1);
  EXPECT_EQ(MigFirstStart(g3, after4), 4);
  EXPECT_EQ(MigFirstStart(g2, after4), 4);
  EXPECT_EQ(MigFirstStart(g1, after4 | MigSlots(g2, 4)), 6);
  // 1g.10gb never starts at slot 7; two 3g.40gb fill the GPU.
  EXPECT_EQ(MigFirstStart(g1, 0b0111'1111), -1);
  EXPECT_EQ(MigFirstStart(g3, MigSlots(g3, 0) | MigSlots(g3, 4)), -1);
  // 1g.20gb starts on even slots only.
  EXPECT_EQ(MigFirstStart(g1m, 0b0000'0001), 2);
  // 2g.20gb starts at 0, 2 or 4, never 6.
  EXPECT_EQ(MigFirstStart(g2, 0b0011'1111), -1);
}

TEST(Mig, A100FortyGigabyteProfiles) {
  const MigModel& a100 = *FindMigModel("A100-SXM4-40GB");
  ASSERT_NE(FindMigProfile(a100, "1g.5gb"), nullptr);
  EXPECT_EQ(FindMigProfile(a100, "1g.5gb")->memory_mib, 5 * 1024);
  EXPECT_EQ(FindMigProfile(a100, "7g.40gb")->size, 8);
  EXPECT_EQ(FindMigProfile(a100, "3g.40gb"), nullptr);
  // Seven 1g.5gb instances, on slots 0..6.
  uint8_t used = 0;
  const MigProfile& g1 = *FindMigProfile(a100, "1g.5gb");
  for (int i = 0; i < 7; ++i) {
    const int32_t s = MigFirstStart(g1, used);
    EXPECT_EQ(s, i);
    used |= MigSlots(g1, s);
  }
  EXPECT_EQ(MigFirstStart(g1, used), -1);
}

// ---- Requests ----

TEST(ShareRequest, ValidationNamesTheFieldAndValue) {
  EXPECT_TRUE(ValidateShareRequest(GpuShare(250)).ok());
  EXPECT_TRUE(ValidateShareRequest(GpuShare(0, 20480)).ok());
  EXPECT_TRUE(ValidateShareRequest(WholeGpus(8)).ok());
  EXPECT_TRUE(ValidateShareRequest(MigDevice("3g.40gb")).ok());
  EXPECT_EQ(ValidateShareRequest(GpuShare(1500)).message(),
            "gpu_milli: 1500 is not in 1..999 (ask for whole GPUs with gpus)");
  EXPECT_EQ(ValidateShareRequest(GpuShare(-3)).message(),
            "gpu_milli: -3 is not in 1..999 (ask for whole GPUs with gpus)");
  EXPECT_EQ(ValidateShareRequest(GpuShare(0, -1)).message(), "gpu_memory_mib: -1 is negative");
  EXPECT_EQ(ValidateShareRequest(WholeGpus(-2)).message(), "gpus: -2 is negative");
  EXPECT_EQ(ValidateShareRequest(WholeGpus(1, -5)).message(), "cpu_milli: -5 is negative");
  EXPECT_EQ(ValidateShareRequest(WholeGpus(65)).message(),
            "gpus: 65 is more than a node holds (64)");
  ShareRequest both = WholeGpus(2);
  both.gpu_milli = 500;
  EXPECT_EQ(ValidateShareRequest(both).message(),
            "gpus: 2 with gpu_milli: 500 and gpu_memory_mib: 0; a pod asks for whole GPUs or a "
            "share of one, not both");
  EXPECT_EQ(ValidateShareRequest(MigDevice("5g.50gb")).message(),
            "mig_profile: \"5g.50gb\" is not a MIG profile of A100 or H100 GPUs");
  ShareRequest mig = MigDevice("1g.10gb");
  mig.gpu_milli = 100;
  EXPECT_EQ(ValidateShareRequest(mig).message(),
            "mig_profile: \"1g.10gb\" comes alone (the request also has gpus: 0, gpu_milli: 100, "
            "gpu_memory_mib: 0)");
  // A pod that asks for no GPU asks for its node's CPU and memory alone.
  ShareRequest cpu_only;
  cpu_only.cpu_milli = 4000;
  EXPECT_TRUE(ValidateShareRequest(cpu_only).ok());
  EXPECT_EQ(cpu_only.kind(), ShareRequest::Kind::kCpu);
  EXPECT_EQ(ShareRequestText(cpu_only), "no GPU");
  EXPECT_EQ(cpu_only.DemandMilli(), 0);
  EXPECT_EQ(GpuShare(0, 20480).kind(), ShareRequest::Kind::kShare);
}

TEST(ShareRequest, TextAndDemand) {
  EXPECT_EQ(ShareRequestText(GpuShare(250)), "0.25 GPU");
  EXPECT_EQ(ShareRequestText(GpuShare(5)), "0.005 GPU");
  EXPECT_EQ(ShareRequestText(GpuShare(500, 1024)), "0.5 GPU + 1024 MiB GPU memory");
  EXPECT_EQ(ShareRequestText(WholeGpus(1)), "1 GPU");
  EXPECT_EQ(ShareRequestText(WholeGpus(4)), "4 GPUs");
  EXPECT_EQ(ShareRequestText(MigDevice("2g.20gb")), "MIG 2g.20gb");
  EXPECT_EQ(GpuShare(250).DemandMilli(), 250);
  EXPECT_EQ(WholeGpus(4).DemandMilli(), 4000);
}

// ---- The cluster ----

TEST(ShareCluster, ApplyChecksAndReleaseGivesBack) {
  ShareCluster c(UniformShareNodes(2, 2, 1000));
  EXPECT_EQ(c.CapacityMilli(), 4000);
  const SharePlacement quarter{0, 0b01, 250, 600, nullptr, -1};
  ASSERT_TRUE(c.Apply(quarter).ok());
  EXPECT_EQ(c.gpus(0)[0].milli, 750);
  EXPECT_EQ(c.gpus(0)[0].memory_mib, 400);
  EXPECT_EQ(c.FreeMilli(), 3750);
  // Memory runs out before compute.
  EXPECT_EQ(c.Apply({0, 0b01, 250, 600, nullptr, -1}).message(),
            "gpu_milli: 250 and gpu_memory_mib: 600 do not fit GPU 0/0 (750 and 400 free)");
  EXPECT_EQ(c.Apply({0, 0b11, 1000, 0, nullptr, -1}).message(),
            "gpu: 0/0 is not entirely free for a whole-GPU pod");
  EXPECT_EQ(c.Apply({2, 0b1, 100, 0, nullptr, -1}).message(), "node: 2 is not a node");
  EXPECT_EQ(c.Apply({1, 0b100, 100, 0, nullptr, -1}).message(),
            "gpu_mask: 0x4 names no GPU or GPUs node 1 lacks");
  ASSERT_TRUE(c.Apply({1, 0b11, 1000, 0, nullptr, -1}).ok());
  EXPECT_EQ(c.FreeMilli(), 1750);
  c.Release(quarter);
  c.Release({1, 0b11, 1000, 0, nullptr, -1});
  EXPECT_EQ(c.FreeMilli(), 4000);
  EXPECT_TRUE(c.gpus(0)[0].EntirelyFree());
  EXPECT_TRUE(c.gpus(1)[1].EntirelyFree());
}

TEST(ShareCluster, MigAndUnhealthyGpusAreNotShareCapacity) {
  ShareNodeSpec node;
  node.gpus = {{81920, "H100-SXM5-80GB", true, true},
               {81920, "H100-SXM5-80GB", false, false},
               {81920, "H100-SXM5-80GB", false, true},
               {16384, "Tesla-T4", true, true}};  // MIG on a model without a table: unusable
  SharePlacer p(ShareStrategy::kBestFit, {node});
  EXPECT_EQ(p.cluster().CapacityMilli(), 1000);
  // Shares only go to GPU 2; MIG devices only to GPU 0.
  EXPECT_EQ(p.Place(GpuShare(500))->gpu_mask, 0b100u);
  const std::optional<SharePlacement> m = p.Place(MigDevice("3g.40gb"));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->gpu_mask, 0b1u);
  EXPECT_EQ(m->mig_start, 0);
  EXPECT_EQ(p.Place(MigDevice("3g.40gb"))->mig_start, 4);
  EXPECT_FALSE(p.Place(MigDevice("1g.10gb")).has_value());
  EXPECT_FALSE(p.Place(MigDevice("1g.5gb")).has_value());  // not an H100 profile
  ShareCluster c({node});
  const MigProfile* g3 = FindMigProfile(*FindMigModel("H100-SXM5-80GB"), "3g.40gb");
  EXPECT_EQ(c.Apply({0, 0b1, 0, 0, g3, 2, 0, 0}).message(),
            "mig: 3g.40gb at slot 2 does not fit GPU 0/0");
  EXPECT_FALSE(c.Apply({0, 0b1, 0, 0, g3, -1, 0, 0}).ok());
  EXPECT_FALSE(c.Apply({0, 0b100, 0, 0, g3, 0, 0, 0}).ok());  // not a MIG GPU
  EXPECT_TRUE(c.Apply({0, 0b1, 0, 0, g3, 4, 0, 0}).ok());
  EXPECT_FALSE(c.Apply({0, 0b1, 0, 0, g3, 4, 0, 0}).ok());  // slots 4..7 are taken
  EXPECT_FALSE(p.Place(WholeGpus(1)).has_value());
  p.Release(*m);
  EXPECT_EQ(p.Place(MigDevice("1g.10gb"))->mig_start, 0);
}

// ---- The mix ----

TEST(WorkloadMix, CountsClassesOverTheWindow) {
  WorkloadMix mix(3, 2);
  mix.Record(GpuShare(500));
  mix.Record(WholeGpus(2));
  mix.Record(GpuShare(500));
  ASSERT_EQ(mix.classes().size(), 2u);
  EXPECT_EQ(mix.classes()[0].weight, 2);
  EXPECT_EQ(mix.classes()[1].weight, 1);
  mix.Record(GpuShare(250));  // a third class: untracked; the first 0.5 leaves the window
  EXPECT_EQ(mix.untracked(), 1);
  EXPECT_EQ(mix.classes()[0].weight, 1);
  EXPECT_EQ(mix.total(), 2);
  mix.Record(MigDevice("1g.10gb"));  // not part of the mix
  EXPECT_EQ(mix.recorded(), 4);
  mix.Record(WholeGpus(2));  // the 2-GPU request leaves, another comes
  EXPECT_EQ(mix.classes()[1].weight, 1);
  EXPECT_EQ(mix.Find(WholeGpus(2)), 1);
  EXPECT_EQ(mix.Find(GpuShare(250)), -1);
}

// ---- Fragmentation ----

TEST(Fragmentation, HandWorkedNode) {
  // A node of four GPUs: 1000, 1000, 600 and 100 free.
  ShareCluster c(UniformShareNodes(1, 4, 1000));
  ASSERT_TRUE(c.Apply({0, 0b0100, 400, 0, nullptr, -1}).ok());
  ASSERT_TRUE(c.Apply({0, 0b1000, 900, 0, nullptr, -1}).ok());
  const std::vector<MixClass> mix = {{GpuShare(500), 3}, {WholeGpus(2), 1}, {WholeGpus(4), 2}};
  // 0.5 GPU: only the 100 cannot hold it. 2 GPUs: the 600 and 100 (two are entirely free). 4
  // GPUs: everything (only two are entirely free).
  EXPECT_EQ(NodeFragmentation(NodeFreeOf(c, 0), mix), 3 * 100 + 1 * 700 + 2 * 2700);
  // Stranded: the 100 fits no class; the 600 fits 0.5.
  EXPECT_EQ(NodeStrandedMilli(NodeFreeOf(c, 0), mix), 100);
  EXPECT_EQ(StrandedMilli(c, std::vector<MixClass>{{WholeGpus(4), 1}}), 2700);
  EXPECT_EQ(StrandedMilli(c, std::vector<MixClass>{{WholeGpus(4), 0}, {GpuShare(50), 1}}), 0);
}

TEST(Fragmentation, ANodeWithoutCpuLeftStrandsItsGpus) {
  // Two free GPUs and 4 cores. A 0.5 share with 8 cores cannot use the node at all: both GPUs
  // count for it. One with 2 cores fits.
  std::vector<ShareNodeSpec> nodes = UniformShareNodes(1, 2);
  nodes[0].cpu_milli = 4000;
  ShareCluster c(nodes);
  const std::vector<MixClass> mix = {{GpuShare(500, 0, 8000), 1}, {GpuShare(500, 0, 2000), 1}};
  EXPECT_EQ(NodeFragmentation(NodeFreeOf(c, 0), mix), 2000);
  EXPECT_EQ(NodeStrandedMilli(NodeFreeOf(c, 0), mix), 0);
  // A pod of 0.1 GPU and 3 cores leaves 1 core: now no class fits the node.
  ASSERT_TRUE(c.Apply({0, 0b01, 100, 0, nullptr, -1, 3000, 0}).ok());
  EXPECT_EQ(c.free_cpu_milli(0), 1000);
  EXPECT_EQ(NodeFragmentation(NodeFreeOf(c, 0), mix), 2 * 1900);
  EXPECT_EQ(StrandedMilli(c, mix), 1900);
  EXPECT_EQ(c.Apply({0, 0b10, 100, 0, nullptr, -1, 3000, 0}).message(),
            "cpu_milli: 3000 and memory_bytes: 0 do not fit node 0 (1000 and "
            "4611686018427387904 free)");
  c.Release({0, 0b01, 100, 0, nullptr, -1, 3000, 0});
  EXPECT_EQ(c.free_cpu_milli(0), 4000);
  // Every policy skips a node without the CPU.
  nodes.push_back(nodes[0]);
  for (ShareStrategy s : {ShareStrategy::kFirstFit, ShareStrategy::kBestFit, ShareStrategy::kFgd,
                          ShareStrategy::kChamber}) {
    SharePlacer p(s, nodes);
    EXPECT_EQ(p.Place(GpuShare(100, 0, 3000))->node, 0);
    EXPECT_EQ(p.Place(GpuShare(100, 0, 3000))->node, 1) << ShareStrategyName(s);
    EXPECT_FALSE(p.Place(WholeGpus(1, 3000)).has_value());
  }
}

TEST(Fragmentation, GpuModelsAPodDoesNotAcceptCountWhole) {
  std::vector<ShareNodeSpec> nodes = UniformShareNodes(1, 2, 81920, "H100-SXM5-80GB");
  const std::vector<ShareNodeSpec> a100 = UniformShareNodes(1, 2, 40960, "A100-SXM4-40GB");
  nodes.push_back(a100[0]);
  for (ShareStrategy s : {ShareStrategy::kFirstFit, ShareStrategy::kBestFit, ShareStrategy::kFgd,
                          ShareStrategy::kChamber}) {
    SharePlacer p(s, nodes);
    const ShareCluster& c = p.cluster();
    EXPECT_EQ(c.node_model(0), 0);
    EXPECT_EQ(c.node_model(1), 1);
    EXPECT_EQ(c.ModelMask({}), 0u);
    EXPECT_EQ(c.ModelMask({"A100-SXM4-40GB"}), (uint64_t{1} << 63) | 0b10);
    EXPECT_EQ(c.ModelMask({"L4"}), uint64_t{1} << 63);
    ShareRequest on_a100 = GpuShare(500);
    on_a100.gpu_model_mask = c.ModelMask({"A100-SXM4-40GB"});
    EXPECT_EQ(p.Place(on_a100)->node, 1) << ShareStrategyName(s);
    ShareRequest nowhere = WholeGpus(1);
    nowhere.gpu_model_mask = c.ModelMask({"L4"});
    EXPECT_FALSE(p.Place(nowhere).has_value());
    // For a class that only accepts A100s, all of the H100 node's free compute is fragmented.
    const std::vector<MixClass> mix = {{on_a100, 1}};
    EXPECT_EQ(NodeFragmentation(NodeFreeOf(c, 0), mix), 2000);
    EXPECT_EQ(NodeFragmentation(NodeFreeOf(c, 1), mix), 0);
    EXPECT_EQ(StrandedMilli(c, mix), 2000);
  }
}

// ---- Policies on hand-worked cases ----

TEST(SharePolicies, BestFitStrandsWhereFgdDoesNot) {
  // One node, two GPUs; requests of 0.4, 0.5, 0.6, 0.5 GPU. Best fit puts the 0.5 beside the
  // 0.4 (0.1 left) and the last 0.5 finds no room; FGD keeps 0.5 whole on the second GPU and
  // fits all four.
  const std::vector<ShareRequest> seq = {GpuShare(400), GpuShare(500), GpuShare(600),
                                         GpuShare(500)};
  SharePlacer best(ShareStrategy::kBestFit, UniformShareNodes(1, 2));
  SharePlacer first(ShareStrategy::kFirstFit, UniformShareNodes(1, 2));
  SharePlacer fgd(ShareStrategy::kFgd, UniformShareNodes(1, 2));
  std::vector<uint64_t> best_gpus, first_gpus, fgd_gpus;
  for (const ShareRequest& r : seq) {
    const auto b = best.Place(r), f = first.Place(r), g = fgd.Place(r);
    best_gpus.push_back(b ? b->gpu_mask : 0);
    first_gpus.push_back(f ? f->gpu_mask : 0);
    fgd_gpus.push_back(g ? g->gpu_mask : 0);
  }
  EXPECT_EQ(best_gpus, (std::vector<uint64_t>{0b01, 0b01, 0b10, 0}));
  EXPECT_EQ(first_gpus, (std::vector<uint64_t>{0b01, 0b01, 0b10, 0}));
  EXPECT_EQ(fgd_gpus, (std::vector<uint64_t>{0b01, 0b10, 0b01, 0b10}));
  EXPECT_EQ(best.cluster().FreeMilli(), 500);
  EXPECT_EQ(fgd.cluster().FreeMilli(), 0);
  const std::vector<MixClass> mix = {{GpuShare(400), 1}, {GpuShare(500), 2}, {GpuShare(600), 1}};
  EXPECT_EQ(StrandedMilli(best.cluster(), mix), 100);  // the 0.1 left beside 0.4 + 0.5
  EXPECT_EQ(StrandedMilli(fgd.cluster(), mix), 0);
}

TEST(SharePolicies, FgdAvoidsBreakingAnEmptyNode) {
  // Two nodes of two GPUs; FGD learns the mix from what it places.
  SharePlacer fgd(ShareStrategy::kFgd, UniformShareNodes(2, 2));
  ASSERT_EQ(fgd.Place(WholeGpus(2))->node, 0);  // learns the 2-GPU class
  ASSERT_EQ(fgd.Place(GpuShare(500)), (SharePlacement{1, 0b01, 500, 0, nullptr, -1}));
  fgd.Release({0, 0b11, kMilliPerGpu, 0, nullptr, -1});
  // Now node 0 is empty and node 1 holds the 0.5. A 0.25 goes to node 1, on GPU 1: under the
  // mix {2 GPUs: 1, 0.5: 1, 0.25: 1}, node 0 would go from 0 to 1750 (no longer two entirely
  // free GPUs); node 1 is at 1500 (for 2 GPUs, all its free compute counts), and goes to 1500 on
  // GPU 0 (250 left there is too little for 0.5) or to 1250 on GPU 1 (500 and 750 left).
  const std::optional<SharePlacement> q = fgd.Place(GpuShare(250));
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->node, 1);
  EXPECT_EQ(q->gpu_mask, 0b10u);
  EXPECT_EQ(fgd.KeptFragmentation(1), 1250);
  EXPECT_EQ(fgd.KeptFragmentation(0), 0);
  // Best fit takes the tightest GPU instead: node 1, GPU 0.
  SharePlacer best(ShareStrategy::kBestFit, UniformShareNodes(2, 2));
  ASSERT_EQ(best.Place(GpuShare(500)), (SharePlacement{0, 0b01, 500, 0, nullptr, -1}));
  EXPECT_EQ(best.Place(GpuShare(250))->gpu_mask, 0b01u);
  // A 2-GPU pod still has node 0.
  EXPECT_EQ(fgd.Place(WholeGpus(2))->node, 0);
  EXPECT_FALSE(fgd.Place(WholeGpus(2)).has_value());
}

TEST(SharePolicies, WholeGpusUseEntirelyFreeGpus) {
  for (ShareStrategy s : {ShareStrategy::kFirstFit, ShareStrategy::kBestFit, ShareStrategy::kFgd,
                          ShareStrategy::kChamber}) {
    SCOPED_TRACE(ShareStrategyName(s));
    SharePlacer p(s, UniformShareNodes(2, 4));
    // Every policy puts a lone 0.1 share on node 0, GPU 0.
    ASSERT_EQ(p.Place(GpuShare(100)), (SharePlacement{0, 0b0001, 100, 0, nullptr, -1}));
    // Three whole GPUs: the entirely free ones of node 0. First fit: the first node that has
    // them. Best fit: node 0 is left with 900 free, node 1 would be with 1000. FGD: node 0's
    // fragmentation does not grow (its 900 was already too little for 3 GPUs), node 1's would
    // grow by 1000.
    EXPECT_EQ(p.Place(WholeGpus(3)), (SharePlacement{0, 0b1110, kMilliPerGpu, 0, nullptr, -1}));
    EXPECT_EQ(p.Place(WholeGpus(4))->node, 1);
    EXPECT_FALSE(p.Place(WholeGpus(1)).has_value());
    EXPECT_EQ(p.cluster().FreeMilli(), 900);
  }
}

TEST(SharePolicies, ChamberWeighsClassesByDemandWhereFgdCountsThem) {
  // One node of two GPUs. The mixes both policies learn: 31 requests of 0.3 GPU, one of 0.65
  // and one of a whole GPU. Then GPU 0 holds the 0.65 (0.35 free), GPU 1 is free, and a 0.3
  // arrives. On GPU 0 it leaves 0.05: +50 for the 0.3 class, -300 for the whole GPU's (the free
  // compute of GPUs not entirely free goes from 350 to 50), -300 for the 0.65's. On GPU 1 it
  // leaves 0.7: +700 for the whole GPU's (no GPU entirely free), 0 for the others.
  //   FGD, counts 31, 1, 1: 50*31 - 300 - 300 = 950 against 700: GPU 1.
  //   Chamber, demand 31*300, 1000, 650: 465,000 - 300,000 - 195,000 = -30,000 against
  //   700,000: GPU 0, which keeps GPU 1 whole for the next 1-GPU pod.
  FgdOptions options;
  options.check_every = 1;  // scores follow every change of the mix
  options.refresh_drift_milli = 0;
  for (ShareStrategy s : {ShareStrategy::kFgd, ShareStrategy::kChamber}) {
    SCOPED_TRACE(ShareStrategyName(s));
    SharePlacer p(s, UniformShareNodes(1, 2), options);
    ASSERT_EQ(p.Place(GpuShare(650))->gpu_mask, 0b01u);
    const std::optional<SharePlacement> whole = p.Place(WholeGpus(1));
    ASSERT_EQ(whole->gpu_mask, 0b10u);
    const std::optional<SharePlacement> first = p.Place(GpuShare(300));
    ASSERT_EQ(first->gpu_mask, 0b01u);
    for (int i = 0; i < 29; ++i) ASSERT_FALSE(p.Place(GpuShare(300)).has_value());
    p.Release(*whole);
    p.Release(*first);
    const std::optional<SharePlacement> q = p.Place(GpuShare(300));
    ASSERT_TRUE(q.has_value());
    const std::span<const MixClass> mix = p.scored_mix();
    ASSERT_EQ(mix.size(), 3u);
    if (s == ShareStrategy::kFgd) {
      EXPECT_EQ(q->gpu_mask, 0b10u);
      EXPECT_EQ(mix[0].weight, 1);  // 0.65, counted
      EXPECT_EQ(mix[2].weight, 31);
      EXPECT_EQ(p.KeptFragmentation(0), 31 * 0 + 1 * 1050 + 1 * 350);
      EXPECT_FALSE(p.Place(WholeGpus(1)).has_value());
    } else {
      EXPECT_EQ(q->gpu_mask, 0b01u);
      EXPECT_EQ(mix[0].weight, 650);  // 0.65, weighed by demand
      EXPECT_EQ(mix[1].weight, 1000);
      EXPECT_EQ(mix[2].weight, 31 * 300);
      EXPECT_EQ(p.KeptFragmentation(0), 9300 * 50 + 1000 * 50 + 650 * 50);
      EXPECT_EQ(p.Place(WholeGpus(1))->gpu_mask, 0b10u);
    }
  }
}

TEST(SharePolicies, APodWithoutGpusGoesWhereItStrandsTheFewestGpus) {
  // Two nodes of two GPUs and 16 cores; node 1's GPUs are held whole. The mix: 1-GPU pods of 8
  // cores. A pod of 8 cores and no GPU leaves 8 on either node, enough for the 1-GPU class:
  // neither node's fragmentation changes. FGD and Chamber break the tie by free GPU compute and
  // take node 1, whose GPUs are all taken; first fit and best fit (the node left with the least
  // CPU, then the lowest) take node 0, whose GPUs a 1-GPU pod could still use.
  std::vector<ShareNodeSpec> nodes = UniformShareNodes(2, 2);
  for (ShareNodeSpec& n : nodes) n.cpu_milli = 16'000;
  ShareRequest cpu_only;
  cpu_only.cpu_milli = 8000;
  for (ShareStrategy s : {ShareStrategy::kFirstFit, ShareStrategy::kBestFit, ShareStrategy::kFgd,
                          ShareStrategy::kChamber}) {
    SCOPED_TRACE(ShareStrategyName(s));
    SharePlacer p(s, nodes);
    // Learn the 1-GPU class of 8 cores on node 0, then take node 1's GPUs whole and free node 0.
    const std::optional<SharePlacement> first = p.Place(WholeGpus(1, 8000));
    ASSERT_EQ(first->node, 0);
    const std::optional<SharePlacement> second = p.Place(WholeGpus(2, 0));
    ASSERT_EQ(second->node, 1);
    p.Release(*first);
    const std::optional<SharePlacement> q = p.Place(cpu_only);
    ASSERT_TRUE(q.has_value());
    EXPECT_EQ(q->gpu_mask, 0u);
    EXPECT_EQ(q->cpu_milli, 8000);
    const bool fgd = s == ShareStrategy::kFgd || s == ShareStrategy::kChamber;
    EXPECT_EQ(q->node, fgd ? 1 : 0);
    EXPECT_EQ(p.cluster().free_cpu_milli(q->node), 8000);
    p.Release(*q);
    EXPECT_EQ(p.cluster().free_cpu_milli(q->node), 16'000);
  }
}

TEST(SharePolicies, ParseNames) {
  EXPECT_EQ(*ParseShareStrategy("chamber"), ShareStrategy::kChamber);
  EXPECT_EQ(ShareStrategyName(ShareStrategy::kChamber), "chamber");
  EXPECT_EQ(*ParseShareStrategy("fgd"), ShareStrategy::kFgd);
  EXPECT_EQ(*ParseShareStrategy("best-fit"), ShareStrategy::kBestFit);
  EXPECT_EQ(*ParseShareStrategy("first-fit"), ShareStrategy::kFirstFit);
  EXPECT_EQ(ParseShareStrategy("drf").status().message(),
            "policy: \"drf\" is not a GPU-sharing policy (first-fit, best-fit, fgd, chamber)");
}

// ---- FGD against full recomputation ----

// The least increase of fragmentation any placement of `r` could make, by trying every node and
// GPU on a copy.
std::optional<int64_t> BruteForceBestDelta(const ShareCluster& cluster,
                                           std::span<const MixClass> mix, const ShareRequest& r) {
  std::optional<int64_t> best;
  for (int32_t n = 0; n < cluster.node_count(); ++n) {
    if (!cluster.NodeFits(n, r)) continue;
    const std::span<const GpuFree> gpus = cluster.gpus(n);
    const int64_t before = NodeFragmentation(NodeFreeOf(cluster, n), mix);
    const int64_t cpu = cluster.free_cpu_milli(n) - r.cpu_milli;
    const int64_t memory = cluster.free_memory_bytes(n) - r.memory_bytes;
    std::vector<GpuFree> copy(gpus.begin(), gpus.end());
    std::vector<std::vector<GpuFree>> options;
    if (r.gpus > 0) {
      int32_t k = r.gpus;
      for (GpuFree& g : copy)
        if (k > 0 && g.Shareable() && g.EntirelyFree()) {
          g.milli = 0;
          g.memory_mib = 0;
          --k;
        }
      if (k == 0) options.push_back(copy);
    } else {
      for (size_t i = 0; i < copy.size(); ++i) {
        if (!copy[i].Fits(r.gpu_milli, r.gpu_memory_mib)) continue;
        std::vector<GpuFree> o = copy;
        o[i].milli -= r.gpu_milli;
        o[i].memory_mib -= r.gpu_memory_mib;
        options.push_back(o);
      }
    }
    for (const std::vector<GpuFree>& o : options) {
      const int64_t d =
          NodeFragmentation(NodeFree{o, cpu, memory, cluster.node_model(n)}, mix) - before;
      if (!best || d < *best) best = d;
    }
  }
  return best;
}

TEST(FgdProperty, KeptFragmentationAndChoicesMatchFullRecomputation) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    auto pick = [&](int64_t lo, int64_t hi) {
      return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    };
    std::vector<ShareNodeSpec> nodes(static_cast<size_t>(pick(1, 6)));
    for (ShareNodeSpec& n : nodes) {
      n.gpus.resize(static_cast<size_t>(pick(1, 8)));
      for (ShareGpuSpec& g : n.gpus) {
        g.memory_mib = pick(0, 1) == 0 ? 40960 : 81920;
        g.healthy = pick(0, 9) != 0;
        g.mig = pick(0, 9) == 0;
      }
      if (pick(0, 1) == 0) n.cpu_milli = pick(2, 16) * 1000;
      const std::string model = pick(0, 1) == 0 ? "H100-SXM5-80GB" : "A100-SXM4-40GB";
      for (ShareGpuSpec& g : n.gpus) g.model = model;
    }
    FgdOptions options;
    options.window = pick(5, 50);
    options.max_classes = static_cast<size_t>(pick(2, 8));
    options.check_every = pick(1, 8);
    // FGD and Chamber's weighing by demand alike: each choice is the least increase under the
    // weights the placer scores with.
    SharePlacer p(seed % 2 == 0 ? ShareStrategy::kFgd : ShareStrategy::kChamber, nodes, options);
    // A small pool of request classes so that they repeat; sometimes more than the mix keeps.
    std::vector<ShareRequest> pool;
    for (int64_t i = 0, n = pick(1, 8); i < n; ++i) {
      if (pick(0, 2) == 0)
        pool.push_back(WholeGpus(static_cast<int32_t>(1 << pick(0, 3))));
      else
        pool.push_back(GpuShare(static_cast<int32_t>(pick(1, 9) * 100),
                                pick(0, 2) == 0 ? pick(1, 5) * 8192 : 0));
      if (pick(0, 5) == 0) pool.back() = MigDevice(pick(0, 1) == 0 ? "1g.10gb" : "3g.20gb");
      if (pick(0, 1) == 0) pool.back().cpu_milli = pick(1, 6) * 1000;
      if (pick(0, 2) == 0 && pool.back().kind() != ShareRequest::Kind::kMig)
        pool.back().gpu_model_mask = p.cluster().ModelMask(
            {pick(0, 3) == 0 ? std::string("L4") : std::string("A100-SXM4-40GB")});
    }
    std::vector<SharePlacement> held;
    for (int step = 0; step < 300; ++step) {
      if (!held.empty() && pick(0, 3) == 0) {
        const size_t i = static_cast<size_t>(pick(0, static_cast<int64_t>(held.size()) - 1));
        p.Release(held[i]);
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        const ShareRequest& r =
            pool[static_cast<size_t>(pick(0, static_cast<int64_t>(pool.size()) - 1))];
        // The best increase, as the placer's scores (refreshed by recording r) will see it. MIG
        // devices are placed outside FGD's measure; their CPU still changes the node's.
        const ShareCluster before = p.cluster();
        if (r.kind() == ShareRequest::Kind::kMig) {
          if (const std::optional<SharePlacement> m = p.Place(r)) held.push_back(*m);
        } else {
          const std::optional<SharePlacement> got = p.Place(r);
          const std::span<const MixClass> mix = p.scored_mix();
          const std::optional<int64_t> want = BruteForceBestDelta(before, mix, r);
          ASSERT_EQ(got.has_value(), want.has_value()) << ShareRequestText(r);
          if (got) {
            held.push_back(*got);
            EXPECT_EQ(before.FreeMilli() - p.cluster().FreeMilli(), r.DemandMilli());
            EXPECT_EQ(before.free_cpu_milli(got->node) - p.cluster().free_cpu_milli(got->node),
                      r.cpu_milli);
            const int64_t was = NodeFragmentation(NodeFreeOf(before, got->node), mix);
            const int64_t now = NodeFragmentation(NodeFreeOf(p.cluster(), got->node), mix);
            EXPECT_EQ(now - was, *want) << ShareRequestText(r) << " at step " << step;
          }
        }
      }
      for (int32_t n = 0; n < p.cluster().node_count(); ++n)
        ASSERT_EQ(p.KeptFragmentation(n),
                  NodeFragmentation(NodeFreeOf(p.cluster(), n), p.scored_mix()))
            << "node " << n << " at step " << step;
      int64_t free = 0;
      for (int32_t n = 0; n < p.cluster().node_count(); ++n)
        for (const GpuFree& g : p.cluster().gpus(n)) free += g.UsableMilli();
      ASSERT_EQ(free, p.cluster().FreeMilli());
    }
    for (const SharePlacement& h : held) p.Release(h);
    EXPECT_EQ(p.cluster().FreeMilli(), p.cluster().CapacityMilli());
    // Scores are computed once a request FGD measures has arrived (a pool of MIG devices only
    // has none).
    EXPECT_EQ(p.refreshes() >= 1, std::any_of(pool.begin(), pool.end(), [](const ShareRequest& r) {
                return r.kind() != ShareRequest::Kind::kMig;
              }));
  }
}

}  // namespace
}  // namespace chamber::core
