#include "common/gpu_share_ask.h"

#include <limits>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "common/testing/mutate_text.h"

namespace chamber::gpu_share {
namespace {

using Annotations = std::map<std::string, std::string>;

TEST(GpuShareAskTest, ReadsAFractionAndMemoryExactly) {
  Result<Ask> a = ReadAsk({{kFractionKey, "0.5"}}, 0);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->gpu_milli, 500);
  EXPECT_EQ(a->gpu_memory_mib, 0);

  a = ReadAsk({{kFractionKey, "0.125"}, {kMemoryKey, "10240"}}, 0);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->gpu_milli, 125);
  EXPECT_EQ(a->gpu_memory_mib, 10240);

  a = ReadAsk({{kFractionKey, "250m"}, {kMemoryKey, "20Gi"}}, 0);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->gpu_milli, 250);
  EXPECT_EQ(a->gpu_memory_mib, 20480);

  // Memory alone (docs/sharing.md, "A share of memory alone").
  a = ReadAsk({{kMemoryKey, "20Gi"}}, 0);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->gpu_milli, 0);
  EXPECT_EQ(a->gpu_memory_mib, 20480);
  EXPECT_TRUE(a->asked());
  EXPECT_TRUE(a->memory_alone());

  a = ReadAsk({{"chamber.io/queue", "ml"}}, 2);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->asked());
}

TEST(GpuShareAskTest, ErrorsNameTheAnnotationAndTheValue) {
  const std::pair<Annotations, std::string> cases[] = {
      {{{kFractionKey, "1.5"}},
       "annotation chamber.io/gpu-fraction: \"1.5\" is not a fraction of one GPU (use forms like "
       "0.5, 0.25 or 250m; at most 3 decimals)"},
      {{{kFractionKey, "1"}},
       "annotation chamber.io/gpu-fraction: \"1\" is not below one GPU (ask for whole GPUs with "
       "nvidia.com/gpu)"},
      {{{kFractionKey, "0"}}, "annotation chamber.io/gpu-fraction: \"0\" is not above zero"},
      {{{kFractionKey, "0.3333"}},
       "annotation chamber.io/gpu-fraction: \"0.3333\" is not a fraction of one GPU (use forms "
       "like 0.5, 0.25 or 250m; at most 3 decimals)"},
      {{{kFractionKey, "half"}},
       "annotation chamber.io/gpu-fraction: \"half\" is not a fraction of one GPU (use forms like "
       "0.5, 0.25 or 250m; at most 3 decimals)"},
      {{{kFractionKey, "0.5"}, {kMemoryKey, "0"}},
       "annotation chamber.io/gpu-memory: \"0\" is not a positive amount of MiB"},
      {{{kFractionKey, "0.5"}, {kMemoryKey, "1.5Mi"}},
       "annotation chamber.io/gpu-memory: \"1.5Mi\" is not a whole number of MiB"},
      {{{kFractionKey, "0.5"}, {kMemoryKey, "lots"}},
       "annotation chamber.io/gpu-memory: \"lots\" is not an amount of GPU memory (MiB as a plain "
       "number, or a quantity such as 10Gi)"},
      {{{kMemoryKey, "0"}},
       "annotation chamber.io/gpu-memory: \"0\" is not a positive amount of MiB"},
  };
  for (const auto& [annotations, want] : cases) {
    Result<Ask> a = ReadAsk(annotations, 0);
    ASSERT_FALSE(a.ok()) << want;
    EXPECT_EQ(a.status().message(), want);
  }
  Result<Ask> both = ReadAsk({{kFractionKey, "0.5"}}, 1);
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().message(),
            "requests nvidia.com/gpu: 1 and annotation chamber.io/gpu-fraction: \"0.5\"; a pod "
            "asks for whole GPUs or a share of one, not both");
  both = ReadAsk({{kMemoryKey, "10Gi"}}, 2);
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().message(),
            "requests nvidia.com/gpu: 2 and annotation chamber.io/gpu-memory: \"10Gi\"; a pod "
            "asks for whole GPUs or a share of one, not both");
}

