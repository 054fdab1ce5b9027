// `chamber sim` end to end: tiny traces in Chamber's CSV, Alibaba openb and Helios formats, run
// through the command in every report format and with the event log, every number worked out by
// hand in the comments.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/test/run_cli.h"

namespace chamber::cli {
namespace {

using nlohmann::json;
using testing::Output;

Output RunCli(std::vector<std::string> args) {
  return testing::RunCli(std::move(args), [](CommandRegistry& r) { RegisterSimCommand(r); });
}

// Files of the running test, removed when it ends.
class TestFiles {
 public:
  TestFiles() = default;
  TestFiles(const TestFiles&) = delete;
  TestFiles& operator=(const TestFiles&) = delete;
  ~TestFiles() {
    for (const std::string& path : paths_) std::filesystem::remove(path);
  }

  std::string Path(const std::string& name) {
    paths_.push_back(testing::TestPath(name));
    return paths_.back();
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = Path(name);
    std::ofstream(path) << text;
    return path;
  }

 private:
  std::vector<std::string> paths_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The terminal table's rows: the label (its first 30 characters, trimmed) to the cells after
// it, split at spaces. Queue share rows are labelled with the queue's name.
std::map<std::string, std::vector<std::string>> Rows(const std::string& table) {
  std::map<std::string, std::vector<std::string>> rows;
  for (const std::string& line : Lines(table)) {
    if (line.size() <= 30) continue;
    std::string label = line.substr(0, 30);
    label.erase(0, label.find_first_not_of(' '));
    label.erase(label.find_last_not_of(' ') + 1);
    std::istringstream cells(line.substr(30));
    std::vector<std::string>& row = rows[label];
    for (std::string cell; cells >> cell;) row.push_back(cell);
  }
  return rows;
}

using Row = std::vector<std::string>;

// The events of one policy from an --events file, as "time workload event" strings, in order.
std::vector<std::string> EventsOf(const std::string& events_path, const std::string& policy) {
  std::vector<std::string> out;
  for (const std::string& line : Lines(ReadFile(events_path))) {
    const json e = json::parse(line);
    if (e.at("policy") != policy) continue;
    std::ostringstream s;
    s << e.at("time").get<double>() << " " << e.at("workload").get<std::string>() << " "
      << e.at("event").get<std::string>();
    out.push_back(s.str());
  }
  return out;
}

// The hand-worked trace, in Chamber's CSV on one 4-GPU node; queue research has quota 3 and
// prod quota 1, so their entitlements are 75% and 25%.
//
//   job  queue     submit  run  GPUs  runs       wait  JCT    GPU-hours
//   a    research  0       1h   4     0-1h       0     1h     4
//   b    research  10m     2h   2     1h-3h      50m   2h50m  4
//   c    prod      30m     1h   2     1h-2h      30m   1h30m  2
//
// Makespan 3h; allocation 10 GPU-h / (4 GPUs x 3h) = 83.3%. Jobs wait from 10m to 1h, while all
// 4 GPUs are busy: 100% allocated while jobs wait, no idle GPU-hours while queued.
// JCT mean (1 + 17/6 + 3/2) / 3 = 16/9 = 1.78h, p50 1.50h, p99 2.83h (nearest rank); wait mean
// (0 + 5/6 + 1/2) / 3 = 4/9 = 0.44h, p50 0.50h, p99 0.83h.
// Shares: research 8/10 = 80%, prod 2/10 = 20%; share over entitlement x = 16/15 and 4/5, and
// Jain's index (x1 + x2)^2 / (2 (x1^2 + x2^2)) = (784/225) / (800/225) = 0.98.
// The same for every policy: each starts b and c when a ends, and nothing else fits before.
class SimCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ =
        files_.Write("cluster.yaml", "pools:\n  - {name: gpu, gpusPerNode: 4, gpuModel: H100}\n");
    trace_ = files_.Write("trace.csv",
                          "id,queue,submit_time,duration,pods,gpus_per_pod\n"
                          "a,research,0,1h,1,4\n"
                          "b,research,10m,2h,1,2\n"
                          "c,prod,30m,1h,1,2\n");
    queues_ = files_.Write("queues.yaml",
                           "queues:\n"
                           "  - {name: research, resources: {gpu: {quota: 3}}}\n"
                           "  - {name: prod, resources: {gpu: {quota: 1}}}\n");
  }

