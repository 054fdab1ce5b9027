#include "agent/health.h"

#include <optional>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "agent/nvml_api.h"

namespace chamber::agent {
namespace {

constexpr double kBoot = 0;
constexpr double kStart = 10000;  // well past any boot grace

GpuInfo Gpu(int nvlinks = 0) {
  GpuInfo g;
  g.index = 0;
  g.uuid = "GPU-0";
  g.name = "NVIDIA H100 80GB HBM3";
  g.pci_bus_id = "00000000:18:00.0";
  g.nvlinks_total = nvlinks;
  for (int l = 0; l < nvlinks; ++l) g.nvlinks_active.push_back(l);
  for (const char* f : {"utilization", "ecc", "remapped_rows", "pcie_link", "clock_event_reasons",
                        "recovery_action"}) {
    g.features[f] = true;
  }
  g.features["nvlink"] = nvlinks > 0;
  g.features["temperature_thresholds"] = true;
  g.temperature_slowdown_c = 90;
  g.temperature_shutdown_c = 95;
  return g;
}

// A healthy sample: every field present and fine.
GpuSample Healthy(int nvlinks = 0) {
  GpuSample s;
  s.index = 0;
  s.uuid = "GPU-0";
  s.gpu_utilization = 50;
  s.utilization_source = UtilizationSource::kCoarse;
  s.clock_event_reasons = 0;
  s.ecc_volatile_uncorrected = 0;
  s.ecc_volatile_corrected = 3;
  s.remap = RemapSample{};
  s.pcie_width_current = 16;
  s.pcie_width_max = 16;
  s.pcie_gen_current = 5;
  s.pcie_gen_max = 5;
  s.recovery_action = 0;
  s.temperature_c = 60;
  s.power_watts = 400;
  for (int l = 0; l < nvlinks; ++l) s.nvlinks.push_back({l, true, 0, 0, 0, 0});
  return s;
}

struct Fixture {
  explicit Fixture(HealthConfig config = {}, int nvlinks = 0, double boot = kBoot)
      : classifier(config, boot) {
    Inventory inv;
    inv.gpus.push_back(Gpu(nvlinks));
    classifier.SetInventory(inv);
  }
  // Feeds `n` copies of `s` one second apart from `t`; returns the changes.
  std::vector<IncidentChange> Feed(const GpuSample& s, int n, double& t) {
    std::vector<IncidentChange> all;
    for (int i = 0; i < n; ++i) {
      auto c = classifier.OnSample(s, t);
      all.insert(all.end(), c.begin(), c.end());
      t += 1;
    }
    return all;
  }
  HealthClassifier classifier;
};

XidEvent Xid(unsigned xid) {
  XidEvent e;
  e.gpu_index = 0;
  e.gpu_uuid = "GPU-0";
  e.pci_bus_id = "00000000:18:00.0";
  e.xid = xid;
  e.source = "nvml-event";
  return e;
}

// One row of the sample-check table: how to make a sample bad for it.
struct SampleRowCase {
  const char* rule;
  Severity severity;
  bool debounced;
  int nvlinks;
  void (*make_bad)(GpuSample&);
};

const SampleRowCase kSampleCases[] = {
    {"gpu-lost", Severity::kFatal, false, 0, [](GpuSample& s) { s.lost = true; }},
    {"ecc-uncorrectable", Severity::kUnhealthy, false, 0,
     [](GpuSample& s) { s.ecc_volatile_uncorrected = 2; }},
    {"row-remap-failure", Severity::kUnhealthy, false, 0,
     [](GpuSample& s) { s.remap->failure = true; }},
    {"row-remap-pending", Severity::kUnhealthy, false, 0,
     [](GpuSample& s) { s.remap->pending = true; }},
    {"recovery-action-reset", Severity::kUnhealthy, false, 0,
     [](GpuSample& s) { s.recovery_action = NVML_GPU_RECOVERY_ACTION_GPU_RESET; }},
    {"recovery-action-reboot", Severity::kFatal, false, 0,
     [](GpuSample& s) { s.recovery_action = NVML_GPU_RECOVERY_ACTION_NODE_REBOOT; }},
    {"pcie-link-width", Severity::kDegraded, true, 0,
     [](GpuSample& s) { s.pcie_width_current = 8; }},
    {"pcie-link-generation", Severity::kDegraded, true, 0,
     [](GpuSample& s) { s.pcie_gen_current = 3; }},
    {"nvlink-down", Severity::kUnhealthy, true, 4,
     [](GpuSample& s) { s.nvlinks[2].active = false; }},
    {"thermal-critical", Severity::kUnhealthy, true, 0, [](GpuSample& s) { s.temperature_c = 90; }},
    {"thermal-slowdown", Severity::kDegraded, true, 0,
     [](GpuSample& s) { s.clock_event_reasons = nvmlClocksThrottleReasonHwThermalSlowdown; }},
    {"power-slowdown", Severity::kDegraded, true, 0,
     [](GpuSample& s) { s.clock_event_reasons = nvmlClocksThrottleReasonHwPowerBrakeSlowdown; }},
};

TEST(HealthRulesTest, EverySampleRowOpensItsIncidentWithItsSeverity) {
  for (const SampleRowCase& c : kSampleCases) {
    SCOPED_TRACE(c.rule);
    Fixture f({}, c.nvlinks);
    double t = kStart;
    EXPECT_TRUE(f.Feed(Healthy(c.nvlinks), 1, t).empty());
    GpuSample bad = Healthy(c.nvlinks);
    c.make_bad(bad);
    int needed = c.debounced ? f.classifier.config().debounce_samples : 1;
    if (needed > 1) {
      EXPECT_TRUE(f.Feed(bad, needed - 1, t).empty()) << "opened before debounce";
    }
    auto changes = f.Feed(bad, 1, t);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].kind, IncidentChange::Kind::kOpened);
    EXPECT_EQ(changes[0].incident.cause, c.rule);
    EXPECT_EQ(changes[0].incident.severity, c.severity);
    EXPECT_EQ(changes[0].incident.gpu_uuid, "GPU-0");
    EXPECT_EQ(f.classifier.GpuSeverity("GPU-0"), c.severity);
    const HealthRule* rule = FindHealthRule(c.rule);
    ASSERT_NE(rule, nullptr);
    EXPECT_EQ(rule->severity, c.severity);
    EXPECT_EQ(rule->debounced, c.debounced);
  }
}

