// The Queue CRD on a real kube-apiserver and etcd (the ctest fixture "controlplane" starts them
// and sets CHAMBER_TEST_KUBECONFIG): schema validation, the status subresource and the printer
// columns, with QueueFromResource and QueueStatusJson on both ends.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "backend/kube/queue_resource.h"
#include "kube/errors.h"

namespace chamber::backend {
namespace {

using core::Resource;
using nlohmann::json;
using namespace std::chrono_literals;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// kubectl from CHAMBER_KUBECTL, else from the control plane's env file; "" when neither has it.
std::string Kubectl() {
  if (const char* k = std::getenv("CHAMBER_KUBECTL"); k != nullptr && *k != '\0') return k;
  const char* dir = std::getenv("CHAMBER_TEST_CONTROLPLANE_DIR");
  if (dir == nullptr) return "";
  std::istringstream env(ReadText(std::string(dir) + "/env"));
  const std::string key = "export CHAMBER_KUBECTL=";
  for (std::string line; std::getline(env, line);)
    if (line.rfind(key, 0) == 0) return line.substr(key.size());
  return "";
}

// Runs `command` through the shell; stdout and stderr together.
std::string RunCommand(const std::string& command, int* rc) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    *rc = -1;
    return out;
  }
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  *rc = pclose(pipe);
  return out;
}

std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

class QueueCrdTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    // Other tests share the API server: leave it without the CRD (and so without Queues).
    const char* kc = std::getenv("CHAMBER_TEST_KUBECONFIG");
    if (kc == nullptr || *kc == '\0') return;
    Result<kube::RestConfig> cfg = kube::LoadKubeconfig(kc);
    if (!cfg.ok()) return;
    Result<std::unique_ptr<kube::Client>> c = kube::Client::Create(*cfg);
    if (!c.ok()) return;
    const std::string name(kQueueCrdName);
    Status deleted = (*c)->Delete(kCustomResourceDefinitions, "", name);
    EXPECT_TRUE(deleted.ok() || kube::IsNotFound(deleted)) << deleted.ToString();
    const auto end = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < end) {
      Result<json> got = (*c)->Get(kCustomResourceDefinitions, "", name);
      if (!got.ok() && kube::IsNotFound(got.status())) return;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "CRD " << name << " still present 60 s after its deletion";
  }

  void SetUp() override {
    const char* kc = std::getenv("CHAMBER_TEST_KUBECONFIG");
    if (kc == nullptr || *kc == '\0') GTEST_SKIP() << "CHAMBER_TEST_KUBECONFIG is not set";
    kubeconfig_ = kc;
    Result<kube::RestConfig> cfg = kube::LoadKubeconfig(kc);
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    Result<std::unique_ptr<kube::Client>> c = kube::Client::Create(*cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(*c);
    Result<std::vector<json>> docs = ManifestToJson(ReadText(CHAMBER_QUEUE_CRD), CHAMBER_QUEUE_CRD);
    ASSERT_TRUE(docs.ok()) << docs.status().ToString();
    ASSERT_EQ(docs->size(), 1u);
    crd_ = (*docs)[0];
    Status applied = ApplyQueueCrd(*client_, crd_);
    ASSERT_TRUE(applied.ok()) << applied.ToString();
    std::random_device rd;
    suffix_ = "-" + std::to_string(rd() % 1'000'000);
  }

  void TearDown() override {
    if (!client_) return;
    for (const std::string& name : created_) (void)client_->Delete(kQueues, "", name);
  }

  // A Queue object named `name` + this test's suffix.
  json Queue(const std::string& name, json spec) {
    return {{"apiVersion", "chamber.io/v1alpha1"},
            {"kind", "Queue"},
            {"metadata", {{"name", name + suffix_}}},
            {"spec", std::move(spec)}};
  }

  Result<json> Create(const json& object) {
    Result<json> r = client_->Create(kQueues, "", object);
    if (r.ok()) created_.push_back((*r)["metadata"]["name"]);
    return r;
  }

  std::string kubeconfig_;
  std::unique_ptr<kube::Client> client_;
  json crd_;
  std::string suffix_;
  std::vector<std::string> created_;
};