  std::vector<std::string> Args(std::vector<std::string> more) const {
    std::vector<std::string> args = {"sim",      "--cluster", cluster_,     "--trace",     trace_,
                                     "--queues", queues_,     "--policies", "chamber,fifo"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  TestFiles files_;
  std::string cluster_, trace_, queues_;
};

TEST_F(SimCommandTest, TableShowsTheHandWorkedMetricsPerPolicy) {
  const Output o = RunCli(Args({}));
  ASSERT_EQ(o.code, kExitOk) << o.err;
  EXPECT_EQ(Lines(o.out).at(0), "Trace " + trace_ + ": 3 jobs on " + cluster_ + " (4 GPUs)");
  auto rows = Rows(o.out);
  EXPECT_EQ(rows["policy"], (Row{"chamber", "fifo"}));
  EXPECT_EQ(rows["finished / jobs"], (Row{"3/3", "3/3"}));
  EXPECT_EQ(rows["makespan (h)"], (Row{"3.0", "3.0"}));
  EXPECT_EQ(rows["GPU allocation"], (Row{"83.3%", "83.3%"}));
  EXPECT_EQ(rows["allocation while jobs wait"], (Row{"100.0%", "100.0%"}));
  EXPECT_EQ(rows["idle GPU-h while queued"], (Row{"0", "0"}));
  EXPECT_EQ(rows["JCT mean (h)"], (Row{"1.78", "1.78"}));
  EXPECT_EQ(rows["JCT p50 (h)"], (Row{"1.50", "1.50"}));
  EXPECT_EQ(rows["JCT p99 (h)"], (Row{"2.83", "2.83"}));
  EXPECT_EQ(rows["wait mean (h)"], (Row{"0.44", "0.44"}));
  EXPECT_EQ(rows["wait p50 (h)"], (Row{"0.50", "0.50"}));
  EXPECT_EQ(rows["wait p99 (h)"], (Row{"0.83", "0.83"}));
  EXPECT_EQ(rows["wait p99 reserved (h)"], (Row{"-", "-"}));  // all at priority 0: elastic
  EXPECT_EQ(rows["wait p99 elastic (h)"], (Row{"0.83", "0.83"}));
  EXPECT_EQ(rows["wait mean 1 gpu (h)"], (Row{"-", "-"}));
  EXPECT_EQ(rows["wait mean 2-8 gpu (h)"], (Row{"0.44", "0.44"}));
  EXPECT_EQ(rows["Jain's index (share/entitled)"], (Row{"0.980", "0.980"}));
  EXPECT_EQ(rows["preemptions"], (Row{"0", "0"}));
  EXPECT_EQ(rows["GPU-h lost to preemption"], (Row{"0.0", "0.0"}));
  EXPECT_EQ(rows["research"], (Row{"80.0%", "[75%]", "80.0%", "[75%]"}));
  EXPECT_EQ(rows["prod"], (Row{"20.0%", "[25%]", "20.0%", "[25%]"}));
}

TEST_F(SimCommandTest, JsonHasEveryMetricAndTheSeries) {
  const Output o = RunCli(Args({"-o", "json"}));
  ASSERT_EQ(o.code, kExitOk) << o.err;
  const json report = json::parse(o.out);
  EXPECT_EQ(report.at("trace"), trace_);
  EXPECT_EQ(report.at("cluster"), cluster_);
  EXPECT_EQ(report.at("skippedLines"), 0);
  EXPECT_EQ(report.at("fractionalGpus").at("jobs"), 0);
  ASSERT_EQ(report.at("policies").size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const json& p = report.at("policies").at(i);
    SCOPED_TRACE(p.at("policy").get<std::string>());
    EXPECT_EQ(p.at("policy"), i == 0 ? "chamber" : "fifo");
    EXPECT_EQ(p.at("capacityGpus"), 4);
    EXPECT_EQ(p.at("jobs"), 3);
    EXPECT_EQ(p.at("finished"), 3);
    EXPECT_EQ(p.at("unfinished"), 0);
    EXPECT_NEAR(p.at("makespanHours").get<double>(), 3.0, 1e-12);
    EXPECT_NEAR(p.at("allocation").get<double>(), 10.0 / 12, 1e-12);
    EXPECT_NEAR(p.at("allocationWhileWaiting").get<double>(), 1.0, 1e-12);
    EXPECT_NEAR(p.at("idleGpuHoursWhileQueued").get<double>(), 0.0, 1e-12);
    EXPECT_EQ(p.at("jctHours").at("count"), 3);
    EXPECT_NEAR(p.at("jctHours").at("mean").get<double>(), 16.0 / 9, 1e-12);
    EXPECT_NEAR(p.at("jctHours").at("p50").get<double>(), 1.5, 1e-12);
    EXPECT_NEAR(p.at("jctHours").at("p99").get<double>(), 17.0 / 6, 1e-12);
    EXPECT_NEAR(p.at("waitHours").at("mean").get<double>(), 4.0 / 9, 1e-12);
    EXPECT_NEAR(p.at("waitHours").at("p99").get<double>(), 5.0 / 6, 1e-12);
    EXPECT_EQ(p.at("waitHoursByGang").at("2-8 gpu").at("count"), 3);
    EXPECT_FALSE(p.at("waitHoursByGang").contains("1 gpu"));
    EXPECT_EQ(p.at("waitHoursByPriority").at("elastic").at("count"), 3);
    const json& queues = p.at("queues");
    ASSERT_EQ(queues.size(), 2u);
    EXPECT_EQ(queues[0].at("name"), "research");
    EXPECT_NEAR(queues[0].at("gpuHours").get<double>(), 8.0, 1e-9);
    EXPECT_NEAR(queues[0].at("share").get<double>(), 0.8, 1e-12);
    EXPECT_NEAR(queues[0].at("entitlement").get<double>(), 0.75, 1e-12);
    EXPECT_EQ(queues[1].at("name"), "prod");
    EXPECT_NEAR(queues[1].at("gpuHours").get<double>(), 2.0, 1e-9);
    EXPECT_NEAR(queues[1].at("share").get<double>(), 0.2, 1e-12);
    EXPECT_NEAR(queues[1].at("entitlement").get<double>(), 0.25, 1e-12);
    EXPECT_NEAR(p.at("jainIndex").get<double>(), 0.98, 1e-12);
    EXPECT_EQ(p.at("preemptions"), 0);
    EXPECT_EQ(p.at("gpuFailures"), 0);
    EXPECT_GT(p.at("cycles").get<int64_t>(), 0);

    // The series: equal steps, a starts on all 4 GPUs of research, and the area under the
    // allocated GPUs is the 10 GPU-hours (less at most the last, unfinished step).
    const json& series = p.at("series");
    ASSERT_FALSE(series.empty());
    const double step = series[0].at("hours").get<double>();
    EXPECT_EQ(series[0].at("allocatedGpus"), 4.0);
    EXPECT_EQ(series[0].at("queueGpus"), json({4.0, 0.0}));
    EXPECT_EQ(series[0].at("waitingJobs"), 0.0);
    double gpu_hours = 0;
    for (const json& point : series) gpu_hours += point.at("allocatedGpus").get<double>() * step;
    EXPECT_LE(gpu_hours, 10.0 + 1e-9);
    EXPECT_GE(gpu_hours, 10.0 - 4 * step);
    EXPECT_LE(series.back().at("hours").get<double>(), 3.0 + 1e-12);
  }
}

TEST_F(SimCommandTest, HtmlGoesToTheOutFileWithTheSummaryAndShares) {
  const std::string path = files_.Path("report.html");
  const Output o = RunCli(Args({"-o", "html", "--out", path}));
  ASSERT_EQ(o.code, kExitOk) << o.err;
  EXPECT_EQ(o.out, "") << "the report goes to --out only";
  const std::string html = ReadFile(path);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const std::string& part : {
           std::string("<dt>jobs</dt><dd>3</dd>"),
           std::string("<dt>capacity</dt><dd>4 GPUs</dd>"),
           std::string("<dt>fractional GPUs</dt><dd>none</dd>"),
           std::string("<tr><td>finished / jobs</td><td>3/3</td><td>3/3</td></tr>"),
           std::string("<tr><td>GPU allocation</td><td>83.3%</td><td>83.3%</td></tr>"),
           std::string("<tr><td>JCT mean (h)</td><td>1.78</td><td>1.78</td></tr>"),
           std::string("<tr><td>wait p99 (h)</td><td>0.83</td><td>0.83</td></tr>"),
           std::string("<tr><td>Jain&#39;s index (share/entitled)</td><td>0.980</td><td>0.980"),
           std::string("<title>chamber, research: 80.0% of GPU-hours, entitled to 75.0%</title>"),
           std::string("<title>fifo, prod: 20.0% of GPU-hours, entitled to 25.0%</title>"),
       })
    EXPECT_NE(html.find(part), std::string::npos) << part;
}

TEST_F(SimCommandTest, EventsLogEveryEventOfEveryPolicy) {
  const std::string path = files_.Path("events.jsonl");
  const Output o = RunCli(Args({"--events", path, "-o", "json"}));
  ASSERT_EQ(o.code, kExitOk) << o.err;
  // FIFO starts b before c at 1h, first fit: b on GPUs 0-1, c on 2-3. Keys come sorted.
  const std::vector<std::string> fifo = {
      R"({"event":"submit","policy":"fifo","time":0.0,"workload":"a"})",
      R"({"event":"start","placement":[{"gpus":[0,1,2,3],"node":"gpu-0"}],"policy":"fifo","time":0.0,"workload":"a"})",
      R"({"event":"submit","policy":"fifo","time":600.0,"workload":"b"})",
      R"({"event":"submit","policy":"fifo","time":1800.0,"workload":"c"})",
      R"({"event":"finish","policy":"fifo","time":3600.0,"workload":"a"})",
      R"({"event":"start","placement":[{"gpus":[0,1],"node":"gpu-0"}],"policy":"fifo","time":3600.0,"workload":"b"})",
      R"({"event":"start","placement":[{"gpus":[2,3],"node":"gpu-0"}],"policy":"fifo","time":3600.0,"workload":"c"})",
      R"({"event":"finish","policy":"fifo","time":7200.0,"workload":"c"})",
      R"({"event":"finish","policy":"fifo","time":10800.0,"workload":"b"})",
  };
  const std::vector<std::string> lines = Lines(ReadFile(path));
  ASSERT_EQ(lines.size(), 18u);  // 9 per policy, chamber's first
  EXPECT_EQ(std::vector<std::string>(lines.begin() + 9, lines.end()), fifo);

  // chamber: the same times; which of b and c its fair share starts first is its own choice.
  std::vector<std::string> chamber = EventsOf(path, "chamber");
  ASSERT_EQ(chamber.size(), 9u);
  std::sort(chamber.begin() + 5, chamber.begin() + 7);
  EXPECT_EQ(chamber, (std::vector<std::string>{"0 a submit", "0 a start", "600 b submit",
                                               "1800 c submit", "3600 a finish", "3600 b start",
                                               "3600 c start", "7200 c finish", "10800 b finish"}));
  std::multiset<int> gpus_from_1h;  // b and c split the node between them
  for (const std::string& line : std::vector<std::string>(lines.begin(), lines.begin() + 9)) {
    const json e = json::parse(line);
    if (e.at("event") != "start") continue;
    ASSERT_EQ(e.at("placement").size(), 1u) << line;
    EXPECT_EQ(e.at("placement")[0].at("node"), "gpu-0");
    EXPECT_EQ(e.at("placement")[0].at("gpus").size(), e.at("workload") == "a" ? 4u : 2u);
    if (e.at("workload") != "a")
      for (const json& g : e.at("placement")[0].at("gpus")) gpus_from_1h.insert(g.get<int>());
  }
  EXPECT_EQ(gpus_from_1h, (std::multiset<int>{0, 1, 2, 3}));
}

TEST_F(SimCommandTest, QueueMissingFromTheQueueFileIsAnError) {
  const std::string queues = files_.Write("research-only.yaml", "queues:\n  - {name: research}\n");
  const Output o = RunCli({"sim", "--cluster", cluster_, "--trace", trace_, "--queues", queues});
  EXPECT_EQ(o.code, kExitFailure);
  EXPECT_NE(o.err.find("job c names queue \"prod\", which the queue file does not define"),
            std::string::npos)
      << o.err;
  EXPECT_EQ(o.out, "");
}

TEST(SimCommand, TraceAndSyntheticAreExclusive) {
  const Output o = RunCli({"sim", "--cluster", "c.yaml", "--trace", "t.csv", "--synthetic", "5"});
  EXPECT_EQ(o.code, kExitFailure);
  EXPECT_NE(o.err.find("give either --trace FILE or --synthetic N"), std::string::npos) << o.err;
}

TEST(SimCommand, SyntheticTeamsGetEqualQuotas) {
  TestFiles files;
  // 40 jobs from 2 teams on 16 GPUs: each team gets a quota of 8 and so half the entitlement.
  const std::string cluster =
      files.Write("synthetic.yaml", "pools:\n  - {name: h, count: 2, gpusPerNode: 8}\n");
  const Output o = RunCli({"sim", "--cluster", cluster, "--synthetic", "40", "--teams", "2",
                           "--span", "1h", "--policies", "chamber", "-o", "json"});
  ASSERT_EQ(o.code, kExitOk) << o.err;
  const json report = json::parse(o.out);
  EXPECT_EQ(report.at("trace"), "synthetic helios (40 jobs, seed 1)");
  const json& p = report.at("policies").at(0);
  EXPECT_EQ(p.at("capacityGpus"), 16);
  EXPECT_EQ(p.at("jobs"), 40);
  EXPECT_EQ(p.at("finished"), 40);
  std::map<std::string, double> entitlement;
  for (const json& q : p.at("queues")) entitlement[q.at("name")] = q.at("entitlement");
  EXPECT_EQ(entitlement, (std::map<std::string, double>{{"team-0", 0.5}, {"team-1", 0.5}}));
}

// An Alibaba openb node list as the cluster and a pod list as the trace, with mapping rules
// (qos LS to queue latency at priority 50, BE to best-effort) and quotas 8 and 2. Times shift
// so that pod-1's creation is 0.
//
//   pod    queue        GPUs               submit  run  node                runs         wait
//   pod-1  latency      8 V100M32          0       2h   node-a              0-2h         0
//   pod-2  best-effort  0.5 of one GPU     10m     1h   node-b (a is full)  10m-1h10m    0
//   pod-3  best-effort  2 T4               30m     1h   node-b              1h10m-2h10m  40m
//   pod-4  latency      1 V100M32          1h      1h   node-a              2h-3h        1h
//
// pod-2's share holds GPU 0 of node-b, which pod-3 cannot take whole beside it. pod-4 never ran
// in the trace, so its run time is deletion - creation. GPU-hours: latency 16 + 1 = 17,
// best-effort 0.5 + 2 = 2.5; capacity 10 GPUs x 3h: allocation 19.5/30 = 65%. Jobs wait from
// 30m to 2h: 8.5 GPUs busy until 1h10m, then 10, so (8.5 x 40m + 10 x 50m) / (10 x 90m) = 14/15
// while jobs wait, and 1.5 GPUs idle for 40m = 1 GPU-hour while work is queued.
// JCT 2, 1, 5/3, 2: mean 5/3 h; waits 0, 0, 2/3, 1: mean 5/12 h.
// Shares 34/39 and 5/39 against 80% and 20%: x = 85/78 and 50/78, Jain's index
// (135/78)^2 / (2 (7225/78^2 + 2500/78^2)) = 729/778.
TEST(SimCommand, OpenbTraceOnItsNodeList) {
  TestFiles files;
  const std::string nodes = files.Write("openb-nodes.csv",
                                        "sn,cpu_milli,memory_mib,gpu,model\n"
                                        "node-a,64000,262144,8,V100M32\n"
                                        "node-b,32000,131072,2,T4\n");
  const std::string pods = files.Write(
      "openb-pods.csv",
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n"
      "pod-1,32000,65536,8,1000,V100M32,LS,Succeeded,1000,8200,1000\n"
      "pod-2,4000,8192,1,500,,BE,Running,1600,5200,1600\n"
      "pod-3,8000,16384,2,1000,T4,BE,Succeeded,2800,6400,2800\n"
      "pod-4,4000,8192,1,1000,V100M32,LS,Failed,4600,8200,\n");
  const std::string mapping = files.Write(
      "openb-mapping.yaml", "queues: {LS: latency, BE: best-effort}\npriorities: {LS: 50}\n");
  const std::string queues = files.Write("openb-queues.yaml",
                                         "queues:\n"
                                         "  - {name: latency, resources: {gpu: {quota: 8}}}\n"
                                         "  - {name: best-effort, resources: {gpu: {quota: 2}}}\n");
  const std::string events = files.Path("events.jsonl");
  const Output o =
      RunCli({"sim", "--cluster", nodes, "--trace", pods, "--format", "openb", "--mapping", mapping,
              "--queues", queues, "--policies", "fifo", "--events", events, "-o", "json"});
  ASSERT_EQ(o.code, kExitOk) << o.err;
  const json report = json::parse(o.out);
  EXPECT_EQ(report.at("fractionalGpus"),
            json({{"jobs", 1}, {"handling", "placed as shares of one GPU"}}));
  const json& p = report.at("policies").at(0);
  EXPECT_EQ(p.at("capacityGpus"), 10);
  EXPECT_EQ(p.at("jobs"), 4);
  EXPECT_EQ(p.at("finished"), 4);
  EXPECT_NEAR(p.at("makespanHours").get<double>(), 3.0, 1e-12);
  EXPECT_NEAR(p.at("allocation").get<double>(), 19.5 / 30, 1e-12);
  EXPECT_NEAR(p.at("allocationWhileWaiting").get<double>(), 14.0 / 15, 1e-12);
  EXPECT_NEAR(p.at("idleGpuHoursWhileQueued").get<double>(), 1.0, 1e-12);
  EXPECT_NEAR(p.at("jctHours").at("mean").get<double>(), 5.0 / 3, 1e-12);
  EXPECT_NEAR(p.at("waitHours").at("mean").get<double>(), 5.0 / 12, 1e-12);
  EXPECT_NEAR(p.at("waitHours").at("p99").get<double>(), 1.0, 1e-12);
  const json& q = p.at("queues");
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].at("name"), "latency");
  EXPECT_NEAR(q[0].at("gpuHours").get<double>(), 17.0, 1e-9);
  EXPECT_NEAR(q[0].at("share").get<double>(), 34.0 / 39, 1e-12);
  EXPECT_NEAR(q[0].at("entitlement").get<double>(), 0.8, 1e-12);
  EXPECT_EQ(q[1].at("name"), "best-effort");
  EXPECT_NEAR(q[1].at("gpuHours").get<double>(), 2.5, 1e-9);
  EXPECT_NEAR(q[1].at("share").get<double>(), 5.0 / 39, 1e-12);
  EXPECT_NEAR(q[1].at("entitlement").get<double>(), 0.2, 1e-12);
  EXPECT_NEAR(p.at("jainIndex").get<double>(), 729.0 / 778, 1e-12);

