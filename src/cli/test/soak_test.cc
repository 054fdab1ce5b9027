#include "cli/soak.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace chamber::cli {
namespace {

// Hourly samples 0..hours, each made by `at(hour)`.
template <typename F>
std::vector<SoakSample> Hourly(int hours, F at) {
  std::vector<SoakSample> out;
  for (int h = 0; h <= hours; ++h) {
    SoakSample s{.hours = static_cast<double>(h),
                 .cycles = h * 60,
                 .rss_mib = 400,
                 .heap_mib = 100,
                 .open_files = 40,
                 .history_mib = h * 0.5,
                 .cycle_ms_p50 = 20,
                 .cycle_ms_p95 = 30};
    at(h, s);
    out.push_back(s);
  }
  return out;
}

const SoakCheck& Check(const std::vector<SoakCheck>& checks, const std::string& name) {
  for (const SoakCheck& c : checks)
    if (c.name == name) return c;
  throw std::runtime_error("no check " + name);
}

TEST(JudgeSoak, AFlatRunPasses) {
  const auto samples = Hourly(24, [](int h, SoakSample& s) {
    s.rss_mib = 400 + (h % 3);  // noise within a percent
    s.cycle_ms_p50 = 20 + (h % 2);
  });
  const auto checks = JudgeSoak(samples, SoakLimits{});
  ASSERT_EQ(checks.size(), 4u);
  for (const SoakCheck& c : checks) EXPECT_TRUE(c.ok) << c.name << ": " << c.detail;
}

TEST(JudgeSoak, GrowthDuringTheWarmUpIsNotJudged) {
  const auto samples = Hourly(24, [](int h, SoakSample& s) {
    s.rss_mib = h <= 4 ? 100.0 * h : 400;
    s.open_files = h <= 4 ? 10 * h : 40;
    s.cycle_ms_p50 = h <= 4 ? 5.0 * h : 20;
  });
  for (const SoakCheck& c : JudgeSoak(samples, SoakLimits{})) EXPECT_TRUE(c.ok) << c.name;
}

TEST(JudgeSoak, ALeakAfterTheWarmUpFails) {
  // 1.5 MiB an hour over the 19 hours judged (5 to 24): 6.9% of the mean.
  const auto samples =
      Hourly(24, [](int h, SoakSample& s) { s.heap_mib = 400 + std::max(0, h - 4) * 1.5; });
  const auto checks = JudgeSoak(samples, SoakLimits{});
  EXPECT_FALSE(Check(checks, "memory").ok);
  EXPECT_TRUE(Check(checks, "resident memory").ok);
  EXPECT_TRUE(Check(checks, "open files").ok);
  EXPECT_TRUE(Check(checks, "cycle time").ok);
  EXPECT_EQ(Check(checks, "memory").detail,
            "+1.500 MiB per simulated hour beyond what the work held explains (0.0000 MiB per "
            "workload): +6.9% of the mean 415.8 MiB over 19.0 h (limit +5.0%); 401.5 to 430.0 "
            "MiB while the workloads held went from 0 to 0");
}

// Workloads that rise and fall with the day, and memory that follows them: the work explains
// the change, and only a trend beyond it fails.
TEST(JudgeSoak, MemoryThatFollowsTheWorkIsNotALeak) {
  const auto load = [](int h, SoakSample& s) {
    s.running = 1000 + static_cast<int64_t>(400 * std::sin(h / 3.8));
    s.pending = h % 5;
  };
  const auto follows = Hourly(24, [&](int h, SoakSample& s) {
    load(h, s);
    s.heap_mib = 300 + 0.05 * static_cast<double>(s.running + s.pending);
    s.cycle_ms_p50 = 2 + 0.01 * static_cast<double>(s.running + s.pending);
  });
  for (const SoakCheck& c : JudgeSoak(follows, SoakLimits{})) EXPECT_TRUE(c.ok) << c.detail;
  const std::vector<SoakSample> judged(follows.begin() + 5, follows.end());
  const SoakTrend trend = FitSoakTrend(judged, &SoakSample::heap_mib);
  EXPECT_NEAR(trend.per_workload, 0.05, 1e-9);
  EXPECT_NEAR(trend.per_hour, 0, 1e-9);

  const auto leaks = Hourly(24, [&](int h, SoakSample& s) {
    load(h, s);
    s.heap_mib = 300 + 0.05 * static_cast<double>(s.running + s.pending) + 1.5 * h;
  });
  const auto checks = JudgeSoak(leaks, SoakLimits{});
  const SoakCheck& memory = Check(checks, "memory");
  EXPECT_FALSE(memory.ok);
  EXPECT_EQ(memory.detail.rfind("+1.500 MiB per simulated hour", 0), 0u) << memory.detail;
}

TEST(JudgeSoak, OpenFilesThatKeepGrowingFail) {
  const auto samples = Hourly(24, [](int h, SoakSample& s) { s.open_files = 40 + h; });
  const auto checks = JudgeSoak(samples, SoakLimits{});
  EXPECT_FALSE(Check(checks, "open files").ok);
  EXPECT_EQ(Check(checks, "open files").detail, "44 at 4.0 h, at most 64 after (+20; limit +8)");
  // Sockets the server is still closing come and go within the allowance.
  const auto wobble = Hourly(24, [](int h, SoakSample& s) { s.open_files = 40 + (h % 2) * 6; });
  EXPECT_TRUE(Check(JudgeSoak(wobble, SoakLimits{}), "open files").ok);
}

TEST(JudgeSoak, CycleTimeThatGrowsFails) {
  // 0.8 ms an hour over the 19 hours judged: 15.2 ms on a mean of 28.4 ms.
  const auto samples =
      Hourly(24, [](int h, SoakSample& s) { s.cycle_ms_p50 = 20 + 0.8 * std::max(0, h - 4); });
  const auto checks = JudgeSoak(samples, SoakLimits{});
  EXPECT_FALSE(Check(checks, "cycle time").ok);
  EXPECT_EQ(Check(checks, "cycle time").detail,
            "+0.800 ms per simulated hour beyond what the work held explains (0.0000 ms per "
            "workload): +53.5% of the mean 28.40 ms over 19.0 h (limit +50.0%); 20.80 to 36.00 "
            "ms while the workloads held went from 0 to 0");
  SoakLimits lenient;
  lenient.max_cycle_growth = 0.6;
  EXPECT_TRUE(Check(JudgeSoak(samples, lenient), "cycle time").ok);
}

TEST(JudgeSoak, TooFewSamplesAfterTheWarmUpJudgeNothing) {
  const auto samples = Hourly(5, [](int, SoakSample&) {});
  const auto checks = JudgeSoak(samples, SoakLimits{});
  ASSERT_EQ(checks.size(), 4u);
  for (const SoakCheck& c : checks) {
    EXPECT_FALSE(c.ok);
    EXPECT_EQ(c.detail,
              "fewer than two samples after the warm-up of 4.0 h: run longer or sample more "
              "often");
  }
}

TEST(SoakReport, JsonAndPlotHoldEverySample) {
  const auto samples = Hourly(6, [](int h, SoakSample& s) { s.rss_mib = 400 + h; });
  SoakLimits limits;
  limits.warmup_hours = 1;
  const auto checks = JudgeSoak(samples, limits);
  const nlohmann::json j = SoakJson(samples, checks, {{"gpus", 264}});
  EXPECT_EQ(j["samples"].size(), 7u);
  EXPECT_EQ(j["samples"][6]["rssMiB"], 406.0);
  EXPECT_EQ(j["options"]["gpus"], 264);
  EXPECT_TRUE(j["ok"]);  // 406 MiB over 401 is +1.2%
  const std::string svg = SoakSvg(samples, limits.warmup_hours, "soak");
  size_t lines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos;
       at = svg.find("<polyline", at + 1))
    ++lines;
  EXPECT_EQ(lines, 4u);  // RSS, heap, cycle p50, cycle p95
  EXPECT_NE(svg.find("<title>warm-up</title>"), std::string::npos);
}

}  // namespace
}  // namespace chamber::cli