TEST(HealthRulesTest, NvLinkErrorsRowOpensWhenCountersGrow) {
  Fixture f({}, 4);
  double t = kStart;
  GpuSample s = Healthy(4);
  EXPECT_TRUE(f.Feed(s, 2, t).empty());
  std::vector<IncidentChange> changes;
  for (int i = 0; i < 3; ++i) {
    s.nvlinks[1].crc_flit_errors += 5;
    auto c = f.Feed(s, 1, t);
    changes.insert(changes.end(), c.begin(), c.end());
  }
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].incident.cause, "nvlink-errors");
  EXPECT_EQ(changes[0].incident.severity, Severity::kUnhealthy);
  EXPECT_NE(changes[0].incident.message.find("total 15"), std::string::npos)
      << changes[0].incident.message;
}

TEST(HealthRulesTest, EveryTableRowHasATest) {
  std::set<std::string> tested = {"nvlink-errors", "xid-hardware", "xid-application-repeated"};
  for (const SampleRowCase& c : kSampleCases) tested.insert(c.rule);
  for (const HealthRule& r : HealthRules()) EXPECT_TRUE(tested.count(std::string(r.id))) << r.id;
}

TEST(HealthRulesTest, HealthySamplesOpenNothing) {
  Fixture f({}, 4);
  double t = kStart;
  EXPECT_TRUE(f.Feed(Healthy(4), 20, t).empty());
  EXPECT_EQ(f.classifier.GpuSeverity("GPU-0"), Severity::kHealthy);
}

// Hardware Xids: each opens at once with the severity of its table row.
TEST(XidRulesTest, EveryHardwareXidOpensAnIncidentAtOnce) {
  int hardware = 0;
  for (const XidRule& r : XidRules()) {
    if (r.cls != XidClass::kHardware) continue;
    SCOPED_TRACE(r.xid);
    ++hardware;
    Fixture f;
    auto changes = f.classifier.OnXid(Xid(r.xid), kStart);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].incident.cause, "xid-hardware");
    EXPECT_EQ(changes[0].incident.xid, r.xid);
    EXPECT_EQ(changes[0].incident.severity, r.severity);
    EXPECT_NE(r.severity, Severity::kHealthy);
  }
  EXPECT_GE(hardware, 12);
}

