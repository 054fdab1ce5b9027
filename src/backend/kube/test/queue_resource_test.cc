#include "backend/kube/queue_resource.h"

#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "common/quantity.h"
#include "core/io/queue_yaml.h"

namespace chamber::backend {
namespace {

using core::Resource;
using nlohmann::json;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json QueueObject(const std::string& name, json spec) {
  return {{"apiVersion", "chamber.io/v1alpha1"},
          {"kind", "Queue"},
          {"metadata", {{"name", name}, {"uid", "0b6f"}, {"generation", 3}}},
          {"spec", std::move(spec)}};
}

std::string ErrorOf(const json& spec) {
  Result<core::Queue> q = QueueFromResource(QueueObject("team-a", spec));
  return q.ok() ? "(accepted)" : q.status().message();
}

TEST(QueueFromResource, DecodesEveryField) {
  Result<core::Queue> q = QueueFromResource(QueueObject(
      "nlp",
      {{"parent", "research"},
       {"priority", -5},
       {"queueing", "StrictFIFO"},
       {"resources",
        {{"gpu", {{"quota", 16}, {"limit", 24}, {"overQuotaWeight", 2.5}, {"lendingLimit", 4}}},
         {"cpu", {{"quota", "1500m"}, {"limit", -1}, {"lendingLimit", 8}}},
         {"memory", {{"quota", "64Gi"}, {"limit", "1e12"}, {"overQuotaWeight", 0}}}}}}));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->name, "nlp");
  EXPECT_EQ(q->parent, "research");
  EXPECT_EQ(q->priority, -5);
  EXPECT_EQ(q->queueing, core::QueueingStrategy::kStrictFifo);
  EXPECT_EQ(q->res(Resource::kGpu).quota, core::Gpus(16));
  EXPECT_EQ(q->res(Resource::kGpu).limit, core::Gpus(24));
  EXPECT_DOUBLE_EQ(q->res(Resource::kGpu).over_quota_weight, 2.5);
  EXPECT_EQ(q->res(Resource::kGpu).lending_limit, core::Gpus(4));
  EXPECT_EQ(q->res(Resource::kCpu).quota, 1500);
  EXPECT_EQ(q->res(Resource::kCpu).limit, core::kUnlimited);
  EXPECT_EQ(q->res(Resource::kCpu).lending_limit, 8000);
  EXPECT_DOUBLE_EQ(q->res(Resource::kCpu).over_quota_weight, 1.0);
  EXPECT_EQ(q->res(Resource::kMemory).quota, int64_t{64} << 30);
  EXPECT_EQ(q->res(Resource::kMemory).limit, 1'000'000'000'000);
  EXPECT_DOUBLE_EQ(q->res(Resource::kMemory).over_quota_weight, 0.0);
  EXPECT_EQ(q->res(Resource::kMemory).lending_limit, core::kUnlimited);
}

TEST(QueueFromResource, AbsentSpecGivesDefaults) {
  for (const json& object :
       {json{{"kind", "Queue"}, {"metadata", {{"name", "root"}}}},
        json{{"kind", "Queue"}, {"metadata", {{"name", "root"}}}, {"spec", nullptr}},
        QueueObject("root", json::object())}) {
    Result<core::Queue> q = QueueFromResource(object);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    EXPECT_EQ(q->name, "root");
    EXPECT_EQ(q->parent, "");
    EXPECT_EQ(q->priority, 0);
    EXPECT_FALSE(q->queueing.has_value());
    for (Resource r : core::kAllResources) {
      EXPECT_EQ(q->res(r).quota, 0);
      EXPECT_EQ(q->res(r).limit, core::kUnlimited);
      EXPECT_DOUBLE_EQ(q->res(r).over_quota_weight, 1.0);
      EXPECT_EQ(q->res(r).lending_limit, core::kUnlimited);
    }
  }
}

TEST(QueueFromResource, BadFieldsNameQueueAndField) {
  const json gpu_quota_neg = {{"resources", {{"gpu", {{"quota", -1}}}}}};
  EXPECT_EQ(ErrorOf(gpu_quota_neg),
            "queue team-a: field spec.resources.gpu.quota: must not be negative");
  EXPECT_EQ(ErrorOf({{"resources", {{"gpu", {{"quota", 8}, {"limit", 4}}}}}}),
            "queue team-a: field spec.resources.gpu.limit: must not be below quota");
  EXPECT_EQ(ErrorOf({{"resources", {{"memory", {{"quota", "2Gi"}, {"limit", "1Gi"}}}}}}),
            "queue team-a: field spec.resources.memory.limit: must not be below quota");
  EXPECT_EQ(ErrorOf({{"resources", {{"gpu", {{"limit", -2}}}}}}),
            "queue team-a: field spec.resources.gpu.limit: must be -1 (none) or at least 0");
  EXPECT_EQ(ErrorOf({{"resources", {{"cpu", {{"lendingLimit", "-3"}}}}}}),
            "queue team-a: field spec.resources.cpu.lendingLimit: must be -1 (none) or at least 0");
  EXPECT_EQ(ErrorOf({{"resources", {{"gpu", {{"overQuotaWeight", -0.5}}}}}}),
            "queue team-a: field spec.resources.gpu.overQuotaWeight: must not be negative");
  EXPECT_EQ(ErrorOf({{"resources", {{"gpu", {{"quota", 1.5}}}}}}), "(accepted)");
  EXPECT_EQ(ErrorOf({{"resources", {{"gpu", {{"quota", 1.0005}}}}}}),
            "queue team-a: field spec.resources.gpu.quota: \"1.0005\" has more than 3 decimals: "
            "GPUs are counted in thousandths");
  EXPECT_EQ(ErrorOf({{"resources", {{"gpu", {{"limit", -0.5}}}}}}),
            "queue team-a: field spec.resources.gpu.limit: must be -1 (none) or at least 0");
  EXPECT_EQ(ErrorOf({{"resources", {{"cpu", {{"quota", "2x"}}}}}}),
            "queue team-a: field spec.resources.cpu.quota: \"2x\": unknown CPU unit \"x\"");
  EXPECT_EQ(ErrorOf({{"resources", {{"memory", {{"quota", "lots"}}}}}}),
            "queue team-a: field spec.resources.memory.quota: \"lots\" is not a memory quantity "
            "(use forms like 512Mi, 16Gi, 1G)");
  EXPECT_EQ(ErrorOf({{"queueing", "Fast"}}),
            "queue team-a: field spec.queueing: expected BestEffort or StrictFIFO, got \"Fast\"");
  EXPECT_EQ(ErrorOf({{"priority", "high"}}),
            "queue team-a: field spec.priority: expected an integer, got \"high\"");
  EXPECT_EQ(ErrorOf({{"priority", 2'000'000'000}}),
            "queue team-a: field spec.priority: out of range");
  EXPECT_EQ(ErrorOf({{"parent", json::array()}}),
            "queue team-a: field spec.parent: expected a string");
  EXPECT_EQ(ErrorOf({{"resources", {{"gpus", {{"quota", 1}}}}}}),
            "queue team-a: field spec.resources.gpus: unknown field (known: gpu, cpu, memory)");
  EXPECT_EQ(ErrorOf({{"resources", {{"gpu", {{"qouta", 1}}}}}}),
            "queue team-a: field spec.resources.gpu.qouta: unknown field (known: quota, limit, "
            "overQuotaWeight, lendingLimit, models)");
  EXPECT_EQ(ErrorOf({{"resources", "all"}}),
            "queue team-a: field spec.resources: expected a mapping");
}

// Found by the queue_resource fuzz harness: the check for a name used json::empty(), which is
// false for every string, so a Queue named "" was read.
TEST(QueueFromResource, EmptyNameIsAnError) {
  Result<core::Queue> q = QueueFromResource(json{{"kind", "Queue"}, {"metadata", {{"name", ""}}}});
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().message(), "Queue object: field metadata.name: a Queue needs a name");
}

TEST(QueueFromResource, BadObjects) {
  Result<core::Queue> q = QueueFromResource(json{{"kind", "Queue"}, {"metadata", json::object()}});
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().message(), "Queue object: field metadata.name: a Queue needs a name");
  q = QueueFromResource(json::array());
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().message(), "Queue object: expected a JSON object");
  q = QueueFromResource(json{{"kind", "Pod"}, {"metadata", {{"name", "p"}}}});
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().message(), "queue p: field kind: expected Queue, got \"Pod\"");
  q = QueueFromResource(
      json{{"apiVersion", "chamber.io/v1"}, {"kind", "Queue"}, {"metadata", {{"name", "p"}}}});
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().message(),
            "queue p: field apiVersion: expected chamber.io/v1alpha1, got \"chamber.io/v1\"");
}

