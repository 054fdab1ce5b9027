#include "core/node_capacity_map.h"

#include <map>
#include <random>

#include <gtest/gtest.h>

namespace chamber::core {
namespace {

TEST(NodeCapacityMapTest, KeepsFirstInsertionOrderAndFindsEveryEntry) {
  NodeCapacityMap m;
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.Find(3), nullptr);
  m[7].cpu_milli = 70;
  m[3].cpu_milli = 30;
  m[7].cpu_milli += 1;  // an existing entry: no new node
  EXPECT_EQ(m.size(), 2U);
  EXPECT_EQ(m.nodes(), (std::vector<int32_t>{7, 3}));
  ASSERT_NE(m.Find(7), nullptr);
  EXPECT_EQ(m.Find(7)->cpu_milli, 71);
  EXPECT_EQ(m.Find(3)->cpu_milli, 30);
  EXPECT_EQ(m.Find(4), nullptr);
  m.clear();
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.Find(7), nullptr);
}

// Past the scanned size the map switches to its index, and grows it; every step must agree
// with a std::map, including ids that collide in the table's low bits.
TEST(NodeCapacityMapTest, AgreesWithAnOrderedMapThroughIndexGrowth) {
  std::mt19937 rng(7);
  for (int round = 0; round < 4; ++round) {
    NodeCapacityMap m;
    std::map<int32_t, int64_t> want;
    std::vector<int32_t> order;
    const int32_t spread = round % 2 == 0 ? 100'000 : 300;
    for (int i = 0; i < 2'000; ++i) {
      const int32_t node = round >= 2 ? static_cast<int32_t>(rng() % 50) * 1024
                                      : static_cast<int32_t>(rng() % spread);
      if (!want.contains(node)) order.push_back(node);
      m[node].memory_bytes += i;
      want[node] += i;
      const int32_t probe = static_cast<int32_t>(rng() % spread);
      const NodeCapacity* found = m.Find(probe);
      ASSERT_EQ(found != nullptr, want.contains(probe)) << "node " << probe;
      if (found != nullptr) {
        EXPECT_EQ(found->memory_bytes, want[probe]);
      }
    }
    ASSERT_EQ(m.nodes(), order);
    for (const auto& [node, bytes] : want) {
      EXPECT_EQ(m.Find(node)->memory_bytes, bytes);
    }
  }
}

}  // namespace
}  // namespace chamber::core