TEST(XidRulesTest, SeveritiesOfKeyXids) {
  EXPECT_EQ(FindXidRule(79)->severity, Severity::kFatal);
  EXPECT_EQ(FindXidRule(95)->severity, Severity::kFatal);
  EXPECT_EQ(FindXidRule(48)->severity, Severity::kFatal);
  EXPECT_EQ(FindXidRule(74)->severity, Severity::kUnhealthy);
  EXPECT_EQ(FindXidRule(64)->severity, Severity::kUnhealthy);
  EXPECT_EQ(FindXidRule(92)->severity, Severity::kDegraded);
  for (unsigned app : {13u, 31u, 43u, 45u})
    EXPECT_EQ(FindXidRule(app)->cls, XidClass::kApplication);
  EXPECT_EQ(FindXidRule(63)->cls, XidClass::kInformational);
  EXPECT_EQ(FindXidRule(9999), nullptr);
}

TEST(XidRulesTest, InformationalAndUnknownXidsOpenNothing) {
  Fixture f;
  EXPECT_TRUE(f.classifier.OnXid(Xid(63), kStart).empty());
  EXPECT_TRUE(f.classifier.OnXid(Xid(154), kStart).empty());
  EXPECT_TRUE(f.classifier.OnXid(Xid(12345), kStart).empty());
  EXPECT_TRUE(f.classifier.OpenIncidents().empty());
}

TEST(XidRulesTest, SingleApplicationXidDoesNotIsolate) {
  for (unsigned xid : {13u, 31u, 43u, 45u}) {
    Fixture f;
    EXPECT_TRUE(f.classifier.OnXid(Xid(xid), kStart).empty()) << xid;
    EXPECT_EQ(f.classifier.GpuSeverity("GPU-0"), Severity::kHealthy);
  }
}

TEST(XidRulesTest, ApplicationXidsRepeatedWithinTheWindowIsolate) {
  HealthConfig config;
  config.app_xid_repeats = 3;
  config.app_xid_window_s = 60;
  Fixture f(config);
  EXPECT_TRUE(f.classifier.OnXid(Xid(13), kStart).empty());
  EXPECT_TRUE(f.classifier.OnXid(Xid(31), kStart + 10).empty());
  auto changes = f.classifier.OnXid(Xid(13), kStart + 20);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].incident.cause, "xid-application-repeated");
  EXPECT_EQ(changes[0].incident.severity, Severity::kUnhealthy);
  // A fourth repeat is the same incident.
  EXPECT_TRUE(f.classifier.OnXid(Xid(43), kStart + 21).empty());
  ASSERT_EQ(f.classifier.OpenIncidents().size(), 1u);
  EXPECT_EQ(f.classifier.OpenIncidents()[0].occurrences, 2);
}

TEST(XidRulesTest, ApplicationXidsSpreadBeyondTheWindowDoNotIsolate) {
  HealthConfig config;
  config.app_xid_repeats = 3;
  config.app_xid_window_s = 60;
  Fixture f(config);
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(f.classifier.OnXid(Xid(13), kStart + i * 40).empty()) << i;
  }
}

TEST(XidRulesTest, ApplicationXidsOnDifferentGpusDoNotAddUp) {
  HealthConfig config;
  config.app_xid_repeats = 2;
  Fixture f(config);
  XidEvent other = Xid(13);
  other.gpu_index = 1;
  other.gpu_uuid = "GPU-1";
  EXPECT_TRUE(f.classifier.OnXid(Xid(13), kStart).empty());
  EXPECT_TRUE(f.classifier.OnXid(other, kStart + 1).empty());
}

TEST(XidRulesTest, RepeatedHardwareXidIsOneIncident) {
  Fixture f;
  EXPECT_EQ(f.classifier.OnXid(Xid(79), kStart).size(), 1u);
  EXPECT_TRUE(f.classifier.OnXid(Xid(79), kStart + 1).empty());
  EXPECT_EQ(f.classifier.OnXid(Xid(48), kStart + 2).size(), 1u);  // another cause
  auto open = f.classifier.OpenIncidents();
  ASSERT_EQ(open.size(), 2u);
  EXPECT_EQ(open[0].xid, 79u);
  EXPECT_EQ(open[0].occurrences, 2);
  EXPECT_EQ(open[1].xid, 48u);
}