  // Starts name the node list's nodes; the models the pods ask for decide where they go.
  std::vector<std::string> starts;
  for (const std::string& line : Lines(ReadFile(events))) {
    const json e = json::parse(line);
    if (e.at("event") == "start")
      starts.push_back(std::to_string(e.at("time").get<int>()) + " " +
                       e.at("workload").get<std::string>() + " " + e.at("placement").dump());
  }
  EXPECT_EQ(starts, (std::vector<std::string>{
                        R"(0 pod-1 [{"gpus":[0,1,2,3,4,5,6,7],"node":"node-a"}])",
                        R"(600 pod-2 [{"gpus":[0],"node":"node-b"}])",
                        R"(4200 pod-3 [{"gpus":[0,1],"node":"node-b"}])",
                        R"(7200 pod-4 [{"gpus":[0],"node":"node-a"}])",
                    }));
}

// A Helios cluster_log.csv on two 4-GPU nodes, with the vcs as queues without quotas (so each
// is entitled to half). Times shift so that 10:00:00 is 0.
//
//   job  vc   GPUs (node_num)  submit  run                 runs           wait  GPU-hours
//   101  vcA  8 (2): 2 x 4     0       2h                  0-2h           0     16
//   103  vcA  0, a CPU job     10m     1h                  10m-1h10m      0     0
//   102  vcB  1                30m     30m (end - start)   2h-2h30m       1h30m 0.5
//   104  vcB  3                2h15m   30m                 2h15m-2h45m    0     1.5
//
// Makespan 2h45m; allocation 18 / (8 x 2.75) = 9/11. JCT 2, 1, 2, 1/2: mean 1.375h; waits
// mean 1.5/4 = 0.375h. Shares 16/18 and 2/18 against 1/2 each: x = 16/9 and 2/9, Jain's index
// 2^2 / (2 (256/81 + 4/81)) = 162/260.
TEST(SimCommand, HeliosTraceEndToEnd) {
  TestFiles files;
  const std::string cluster =
      files.Write("helios.yaml", "pools:\n  - {name: v100, count: 2, gpusPerNode: 4}\n");
  const std::string log = files.Write(
      "helios.csv",
      "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,"
      "queue\n"
      "101,alice,vcA,8,16,2,COMPLETED,2020-06-09 10:00:00,2020-06-09 10:00:00,"
      "2020-06-09 12:00:00,7200,0\n"
      "102,bob,vcB,1,2,1,COMPLETED,2020-06-09 10:30:00,2020-06-09 10:30:00,"
      "2020-06-09 11:00:00,,0\n"
      "103,alice,vcA,0,4,1,COMPLETED,2020-06-09 10:10:00,2020-06-09 10:10:00,"
      "2020-06-09 11:10:00,3600,0\n"
      "104,carol,vcB,3,6,1,FAILED,2020-06-09 12:15:00,2020-06-09 12:15:00,"
      "2020-06-09 12:45:00,1800,0\n");
  const std::string queues =
      files.Write("helios-queues.yaml", "queues:\n  - {name: vcA}\n  - {name: vcB}\n");
  const std::string events = files.Path("events.jsonl");
  const Output o = RunCli({"sim", "--cluster", cluster, "--trace", log, "--format", "helios",
                           "--queues", queues, "--policies", "fifo,chamber", "--events", events});
  ASSERT_EQ(o.code, kExitOk) << o.err;
  EXPECT_EQ(Lines(o.out).at(0), "Trace " + log + ": 4 jobs on " + cluster + " (8 GPUs)");
  auto rows = Rows(o.out);
  EXPECT_EQ(rows["finished / jobs"], (Row{"4/4", "4/4"}));
  EXPECT_EQ(rows["makespan (h)"], (Row{"2.8", "2.8"}));  // 2.75, rounded to even
  EXPECT_EQ(rows["GPU allocation"], (Row{"81.8%", "81.8%"}));
  EXPECT_EQ(rows["JCT mean (h)"], (Row{"1.38", "1.38"}));  // 1.375
  EXPECT_EQ(rows["wait mean (h)"], (Row{"0.38", "0.38"}));
  EXPECT_EQ(rows["wait p99 (h)"], (Row{"1.50", "1.50"}));
  EXPECT_EQ(rows["Jain's index (share/entitled)"], (Row{"0.623", "0.623"}));
  EXPECT_EQ(rows["vcA"], (Row{"88.9%", "[50%]", "88.9%", "[50%]"}));
  EXPECT_EQ(rows["vcB"], (Row{"11.1%", "[50%]", "11.1%", "[50%]"}));

  // The 2-node gang starts whole; 102 waits for it to end.
  EXPECT_EQ(EventsOf(events, "fifo"),
            (std::vector<std::string>{"0 101 submit", "0 101 start", "600 103 submit",
                                      "600 103 start", "1800 102 submit", "4200 103 finish",
                                      "7200 101 finish", "7200 102 start", "8100 104 submit",
                                      "8100 104 start", "9000 102 finish", "9900 104 finish"}));
  for (const std::string& line : Lines(ReadFile(events))) {
    const json e = json::parse(line);
    if (e.at("workload") == "101" && e.at("event") == "start") {
      EXPECT_EQ(e.at("placement"), json::parse(R"([{"gpus":[0,1,2,3],"node":"v100-0"},
                                                    {"gpus":[0,1,2,3],"node":"v100-1"}])"));
    }
  }
}

