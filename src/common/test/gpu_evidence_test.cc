#include "common/gpu_evidence.h"

#include <gtest/gtest.h>

#include "common/gpu_health_rules.h"

namespace chamber {
namespace {

using nlohmann::json;

EvidenceList OneOfEach() {
  ActionEvidence action;
  action.gpu_fenced = true;
  action.taint = "NoSchedule";
  action.workloads_requeued = {"team-a/train"};
  action.workloads_requeued_count = 3;
  return {
      XidEvidence{79, "GPU has fallen off the bus", "the GPU is no longer reachable over PCIe",
                  "hardware", "nvml-event", std::nullopt},
      EccEvidence{12, 4, 17, 4},
      RowRemapEvidence{1, 2, true, false},
      NvLinkEvidence{{{1, true, 40, 0, 3, 0}}, {2}},
      PcieEvidence{7, 8, 16, 5, 5},
      ThermalEvidence{93, 90, 95, {"hw_thermal_slowdown"}},
      PowerEvidence{612.5, {"hw_power_brake_slowdown"}},
      RecoveryActionEvidence{2, "node reboot"},
      RuleEvidence{"xid-hardware", "fatal", "a hardware Xid; severity from the Xid table",
                   "Xid 79 is a hardware Xid, fatal in the Xid table"},
      action,
  };
}

TEST(EvidenceJsonTest, EveryTypeHasItsFieldsAndRoundTrips) {
  const EvidenceList list = OneOfEach();
  const json j = EvidenceListJson(list);
  ASSERT_EQ(j.size(), std::variant_size_v<Evidence>);
  EXPECT_EQ(j[0], json::parse(R"({"type":"xid","xid":79,"name":"GPU has fallen off the bus",
      "meaning":"the GPU is no longer reachable over PCIe","class":"hardware",
      "source":"nvml-event","count":null})"));
  EXPECT_EQ(j[1], json::parse(R"({"type":"ecc","volatile_single_bit":12,"volatile_double_bit":4,
      "aggregate_single_bit":17,"aggregate_double_bit":4})"));
  EXPECT_EQ(j[2], json::parse(R"({"type":"row_remap","single_bit_rows":1,"double_bit_rows":2,
      "pending":true,"failed":false})"));
  EXPECT_EQ(j[3], json::parse(R"({"type":"nvlink","links":[{"link":1,"active":true,
      "replay_errors":40,"recovery_errors":0,"crc_flit_errors":3,"crc_data_errors":0}],
      "links_down":[2]})"));
  EXPECT_EQ(j[4], json::parse(R"({"type":"pcie","replays":7,"width_current":8,"width_max":16,
      "gen_current":5,"gen_max":5})"));
  EXPECT_EQ(j[5], json::parse(R"({"type":"thermal","temperature_c":93,"slowdown_c":90,
      "shutdown_c":95,"clock_event_reasons":["hw_thermal_slowdown"]})"));
  EXPECT_EQ(j[6], json::parse(R"({"type":"power","power_watts":612.5,
      "clock_event_reasons":["hw_power_brake_slowdown"]})"));
  EXPECT_EQ(j[7], json::parse(R"({"type":"recovery_action","action":2,"name":"node reboot"})"));
  EXPECT_EQ(j[8]["type"], "rule");
  EXPECT_EQ(j[8]["rule"], "xid-hardware");
  EXPECT_EQ(j[8]["threshold"], "Xid 79 is a hardware Xid, fatal in the Xid table");
  EXPECT_EQ(j[9], json::parse(R"({"type":"action","gpu_fenced":true,"taint":"NoSchedule",
      "breaker_held":false,"workloads_requeued":["team-a/train"],
      "workloads_requeued_count":3})"));
  Result<EvidenceList> back = ParseEvidenceList(j, "e");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, list);
}

TEST(EvidenceJsonTest, MistypedFieldsNameTheirPathAndUnknownTypesAreSkipped) {
  Result<EvidenceList> r = ParseEvidenceList(
      json::parse(R"([{"type":"ecc","volatile_double_bit":-1}])"), "report.incidents[0].evidence");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "report.incidents[0].evidence[0].volatile_double_bit: expected an unsigned integer");
  r = ParseEvidenceList(json::parse(R"([{"xid":79}])"), "e");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "e[0].type: expected a string");
  r = ParseEvidenceList(json::parse(R"([{"type":"nvlink","links":[{"link":"one"}]}])"), "e");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "e[0].links[0].link: expected an integer");
  // Integers too large for their field were cut to fit (an Xid of 2^32 + 79 read as 79).
  r = ParseEvidenceList(json::parse(R"([{"type":"xid","xid":4294967375}])"), "e");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "e[0].xid: out of range");
  r = ParseEvidenceList(json::parse(R"([{"type":"xid","xid":79,"count":5000000000}])"), "e");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "e[0].count: out of range");
  r = ParseEvidenceList(json::parse(R"([{"type":"row_remap","pending":"yes"}])"), "e");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "e[0].pending: expected true or false");
  r = ParseEvidenceList(json::parse(R"([{"type":"fan","rpm":0},{"type":"xid","xid":48}])"), "e");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ(std::get<XidEvidence>((*r)[0]).xid, 48u);
  EXPECT_FALSE(ParseEvidenceList(json::object(), "e").ok());
}