TEST(XidRulesTest, XidIncidentsAreStickyUnlessConfigured) {
  Fixture sticky;
  sticky.classifier.OnXid(Xid(79), kStart);
  double t = kStart + 1;
  EXPECT_TRUE(sticky.Feed(Healthy(), 100, t).empty());
  EXPECT_EQ(sticky.classifier.OpenIncidents().size(), 1u);

  HealthConfig config;
  config.xid_clear_after_s = 30;
  Fixture clears(config);
  clears.classifier.OnXid(Xid(74), kStart);
  t = kStart + 1;
  auto changes = clears.Feed(Healthy(), 40, t);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, IncidentChange::Kind::kClosed);
  EXPECT_GE(*changes[0].incident.closed_at - changes[0].incident.last_seen, 30);
}

TEST(DebounceTest, BadSamplesBelowTheThresholdOpenNothing) {
  HealthConfig config;
  config.debounce_samples = 3;
  Fixture f(config);
  double t = kStart;
  GpuSample hot = Healthy();
  hot.clock_event_reasons = nvmlClocksThrottleReasonHwThermalSlowdown;
  // bad, bad, good, bad, bad, good: never three in a row.
  for (int round = 0; round < 5; ++round) {
    EXPECT_TRUE(f.Feed(hot, 2, t).empty());
    EXPECT_TRUE(f.Feed(Healthy(), 1, t).empty());
  }
}

TEST(DebounceTest, IncidentClosesAfterClearAfterOfGoodSamples) {
  HealthConfig config;
  config.clear_after_s = 10;
  Fixture f(config);
  double t = kStart;
  GpuSample narrow = Healthy();
  narrow.pcie_width_current = 4;
  ASSERT_EQ(f.Feed(narrow, 3, t).size(), 1u);
  double last_bad = t - 1;
  EXPECT_TRUE(f.Feed(Healthy(), 9, t).empty());  // good for 9 s: still open
  auto changes = f.Feed(Healthy(), 2, t);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, IncidentChange::Kind::kClosed);
  EXPECT_GE(*changes[0].incident.closed_at - last_bad, 10);
  EXPECT_EQ(f.classifier.ClosedIncidents().size(), 1u);
  EXPECT_EQ(f.classifier.GpuSeverity("GPU-0"), Severity::kHealthy);
}

TEST(DedupTest, FlappingNvLinkCounterIsOneIncident) {
  HealthConfig config;
  config.nvlink_error_window_s = 10;
  config.clear_after_s = 60;
  Fixture f(config, 4);
  double t = kStart;
  GpuSample s = Healthy(4);
  int opened = 0;
  // Five minutes of a link that errs in bursts: 3 s of errors, 5 s quiet, repeating.
  for (int i = 0; i < 300; ++i) {
    if (i % 8 < 3) s.nvlinks[0].replay_errors += 7;
    for (const auto& c : f.classifier.OnSample(s, t)) {
      if (c.kind == IncidentChange::Kind::kOpened) ++opened;
    }
    t += 1;
  }
  EXPECT_EQ(opened, 1);
  auto open = f.classifier.OpenIncidents();
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].cause, "nvlink-errors");
  EXPECT_GT(open[0].occurrences, 100);
}

TEST(DedupTest, PersistentFaultIsOneIncidentCountingOccurrences) {
  Fixture f;
  double t = kStart;
  GpuSample s = Healthy();
  s.remap->pending = true;
  auto changes = f.Feed(s, 50, t);
  ASSERT_EQ(changes.size(), 1u);
  ASSERT_EQ(f.classifier.OpenIncidents().size(), 1u);
  EXPECT_EQ(f.classifier.OpenIncidents()[0].occurrences, 50);
  EXPECT_EQ(f.classifier.OpenIncidents()[0].last_seen, t - 1);
}

TEST(FeatureGateTest, NvLinkChecksSkipPcieGpus) {
  Fixture f({}, 0);  // no NVLink
  double t = kStart;
  GpuSample s = Healthy(0);
  // A PCIe card reporting odd NVLink data must not be judged on it.
  s.nvlinks.push_back({0, false, 100, 0, 0, 0});
  EXPECT_TRUE(f.Feed(s, 5, t).empty());
  s.nvlinks[0].replay_errors = 500;
  EXPECT_TRUE(f.Feed(s, 5, t).empty());
}