// MIG asks in a Chamber CSV trace, on a node whose second A100 is in MIG mode with two 3g.40gb
// devices: srv-1 takes one device, srv-2 asks for two and waits until srv-1 ends at 1 h; the
// training job has the whole GPU throughout.
TEST(SimCommand, MigAsksOfAChamberTraceRunOnTheLayoutsDevices) {
  TestFiles files;
  const std::string cluster =
      files.Write("mig.yaml",
                  "pools:\n  - {name: a100, count: 1, gpusPerNode: 2, gpuModel: A100-SXM4-80GB,\n"
                  "     mig: {gpus: 1, devices: {3g.40gb: 2}}}\n");
  const std::string trace =
      files.Write("mig.csv",
                  "id,queue,submit_time,duration,gpus_per_pod,mig_profile,mig_devices_per_pod\n"
                  "train,a,0,2h,1,,\n"
                  "srv-1,b,0,1h,,3g.40gb,\n"
                  "srv-2,b,1,1h,,3g.40gb,2\n");
  const std::string queues =
      files.Write("mig-queues.yaml", "queues:\n  - {name: a}\n  - {name: b}\n");
  const std::string events = files.Path("mig-events.jsonl");
  const Output o = RunCli({"sim", "--cluster", cluster, "--trace", trace, "--queues", queues,
                           "--policies", "chamber", "--events", events});
  ASSERT_EQ(o.code, kExitOk) << o.err;
  EXPECT_EQ(Lines(o.out).at(0), "Trace " + trace + ": 3 jobs on " + cluster + " (2 GPUs)");
  auto rows = Rows(o.out);
  EXPECT_EQ(rows["finished / jobs"], Row{"3/3"});
  EXPECT_EQ(
      EventsOf(events, "chamber"),
      (std::vector<std::string>{"0 srv-1 submit", "0 train submit", "0 train start",
                                "0 srv-1 start", "1 srv-2 submit", "3600 srv-1 finish",
                                "3600 srv-2 start", "7200 train finish", "7200 srv-2 finish"}));

  // A profile the cluster's layouts lack is an error naming the job.
  const std::string other =
      files.Write("mig-other.csv", "id,submit_time,duration,mig_profile\nx,0,1,1g.10gb\n");
  const Output bad = RunCli({"sim", "--cluster", cluster, "--trace", other});
  EXPECT_NE(bad.code, kExitOk);
  EXPECT_NE(bad.err.find("job x asks for MIG devices of profile 1g.10gb, which no pool's MIG "
                         "layout has"),
            std::string::npos)
      << bad.err;
}

}  // namespace
}  // namespace chamber::cli

