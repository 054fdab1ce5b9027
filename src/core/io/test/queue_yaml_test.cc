#include "core/io/queue_yaml.h"

#include <gtest/gtest.h>

namespace chamber::core::io {
namespace {

TEST(QueueYaml, ReadsCustomResources) {
  Result<std::vector<Queue>> q = ParseQueues(R"(
apiVersion: chamber.io/v1alpha1
kind: Queue
metadata: {name: research}
spec:
  resources:
    gpu: {quota: 32}
---
apiVersion: chamber.io/v1alpha1
kind: Queue
metadata: {name: nlp}
spec:
  parent: research
  priority: 5
  queueing: StrictFIFO
  resources:
    gpu: {quota: 16, limit: 24, overQuotaWeight: 2, lendingLimit: 4}
    cpu: {quota: "200", limit: -1}
    memory: {quota: 2Ti}
)",
                                             "queues.yaml");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ASSERT_EQ(q->size(), 2u);
  const Queue& nlp = (*q)[1];
  EXPECT_EQ(nlp.name, "nlp");
  EXPECT_EQ(nlp.parent, "research");
  EXPECT_EQ(nlp.priority, 5);
  EXPECT_EQ(nlp.queueing, QueueingStrategy::kStrictFifo);
  EXPECT_EQ(nlp.res(Resource::kGpu).quota, Gpus(16));
  EXPECT_EQ(nlp.res(Resource::kGpu).limit, Gpus(24));
  EXPECT_DOUBLE_EQ(nlp.res(Resource::kGpu).over_quota_weight, 2.0);
  EXPECT_EQ(nlp.res(Resource::kGpu).lending_limit, Gpus(4));
  EXPECT_EQ(nlp.res(Resource::kCpu).quota, 200'000);
  EXPECT_EQ(nlp.res(Resource::kCpu).limit, kUnlimited);
  EXPECT_EQ(nlp.res(Resource::kMemory).quota, int64_t{2} << 40);
}

TEST(QueueYaml, ReadsPlainListAndKubernetesList) {
  Result<std::vector<Queue>> plain =
      ParseQueues("queues:\n  - name: a\n    resources: {gpu: {quota: 4}}\n  - name: b\n", "q");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_EQ(plain->size(), 2u);
  EXPECT_EQ((*plain)[0].res(Resource::kGpu).quota, Gpus(4));

  Result<std::vector<Queue>> list = ParseQueues(
      "kind: List\nitems:\n  - {kind: Queue, metadata: {name: x}, spec: {priority: 3}}\n", "q");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].priority, 3);
}

TEST(QueueYaml, ReadsThePreemptionPolicy) {
  Result<std::vector<Queue>> q = ParseQueues(R"(queues:
  - name: a
  - name: b
    preemption: {withinQueue: LowerOrNewerEqualPriority, reclaim: LowerPriority, delay: 2m30s}
  - name: c
    preemption: {withinQueue: Never, reclaim: Never}
  - name: d
    preemption: {whileBorrowing: {policy: LowerPriority, maxPriorityThreshold: 50}}
)",
                                             "queues.yaml");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ((*q)[0].preemption, QueuePreemption{});
  EXPECT_EQ((*q)[0].preemption.within_queue, WithinQueuePreemption::kLowerPriority);
  EXPECT_EQ((*q)[0].preemption.reclaim, ReclaimPreemption::kAny);
  EXPECT_EQ((*q)[1].preemption.within_queue, WithinQueuePreemption::kLowerOrNewerEqualPriority);
  EXPECT_EQ((*q)[1].preemption.reclaim, ReclaimPreemption::kLowerPriority);
  EXPECT_EQ((*q)[1].preemption.delay, std::chrono::seconds(150));
  EXPECT_EQ((*q)[2].preemption.within_queue, WithinQueuePreemption::kNever);
  EXPECT_EQ((*q)[2].preemption.reclaim, ReclaimPreemption::kNever);
  EXPECT_EQ((*q)[0].preemption.while_borrowing, WhileBorrowingPreemption::kNever);
  EXPECT_EQ((*q)[3].preemption.while_borrowing, WhileBorrowingPreemption::kLowerPriority);
  EXPECT_EQ((*q)[3].preemption.max_priority_threshold, 50);

  q = ParseQueues("queues:\n  - name: a\n    preemption: {reclaim: Sometimes}\n", "queues.yaml");
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().message(),
            "queues.yaml:3:27: field queues[0].preemption.reclaim: expected Never, LowerPriority "
            "or Any, got \"Sometimes\"");
  q = ParseQueues("queues:\n  - name: a\n    preemption: {delay: soon}\n", "queues.yaml");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("queues[0].preemption.delay"), std::string::npos)
      << q.status().message();
  q = ParseQueues("queues:\n  - name: a\n    preemption: {within: Never}\n", "queues.yaml");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("queues[0].preemption.within: unknown field"),
            std::string::npos)
      << q.status().message();
}