TEST(FeatureGateTest, MissingFieldsAreNotApplicable) {
  HealthConfig config;
  config.clear_after_s = 0;
  Fixture f(config);
  double t = kStart;
  GpuSample bad = Healthy();
  bad.ecc_volatile_uncorrected = 1;
  ASSERT_EQ(f.Feed(bad, 1, t).size(), 1u);
  // A sample without ECC data (query failed) neither keeps nor clears the incident...
  GpuSample unknown = Healthy();
  unknown.ecc_volatile_uncorrected.reset();
  EXPECT_TRUE(f.Feed(unknown, 5, t).empty());
  EXPECT_EQ(f.classifier.OpenIncidents().size(), 1u);
  // ...a good one does.
  EXPECT_EQ(f.Feed(Healthy(), 1, t).size(), 1u);
}

TEST(FeatureGateTest, GpuWithoutTheFeatureIsNotChecked) {
  HealthClassifier c({}, kBoot);
  Inventory inv;
  inv.gpus.push_back(Gpu());
  inv.gpus[0].features["ecc"] = false;
  c.SetInventory(inv);
  GpuSample s = Healthy();
  s.ecc_volatile_uncorrected = 9;
  EXPECT_TRUE(c.OnSample(s, kStart).empty());
}

TEST(FeatureGateTest, LostGpuSkipsOtherChecks) {
  Fixture f;
  double t = kStart;
  GpuSample lost;
  lost.index = 0;
  lost.uuid = "GPU-0";
  lost.lost = true;
  auto changes = f.Feed(lost, 5, t);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].incident.cause, "gpu-lost");
}

TEST(FeatureGateTest, IdleGpuAtLowerPcieGenerationIsHealthy) {
  Fixture f;
  double t = kStart;
  GpuSample idle = Healthy();
  idle.gpu_utilization = 0;
  idle.pcie_gen_current = 1;
  EXPECT_TRUE(f.Feed(idle, 10, t).empty());
}

TEST(BootGraceTest, GraceDefersDegradedChecksButNotHardFaults) {
  HealthConfig config;
  config.boot_grace_s = 120;
  Fixture f(config, 0, /*boot=*/kStart);
  double t = kStart + 1;
  GpuSample s = Healthy();
  s.pcie_width_current = 8;
  EXPECT_TRUE(f.Feed(s, 60, t).empty());  // within grace
  // Hard faults are never deferred.
  EXPECT_EQ(f.classifier.OnXid(Xid(79), t).size(), 1u);
  // After the grace period the still-narrow link opens its incident on the next sample.
  t = kStart + 121;
  auto changes = f.Feed(s, 1, t);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].incident.cause, "pcie-link-width");
}

TEST(BootGraceTest, GraceDoesNotDeferGpuLost) {
  HealthConfig config;
  config.boot_grace_s = 1000;
  Fixture f(config, 0, /*boot=*/kStart);
  double t = kStart + 1;
  GpuSample lost = Healthy();
  lost.lost = true;
  EXPECT_EQ(f.Feed(lost, 1, t).size(), 1u);
}

// --- evidence: what each incident carries

// The incident `changes` opened for `cause`; fails the test when there is none.
std::optional<GpuIncident> Opened(const std::vector<IncidentChange>& changes,
                                  const std::string& cause) {
  for (const IncidentChange& c : changes)
    if (c.kind == IncidentChange::Kind::kOpened && c.incident.cause == cause) return c.incident;
  ADD_FAILURE() << "no " << cause << " incident opened";
  return std::nullopt;
}

TEST(EvidenceTest, UncorrectableEccCarriesTheCountsTheRemapStateAndTheRule) {
  Fixture f;
  double t = kStart;
  GpuSample s = Healthy();
  s.ecc_volatile_corrected = 12;
  s.ecc_volatile_uncorrected = 4;
  s.ecc_aggregate_corrected = 17;
  s.ecc_aggregate_uncorrected = 5;
  s.remap = RemapSample{1, 2, true, false};
  const std::optional<GpuIncident> i = Opened(f.Feed(s, 1, t), "ecc-uncorrectable");
  ASSERT_TRUE(i);
  ASSERT_EQ(i->evidence.size(), 3u);
  EXPECT_EQ(std::get<EccEvidence>(i->evidence[0]), (EccEvidence{12, 4, 17, 5}));
  EXPECT_EQ(std::get<RowRemapEvidence>(i->evidence[1]), (RowRemapEvidence{1, 2, true, false}));
  const auto& rule = std::get<RuleEvidence>(i->evidence[2]);
  EXPECT_EQ(rule.rule, "ecc-uncorrectable");
  EXPECT_EQ(rule.severity, "unhealthy");
  EXPECT_EQ(rule.threshold, "volatile double-bit ECC count > 0");
}

