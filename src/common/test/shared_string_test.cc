#include "common/shared_string.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "common/shared_items.h"

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