// GPU amounts are GPU-equivalents, exact to a thousandth: "2.5" and "2500m" are 2,500
// thousandths, an integer whole GPUs; anything finer, signed or malformed is refused, naming
// the field and the line.
TEST(QueueYaml, GpuAmountsAreExactToAThousandth) {
  Result<std::vector<Queue>> q = ParseQueues(
      "queues:\n"
      "  - name: a\n"
      "    resources: {gpu: {quota: 2.5, limit: 2500m, lendingLimit: 0.125}}\n"
      "  - name: b\n"
      "    resources: {gpu: {quota: 8, limit: -1}}\n",
      "queues.yaml");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ((*q)[0].res(Resource::kGpu).quota, 2500);
  EXPECT_EQ((*q)[0].res(Resource::kGpu).limit, 2500);
  EXPECT_EQ((*q)[0].res(Resource::kGpu).lending_limit, 125);
  EXPECT_EQ((*q)[1].res(Resource::kGpu).quota, Gpus(8));
  EXPECT_EQ((*q)[1].res(Resource::kGpu).limit, kUnlimited);
  const std::pair<const char*, const char*> bad[] = {
      {"0.0005", "\"0.0005\" has more than 3 decimals: GPUs are counted in thousandths"},
      {"1e3", "\"1e3\" is not an amount of GPUs (use forms like 8, 2.5, 500m)"},
      {"2.", "\"2.\" is not an amount of GPUs (use forms like 8, 2.5, 500m)"},
      {"1.5m", "\"1.5m\" is not an amount of GPUs (use forms like 8, 2.5, 500m)"},
      {"-0.5", "must not be negative"},
      {"2000000000", "\"2000000000\" is more than 1000000000 GPUs"},
      {"99999999999999999999", "is more than 1000000000 GPUs"},
  };
  for (const auto& [text, message] : bad) {
    SCOPED_TRACE(text);
    q = ParseQueues(
        "queues:\n  - name: a\n    resources: {gpu: {quota: " + std::string(text) + "}}\n",
        "queues.yaml");
    ASSERT_FALSE(q.ok());
    EXPECT_NE(q.status().message().find("queues.yaml:3:"), std::string::npos)
        << q.status().message();
    EXPECT_NE(q.status().message().find("queues[0].resources.gpu.quota: "), std::string::npos)
        << q.status().message();
    EXPECT_NE(q.status().message().find(message), std::string::npos) << q.status().message();
  }
}