TEST(EvidenceTest, HardwareXidCarriesItsMeaningAndTheRule) {
  Fixture f;
  auto changes = f.classifier.OnXid(Xid(79), kStart);
  const std::optional<GpuIncident> i = Opened(changes, "xid-hardware");
  ASSERT_TRUE(i);
  ASSERT_EQ(i->evidence.size(), 2u);
  EXPECT_EQ(
      std::get<XidEvidence>(i->evidence[0]),
      (XidEvidence{79, "GPU has fallen off the bus", "the GPU is no longer reachable over PCIe",
                   "hardware", "nvml-event", std::nullopt}));
  EXPECT_EQ(std::get<RuleEvidence>(i->evidence[1]),
            (RuleEvidence{"xid-hardware", "fatal", "a hardware Xid; severity from the Xid table",
                          "Xid 79 is a hardware Xid, fatal in the Xid table"}));
}

TEST(EvidenceTest, EccXidCarriesTheLatestEccCountsAndNvLinkXidTheLinks) {
  Fixture f({}, 4);
  double t = kStart;
  GpuSample s = Healthy(4);
  s.ecc_volatile_corrected = 7;
  s.ecc_aggregate_corrected = 30;
  s.ecc_aggregate_uncorrected = 1;
  s.nvlinks[3].replay_errors = 40;
  s.nvlinks[3].crc_flit_errors = 3;
  f.Feed(s, 1, t);
  const std::optional<GpuIncident> dbe = Opened(f.classifier.OnXid(Xid(48), t), "xid-hardware");
  ASSERT_TRUE(dbe);
  ASSERT_EQ(dbe->evidence.size(), 4u);
  EXPECT_EQ(std::get<XidEvidence>(dbe->evidence[0]).name, "Double-bit ECC error");
  EXPECT_EQ(std::get<EccEvidence>(dbe->evidence[1]), (EccEvidence{7, 0, 30, 1}));
  EXPECT_EQ(std::get<RowRemapEvidence>(dbe->evidence[2]), RowRemapEvidence{});
  EXPECT_EQ(std::get<RuleEvidence>(dbe->evidence[3]).threshold,
            "Xid 48 is a hardware Xid, fatal in the Xid table");
  const std::optional<GpuIncident> link = Opened(f.classifier.OnXid(Xid(74), t), "xid-hardware");
  ASSERT_TRUE(link);
  ASSERT_EQ(link->evidence.size(), 3u);
  EXPECT_EQ(std::get<NvLinkEvidence>(link->evidence[1]),
            (NvLinkEvidence{{{3, true, 40, 0, 3, 0}}, {}}));
  EXPECT_EQ(std::get<RuleEvidence>(link->evidence[2]).severity, "unhealthy");
}

TEST(EvidenceTest, NvLinkErrorsAndLinksDownCarryTheCounters) {
  HealthConfig config;
  config.debounce_samples = 1;
  Fixture f(config, 4);
  double t = kStart;
  GpuSample s = Healthy(4);
  f.Feed(s, 1, t);
  s.nvlinks[1].crc_flit_errors = 15;
  s.nvlinks[2].active = false;
  auto changes = f.Feed(s, 1, t);
  const std::optional<GpuIncident> errors = Opened(changes, "nvlink-errors");
  const std::optional<GpuIncident> down = Opened(changes, "nvlink-down");
  ASSERT_TRUE(errors);
  ASSERT_TRUE(down);
  const NvLinkEvidence want{{{1, true, 0, 0, 15, 0}, {2, false, 0, 0, 0, 0}}, {2}};
  EXPECT_EQ(std::get<NvLinkEvidence>(errors->evidence[0]), want);
  EXPECT_EQ(std::get<NvLinkEvidence>(down->evidence[0]), want);
  EXPECT_EQ(std::get<RuleEvidence>(errors->evidence[1]).threshold,
            "1 sample with counters grown within 10 s");
}

