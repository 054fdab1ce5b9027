#include "common/prometheus_text.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace chamber::prometheus {
namespace {

TEST(PrometheusTextTest, WritesHelpTypeAndSamples) {
  TextWriter w;
  w.Family("chamber_gpus", "GPUs by state.", MetricType::kGauge);
  w.Sample({{"state", "idle"}}, 12);
  w.Sample({{"state", "busy"}, {"pool", "h100"}}, 3.5);
  w.Family("chamber_preemptions_total", "Preemptions.", MetricType::kCounter);
  w.Sample(7);
  EXPECT_EQ(w.Take(),
            "# HELP chamber_gpus GPUs by state.\n"
            "# TYPE chamber_gpus gauge\n"
            "chamber_gpus{state=\"idle\"} 12\n"
            "chamber_gpus{state=\"busy\",pool=\"h100\"} 3.5\n"
            "# HELP chamber_preemptions_total Preemptions.\n"
            "# TYPE chamber_preemptions_total counter\n"
            "chamber_preemptions_total 7\n");
  EXPECT_EQ(w.Take(), "");
}

TEST(PrometheusTextTest, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  TextWriter w;
  w.Family("m", "line one\nback\\slash \"quoted\"", MetricType::kUntyped);
  w.Sample({{"node", "gpu-\"7\""}}, 1);
  EXPECT_EQ(w.Take(),
            "# HELP m line one\\nback\\\\slash \"quoted\"\n"
            "# TYPE m untyped\n"
            "m{node=\"gpu-\\\"7\\\"\"} 1\n");
}

TEST(PrometheusTextTest, FormatsSpecialAndExactValues) {
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(1e21), "1e+21");
  EXPECT_EQ(std::stod(FormatValue(1.0 / 3.0)), 1.0 / 3.0);
}

TEST(PrometheusTextTest, ValidatesNames) {
  EXPECT_TRUE(ValidName("chamber:gpu_hours_total"));
  EXPECT_TRUE(ValidName("_x9"));
  EXPECT_FALSE(ValidName("9x"));
  EXPECT_FALSE(ValidName(""));
  EXPECT_FALSE(ValidName("a-b"));
  EXPECT_FALSE(ValidName("a:b", /*allow_colon=*/false));
}

TEST(PrometheusTextTest, RejectsProgrammingErrors) {
  TextWriter w;
  EXPECT_THROW(w.Sample(1), std::invalid_argument);
  EXPECT_THROW(w.Family("bad-name", "", MetricType::kGauge), std::invalid_argument);
  w.Family("ok", "", MetricType::kGauge);
  EXPECT_THROW(w.Sample({{"bad label", "v"}}, 1), std::invalid_argument);
  EXPECT_THROW(w.Family("ok", "", MetricType::kGauge), std::invalid_argument);
}

}  // namespace
}  // namespace chamber::prometheus