TEST(DecayedUsage, RoundTripsThroughTheStatusAndRefusesWhatIsMalformed) {
  const int64_t at = 1'796'032'800'000;  // 2026-11-30T10:00:00Z
  const json written = DecayedUsageJson(41.20749, at);
  EXPECT_EQ(written, json({{"gpuHours", 41.207}, {"time", "2026-11-30T10:00:00Z"}}));
  std::optional<StoredUsage> back =
      DecayedUsageFromResource({{"status", {{"decayedUsage", written}}}});
  ASSERT_TRUE(back.has_value());
  EXPECT_DOUBLE_EQ(back->gpu_hours, 41.207);
  EXPECT_EQ(back->unix_ms, at);
  for (const json& bad :
       {json::object(), json{{"status", json::object()}}, json{{"status", "x"}},
        json{{"status", {{"decayedUsage", {{"gpuHours", "7"}, {"time", "2026-11-30T10:00:00Z"}}}}}},
        json{{"status", {{"decayedUsage", {{"gpuHours", -1}, {"time", "2026-11-30T10:00:00Z"}}}}}},
        json{{"status", {{"decayedUsage", {{"gpuHours", 3}, {"time", "yesterday"}}}}}},
        json{{"status", {{"decayedUsage", {{"gpuHours", 3}}}}}}})
    EXPECT_FALSE(DecayedUsageFromResource(bad).has_value()) << bad.dump();
}

