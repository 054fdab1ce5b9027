#include "common/config_file.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace chamber {
namespace {

TEST(ConfigFileTest, SectionsOfOneParse) {
  Result<ConfigFile> f =
      ConfigFile::Parse("cyclePeriod: 1s\nhealth:\n  enabled: false\n", "c.yaml");
  ASSERT_TRUE(f.ok()) << f.status().message();
  bool found = false;
  const YAML::Node h = f->Section("health", &found);
  EXPECT_TRUE(found);
  ASSERT_TRUE(h.IsMap());
  EXPECT_EQ(*f->reader().Bool(h["enabled"], "health.enabled"), false);
  const YAML::Node p = f->Section("pricing", &found);
  EXPECT_FALSE(found);
  EXPECT_TRUE(p.IsNull());
  // Asking for a missing section adds nothing to the document.
  EXPECT_FALSE(f->root()["pricing"]);
  EXPECT_EQ(f->root().size(), 2u);
}

TEST(ConfigFileTest, EmptySectionAndEmptyFile) {
  bool found = false;
  Result<ConfigFile> f = ConfigFile::Parse("pricing:\n", "c.yaml");
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->Section("pricing", &found).IsNull());
  EXPECT_TRUE(found);
  f = ConfigFile::Parse("", "c.yaml");
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->root().IsNull());
  EXPECT_TRUE(f->Section("health", &found).IsNull());
  EXPECT_FALSE(found);
  // A document that is not a map has no sections; the engine's reader reports it.
  f = ConfigFile::Parse("- a\n- b\n", "c.yaml");
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->Section("health", &found).IsNull());
  EXPECT_FALSE(found);
  EXPECT_TRUE(ConfigFile().Section("health").IsNull());
}

TEST(ConfigFileTest, ErrorsNameTheFile) {
  Result<ConfigFile> f = ConfigFile::Parse("a: [1, 2\nb: 3\n", "chamber.yaml");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message().rfind("chamber.yaml:", 0), 0u) << f.status().message();

  f = ConfigFile::Load("/nonexistent/chamber.yaml");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f.status().message(), "/nonexistent/chamber.yaml: No such file or directory");
}

TEST(ConfigFileTest, LoadReadsTheFile) {
  const std::string path =
      testing::TempDir() + "config_file_test_" + std::to_string(::getpid()) + ".yaml";
  {
    std::ofstream out(path);
    out << "health:\n  probation: 5m\n";
  }
  Result<ConfigFile> f = ConfigFile::Load(path);
  std::remove(path.c_str());
  ASSERT_TRUE(f.ok()) << f.status().message();
  const YAML::Node h = f->Section("health");
  EXPECT_EQ(f->reader().Dur(h["probation"], "health.probation")->count(), 300'000);
  Result<int64_t> bad = f->reader().Int(h["probation"], "health.probation");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            path + ":2:14: field health.probation: expected an integer, got \"5m\"");
}

}  // namespace
}  // namespace chamber
