#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "core/cluster_state.h"
#include "core/placement.h"
#include "core/preemption.h"
#include "core/test/selection_state.h"
#include "core/test/snapshot_builder.h"

namespace chamber::core {
namespace {

using testing::Sec;
using testing::SnapshotBuilder;

// Two nodes of two GPUs, full of one borrowing queue's single-GPU work whose GPU-hours lost
// since its last checkpoint differ: on n1 the least (b2) and the next (b3), on n0 more.
class VictimIndexTest : public ::testing::Test {
 protected:
  VictimIndexTest() {
    b_.Node("n0", 2);
    b_.Node("n1", 2);
    b_.Queue("borrower");
    b_.Queue("owner").Quota(2);
    const int64_t ran[] = {3000, 3500, 1000, 2000};  // seconds since the last checkpoint
    const char* node[] = {"n0", "n0", "n1", "n1"};
    for (int i = 0; i < 4; ++i) {
      b_.Workload("b" + std::to_string(i), "borrower")
          .Pods(1, 1)
          .Running(node[i], uint64_t{1} << (i % 2))
          .Start(b_.snapshot().now - Sec(ran[i]));
      lost_.push_back(static_cast<double>(ran[i]) / 3600);
    }
    b_.Workload("want", "owner").Pods(1, 1);
    sel_.Load(b_.snapshot());
  }

  // The candidates a scan would offer: every running workload not yet taken.
  std::vector<VictimCandidate> Candidates(const std::vector<bool>& taken) const {
    std::vector<VictimCandidate> out;
    for (int i = 0; i < 4; ++i) {
      if (taken[static_cast<size_t>(i)]) continue;
      const Workload& w = b_.snapshot().workloads[static_cast<size_t>(i)];
      out.push_back({WorkloadId{i},
                     PreemptReason::kReclaim,
                     w.priority,
                     lost_[static_cast<size_t>(i)],
                     kOvershare,
                     -1,
                     {},
                     w.placements});
    }
    return out;
  }

  std::string Scan(const std::vector<bool>& taken) {
    const auto set = selector_.Select({.state = *sel_.state,
                                       .feasibility = *sel_.feas,
                                       .placement = placement_,
                                       .snapshot = b_.snapshot(),
                                       .preemptor = want(),
                                       .pods = 1,
                                       .candidates = Candidates(taken),
                                       .releasing = sel_.releasing});
    return set ? Name(*set) : "none";
  }
  std::string Indexed(VictimIndex& index) {
    const std::vector<VictimGroup> groups = {{true, kOvershare}, {false, 0}};
    const auto set = selector_.Select({.state = *sel_.state,
                                       .feasibility = *sel_.feas,
                                       .placement = placement_,
                                       .snapshot = b_.snapshot(),
                                       .preemptor = want(),
                                       .pods = 1,
                                       .releasing = sel_.releasing,
                                       .index = &index,
                                       .groups = groups});
    return set ? Name(*set) : "none";
  }
  std::string Name(const VictimSet& set) const {
    std::string out;
    for (const VictimCandidate& v : set.victims)
      out += b_.snapshot().workloads[v.workload.index()].name + " ";
    return out + "on " + std::to_string(set.plan.pods.at(0).placement.node.value);
  }
  const Workload& want() const { return b_.snapshot().workloads.at(4); }

  static constexpr double kOvershare = 2.0;
  SnapshotBuilder b_;
  std::vector<double> lost_;
  testing::SelectionState sel_;
  TopologyBinPacking placement_;
  MinimalVictimSelector selector_;
};

TEST_F(VictimIndexTest, ChoosesAsTheScanAndNeverOffersATakenVictimAgain) {
  std::vector<VictimIndex::Entry> entries;
  for (const VictimCandidate& c : Candidates({false, false, false, false}))
    entries.push_back({c, 0});
  VictimIndex index(2, 2, 5, std::move(entries));
  EXPECT_EQ(index.alive(0), 4);

  EXPECT_EQ(Indexed(index), "b2 on 1");
  EXPECT_EQ(Scan({false, false, false, false}), "b2 on 1");
  // The group's overshare is unchanged, so only the removal can tell the index that n1's first
  // candidate is now b3.
  index.Remove(WorkloadId{2});
  EXPECT_EQ(index.alive(0), 3);
  EXPECT_EQ(Indexed(index), "b3 on 1");
  EXPECT_EQ(Scan({false, false, true, false}), "b3 on 1");
  index.Remove(WorkloadId{3});
  EXPECT_EQ(Indexed(index), "b0 on 0");
  EXPECT_EQ(Scan({false, false, true, true}), "b0 on 0");
  index.Remove(WorkloadId{0});
  index.Remove(WorkloadId{1});
  EXPECT_EQ(index.alive(0), 0);
  EXPECT_EQ(Indexed(index), "none");
}

}  // namespace
}  // namespace chamber::core
