// `chamber config check` with chamberd's `pricing:` section.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli/command.h"
#include "cli/test/run_cli.h"

namespace chamber::cli {
namespace {

testing::Output RunCli(std::vector<std::string> args) {
  return testing::RunCli(std::move(args), [](CommandRegistry& r) { RegisterConfigCommand(r); });
}

TEST(ConfigCheckTest, ChecksAndPrintsThePricingSection) {
  const std::string path = ::testing::TempDir() + "/pricing-config.yaml";
  std::ofstream(path) << "cyclePeriod: 1s\n"
                         "pricing:\n"
                         "  currency: EUR\n"
                         "  rules:\n"
                         "    - gpuModel: NVIDIA-H100-80GB-HBM3\n"
                         "      nodeSelector: {cloud.google.com/gke-spot: true}\n"
                         "      pricePerGpuHour: 2.25\n";
  testing::Output o = RunCli({"config", "check", path});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("cyclePeriod: 1s\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("pricing:\n"
                       "  currency: EUR\n"
                       "  defaultPricePerGpuHour: 0\n"
                       "  rules:\n"
                       "  - gpuModel: \"NVIDIA-H100-80GB-HBM3\"\n"
                       "    nodeSelector:\n"
                       "      \"cloud.google.com/gke-spot\": \"true\"\n"
                       "    pricePerGpuHour: 2.25  # pricing: from the node's capacity-type "
                       "labels\n"),
            std::string::npos)
      << o.out;

  std::ofstream(path) << "pricing:\n  rules:\n    - pricePerGpuHour: -3\n";
  o = RunCli({"config", "check", path});
  EXPECT_EQ(o.code, kExitFailure);
  EXPECT_NE(
      o.err.find(path + ":3:24: field pricing.rules[0].pricePerGpuHour: must not be negative"),
      std::string::npos)
      << o.err;

  std::ofstream(path) << "cyclePeriod: 1s\n";
  o = RunCli({"config", "check", path});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out.find("pricing:"), std::string::npos) << "no section, none printed";
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace chamber::cli
