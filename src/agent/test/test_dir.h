// A directory of this test process's own, for the files and sockets the agent tests make: two
// test runs at once (two build trees, or a run beside CI) never share a path.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace chamber::agent::test {

// Created under gtest's temporary directory on first use, removed when the process exits.
// Kept short: a Unix socket's path must fit in 108 bytes.
inline const std::string& TestDir() {
  struct Dir {
    std::string path;
    Dir() {
      std::string base = testing::TempDir();
      if (base.empty() || base.back() != '/') base += '/';
      std::string tmpl = base + "chamber-XXXXXX";
      if (mkdtemp(tmpl.data()) == nullptr) {
        ADD_FAILURE() << "cannot make a directory from " << tmpl;
        tmpl = base;
      }
      path = tmpl;
    }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

// `name` in TestDir().
inline std::string TestPath(const std::string& name) { return TestDir() + "/" + name; }

}  // namespace chamber::agent::test