TEST_F(QueueCrdTest, ApplyIsIdempotentAndEstablished) {
  // SetUp applied it once; again, unchanged, and again with a changed description.
  ASSERT_TRUE(ApplyQueueCrd(*client_, crd_).ok());
  json changed = crd_;
  changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = "changed";
  Status s = ApplyQueueCrd(*client_, changed);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Result<json> got = client_->Get(kCustomResourceDefinitions, "", std::string(kQueueCrdName));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->at("spec")["versions"][0]["schema"]["openAPIV3Schema"]["description"], "changed");
  EXPECT_EQ(got->at("spec")["names"]["shortNames"], json({"cq", "cqueue"}));
  ASSERT_TRUE(ApplyQueueCrd(*client_, crd_).ok());
}

TEST_F(QueueCrdTest, ExampleQueuesRoundTrip) {
  Result<std::vector<json>> docs =
      ManifestToJson(ReadText(CHAMBER_QUEUE_EXAMPLES), CHAMBER_QUEUE_EXAMPLES);
  ASSERT_TRUE(docs.ok()) << docs.status().ToString();
  ASSERT_EQ(docs->size(), 4u);
  for (json object : *docs) {
    Result<core::Queue> want = QueueFromResource(object);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    object["metadata"]["name"] = want->name + suffix_;
    if (object["spec"].contains("parent")) object["spec"]["parent"] = want->parent + suffix_;
    Result<json> created = Create(object);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    Result<json> got = client_->Get(kQueues, "", want->name + suffix_);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    Result<core::Queue> q = QueueFromResource(*got);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    EXPECT_EQ(q->name, want->name + suffix_);
    EXPECT_EQ(q->parent, want->parent.empty() ? "" : want->parent + suffix_);
    EXPECT_EQ(q->priority, want->priority);
    EXPECT_EQ(q->queueing, want->queueing);
    EXPECT_EQ(q->preemption, want->preemption) << q->name;
    EXPECT_EQ(q->gpu_models, want->gpu_models) << q->name;
    for (Resource r : core::kAllResources) {
      EXPECT_EQ(q->res(r).quota, want->res(r).quota) << q->name;
      EXPECT_EQ(q->res(r).limit, want->res(r).limit) << q->name;
      EXPECT_EQ(q->res(r).lending_limit, want->res(r).lending_limit) << q->name;
      EXPECT_DOUBLE_EQ(q->res(r).over_quota_weight, want->res(r).over_quota_weight) << q->name;
    }
  }
  Result<json> nlp = client_->Get(kQueues, "", "nlp" + suffix_);
  ASSERT_TRUE(nlp.ok());
  Result<core::Queue> q = QueueFromResource(*nlp);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->res(Resource::kGpu).quota, core::Gpus(40));
  EXPECT_EQ(q->res(Resource::kGpu).limit, core::Gpus(56));
  EXPECT_EQ(q->res(Resource::kCpu).quota, 320'000);
  EXPECT_EQ(q->queueing, core::QueueingStrategy::kStrictFifo);
  EXPECT_EQ(q->preemption.reclaim, core::ReclaimPreemption::kLowerPriority);
  EXPECT_EQ(q->preemption.delay, std::chrono::minutes(2));
}

struct BadSpec {
  std::string what;
  json spec;
  std::string field;                                 // the API server's error names it
  std::string message;                               // and says this
  std::string not_said = "must not be below quota";  // one error per problem, not two
};

