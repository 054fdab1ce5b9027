#include <gtest/gtest.h>

#include "common/file.h"
#include "sim/trace/test/test_util.h"
#include "sim/trace/trace.h"

namespace chamber::sim {
namespace {

using std::chrono::milliseconds;
using testing::DataPath;
using testing::Skipping;

constexpr milliseconds Sec(int64_t s) { return milliseconds(s * 1000); }
constexpr int64_t kMi = int64_t{1} << 20;

TEST(OpenbTest, ReadsTheFixtureWithMappingRules) {
  Result<std::string> yaml = ReadFile(DataPath("mapping.yaml"));
  ASSERT_TRUE(yaml.ok());
  Result<MappingRules> rules = ParseMappingRules(*yaml, "mapping.yaml");
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  TraceReadOptions o;
  o.rules = *rules;
  Result<Trace> t = ReadTrace(DataPath("openb_pod_list.csv"), TraceFormat::kOpenb, o);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 5u);

  const TraceJob& eight = t->jobs[0];
  EXPECT_EQ(eight.id, "openb-pod-0017");
  EXPECT_EQ(eight.submit, Sec(0));
  EXPECT_EQ(eight.duration, Sec(1'332'357));  // deletion - scheduled
  EXPECT_EQ(eight.pods, 1);
  EXPECT_EQ(eight.gpus_per_pod, 8);
  EXPECT_EQ(eight.gpu_milli_per_pod, 0);
  EXPECT_EQ(eight.cpu_milli_per_pod, 88'000);
  EXPECT_EQ(eight.memory_bytes_per_pod, 327'680 * kMi);
  EXPECT_EQ(eight.gpu_models, std::vector<std::string>{"G2"});
  EXPECT_EQ(eight.qos, "Burstable");
  EXPECT_EQ(eight.group, "Burstable");
  EXPECT_EQ(eight.queue, "Burstable");
  EXPECT_EQ(eight.priority, 20);

  const TraceJob& shared = t->jobs[1];
  EXPECT_EQ(shared.id, "openb-pod-0022");
  EXPECT_EQ(shared.submit, Sec(241'678));
  EXPECT_EQ(shared.duration, Sec(294'651));
  EXPECT_EQ(shared.gpus_per_pod, 0);
  EXPECT_EQ(shared.gpu_milli_per_pod, 220);  // 22% of one GPU
  EXPECT_EQ(shared.memory_bytes_per_pod, 15'258 * kMi);
  EXPECT_TRUE(shared.gpu_models.empty());
  EXPECT_EQ(shared.queue, "best-effort");  // renamed
  EXPECT_EQ(shared.priority, 1);           // BE has no priority: the default

  const TraceJob& v100 = t->jobs[2];
  EXPECT_EQ(v100.submit, Sec(523'805));
  EXPECT_EQ(v100.duration, Sec(33'053));  // scheduled two seconds after creation
  EXPECT_EQ(v100.gpus_per_pod, 1);
  EXPECT_EQ(v100.gpu_models, (std::vector<std::string>{"V100M16", "V100M32"}));  // deduplicated
  EXPECT_EQ(v100.queue, "latency");
  EXPECT_EQ(v100.priority, 50);

  const TraceJob& cpu = t->jobs[3];
  EXPECT_EQ(cpu.submit, Sec(554'589));
  EXPECT_EQ(cpu.gpus_per_pod, 0);
  EXPECT_EQ(cpu.gpu_milli_per_pod, 0);
  EXPECT_EQ(cpu.duration, Sec(21'735));

  const TraceJob& pending = t->jobs[4];
  EXPECT_EQ(pending.id, "openb-pod-0061");
  EXPECT_EQ(pending.submit, Sec(563'781));
  EXPECT_EQ(pending.duration, Sec(125));  // never scheduled: deletion - creation
}

TEST(OpenbTest, Errors) {
  const std::string header =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"p,1000,1024,2,500,,BE,Running,10,20,10",
       "o.csv:2:15: column gpu_milli: a GPU share below 1000 needs num_gpu 1, got num_gpu 2"},
      {"p,1000,1024,0,500,,BE,Running,10,20,10",
       "o.csv:2:15: column gpu_milli: is 500 but num_gpu is 0"},
      {"p,1000,1024,1,1500,,BE,Running,10,20,10",
       "o.csv:2:15: column gpu_milli: \"1500\" is out of range [0, 1000]"},
      {"p,1000,1024,1,1000,,BE,Running,10,5,10",
       "o.csv:2:35: column deletion_time: is before scheduled_time"},
      {"p,1000,1024,1,1000,,BE,Running,10,20,9",
       "o.csv:2:38: column scheduled_time: is before creation_time"},
      {"p,1000,1024,1,1000,,BE,Running,,20,10",
       "o.csv:2:32: column creation_time: must not be empty"},
      {"p,1k,1024,1,1000,,BE,Running,10,20,10",
       "o.csv:2:3: column cpu_milli: \"1k\" is not an integer"},
  };
  for (const auto& [line, want] : cases) {
    Result<Trace> t = ParseTrace(header + line + "\n", "o.csv", TraceFormat::kOpenb, {});
    ASSERT_FALSE(t.ok()) << line;
    EXPECT_EQ(t.status().message(), want) << line;
  }
  std::string all = header;
  for (const auto& c : cases) all += c.first + "\n";
  Result<Trace> t = ParseTrace(all, "o.csv", TraceFormat::kOpenb, Skipping());
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->jobs.empty());
  EXPECT_EQ(t->skipped_lines, 7);
  EXPECT_EQ(t->skipped_examples.size(), 5u);
}

TEST(OpenbTest, NodeList) {
  Result<std::vector<OpenbNode>> nodes = ReadOpenbNodes(DataPath("openb_node_list.csv"));
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  EXPECT_EQ(*nodes, (std::vector<OpenbNode>{
                        {"openb-node-0227", 32'000, 262'144 * kMi, 0, ""},
                        {"openb-node-0228", 128'000, 786'432 * kMi, 8, "G3"},
                        {"openb-node-0229", 96'000, 786'432 * kMi, 8, "V100M32"},
                        {"openb-node-0230", 64'000, 262'144 * kMi, 2, ""},
                    }));
  EXPECT_EQ(
      ParseOpenbNodes("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,1,T4\nn1,1,1,1,T4\n", "nodes.csv")
          .status()
          .message(),
      "nodes.csv:3:1: column sn: duplicate node \"n1\" (first on line 2)");
  EXPECT_EQ(ParseOpenbNodes("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,eight,T4\n", "nodes.csv")
                .status()
                .message(),
            "nodes.csv:2:8: column gpu: \"eight\" is not an integer");
  EXPECT_EQ(ParseOpenbNodes("cpu_milli,gpu\n", "nodes.csv").status().message(),
            "nodes.csv:1:14: column sn: missing from the header (expected columns sn,cpu_milli,"
            "memory_mib,gpu,model)");
}

}  // namespace
}  // namespace chamber::sim
