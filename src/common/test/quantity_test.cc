#include "common/quantity.h"

#include <string>

#include <gtest/gtest.h>

namespace chamber {
namespace {

TEST(QuantityTest, CpuMillicores) {
  EXPECT_EQ(*ParseCpuMilli("4"), 4000);
  EXPECT_EQ(*ParseCpuMilli("500m"), 500);
  EXPECT_EQ(*ParseCpuMilli("1.5"), 1500);
  EXPECT_EQ(*ParseCpuMilli("2k"), 2'000'000);
  EXPECT_EQ(*ParseCpuMilli("+2"), 2000);
  Result<int64_t> bad = ParseCpuMilli("4 cores");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "\"4 cores\": unknown CPU unit \" cores\"");
  bad = ParseCpuMilli("lots");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "\"lots\" is not a CPU quantity (use forms like 4, 500m, 1.5)");
  EXPECT_FALSE(ParseCpuMilli("").ok());
  EXPECT_FALSE(ParseCpuMilli(".").ok());
}

TEST(QuantityTest, GpuThousandths) {
  EXPECT_EQ(*ParseGpuMilli("8", 64), 8000);
  EXPECT_EQ(*ParseGpuMilli("2.5", 64), 2500);
  EXPECT_EQ(*ParseGpuMilli("0.125", 64), 125);
  EXPECT_EQ(*ParseGpuMilli("1.000", 64), 1000);
  EXPECT_EQ(*ParseGpuMilli("500m", 64), 500);
  EXPECT_EQ(*ParseGpuMilli("0", 64), 0);
  EXPECT_EQ(*ParseGpuMilli("64", 64), 64000);
  EXPECT_EQ(ParseGpuMilli("64.001", 64).status().message(), "\"64.001\" is more than 64 GPUs");
  EXPECT_EQ(ParseGpuMilli("64001m", 64).status().message(), "\"64001m\" is more than 64 GPUs");
  EXPECT_EQ(ParseGpuMilli("0.0001", 64).status().message(),
            "\"0.0001\" has more than 3 decimals: GPUs are counted in thousandths");
  for (const char* bad : {"", ".", "m", ".5", "5.", "+1", "-1", "1e3", "1.5m", "1,5", "0x10", " 1"})
    EXPECT_EQ(ParseGpuMilli(bad, 64).status().message(),
              "\"" + std::string(bad) + "\" is not an amount of GPUs (use forms like 8, 2.5, 500m)")
        << bad;
}

TEST(QuantityTest, Bytes) {
  EXPECT_EQ(*ParseBytes("16Gi"), int64_t{16} << 30);
  EXPECT_EQ(*ParseBytes("1G"), 1'000'000'000);
  EXPECT_EQ(*ParseBytes("1.5Ki"), 1536);
  EXPECT_EQ(*ParseBytes("512"), 512);
  EXPECT_EQ(*ParseBytes("8"), 8);
  EXPECT_EQ(*ParseBytes("2Pi"), int64_t{2} << 50);
  Result<int64_t> bad = ParseBytes("16GB");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "\"16GB\": unknown memory unit \"GB\"");
  bad = ParseBytes("12 GB");
  ASSERT_FALSE(bad.ok());
  bad = ParseBytes("Gi");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "\"Gi\" is not a memory quantity (use forms like 512Mi, 16Gi, 1G)");
  bad = ParseBytes("1e400Gi");
  ASSERT_FALSE(bad.ok());
  bad = ParseBytes("9Ei");  // exbibytes do not fit
  ASSERT_FALSE(bad.ok());
  bad = ParseBytes("9000000Ti");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "quantity 9000000Ti is too large");
}

TEST(QuantityTest, DecimalExponentForm) {
  EXPECT_EQ(*ParseCpuMilli("1e3"), 1'000'000);
  EXPECT_EQ(*ParseCpuMilli("2.5E-1"), 250);
  EXPECT_EQ(*ParseBytes("1e3"), 1000);
  EXPECT_EQ(*ParseBytes("1E+6"), 1'000'000);
  EXPECT_EQ(*ParseBytes("2E6"), 2'000'000);
  EXPECT_EQ(*ParseBytes("1.5e1"), 15);
  EXPECT_EQ(*ParseBytes("1Gi"), int64_t{1} << 30);  // units are untouched
  EXPECT_FALSE(ParseBytes("e3").ok());
  EXPECT_FALSE(ParseBytes("1e").ok());
  EXPECT_FALSE(ParseBytes("1e3x").ok());
  EXPECT_FALSE(ParseBytes("1e30").ok());
}

}  // namespace
}  // namespace chamber