TEST(EvidenceTextTest, OneLinePerItem) {
  const EvidenceList list = OneOfEach();
  std::vector<std::string> lines;
  for (const Evidence& e : list) lines.push_back(EvidenceText(e));
  EXPECT_EQ(lines[0],
            "Xid 79 (GPU has fallen off the bus): the GPU is no longer reachable over PCIe");
  EXPECT_EQ(lines[1],
            "ECC double-bit 4 volatile, 4 aggregate; single-bit 12 volatile, 17 aggregate");
  EXPECT_EQ(lines[2],
            "row remap pending until a GPU reset; rows remapped: 2 for double-bit, 1 for "
            "single-bit errors");
  EXPECT_EQ(lines[3],
            "NVLink 1: replay 40, recovery 0, CRC flit 3, CRC data 0; NVLink links down: 2");
  EXPECT_EQ(lines[4], "PCIe x8 of x16, Gen5 of Gen5, 7 replays");
  EXPECT_EQ(lines[5],
            "temperature 93 C (slowdown at 90 C, shutdown at 95 C); clocks held by "
            "hw_thermal_slowdown");
  EXPECT_EQ(lines[6], "power 613 W; clocks held by hw_power_brake_slowdown");
  EXPECT_EQ(lines[7], "driver recovery action: node reboot (2)");
  EXPECT_EQ(lines[8],
            "rule xid-hardware (fatal): Xid 79 is a hardware Xid, fatal in the Xid table");
  EXPECT_EQ(lines[9],
            "GPU fenced, node tainted NoSchedule, 3 workloads requeued (team-a/train and 2 more)");
  EXPECT_EQ(EvidenceText(ActionEvidence{false, "", true, {}, 0}),
            "not fenced: the fleet circuit breaker held the fence back");
  EXPECT_EQ(EvidenceText(EccEvidence{std::nullopt, 3, std::nullopt, std::nullopt}),
            "ECC double-bit 3 volatile, - aggregate; single-bit - volatile, - aggregate");
}

TEST(EvidenceTextTest, SummaryStaysWithinTheLimit) {
  const EvidenceList list = OneOfEach();
  const std::string full = EvidenceSummary(list, 100000);
  EXPECT_EQ(full.rfind("Xid 79 (GPU has fallen off the bus)", 0), 0u) << full;
  EXPECT_NE(full.find("; ECC double-bit 4 volatile"), std::string::npos) << full;
  const std::string cut = EvidenceSummary(list, 200);
  EXPECT_EQ(cut.size(), 200u);
  EXPECT_EQ(cut.substr(197), "...");
  // Never inside a UTF-8 character: "é" is two bytes.
  EXPECT_EQ(LimitText("ab\xC3\xA9"
                      "cdef",
                      6),
            "ab...");
  EXPECT_EQ(LimitText("short", 6), "short");
}

TEST(XidTableTest, CommonXidsHaveAMeaningAndAClass) {
  for (unsigned xid :
       {13u, 31u, 43u, 45u, 48u, 61u, 62u, 63u, 64u, 74u, 79u, 92u, 94u, 95u, 119u, 120u}) {
    SCOPED_TRACE(xid);
    const XidRule* r = FindXidRule(xid);
    ASSERT_NE(r, nullptr);
    EXPECT_FALSE(r->name.empty());
    EXPECT_FALSE(r->meaning.empty());
  }
  EXPECT_EQ(FindXidRule(61)->cls, XidClass::kHardware);
  EXPECT_EQ(FindXidRule(61)->severity, GpuSeverity::kUnhealthy);
}

TEST(RuleThresholdTest, NamesTheNumbers) {
  RuleSettings s;
  s.debounce_samples = 2;
  s.app_xid_repeats = 4;
  s.app_xid_window_s = 300;
  EXPECT_EQ(RuleThreshold("xid-hardware", s, 79),
            "Xid 79 is a hardware Xid, fatal in the Xid table");
  EXPECT_EQ(RuleThreshold("xid-application-repeated", s),
            "4 application Xids on one GPU within 300 s");
  EXPECT_EQ(RuleThreshold("thermal-critical", s),
            "2 consecutive samples within 5 C of the shutdown temperature");
  EXPECT_EQ(RuleThreshold("ecc-uncorrectable", s), "volatile double-bit ECC count > 0");
  for (const HealthRule& r : HealthRules())
    EXPECT_FALSE(RuleThreshold(r.id, s, 79).empty()) << r.id;
}

}  // namespace
}  // namespace chamber
