// Mutation fuzzing of the decoders: whatever bytes arrive, they return a value or an error that
// names the source, and never crash (this binary also runs under ASan and UBSan).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "common/testing/mutate_text.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/types.h"

namespace chamber::kube {
namespace {

std::vector<int> Ops() {
  return *rc::gen::container<std::vector<int>>(*rc::gen::inRange<size_t>(3, 30),
                                               rc::gen::inRange(0, 1 << 20));
}

constexpr std::string_view kJsonTokens[] = {
    "{",        "}",        "[",    "]",       ",",
    ":",        "\"",       "null", "-1",      "1e999",
    "\"500m\"", "\"16Gi\"", "true", "\\u0000", "99999999999999999999",
    "\n"};

const char kPod[] = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ml",
"uid":"u","resourceVersion":"5","labels":{"a":"b"},"ownerReferences":[{"kind":"Job","name":"j",
"uid":"x","controller":true}]},"spec":{"schedulerName":"chamber","nodeName":"n","priority":5,
"containers":[{"name":"c","resources":{"requests":{"cpu":"500m","memory":"1Gi",
"nvidia.com/gpu":"1"}}}],"tolerations":[{"key":"k","operator":"Exists"}]},
"status":{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False"}]}})";

const char kNode[] =
    R"({"metadata":{"name":"n"},"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]},
"status":{"capacity":{"cpu":"8","nvidia.com/gpu":"8"},"allocatable":{"cpu":"7500m"},
"conditions":[{"type":"Ready","status":"True"}],"addresses":[{"type":"InternalIP","address":"a"}]}})";

RC_GTEST_PROP(KubeFuzz, PodAndNodeDecodersNeverCrash, ()) {
  for (const char* base : {kPod, kNode}) {
    const std::string text = fuzz::MutateText(base, Ops(), kJsonTokens);
    Json j = Json::parse(text, nullptr, false);
    if (j.is_discarded()) continue;
    Result<Pod> p = Pod::FromJson(j);
    if (!p.ok()) RC_ASSERT(p.status().message().rfind("Pod ", 0) == 0);
    Result<Node> n = Node::FromJson(j);
    if (!n.ok()) RC_ASSERT(n.status().message().rfind("Node ", 0) == 0);
    if (p.ok()) RC_ASSERT(Pod::FromJson(p->ToJson()).ok());
    Result<Job> job = Job::FromJson(j);
    Result<Lease> lease = Lease::FromJson(j);
    Result<PodDisruptionBudget> pdb = PodDisruptionBudget::FromJson(j);
    RC_ASSERT(job.ok() || !job.status().message().empty());
    RC_ASSERT(lease.ok() || !lease.status().message().empty());
    RC_ASSERT(pdb.ok() || !pdb.status().message().empty());
  }
}

RC_GTEST_PROP(KubeFuzz, WatchDecoderNeverCrashes, ()) {
  const std::string base = std::string(R"({"type":"ADDED","object":)") + kPod +
                           "}\n"
                           R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}})"
                           "\n";
  const std::string text = fuzz::MutateText(base, Ops(), kJsonTokens);
  WatchStreamDecoder d("fuzz");
  const size_t split = *rc::gen::inRange<size_t>(0, text.size() + 1);
  int events = 0;
  auto cb = [&](WatchEvent&& e) {
    ++events;
    RC_ASSERT(e.object.is_object());
  };
  Status s = d.Feed(std::string_view(text).substr(0, split), cb);
  if (s.ok()) s = d.Feed(std::string_view(text).substr(split), cb);
  if (s.ok()) s = d.Finish();
  if (!s.ok()) RC_ASSERT(s.message().rfind("fuzz", 0) == 0);
  RC_ASSERT(events <= 2 + 2 * static_cast<int>(text.size()));
}

RC_GTEST_PROP(KubeFuzz, KubeconfigParserNeverCrashes, ()) {
  static constexpr std::string_view kYamlTokens[] = {
      "- ", ": ", "{", "}", "[",  "]",    "\n  ",     "null",  "~",        "&a",
      "*a", "\"", "'", "#", "\t", "true", "https://", "-data", "!!binary "};
  const std::string base =
      "current-context: x\n"
      "clusters:\n- name: c\n  cluster:\n    server: https://h:6443\n"
      "    certificate-authority-data: " +
      Base64Encode("-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n") +
      "\n"
      "users:\n- name: u\n  user:\n    token: abc\n"
      "    client-certificate-data: " +
      Base64Encode("-----BEGIN CERTIFICATE-----\nC\n") +
      "\n    client-key-data: " + Base64Encode("-----BEGIN PRIVATE KEY-----\nK\n") +
      "\n"
      "contexts:\n- name: x\n  context: {cluster: c, user: u, namespace: n}\n";
  Result<RestConfig> c = ParseKubeconfig(fuzz::MutateText(base, Ops(), kYamlTokens), "fuzz.yaml");
  if (!c.ok()) {
    RC_ASSERT(c.status().message().rfind("fuzz.yaml", 0) == 0);
  } else {
    RC_ASSERT(c->server.rfind("http", 0) == 0);
  }
}

}  // namespace
}  // namespace chamber::kube