TEST_F(QueueCrdTest, BadSpecsAreRefusedNamingTheField) {
  const std::vector<BadSpec> cases = {
      {"negative quota",
       {{"resources", {{"gpu", {{"quota", -1}}}}}},
       "spec.resources.gpu.quota",
       "greater than or equal to 0"},
      {"unknown reclaim policy",
       {{"preemption", {{"reclaim", "Sometimes"}}}},
       "spec.preemption.reclaim",
       "supported values"},
      {"malformed preemption delay",
       {{"preemption", {{"delay", "soon"}}}},
       "spec.preemption.delay",
       "should match"},
      {"gpu limit below quota",
       {{"resources", {{"gpu", {{"quota", 8}, {"limit", 4}}}}}},
       "spec.resources.gpu.limit",
       "must not be below quota"},
      {"cpu limit below quota",
       {{"resources", {{"cpu", {{"quota", "2"}, {"limit", "1500m"}}}}}},
       "spec.resources.cpu.limit",
       "must not be below quota"},
      {"memory limit below quota",
       {{"resources", {{"memory", {{"quota", "2Gi"}, {"limit", 1024}}}}}},
       "spec.resources.memory.limit",
       "must not be below quota"},
      {"limit below -1",
       {{"resources", {{"gpu", {{"quota", 3}, {"limit", -2}}}}}},
       "spec.resources.gpu.limit",
       "greater than or equal to -1"},
      {"malformed limit",
       {{"resources", {{"memory", {{"quota", "2Gi"}, {"limit", "lots"}}}}}},
       "spec.resources.memory.limit",
       "should match"},
      {"negative lending limit",
       {{"resources", {{"cpu", {{"lendingLimit", "-3"}}}}}},
       "spec.resources.cpu.lendingLimit",
       "should match"},
      {"negative weight",
       {{"resources", {{"memory", {{"overQuotaWeight", -0.5}}}}}},
       "spec.resources.memory.overQuotaWeight",
       "greater than or equal to 0"},
      {"bad memory quantity",
       {{"resources", {{"memory", {{"quota", "lots"}}}}}},
       "spec.resources.memory.quota",
       "should match"},
      {"GPU limit between -1 and 0",
       {{"resources", {{"gpu", {{"limit", -0.5}}}}}},
       "spec.resources.gpu.limit",
       "must be -1 (none) or at least 0"},
      {"GPU lending limit between -1 and 0",
       {{"resources", {{"gpu", {{"lendingLimit", -0.25}}}}}},
       "spec.resources.gpu.lendingLimit",
       "must be -1 (none) or at least 0"},
      {"bad queueing", {{"queueing", "Fast"}}, "spec.queueing", "Unsupported value: \"Fast\""},
      {"priority out of range",
       {{"priority", 2'000'000'000}},
       "spec.priority",
       "less than or equal to 1000000000"},
  };
  for (const BadSpec& c : cases) {
    SCOPED_TRACE(c.what);
    const json object = Queue("bad", c.spec);
    Result<json> created = Create(object);
    ASSERT_FALSE(created.ok()) << c.what << " was accepted";
    EXPECT_TRUE(kube::IsInvalid(created.status())) << created.status().ToString();
    const std::string& m = created.status().message();
    EXPECT_NE(m.find(c.field), std::string::npos) << m;
    EXPECT_NE(m.find(c.message), std::string::npos) << m;
    if (c.message != c.not_said) {
      EXPECT_EQ(m.find(c.not_said), std::string::npos) << m;
    }
    // The reader refuses it too, naming the same field.
    Result<core::Queue> q = QueueFromResource(object);
    ASSERT_FALSE(q.ok()) << c.what;
    EXPECT_NE(q.status().message().find("field " + c.field + ":"), std::string::npos)
        << q.status().message();
  }

  // Its own parent: a rule over the whole object, reported at spec.parent.
  json self = Queue("selfish", {{"parent", "selfish" + suffix_}});
  Result<json> created = Create(self);
  ASSERT_FALSE(created.ok());
  EXPECT_TRUE(kube::IsInvalid(created.status())) << created.status().ToString();
  EXPECT_NE(created.status().message().find("spec.parent"), std::string::npos)
      << created.status().message();
  EXPECT_NE(created.status().message().find("a queue cannot be its own parent"), std::string::npos)
      << created.status().message();

  // Edge values the schema must let through, as the reader does.
  Result<json> ok = Create(Queue("edges", {{"resources",
                                            {{"gpu", {{"quota", 0}, {"limit", 0}}},
                                             {"cpu", {{"quota", "1e3"}, {"limit", "-1"}}},
                                             {"memory", {{"quota", 1024}, {"limit", "1Ki"}}}}}}));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  Result<core::Queue> q = QueueFromResource(*ok);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->res(Resource::kCpu).quota, 1'000'000);
  EXPECT_EQ(q->res(Resource::kMemory).limit, 1024);

  // GPUs in GPU-equivalents, to a thousandth: the schema keeps the numbers as they are given and
  // the reader takes them exactly.
  ok = Create(
      Queue("shares",
            {{"resources", {{"gpu", {{"quota", 2.5}, {"limit", 4.125}, {"lendingLimit", 0.5}}}}}}));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  q = QueueFromResource(*ok);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->res(Resource::kGpu).quota, 2500);
  EXPECT_EQ(q->res(Resource::kGpu).limit, 4125);
  EXPECT_EQ(q->res(Resource::kGpu).lending_limit, 500);
}