TEST(EvidenceTest, ThermalIncidentsCarryTheReadingsAndThresholds) {
  Fixture f;
  double t = kStart;
  GpuSample s = Healthy();
  s.temperature_c = 93;
  s.clock_event_reasons = nvmlClocksThrottleReasonHwThermalSlowdown;
  auto changes = f.Feed(s, 3, t);
  const std::optional<GpuIncident> critical = Opened(changes, "thermal-critical");
  const std::optional<GpuIncident> slowdown = Opened(changes, "thermal-slowdown");
  ASSERT_TRUE(critical);
  ASSERT_TRUE(slowdown);
  EXPECT_EQ(critical->severity, Severity::kUnhealthy);
  const ThermalEvidence want{93, 90, 95, {"hw_thermal_slowdown"}};
  EXPECT_EQ(std::get<ThermalEvidence>(critical->evidence[0]), want);
  EXPECT_EQ(std::get<ThermalEvidence>(slowdown->evidence[0]), want);
  EXPECT_EQ(std::get<RuleEvidence>(critical->evidence[1]).threshold,
            "3 consecutive samples within 5 C of the shutdown temperature");
  EXPECT_EQ(critical->message, "temperature 93 C within 5 C of the shutdown threshold of 95 C");
}

TEST(EvidenceTest, PcieRecoveryAndPowerIncidentsCarryTheirReadings) {
  HealthConfig config;
  config.debounce_samples = 1;
  Fixture f(config);
  double t = kStart;
  GpuSample s = Healthy();
  s.pcie_width_current = 8;
  s.pcie_replays = 9;
  s.recovery_action = NVML_GPU_RECOVERY_ACTION_NODE_REBOOT;
  s.clock_event_reasons = nvmlClocksThrottleReasonHwPowerBrakeSlowdown;
  auto changes = f.Feed(s, 1, t);
  const std::optional<GpuIncident> pcie = Opened(changes, "pcie-link-width");
  const std::optional<GpuIncident> reboot = Opened(changes, "recovery-action-reboot");
  const std::optional<GpuIncident> power = Opened(changes, "power-slowdown");
  ASSERT_TRUE(pcie && reboot && power);
  EXPECT_EQ(std::get<PcieEvidence>(pcie->evidence[0]), (PcieEvidence{9, 8, 16, 5, 5}));
  EXPECT_EQ(std::get<RecoveryActionEvidence>(reboot->evidence[0]),
            (RecoveryActionEvidence{2, "node reboot"}));
  EXPECT_EQ(std::get<PowerEvidence>(power->evidence[0]),
            (PowerEvidence{400, {"hw_power_brake_slowdown"}}));
}

TEST(EvidenceTest, RepeatedApplicationXidsCarryTheCountAndTheWindow) {
  Fixture f;
  std::vector<IncidentChange> changes;
  for (int i = 0; i < 3; ++i) {
    auto c = f.classifier.OnXid(Xid(i == 2 ? 31 : 13), kStart + i);
    changes.insert(changes.end(), c.begin(), c.end());
  }
  const std::optional<GpuIncident> i = Opened(changes, "xid-application-repeated");
  ASSERT_TRUE(i);
  const auto& xid = std::get<XidEvidence>(i->evidence[0]);
  EXPECT_EQ(xid.xid, 31u);
  EXPECT_EQ(xid.xid_class, "application");
  EXPECT_EQ(xid.count, 3);
  EXPECT_EQ(std::get<RuleEvidence>(i->evidence[1]).threshold,
            "3 application Xids on one GPU within 600 s");
}

TEST(ClassifierTest, IncidentIdsIncrease) {
  Fixture f;
  auto a = f.classifier.OnXid(Xid(79), kStart);
  auto b = f.classifier.OnXid(Xid(64), kStart);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_LT(a[0].incident.id, b[0].incident.id);
}

TEST(ClassifierTest, SeverityNames) {
  EXPECT_EQ(SeverityName(Severity::kHealthy), "healthy");
  EXPECT_EQ(SeverityName(Severity::kDegraded), "degraded");
  EXPECT_EQ(SeverityName(Severity::kUnhealthy), "unhealthy");
  EXPECT_EQ(SeverityName(Severity::kFatal), "fatal");
}

}  // namespace
}  // namespace chamber::agent