namespace chamber::cli {
namespace {

// Saturation mode on one node of two GPUs and pods of 0.4, 0.5, 0.6 and 0.5 GPU (the hand-worked
// case of sim's Saturation.HandWorkedCurves): best fit leaves the last 0.5 unplaced with 0.1 of
// GPU 0 stranded; FGD (named chamber) places all four.
TEST(SimCommand, SaturationReportsUnallocatedAndStrandedPerPolicy) {
  TestFiles files;
  const std::string cluster = files.Write(
      "saturation.yaml",
      "pools:\n  - {name: h, count: 1, gpusPerNode: 2, gpuModel: H100-SXM5-80GB, gpuMemory: "
      "80Gi}\n");
  const std::string trace = files.Write("saturation.csv",
                                        "id,submit_time,duration,gpu_milli_per_pod\n"
                                        "a,0,1h,400\nb,1,1h,500\nc,2,1h,600\nd,3,1h,500\n");
  const std::vector<std::string> base = {
      "sim",  "--cluster",          cluster, "--trace", trace, "--saturation", "--saturation-step",
      "0.25", "--saturation-until", "1"};
  std::vector<std::string> args = base;
  args.insert(args.end(), {"-o", "json"});
  const Output o = RunCli(args);
  ASSERT_EQ(o.code, kExitOk) << o.err;
  const json report = json::parse(o.out);
  const json& s = report.at("saturation");
  EXPECT_EQ(s.at("capacityGpus"), 2);
  EXPECT_EQ(s.at("arrivalsFromTrace"), 4);
  EXPECT_EQ(s.at("arrivalsSampled"), 0);
  ASSERT_EQ(s.at("policies").size(), 3u);  // the default: first-fit, best-fit, chamber
  std::map<std::string, std::vector<std::pair<double, double>>> curves;
  std::map<std::string, int> unplaced;
  for (const json& p : s.at("policies")) {
    for (const json& pt : p.at("points"))
      curves[p.at("policy")].push_back({pt.at("unallocated"), pt.at("stranded")});
    unplaced[p.at("policy")] = p.at("unplaced");
    EXPECT_EQ(p.at("points").at(4).at("arrivedDemand"), 1.0);
  }
  using Curve = std::vector<std::pair<double, double>>;
  const Curve packed = {{1, 0}, {0.55, 0.05}, {0.25, 0.05}, {0.25, 0.05}, {0.25, 0.05}};
  EXPECT_EQ(curves["best-fit"], packed);
  EXPECT_EQ(curves["first-fit"], packed);
  EXPECT_EQ(curves["chamber"], (Curve{{1, 0}, {0.55, 0}, {0.25, 0}, {0.25, 0}, {0, 0}}));
  EXPECT_EQ(unplaced,
            (std::map<std::string, int>{{"best-fit", 1}, {"chamber", 0}, {"first-fit", 1}}));

  // The table, and the HTML page with both plots.
  args = base;
  args.insert(args.end(), {"--policies", "best-fit,fgd"});
  const Output table = RunCli(args);
  ASSERT_EQ(table.code, kExitOk) << table.err;
  EXPECT_NE(table.out.find("    100%        25.0% /     5.0%         0.0% /     0.0%"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("best-fit 3 / 1  fgd 4 / 0"), std::string::npos) << table.out;
  const std::string html = files.Path("saturation.html");
  args.insert(args.end(), {"-o", "html", "--out", html});
  ASSERT_EQ(RunCli(args).code, kExitOk);
  const std::string page = ReadFile(html);
  EXPECT_NE(page.find("<h2>Unallocated GPU capacity</h2>"), std::string::npos);
  EXPECT_EQ(std::count(page.begin(), page.end(), '<') > 50, true);
  EXPECT_NE(page.find("<td>25.0%</td><td>5.0%</td>"), std::string::npos);

  args = base;
  args.insert(args.end(), {"--policies", "fifo"});
  const Output bad = RunCli(args);
  EXPECT_EQ(bad.code, kExitFailure);
  EXPECT_NE(bad.err.find("policy: \"fifo\" is not a GPU-sharing policy"), std::string::npos)
      << bad.err;
}

}  // namespace
}  // namespace chamber::cli

namespace chamber::cli {
namespace {

// Saturation on an openb node list and pod list: 10 V100s with 64 cores and 2 T4s with 32, 12
// GPUs. Pods arrive until demand reaches 87.5% (10.5 GPUs): pod-1 (8 V100s), pod-2 (half a T4),
// pod-3 (2 T4s). pod-1 takes 8 V100s; pod-2 the first T4; pod-3 then finds one entirely free T4,
// not two, and may not use the free V100s. Left: 2 V100s and 1.5 T4s free (3.5 / 12); the V100s
// are stranded (2 / 12): no class of the arrivals accepts them (8 V100s do not fit).
TEST(SimCommand, SaturationOnAnOpenbNodeList) {
  TestFiles files;
  const std::string nodes = files.Write("openb-nodes.csv",
                                        "sn,cpu_milli,memory_mib,gpu,model\n"
                                        "node-a,64000,262144,10,V100M32\n"
                                        "node-b,32000,131072,2,T4\n");
  const std::string pods = files.Write(
      "openb-pods.csv",
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n"
      "pod-1,32000,65536,8,1000,V100M32,LS,Succeeded,1000,8200,1000\n"
      "pod-2,4000,8192,1,500,T4,BE,Running,1600,5200,1600\n"
      "pod-3,8000,16384,2,1000,T4,BE,Succeeded,2800,6400,2800\n"
      "pod-4,4000,8192,1,1000,V100M32,LS,Failed,4600,8200,\n");
  const Output o = RunCli({"sim", "--cluster", nodes, "--trace", pods, "--format", "openb",
                           "--saturation", "--saturation-step", "0.875", "--saturation-until",
                           "0.875", "--policies", "best-fit,chamber", "-o", "json"});
  ASSERT_EQ(o.code, kExitOk) << o.err;
  const json s = json::parse(o.out).at("saturation");
  EXPECT_EQ(s.at("capacityGpus"), 12);
  EXPECT_EQ(s.at("arrivalsFromTrace"), 3);
  ASSERT_EQ(s.at("policies").size(), 2u);
  for (const json& p : s.at("policies")) {
    SCOPED_TRACE(p.at("policy").get<std::string>());
    EXPECT_EQ(p.at("placed"), 2);
    EXPECT_EQ(p.at("unplaced"), 1);
    const json& points = p.at("points");
    ASSERT_EQ(points.size(), 2u);
    EXPECT_EQ(points.at(1).at("arrivedDemand"), 0.875);
    EXPECT_DOUBLE_EQ(points.at(1).at("unallocated").get<double>(), 3500.0 / 12000.0);
    EXPECT_DOUBLE_EQ(points.at(1).at("stranded").get<double>(), 2000.0 / 12000.0);
  }
}

}  // namespace
}  // namespace chamber::cli