TEST(QueueYaml, ErrorsNameFieldAndLine) {
  Result<std::vector<Queue>> q = ParseQueues(
      "queues:\n  - name: a\n    resources:\n      gpu: {quota: 8, limit: 4}\n", "queues.yaml");
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().message(),
            "queues.yaml:4:30: field queues[0].resources.gpu.limit: must not be below quota");

  q = ParseQueues("queues:\n  - name: a\n    resources: {gpu: {quota: -2}}\n", "queues.yaml");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("queues[0].resources.gpu.quota: must not be negative"),
            std::string::npos);

  q = ParseQueues("kind: Queue\nmetadata: {name: a}\nspec: {resources: {gpus: {quota: 1}}}\n",
                  "queues.yaml");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("spec.resources.gpus: unknown field"), std::string::npos)
      << q.status().message();

  // An empty name, however it is written (found by the queues fuzz harness: a YAML tag with no
  // value, `name: !research`, is an empty string).
  for (const char* text : {"queues:\n  - name: !research\n", "queues:\n  - name: \"\"\n",
                           "kind: Queue\nmetadata: {name: !a}\n"}) {
    q = ParseQueues(text, "queues.yaml");
    ASSERT_FALSE(q.ok()) << text;
    EXPECT_NE(q.status().message().find("needs a name"), std::string::npos) << q.status().message();
    EXPECT_NE(q.status().message().find("queues.yaml:"), std::string::npos) << q.status().message();
  }

  q = ParseQueues("kind: Queue\napiVersion: chamber.io/v2\nmetadata: {name: a}\n", "queues.yaml");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("expected chamber.io/v1alpha1"), std::string::npos);
}

// resources.gpu.models (docs/queues.md, "GPU models"): a list, in order, each model with the
// quantities of a GPU resource; errors name the entry.
TEST(QueueYaml, ReadsGpuModels) {
  Result<std::vector<Queue>> q = ParseQueues(R"(
kind: Queue
metadata: {name: research}
spec:
  resources:
    gpu:
      quota: 12
      models:
        - {name: NVIDIA-H100-80GB-HBM3, quota: 4, limit: 8, lendingLimit: 2}
        - {name: NVIDIA-A100-SXM4-80GB, quota: 8, overQuotaWeight: 2}
)",
                                             "queues.yaml");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  const Queue& r = (*q)[0];
  EXPECT_EQ(r.res(Resource::kGpu).quota, Gpus(12));
  ASSERT_EQ(r.gpu_models.size(), 2u);
  EXPECT_EQ(r.gpu_models[0].model, "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(r.gpu_models[0].gpu.quota, Gpus(4));
  EXPECT_EQ(r.gpu_models[0].gpu.limit, Gpus(8));
  EXPECT_EQ(r.gpu_models[0].gpu.lending_limit, Gpus(2));
  EXPECT_EQ(r.gpu_models[1].model, "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(r.gpu_models[1].gpu.limit, kUnlimited);
  EXPECT_DOUBLE_EQ(r.gpu_models[1].gpu.over_quota_weight, 2.0);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"models: {H100: {quota: 4}}",
       "q.yaml:1:46: field queues[0].resources.gpu.models: expected a list of GPU models with "
       "their quotas, e.g. [{name: H100-SXM5-80GB, quota: 8}]"},
      {"models: [{quota: 4}]",
       "q.yaml:1:47: field queues[0].resources.gpu.models[0].name: a GPU model needs a name"},
      {"models: [{name: H100, quota: 4, limit: 2}]",
       "q.yaml:1:77: field queues[0].resources.gpu.models[0].limit: must not be below quota"},
      {"models: [{name: H100}, {name: H100}]",
       "q.yaml:1:68: field queues[0].resources.gpu.models[1].name: model H100 is listed twice"},
      {"models: [{name: a/b}]",
       "q.yaml:1:54: field queues[0].resources.gpu.models[0].name: a GPU model is a name without "
       "'/', got \"a/b\""},
      {"models: [{name: H100, models: []}]",
       "q.yaml:1:60: field queues[0].resources.gpu.models[0].models: unknown field (known: name, "
       "quota, limit, overQuotaWeight, lendingLimit)"},
  };
  for (const auto& [models, want] : bad) {
    q = ParseQueues("queues: [{name: a, resources: {gpu: {" + models + "}}}]\n", "q.yaml");
    ASSERT_FALSE(q.ok()) << models;
    EXPECT_EQ(q.status().message(), want) << models;
  }
}

}  // namespace
}  // namespace chamber::core::io