// Each GPU model's entry of status.models[] carries its own decayed usage; entries without a
// name, or whose figure does not read, are left out.
TEST(DecayedUsage, EachModelsFigureIsReadFromItsEntry) {
  const int64_t at = 1'796'612'400'000;  // 2026-12-07T03:00:00Z
  const json status = {
      {"decayedUsage", DecayedUsageJson(9, at)},
      {"models",
       {{{"name", "H100"}, {"allocated", 8}, {"decayedUsage", DecayedUsageJson(6.5, at)}},
        {{"name", "A100"}, {"allocated", 0}},
        {{"name", "L4"}, {"decayedUsage", {{"gpuHours", -2}, {"time", "2026-12-07T03:00:00Z"}}}},
        {{"allocated", 1}, {"decayedUsage", DecayedUsageJson(1, at)}},
        {{"name", "B200"}, {"decayedUsage", DecayedUsageJson(2.25, at - 1000)}}}}};
  const auto models = ModelDecayedUsageFromResource({{"status", status}});
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0].first, "H100");
  EXPECT_DOUBLE_EQ(models[0].second.gpu_hours, 6.5);
  EXPECT_EQ(models[0].second.unix_ms, at);
  EXPECT_EQ(models[1].first, "B200");
  EXPECT_DOUBLE_EQ(models[1].second.gpu_hours, 2.25);
  EXPECT_EQ(models[1].second.unix_ms, at - 1000);
  EXPECT_TRUE(ModelDecayedUsageFromResource({{"status", {{"models", "H100"}}}}).empty());
  EXPECT_TRUE(ModelDecayedUsageFromResource(json::object()).empty());
}

