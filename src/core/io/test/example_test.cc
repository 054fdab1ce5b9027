// The built-in example is what a new user sees first; these checks keep what it shows true.
#include "core/io/example.h"

#include <gtest/gtest.h>

#include "core/engine.h"
#include "core/io/snapshot_yaml.h"

namespace chamber::core::io {
namespace {

const Workload* Find(const Snapshot& s, WorkloadId id) { return &s.workloads[id.index()]; }

TEST(Example, ParsesAndShowsEveryKindOfDecision) {
  Result<Snapshot> s = ParseSnapshot(ExampleSnapshotYaml(), "example");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const CycleResult r = Engine().Schedule(*s);

  std::vector<std::string> bound;
  for (const BindDecision& b : r.binds) bound.push_back(Find(*s, b.workload)->name);
  EXPECT_NE(std::find(bound.begin(), bound.end(), "serving/llama-70b"), bound.end());

  bool hardware = false, reclaim = false;
  for (const PreemptDecision& p : r.preemptions) {
    hardware |= p.reason == PreemptReason::kHardwareFault &&
                Find(*s, p.workload)->name == "nlp/bert-finetune";
    reclaim |= p.reason == PreemptReason::kReclaim && Find(*s, p.preemptor)->name == "nlp/llm-sft";
  }
  EXPECT_TRUE(hardware);
  EXPECT_TRUE(reclaim);

  std::map<std::string, PendingReason> pending;
  for (const PendingDecision& p : r.pending) pending[Find(*s, p.workload)->name] = p.reason;
  EXPECT_EQ(pending["nlp/llm-sft"], PendingReason::kWaitingForPreemption);
  EXPECT_EQ(pending["nlp/rlhf-gang"], PendingReason::kOverQueueLimit);
  EXPECT_EQ(pending["vision/sweep-5"], PendingReason::kBlockedByQueueHead);
  EXPECT_EQ(pending["ml/typo-job"], PendingReason::kQueueNotFound);
  EXPECT_EQ(pending["nlp/broken-gang"], PendingReason::kInvalidWorkload);
  EXPECT_EQ(pending["nlp/ppo-gang"], PendingReason::kFairShare);
  EXPECT_EQ(pending["production/llm-eval"], PendingReason::kPreemptionNotAllowed);
  EXPECT_EQ(pending["nlp/h200-probe"], PendingReason::kNoNodeFits);
  EXPECT_TRUE(r.issues.empty());
}

}  // namespace
}  // namespace chamber::core::io
