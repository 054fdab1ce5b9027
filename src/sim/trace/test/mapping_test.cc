#include <gtest/gtest.h>

#include "sim/trace/trace.h"

namespace chamber::sim {
namespace {

TEST(MappingRulesTest, ParsesEveryField) {
  Result<MappingRules> r = ParseMappingRules(R"(queueBy: fixed
fixedQueue: sim
queues: {sim: simulated, vcA: research}
priorities: {LS: 50, BE: -5}
defaultPriority: 3
)",
                                             "rules.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->queue_by, MappingRules::QueueBy::kFixed);
  EXPECT_EQ(r->fixed_queue, "sim");
  EXPECT_EQ(r->queue_rename,
            (std::map<std::string, std::string>{{"sim", "simulated"}, {"vcA", "research"}}));
  EXPECT_EQ(r->priority_by_group, (std::map<std::string, int32_t>{{"LS", 50}, {"BE", -5}}));
  EXPECT_EQ(r->default_priority, 3);

  Result<MappingRules> empty = ParseMappingRules("", "rules.yaml");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->queue_by, MappingRules::QueueBy::kGroup);
  EXPECT_EQ(empty->fixed_queue, "default");
}

TEST(MappingRulesTest, ErrorsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"queueBy: team\n",
       "rules.yaml:1:10: field queueBy: expected group, user or fixed, got \"team\""},
      {"qeueBy: user\n",
       "rules.yaml:1:1: field qeueBy: unknown field (known: queueBy, fixedQueue, queues, "
       "priorities, defaultPriority)"},
      {"priorities:\n  LS: high\n",
       "rules.yaml:2:7: field priorities.LS: expected an integer, got \"high\""},
      {"defaultPriority: 99999999999\n",
       "rules.yaml:1:18: field defaultPriority: out of range for a priority"},
      {"queues: [a, b]\n", "rules.yaml:1:9: field queues: expected a mapping"},
      {"queues: {vcA: \"\"}\n", "rules.yaml:1:15: field queues.vcA: must not be empty"},
      {"fixedQueue: [x]\n", "rules.yaml:1:13: field fixedQueue: expected a string"},
      {"queueBy: [\n", "rules.yaml:2:1: end of sequence flow not found"},
  };
  for (const auto& [yaml, want] : cases) {
    Result<MappingRules> r = ParseMappingRules(yaml, "rules.yaml");
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_EQ(r.status().message(), want) << yaml;
  }
}

TraceJob JobWithGroupAndQos(std::string group, std::string qos) {
  TraceJob j;
  j.group = std::move(group);
  j.qos = std::move(qos);
  return j;
}

TEST(MappingRulesTest, ApplyOrder) {
  MappingRules rules;
  rules.queue_rename = {{"vcA", "research"}};
  rules.priority_by_group = {{"vcA", 40}, {"LS", 60}};
  rules.default_priority = 1;

  TraceJob j;
  j.group = "vcA";
  j.user = "alice";
  ApplyMappingRules(rules, 9, &j);
  EXPECT_EQ(j.queue, "research");  // group, then renamed
  EXPECT_EQ(j.priority, 40);       // the rules' priority beats the trace's own

  TraceJob k;
  k.user = "bob";
  ApplyMappingRules(rules, 9, &k);
  EXPECT_EQ(k.queue, "bob");  // no group: the user
  EXPECT_EQ(k.priority, 9);   // no rule: the trace's own
  ApplyMappingRules(rules, std::nullopt, &k);
  EXPECT_EQ(k.priority, 1);  // neither: the default

  TraceJob qos = JobWithGroupAndQos("pool-1", "LS");
  rules.queue_by = MappingRules::QueueBy::kUser;
  ApplyMappingRules(rules, std::nullopt, &qos);
  EXPECT_EQ(qos.queue, "pool-1");  // no user: the group
  EXPECT_EQ(qos.priority, 60);     // by qos when the group has no rule

  TraceJob nobody;
  ApplyMappingRules(rules, std::nullopt, &nobody);
  EXPECT_EQ(nobody.queue, "default");
  rules.queue_by = MappingRules::QueueBy::kFixed;
  rules.fixed_queue = "sim";
  ApplyMappingRules(rules, std::nullopt, &nobody);
  EXPECT_EQ(nobody.queue, "sim");
}

}  // namespace
}  // namespace chamber::sim