TEST(Quantities, RenderAsKubernetesQuantities) {
  EXPECT_EQ(CpuQuantity(0), "0");
  EXPECT_EQ(CpuQuantity(2000), "2");
  EXPECT_EQ(CpuQuantity(1500), "1500m");
  EXPECT_EQ(CpuQuantity(1), "1m");
  EXPECT_EQ(MemoryQuantity(0), "0");
  EXPECT_EQ(MemoryQuantity(int64_t{64} << 30), "64Gi");
  EXPECT_EQ(MemoryQuantity(int64_t{3} << 49), "1536Ti");
  EXPECT_EQ(MemoryQuantity(int64_t{1} << 50), "1Pi");
  EXPECT_EQ(MemoryQuantity(1536 * 1024), "1536Ki");
  EXPECT_EQ(MemoryQuantity(1000), "1000");
  EXPECT_EQ(MemoryQuantity(1'000'000'000), "1000000000");
}

RC_GTEST_PROP(Quantities, RoundTripThroughCoreIo, ()) {
  const int64_t milli = *rc::gen::inRange<int64_t>(0, int64_t{1} << 50);
  const int64_t bytes = *rc::gen::oneOf(
      rc::gen::inRange<int64_t>(0, int64_t{1} << 52),
      rc::gen::map(rc::gen::inRange<int64_t>(0, 1 << 20), [](int64_t k) { return k << 30; }));
  Result<int64_t> cpu = ParseCpuMilli(CpuQuantity(milli));
  RC_ASSERT(cpu.ok());
  RC_ASSERT(*cpu == milli);
  Result<int64_t> mem = ParseBytes(MemoryQuantity(bytes));
  RC_ASSERT(mem.ok());
  RC_ASSERT(*mem == bytes);
}

core::QueueStatus SampleStatus() {
  core::QueueStatus s;
  s.name = "nlp";
  s.allocated = core::Resources::Of(12, 48'500, int64_t{96} << 30);
  s.fair_share = {10'456, 40'000.4, 1.5 * (int64_t{1} << 30)};
  s.borrowed = core::Resources::Of(2, 0, 0);
  s.lent = core::Resources::Of(0, 1500, 1000);
  s.pending_workloads = 7;
  s.running_workloads = 3;
  return s;
}

TEST(QueueStatusJson, HasTheCrdShape) {
  const json expected = json::parse(R"({
    "observedGeneration": 4,
    "allocated": {"gpu": 12, "cpu": "48500m", "memory": "96Gi"},
    "fairShare": {"gpu": 10.46, "cpu": "40", "memory": "1536Mi"},
    "borrowed": {"gpu": 2, "cpu": "0", "memory": "0"},
    "lent": {"gpu": 0, "cpu": "1500m", "memory": "1000"},
    "pendingWorkloads": 7,
    "runningWorkloads": 3,
    "conditions": [{"type": "Valid", "status": "True", "reason": "Accepted",
                    "message": "the scheduler accepts the spec", "observedGeneration": 4}]
  })");
  EXPECT_EQ(QueueStatusJson(SampleStatus(), 4), expected) << QueueStatusJson(SampleStatus(), 4);
}

TEST(QueueStatusJson, InvalidSpecBecomesValidFalse) {
  core::QueueStatus s;
  s.name = "orphan";
  s.error = "queue orphan: unknown parent \"nowhere\"";
  const json j = QueueStatusJson(s, 9);
  ASSERT_EQ(j["conditions"].size(), 1u);
  EXPECT_EQ(j["conditions"][0], json({{"type", "Valid"},
                                      {"status", "False"},
                                      {"reason", "InvalidSpec"},
                                      {"message", "queue orphan: unknown parent \"nowhere\""},
                                      {"observedGeneration", 9}}));
  EXPECT_EQ(j["allocated"], json({{"gpu", 0}, {"cpu", "0"}, {"memory", "0"}}));
}

TEST(QueueStatusJson, ValuesRoundTrip) {
  const core::QueueStatus s = SampleStatus();
  const json j = QueueStatusJson(s, 1);
  for (const char* field : {"allocated", "borrowed", "lent"}) {
    const core::Resources& want = std::string(field) == "allocated"  ? s.allocated
                                  : std::string(field) == "borrowed" ? s.borrowed
                                                                     : s.lent;
    EXPECT_EQ(j[field]["gpu"].get<int64_t>(), want.whole_gpus()) << field;
    EXPECT_EQ(*ParseCpuMilli(j[field]["cpu"].get<std::string>()), want.cpu_milli()) << field;
    EXPECT_EQ(*ParseBytes(j[field]["memory"].get<std::string>()), want.memory_bytes()) << field;
  }
  EXPECT_DOUBLE_EQ(j["fairShare"]["gpu"].get<double>(), 10.46);
  EXPECT_EQ(*ParseCpuMilli(j["fairShare"]["cpu"].get<std::string>()), 40'000);
  EXPECT_EQ(*ParseBytes(j["fairShare"]["memory"].get<std::string>()), int64_t{3} << 29);
  EXPECT_EQ(j["pendingWorkloads"].get<int>(), 7);
  EXPECT_EQ(j["runningWorkloads"].get<int>(), 3);
}

TEST(ManifestToJson, TypesScalarsAsYamlCoreSchema) {
  Result<std::vector<json>> docs = ManifestToJson(
      "a: 512\nb: \"512\"\nc: 1.5\nd: true\ne: null\nf: 64Gi\ng: -1\nh: 1e3\ni: ''\nj: [x, 2]\n"
      "---\n---\nk: {l: m}\n",
      "m.yaml");
  ASSERT_TRUE(docs.ok()) << docs.status().ToString();
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[0], json::parse(R"({"a": 512, "b": "512", "c": 1.5, "d": true, "e": null,
      "f": "64Gi", "g": -1, "h": 1000.0, "i": "", "j": ["x", 2]})"));
  EXPECT_EQ((*docs)[1], json::parse(R"({"k": {"l": "m"}})"));

  Result<std::vector<json>> bad = ManifestToJson("a: [1\n", "m.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("m.yaml:", 0), 0u) << bad.status().message();
}

// The example manifest decodes through the resource path and through core/io's file reader to
// the same queues.
TEST(Examples, QueuesYamlDecodesBothWays) {
  const std::string text = ReadText(CHAMBER_QUEUE_EXAMPLES);
  ASSERT_FALSE(text.empty());
  Result<std::vector<json>> docs = ManifestToJson(text, CHAMBER_QUEUE_EXAMPLES);
  ASSERT_TRUE(docs.ok()) << docs.status().ToString();
  Result<std::vector<core::Queue>> from_file = core::io::ParseQueues(text, "queues.yaml");
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  ASSERT_EQ(docs->size(), 4u);
  ASSERT_EQ(from_file->size(), 4u);
  std::vector<core::Queue> queues;
  for (size_t i = 0; i < docs->size(); ++i) {
    Result<core::Queue> q = QueueFromResource((*docs)[i]);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    const core::Queue& f = (*from_file)[i];
    EXPECT_EQ(q->name, f.name);
    EXPECT_EQ(q->parent, f.parent);
    EXPECT_EQ(q->priority, f.priority);
    EXPECT_EQ(q->queueing, f.queueing);
    EXPECT_EQ(q->gpu_models, f.gpu_models) << q->name;
    for (Resource r : core::kAllResources) {
      EXPECT_EQ(q->res(r).quota, f.res(r).quota) << q->name;
      EXPECT_EQ(q->res(r).limit, f.res(r).limit) << q->name;
      EXPECT_EQ(q->res(r).lending_limit, f.res(r).lending_limit) << q->name;
      EXPECT_DOUBLE_EQ(q->res(r).over_quota_weight, f.res(r).over_quota_weight) << q->name;
    }
    queues.push_back(*q);
  }
  EXPECT_EQ(queues[1].name, "nlp");
  EXPECT_EQ(queues[1].parent, "research");
  EXPECT_EQ(queues[1].res(Resource::kGpu).limit, core::Gpus(56));
  EXPECT_EQ(queues[1].res(Resource::kGpu).lending_limit, core::Gpus(8));
  EXPECT_EQ(queues[1].res(Resource::kCpu).quota, 320'000);
  EXPECT_EQ(queues[2].res(Resource::kCpu).quota, 1500);
  EXPECT_EQ(queues[2].res(Resource::kMemory).limit, int64_t{1536} << 30);
  EXPECT_EQ(queues[0].res(Resource::kMemory).quota, int64_t{4} << 40);
  ASSERT_EQ(queues[3].gpu_models.size(), 2u);
  EXPECT_EQ(queues[3].gpu_models[0].model, "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(queues[3].gpu_models[0].gpu.limit, core::Gpus(16));
  EXPECT_DOUBLE_EQ(queues[3].gpu_models[1].gpu.over_quota_weight, 2.0);
}

// The CRD's spec schema and core/io's reader are one contract: every field the schema declares
// is accepted by the reader, and every field the reader knows is in the schema.
TEST(Crd, SchemaMatchesTheReader) {
  Result<std::vector<json>> docs = ManifestToJson(ReadText(CHAMBER_QUEUE_CRD), CHAMBER_QUEUE_CRD);
  ASSERT_TRUE(docs.ok()) << docs.status().ToString();
  ASSERT_EQ(docs->size(), 1u);
  const json& crd = (*docs)[0];
  EXPECT_EQ(crd["metadata"]["name"], "queues.chamber.io");
  EXPECT_EQ(crd["spec"]["group"], kQueues.group);
  EXPECT_EQ(crd["spec"]["scope"], "Cluster");
  EXPECT_EQ(crd["spec"]["names"]["plural"], kQueues.plural);
  EXPECT_EQ(crd["spec"]["names"]["kind"], kQueues.kind);
  const json& version = crd["spec"]["versions"][0];
  EXPECT_EQ(version["name"], kQueues.version);
  std::vector<std::string> columns;
  for (const json& c : version["additionalPrinterColumns"]) columns.push_back(c["name"]);
  EXPECT_EQ(columns, (std::vector<std::string>{"Parent", "GPU Quota", "GPU Limit", "Allocated GPUs",
                                               "Fair Share", "Pending", "Age"}));

  const json& spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
  std::set<std::string> keys;
  for (const auto& [k, v] : spec.items()) keys.insert(k);
  EXPECT_EQ(keys,
            (std::set<std::string>{"parent", "priority", "queueing", "preemption", "resources"}));
  EXPECT_EQ(spec["queueing"]["enum"], json({"BestEffort", "StrictFIFO"}));
  for (const json& value : spec["queueing"]["enum"])
    EXPECT_EQ(ErrorOf({{"queueing", value}}), "(accepted)") << value;
  // Every value the schema allows for the preemption policy, the reader takes too.
  const json& preemption = spec["preemption"]["properties"];
  std::set<std::string> policy_fields;
  for (const auto& [k, v] : preemption.items()) policy_fields.insert(k);
  EXPECT_EQ(policy_fields,
            (std::set<std::string>{"withinQueue", "reclaim", "whileBorrowing", "delay"}));
  for (const char* field : {"withinQueue", "reclaim"})
    for (const json& value : preemption[field]["enum"])
      EXPECT_EQ(ErrorOf({{"preemption", {{field, value}}}}), "(accepted)") << field << value;
  for (const json& value : preemption["whileBorrowing"]["properties"]["policy"]["enum"])
    EXPECT_EQ(ErrorOf({{"preemption", {{"whileBorrowing", {{"policy", value}}}}}}), "(accepted)")
        << value;
  EXPECT_EQ(ErrorOf({{"preemption", {{"delay", "1h30m"}}}}), "(accepted)");
  std::set<std::string> resources;
  for (const auto& [name, schema] : spec["resources"]["properties"].items()) {
    resources.insert(name);
    std::set<std::string> fields;
    for (const auto& [field, field_schema] : schema["properties"].items()) {
      fields.insert(field);
      if (field == "models") continue;  // below
      const json value = field == "overQuotaWeight" ? json(1.5) : json(2);
      EXPECT_EQ(ErrorOf({{"resources", {{name, {{field, value}}}}}}), "(accepted)")
          << name << "." << field;
    }
    std::set<std::string> want = {"quota", "limit", "overQuotaWeight", "lendingLimit"};
    if (name == "gpu") want.insert("models");
    EXPECT_EQ(fields, want) << name;
  }
  // Every field of a GPU model the schema has, the reader takes.
  const json& model = spec["resources"]["properties"]["gpu"]["properties"]["models"]["items"];
  std::set<std::string> model_fields;
  json entry = json::object();
  for (const auto& [field, field_schema] : model["properties"].items()) {
    model_fields.insert(field);
    entry[field] = field == "name"              ? json("H100")
                   : field == "overQuotaWeight" ? json(1.5)
                                                : json(2);
  }
  EXPECT_EQ(model_fields,
            (std::set<std::string>{"name", "quota", "limit", "overQuotaWeight", "lendingLimit"}));
  EXPECT_EQ(model["required"], json({"name"}));
  EXPECT_EQ(ErrorOf({{"resources", {{"gpu", {{"models", json::array({entry})}}}}}}), "(accepted)");
  EXPECT_EQ(resources, (std::set<std::string>{"gpu", "cpu", "memory"}));

  // The status schema holds every field QueueStatusJson writes.
  const json& status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"];
  const json written = QueueStatusJson(SampleStatus(), 1);
  for (const auto& [field, value] : written.items()) {
    ASSERT_TRUE(status.contains(field)) << field;
    if (value.is_object()) {
      for (const auto& [sub, v] : value.items())
        EXPECT_TRUE(status[field]["properties"].contains(sub)) << field << "." << sub;
    }
  }
  for (const auto& [field, v] : written["conditions"][0].items())
    EXPECT_TRUE(status["conditions"]["items"]["properties"].contains(field)) << field;
}

}  // namespace
}  // namespace chamber::backend
