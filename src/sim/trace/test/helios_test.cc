#include <gtest/gtest.h>

#include "sim/trace/test/test_util.h"
#include "sim/trace/trace.h"

namespace chamber::sim {
namespace {

using std::chrono::milliseconds;
using testing::DataPath;
using testing::Skipping;

constexpr milliseconds Sec(int64_t s) { return milliseconds(s * 1000); }

TEST(HeliosTest, ReadsTheFixture) {
  Result<Trace> t = ReadTrace(DataPath("helios_cluster_log.csv"), TraceFormat::kHelios, {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 6u);
  std::vector<std::string> ids;
  for (const TraceJob& j : t->jobs) ids.push_back(j.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"1425515", "1425511", "1425512", "1425513", "1425514",
                                           "1425516"}));

  // The earliest submit (18:40:01) is 0.
  const TraceJob& cpu = t->jobs[0];
  EXPECT_EQ(cpu.submit, Sec(0));
  EXPECT_EQ(cpu.duration, Sec(600));  // no duration: end_time - start_time
  EXPECT_EQ(cpu.gpus_per_pod, 0);     // a CPU job, kept
  EXPECT_EQ(cpu.pods, 1);
  EXPECT_EQ(cpu.cpu_milli_per_pod, 8000);
  EXPECT_EQ(cpu.user, "uVMrF");
  EXPECT_EQ(cpu.group, "vchbv");
  EXPECT_EQ(cpu.queue, "vchbv");

  const TraceJob& first = t->jobs[1];
  EXPECT_EQ(first.submit, Sec(60));
  EXPECT_EQ(first.duration, Sec(36848));
  EXPECT_EQ(first.gpus_per_pod, 1);
  EXPECT_EQ(first.pods, 1);
  EXPECT_EQ(first.queue, "vcJkd");
  EXPECT_EQ(first.priority, 0);

  EXPECT_EQ(t->jobs[2].submit, Sec(86));
  EXPECT_EQ(t->jobs[2].gpus_per_pod, 4);
  EXPECT_EQ(t->jobs[2].cpu_milli_per_pod, 16000);
  EXPECT_EQ(t->jobs[3].duration, Sec(675233));

  const TraceJob& two_nodes = t->jobs[4];
  EXPECT_EQ(two_nodes.submit, Sec(119));
  EXPECT_EQ(two_nodes.pods, 2);
  EXPECT_EQ(two_nodes.gpus_per_pod, 8);  // 16 GPUs over 2 nodes
  EXPECT_EQ(two_nodes.cpu_milli_per_pod, 48000);
  EXPECT_EQ(two_nodes.duration, Sec(3600));

  const TraceJob& three_nodes = t->jobs[5];
  EXPECT_EQ(three_nodes.submit, Sec(179));
  EXPECT_EQ(three_nodes.pods, 3);
  EXPECT_EQ(three_nodes.gpus_per_pod, 4);
  EXPECT_EQ(three_nodes.duration, Sec(30));
}

TEST(HeliosTest, EpochSecondsUnevenSplitsAndMapping) {
  const std::string text =
      "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,"
      "queue\n"
      "1,ua,vcA,3,2,2,COMPLETED,1591728061,1591728061,1591728161,100,0\n"
      "2,ub,vcB,8,4,0,COMPLETED,1591728071,,,20,0\n";
  TraceReadOptions o;
  o.rules.queue_by = MappingRules::QueueBy::kUser;
  o.rules.queue_rename = {{"ua", "team-a"}};
  o.rules.priority_by_group = {{"vcB", 7}};
  o.rules.default_priority = 2;
  Result<Trace> t = ParseTrace(text, "h.csv", TraceFormat::kHelios, o);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].pods, 2);
  EXPECT_EQ(t->jobs[0].gpus_per_pod, 2);  // 3 GPUs over 2 nodes, rounded up
  EXPECT_EQ(t->jobs[0].cpu_milli_per_pod, 1000);
  EXPECT_EQ(t->jobs[0].queue, "team-a");
  EXPECT_EQ(t->jobs[0].priority, 2);
  EXPECT_EQ(t->jobs[1].submit, Sec(10));
  EXPECT_EQ(t->jobs[1].pods, 1);  // node_num 0
  EXPECT_EQ(t->jobs[1].gpus_per_pod, 8);
  EXPECT_EQ(t->jobs[1].queue, "ub");
  EXPECT_EQ(t->jobs[1].priority, 7);
}

TEST(HeliosTest, Errors) {
  const std::string header =
      "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,"
      "queue\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"1,u,v,x,1,1,COMPLETED,2020-06-09 18:41:01,,,5,0",
       "h.csv:2:7: column gpu_num: \"x\" is not an integer"},
      {"1,u,v,1,1,1,COMPLETED,2020-06-31 18:41:01,,,5,0",
       "h.csv:2:23: column submit_time: \"2020-06-31 18:41:01\" is not a valid date-time"},
      {"1,u,v,1,1,1,COMPLETED,2020-06-09 18:41:01,,,,0",
       "h.csv:2:45: column duration: missing, and start_time and end_time do not give one"},
      {"1,u,v,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 18:40:01,,0",
       "h.csv:2:63: column end_time: is before start_time"},
      {"1,u,v,1,1,-2,COMPLETED,2020-06-09 18:41:01,,,5,0",
       "h.csv:2:11: column node_num: \"-2\" is out of range [0, 1000000]"},
  };
  for (const auto& [line, want] : cases) {
    Result<Trace> t = ParseTrace(header + line + "\n", "h.csv", TraceFormat::kHelios, {});
    ASSERT_FALSE(t.ok()) << line;
    EXPECT_EQ(t.status().message(), want) << line;
  }
  std::string all = header;
  for (const auto& c : cases) all += c.first + "\n";
  all += "2,u,v,1,1,1,COMPLETED,2020-06-09 18:41:01,,,5,0\n";
  Result<Trace> t = ParseTrace(all, "h.csv", TraceFormat::kHelios, Skipping());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->jobs.size(), 1u);
  EXPECT_EQ(t->skipped_lines, 5);
  EXPECT_EQ(t->skipped_examples.size(), 5u);
  EXPECT_EQ(t->skipped_examples[4],
            "h.csv:6:11: column node_num: \"-2\" is out of range [0, "
            "1000000]");
}

TEST(HeliosTest, MissingRequiredColumn) {
  EXPECT_EQ(ParseTrace("job_id,user,vc,submit_time\n", "h.csv", TraceFormat::kHelios, {})
                .status()
                .message(),
            "h.csv:1:27: column gpu_num: missing from the header (expected columns job_id,user,vc,"
            "gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue)");
}

}  // namespace
}  // namespace chamber::sim
