#include "common/interned.h"

#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace chamber {
namespace {

TEST(InternedTest, EqualValuesShareOneCopyAndOthersDoNot) {
  using List = std::vector<std::string>;
  const Interned<List> a(List{"x", "y"});
  const Interned<List> b(List{"x", "y"});
  const Interned<List> c(List{"x"});
  ASSERT_NE(a.get(), nullptr);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), c.get());
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a == c);
  EXPECT_EQ(*a, (List{"x", "y"}));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0], "x");
  // Empty allocates nothing and reads as an empty value.
  const Interned<List> none(List{});
  EXPECT_EQ(none.get(), nullptr);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none, Interned<List>());
  EXPECT_FALSE(none == c);
}

TEST(InternedTest, AValueNoLongerHeldIsMadeAgain) {
  using List = std::vector<int>;
  { const Interned<List> gone(List{7, 8, 9}); }
  const Interned<List> again(List{7, 8, 9});
  ASSERT_NE(again.get(), nullptr);
  EXPECT_EQ(*again, (List{7, 8, 9}));
  // Many short-lived values: the table drops those no longer held, and those held stay shared.
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(Interned<List>(List{i}).size(), 1u);
  EXPECT_EQ(Interned<List>(List{7, 8, 9}).get(), again.get());
}

TEST(InternedTest, ThreadsMakingEqualValuesShareOne) {
  using List = std::vector<std::string>;
  constexpr int kThreads = 4, kEach = 500;
  std::vector<std::vector<Interned<List>>> made(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&made, t] {
      for (int i = 0; i < kEach; ++i) made[t].emplace_back(List{"shared", std::to_string(i % 10)});
    });
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kEach; ++i) ASSERT_EQ(made[t][i].get(), made[0][i % 10].get());
}

}  // namespace
}  // namespace chamber