// A share of memory alone holds its memory's part of its GPU, rounded up, within 1..999.
TEST(GpuShareAskTest, AShareOfMemoryAloneHoldsItsMemorysPartOfTheGpu) {
  EXPECT_EQ(MemoryShareMilli(20480, 81920), 250);
  EXPECT_EQ(MemoryShareMilli(20480, 40960), 500);
  EXPECT_EQ(MemoryShareMilli(10000, 81920), 123);  // 122.07: rounded up
  EXPECT_EQ(MemoryShareMilli(1, 81920), 1);        // 0.012: at least one thousandth
  EXPECT_EQ(MemoryShareMilli(81920, 81920), 999);  // all of it: still a share
  EXPECT_EQ(MemoryShareMilli(90000, 81920), 999);
  EXPECT_EQ(MemoryShareMilli(int64_t{1} << 43, std::numeric_limits<int64_t>::max()), 1);
  EXPECT_EQ(MemoryShareMilli(0, 81920), 0);
  EXPECT_EQ(MemoryShareMilli(20480, 0), 0) << "a GPU whose memory is not known";
}

TEST(GpuShareAskTest, BindAnnotationsNameTheDeviceAndTheMpsLimits) {
  EXPECT_EQ(BindAnnotations({.gpu_milli = 250, .gpu_memory_mib = 0}, "GPU-1"),
            (Annotations{{kVisibleDevicesKey, "GPU-1"}, {kMpsThreadsKey, "25"}}));
  EXPECT_EQ(
      BindAnnotations({.gpu_milli = 1, .gpu_memory_mib = 4096}, "3"),
      (Annotations{{kVisibleDevicesKey, "3"}, {kMpsThreadsKey, "1"}, {kMpsMemoryKey, "0=4096MB"}}));
  EXPECT_EQ(BindAnnotations({.gpu_milli = 333, .gpu_memory_mib = 0}, "0").at(kMpsThreadsKey),
            "34");  // rounded up: never less than the share
}

// Whatever the annotations say, ReadAsk returns a share of one GPU within its bounds or an error
// naming an annotation (or the request), and never crashes (this binary also runs under ASan
// and UBSan).
RC_GTEST_PROP(GpuShareAskTest, AnyAnnotationsGiveAShareOrANamedError, ()) {
  static constexpr std::string_view kTokens[] = {
      "0", ".", "5", "m", "Mi", "Gi", "-", "e9", "99999999999999", " ", "1", "k"};
  auto text = [&](std::string_view seed) {
    const auto ops = *rc::gen::container<std::vector<int>>(*rc::gen::inRange<size_t>(0, 12),
                                                           rc::gen::inRange(0, 1 << 20));
    return fuzz::MutateText(std::string(seed), ops, kTokens);
  };
  Annotations a;
  if (*rc::gen::arbitrary<bool>()) a[kFractionKey] = text("0.5");
  if (*rc::gen::arbitrary<bool>()) a[kMemoryKey] = text("10240");
  const int64_t whole = *rc::gen::inRange<int64_t>(0, 3);
  Result<Ask> r = ReadAsk(a, whole);
  if (r.ok()) {
    RC_ASSERT(r->gpu_milli >= 0 && r->gpu_milli <= 999);
    RC_ASSERT(r->gpu_memory_mib >= 0);
    RC_ASSERT(r->asked() == !a.empty());
    RC_ASSERT(!r->asked() || whole == 0);
    RC_ASSERT(r->gpu_milli > 0 || !a.contains(kFractionKey));
    RC_ASSERT(r->gpu_memory_mib > 0 || !a.contains(kMemoryKey));
  } else {
    const std::string& m = r.status().message();
    RC_ASSERT(m.starts_with("annotation chamber.io/gpu-") ||
              m.starts_with("requests nvidia.com/gpu"));
  }
}

}  // namespace
}  // namespace chamber::gpu_share