core::QueueStatus SampleStatus() {
  core::QueueStatus s;
  s.allocated = core::Resources::Of(12, 48'500, int64_t{96} << 30);
  s.fair_share = {10'456, 40'000, 1.5 * (int64_t{1} << 30)};
  s.borrowed = core::Resources::Of(2, 0, 0);
  s.lent = core::Resources::Of(0, 1500, 0);
  s.pending_workloads = 7;
  s.running_workloads = 3;
  return s;
}

TEST_F(QueueCrdTest, StatusSubresourceAndPrinterColumns) {
  Result<json> created = Create(Queue(
      "team", {{"parent", "org"},
               {"resources", {{"gpu", {{"quota", 40}, {"limit", 56}}}, {"cpu", {{"quota", 8}}}}}}));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const std::string name = "team" + suffix_;
  const int64_t generation = (*created)["metadata"]["generation"];

  json with_status = *created;
  with_status["status"] = QueueStatusJson(SampleStatus(), generation);
  with_status["spec"]["priority"] = 99;  // the status subresource ignores spec changes
  Result<json> updated = client_->UpdateStatus(kQueues, "", with_status);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();

  Result<json> got = client_->Get(kQueues, "", name);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)["status"], QueueStatusJson(SampleStatus(), generation)) << (*got)["status"];
  EXPECT_FALSE((*got)["spec"].contains("priority"));
  EXPECT_EQ((*got)["metadata"]["generation"], generation);
  EXPECT_EQ((*got)["status"]["fairShare"]["gpu"], 10.46);
  EXPECT_EQ((*got)["status"]["allocated"]["memory"], "96Gi");

  // An invalid spec found by the engine: Valid=False through a merge patch of the status.
  core::QueueStatus invalid;
  invalid.error = "queue " + name + ": unknown parent \"org\"";
  Result<json> patched = client_->MergePatch(
      kQueues, "", name, {{"status", QueueStatusJson(invalid, generation)}}, "status");
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ((*patched)["status"]["conditions"][0]["status"], "False");
  EXPECT_EQ((*patched)["status"]["conditions"][0]["reason"], "InvalidSpec");
  EXPECT_EQ((*patched)["status"]["conditions"][0]["message"], invalid.error);

  // Back to the sample for the printer columns.
  updated = client_->MergePatch(
      kQueues, "", name, {{"status", QueueStatusJson(SampleStatus(), generation)}}, "status");
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();

  const std::string kubectl = Kubectl();
  if (kubectl.empty()) GTEST_SKIP() << "no kubectl (CHAMBER_KUBECTL); run scripts/kube-tools.sh";
  const std::string cache = ::testing::TempDir() + "/kubectl-cache" + suffix_;
  for (const std::string resource : {"queues", "cq"}) {
    int rc = 0;
    const std::string out =
        RunCommand("'" + kubectl + "' --kubeconfig '" + kubeconfig_ + "' --cache-dir '" + cache +
                       "' get " + resource + " " + name,
                   &rc);
    ASSERT_EQ(rc, 0) << out;
    std::istringstream lines(out);
    std::string header, row;
    std::getline(lines, header);
    std::getline(lines, row);
    EXPECT_EQ(Words(header),
              (std::vector<std::string>{"NAME", "PARENT", "GPU", "QUOTA", "GPU", "LIMIT",
                                        "ALLOCATED", "GPUS", "FAIR", "SHARE", "PENDING", "AGE"}))
        << out;
    std::vector<std::string> cells = Words(row);
    ASSERT_EQ(cells.size(), 8u) << out;
    cells.pop_back();  // age
    EXPECT_EQ(cells, (std::vector<std::string>{name, "org", "40", "56", "12", "10.46", "7"}))
        << out;
  }
}

}  // namespace
}  // namespace chamber::backend
