#include "common/shared_string.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/shared_items.h"
#include "common/shared_value.h"

namespace chamber {
namespace {

TEST(SharedStringTest, CopiesShareOneAllocationAndReadAsAString) {
  const SharedString a(std::string("GPU-2b1e5f0c-93d4-4c1a-8f0e-6d2a4b7c9e11"));
  const SharedString b = a;
  EXPECT_EQ(&a.str(), &b.str());  // one allocation
  const SharedString c(std::string("GPU-2b1e5f0c-93d4-4c1a-8f0e-6d2a4b7c9e11"));
  EXPECT_NE(&a.str(), &c.str());  // made apart: equal, not shared
  EXPECT_EQ(a, c);
  EXPECT_EQ(a, "GPU-2b1e5f0c-93d4-4c1a-8f0e-6d2a4b7c9e11");
  EXPECT_EQ(a, std::string("GPU-2b1e5f0c-93d4-4c1a-8f0e-6d2a4b7c9e11"));
  EXPECT_FALSE(a == "GPU-other");
  const std::string& as_string = a;
  EXPECT_EQ(as_string.size(), 40u);
  EXPECT_EQ(a.size(), 40u);
  std::ostringstream out;
  out << a;
  EXPECT_EQ(out.str(), a.str());
}

TEST(SharedStringTest, EmptyAllocatesNothingAndOrdersLikeStrings) {
  const SharedString none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none, "");
  EXPECT_EQ(none, SharedString(std::string()));
  std::map<SharedString, int, std::less<>> m;
  m[SharedString("b")] = 2;
  m[SharedString("a")] = 1;
  m[SharedString("")] = 0;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m.begin()->second, 0);
  EXPECT_EQ(m.find(std::string_view("b"))->second, 2);
  EXPECT_TRUE(SharedString("a") < SharedString("b"));
}

TEST(SharedItemsTest, ReadsLikeAVectorAndSharesAddedItems) {
  SharedItems<std::string> a = {"x", "y", "z"};
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[1], "y");
  EXPECT_EQ(a.front(), "x");
  EXPECT_EQ(a.back(), "z");
  EXPECT_EQ(std::string(a.begin()->c_str()), "x");
  EXPECT_EQ(a.end() - a.begin(), 3);
  EXPECT_EQ(*std::find(a.begin(), a.end(), "z"), "z");
  std::string joined;
  for (const std::string& s : a) joined += s;
  EXPECT_EQ(joined, "xyz");

  SharedItems<std::string> b;
  b.Add(a.item(2));
  b.Add(std::string("w"));
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(&b[0], &a[2]);  // shared, not copied
  EXPECT_EQ(b[1], "w");
  a.clear();
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(b[0], "z");  // still held by b
}

}  // namespace
}  // namespace chamber

namespace chamber {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

TEST(SharedTest, CopiesShareOneValueAndEqualValuesMadeApartAreEqualNotShared) {
  const Shared<Pairs> a = Pairs{{"zone", "a"}, {"host", "n1"}};
  const Shared<Pairs> copy = a;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_TRUE(copy.SameAs(a));
  EXPECT_EQ(&*copy, &*a);
  ASSERT_EQ(copy.size(), 2u);
  EXPECT_EQ(copy[1].second, "n1");
  EXPECT_EQ(copy.at(0).first, "zone");
  const Shared<Pairs> apart = Pairs{{"zone", "a"}, {"host", "n1"}};
  EXPECT_EQ(apart, a);
  EXPECT_FALSE(apart.SameAs(a));
  EXPECT_NE(Shared<Pairs>(Pairs{{"zone", "b"}}), a);
  // Empty: default or made from an empty value; reads as an empty value.
  const Shared<Pairs> none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none, Shared<Pairs>(Pairs{}));
  EXPECT_EQ(none.begin(), none.end());
  int n = 0;
  for (const auto& [k, v] : a) n += static_cast<int>(k.size() + v.size());
  EXPECT_EQ(n, 11);
}

}  // namespace
}  // namespace chamber
