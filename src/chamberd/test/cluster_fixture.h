// The fixture the end-to-end tests on the control plane share: a client for the suite, with the
// Queue CRD installed, and per test a namespace name of its own, a scratch directory named after
// it, and no fake GPU nodes left by an earlier test. Each test's target defines
// CHAMBER_QUEUE_CRD.
#pragma once

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "chamberd/test/e2e_support.h"
#include "kube/client.h"
#include "kube/types.h"
#include "kubesim/nodes.h"

namespace chamber::chamberd::e2e {

class ClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto client = ConnectWithQueueCrd(CHAMBER_QUEUE_CRD);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }

  // Names the test's namespace `prefix` plus a random number (returned), makes the scratch
  // directory `<temp>/<dir_prefix><namespace>`, deletes the fake nodes of earlier tests, and
  // creates the namespace unless `create` is false (helm creates its own).
  std::string NewNamespace(const std::string& prefix, const std::string& dir_prefix,
                           bool create = true) {
    std::random_device rd;
    const std::string n = std::to_string(rd() % 1000000);
    ns_ = prefix + n;
    dir_ = std::filesystem::temp_directory_path() / (dir_prefix + ns_);
    std::filesystem::create_directories(dir_);
    EXPECT_TRUE(kubesim::DeleteFakeNodes(*client_).ok());
    if (create) {
      EXPECT_TRUE(
          client_->Create(kube::resources::kNamespaces, "", {{"metadata", {{"name", ns_}}}}).ok());
    }
    return n;
  }

  // The pods of Job `job` in the test's namespace (none when the list fails).
  std::vector<kube::Pod> JobPods(const std::string& job) const {
    kube::ListOptions o;
    o.label_selector = "batch.kubernetes.io/job-name=" + job;
    std::vector<kube::Pod> out;
    auto list = client_->List(kube::resources::kPods, ns_, o);
    if (!list.ok()) return out;
    for (kube::Json& j : list->items) out.push_back(kube::Pod::FromJson(std::move(j)).value());
    return out;
  }

  inline static std::unique_ptr<kube::Client> client_;
  std::string ns_;
  std::filesystem::path dir_;
};

}  // namespace chamber::chamberd::e2e
