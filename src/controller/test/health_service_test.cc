#include "controller/health_service.h"

#include <gtest/gtest.h>

namespace chamber::controller::health {
namespace {

using nlohmann::json;

std::string Report(const std::string& node) {
  return json{{"kind", "chamber.io/agent-report/v1"},
              {"node", node},
              {"time", 1000.0},
              {"inventory", {{"gpus", json::array({{{"index", 0}, {"uuid", "GPU-0"}}})}}},
              {"samples", json::array()},
              {"incidents", json::array()},
              {"labels", {{"chamber.io/gpu.count", "1"}}}}
      .dump();
}

HealthService::Options Options() {
  HealthService::Options o;
  o.clock = [] { return 1000.0; };
  return o;
}

bool Reports(const std::string& metrics, const std::string& result, int n) {
  return metrics.find("chamber_health_reports_total{result=\"" + result + "\"} " +
                      std::to_string(n) + "\n") != std::string::npos;
}

TEST(HealthService, TokenBoundToANodeReportsForThatNodeOnly) {
  HealthService s(Options(), nullptr, nullptr);
  EXPECT_TRUE(s.PostReport(Report("gpu-a"), "agent", "gpu-a").ok());
  Status refused = s.PostReport(Report("gpu-b"), "agent", "gpu-a");
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(), "token bound to node gpu-a may not report for node gpu-b");
  // Tokens without a node (token file, older clusters) may report for any node.
  EXPECT_TRUE(s.PostReport(Report("gpu-b"), "agent", "").ok());
  const std::string m = s.Metrics();
  EXPECT_TRUE(Reports(m, "accepted", 2)) << m;
  EXPECT_TRUE(Reports(m, "rejected", 1)) << m;
  json nodes = s.View()["nodes"];
  ASSERT_EQ(nodes.size(), 2u) << nodes.dump();  // the refused report changed nothing
}

TEST(HealthService, MalformedReportIsRejectedBeforeTheNodeCheck) {
  HealthService s(Options(), nullptr, nullptr);
  Status bad = s.PostReport(R"({"kind":"chamber.io/agent-report/v1","node":7})", "agent", "n");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Reports(s.Metrics(), "rejected", 1));
}

}  // namespace
}  // namespace chamber::controller::health
