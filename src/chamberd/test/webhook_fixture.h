// chamberd's admission webhook in an e2e test: chamberd started with the webhook on a free port,
// and a MutatingWebhookConfiguration shaped like the chart's (an entry per opt-in route, failing
// closed only for opted-in objects) pointed at it. The configuration selects only the namespaces
// labelled chamber-test/webhook=<the test's namespace>, so that other tests on the same control
// plane never meet it. A mixin over the suite's fixture (e2e::ChamberdCluster or one derived from
// it); its TearDown removes the configuration first.
#pragma once

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "chamberd/test/chamberd_fixture.h"
#include "common/testing/test_pki.h"
#include "kube/client.h"
#include "kube/config.h"

namespace chamber::chamberd::e2e {

inline const kube::ResourceType kWebhookConfigs{.group = "admissionregistration.k8s.io",
                                                .version = "v1",
                                                .plural = "mutatingwebhookconfigurations",
                                                .kind = "MutatingWebhookConfiguration",
                                                .namespaced = false};

template <typename Base>
class WithWebhook : public Base {
 protected:
  using Json = kube::Json;

  void TearDown() override {
    (void)this->client_->Delete(kWebhookConfigs, "", config_name());
    Base::TearDown();
  }

  std::string config_name() const { return "chamber-test-" + this->ns_; }

  // Labels namespace `ns` so that this test's webhook configuration selects it.
  void SelectNamespace(const std::string& ns) {
    ASSERT_TRUE(
        this->client_
            ->MergePatch(kube::resources::kNamespaces, "", ns,
                         {{"metadata", {{"labels", {{"chamber-test/webhook", this->ns_}}}}}})
            .ok());
  }

  // Starts chamberd with the webhook on a free port; returns that port (0 when its log does not
  // name one within 30 s).
  int StartWithWebhook(const std::string& name, const std::vector<std::string>& extra = {}) {
    using namespace std::chrono_literals;
    std::vector<std::string> args = {"--webhook-listen",        "127.0.0.1:0",
                                     "--webhook-tls-cert-file", pki_("server.crt"),
                                     "--webhook-tls-key-file",  pki_("server.key")};
    args.insert(args.end(), extra.begin(), extra.end());
    this->StartChamberd(name, std::move(args));
    int port = 0;
    Eventually(
        [&] {
          std::ifstream log(this->dir_ / (name + ".log"));
          std::string line;
          while (std::getline(log, line)) {
            const std::string tag = "serving the admission webhook on https://127.0.0.1:";
            if (size_t at = line.find(tag); at != std::string::npos)
              port = std::stoi(line.substr(at + tag.size()));
          }
          return port > 0;
        },
        30s);
    return port;
  }

  // The chart's webhook entries (deploy/helm/chamber/templates/webhook.yaml), pointed at
  // 127.0.0.1:`port` and limited to this test's namespaces. Waits until a probe pod labelled
  // with queue `queue` comes back mutated.
  void RegisterWebhook(int port, const std::string& queue) {
    using namespace std::chrono_literals;
    ASSERT_TRUE(pki_.ok());
    std::ifstream ca_file(pki_("ca.crt"));
    const std::string ca((std::istreambuf_iterator<char>(ca_file)),
                         std::istreambuf_iterator<char>());
    const std::string base = "https://127.0.0.1:" + std::to_string(port);
    auto entry = [&](const std::string& name, const std::string& path, Json rules,
                     const std::string& failure, Json object_selector, Json ns_expressions) {
      ns_expressions.push_back(
          {{"key", "chamber-test/webhook"}, {"operator", "In"}, {"values", {this->ns_}}});
      return Json{{"name", name},
                  {"admissionReviewVersions", {"v1"}},
                  {"sideEffects", "None"},
                  {"timeoutSeconds", 10},
                  {"failurePolicy", failure},
                  {"matchPolicy", "Equivalent"},
                  {"reinvocationPolicy", "IfNeeded"},
                  {"clientConfig", {{"url", base + path}, {"caBundle", kube::Base64Encode(ca)}}},
                  {"rules", rules},
                  {"objectSelector", object_selector},
                  {"namespaceSelector", {{"matchExpressions", ns_expressions}}}};
    };
    const Json pods = Json::array({{{"apiGroups", {""}},
                                    {"apiVersions", {"v1"}},
                                    {"operations", {"CREATE"}},
                                    {"resources", {"pods"}},
                                    {"scope", "Namespaced"}}});
    const Json workloads =
        Json::array({{{"apiGroups", {"batch"}},
                      {"apiVersions", {"v1"}},
                      {"operations", {"CREATE"}},
                      {"resources", {"jobs", "cronjobs"}},
                      {"scope", "Namespaced"}},
                     {{"apiGroups", {"apps"}},
                      {"apiVersions", {"v1"}},
                      {"operations", {"CREATE"}},
                      {"resources", {"deployments", "statefulsets", "replicasets"}},
                      {"scope", "Namespaced"}}});
    const Json labelled = {
        {"matchExpressions", {{{"key", "chamber.io/queue"}, {"operator", "Exists"}}}}};
    const Json unlabelled = {
        {"matchExpressions", {{{"key", "chamber.io/queue"}, {"operator", "DoesNotExist"}}}}};
    const Json config = {
        {"apiVersion", "admissionregistration.k8s.io/v1"},
        {"kind", "MutatingWebhookConfiguration"},
        {"metadata", {{"name", config_name()}}},
        {"webhooks",
         {entry("pods-opted-in.chamber.io", "/mutate/pods", pods, "Fail", labelled, Json::array()),
          entry("pods-namespace-queue.chamber.io", "/mutate/pods", pods, "Fail", unlabelled,
                Json::array({{{"key", "chamber.io/queue"}, {"operator", "Exists"}}})),
          entry("pods.chamber.io", "/mutate/pods", pods, "Ignore", unlabelled,
                Json::array({{{"key", "chamber.io/queue"}, {"operator", "DoesNotExist"}}})),
          entry("workloads.chamber.io", "/mutate/workloads", workloads, "Fail", labelled,
                Json::array())}}};
    auto r = this->client_->Create(kWebhookConfigs, "", config);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    // The API server picks the configuration up within a second or so: wait until a labelled
    // probe pod (asking for nothing) comes back mutated.
    int probes = 0;
    ASSERT_TRUE(Eventually(
        [&] {
          const std::string name = "probe-" + std::to_string(probes++);
          const Json probe = {
              {"metadata", {{"name", name}, {"labels", {{"chamber.io/queue", queue}}}}},
              {"spec",
               {{"restartPolicy", "Never"},
                {"containers", {{{"name", "main"}, {"image", "trainer:latest"}}}}}}};
          auto p = this->client_->Create(kube::resources::kPods, this->ns_, probe);
          if (!p.ok()) return false;
          (void)this->client_->Delete(kube::resources::kPods, this->ns_, name);
          return (*p)["spec"].value("schedulerName", "") == "chamber";
        },
        30s, 300ms))
        << "the API server never called the webhook";
  }

  testing::TestPki pki_;
};

}  // namespace chamber::chamberd::e2e
