#include <gtest/gtest.h>

#include "sim/trace/test/test_util.h"
#include "sim/trace/trace.h"

namespace chamber::sim {
namespace {

using std::chrono::milliseconds;
using testing::DataPath;
using testing::Skipping;

constexpr int64_t kGi = int64_t{1} << 30;

TEST(ChamberCsvTest, ReadsTheFixture) {
  Result<Trace> t = ReadTrace(DataPath("chamber.csv"), TraceFormat::kChamberCsv, {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 3u);
  EXPECT_EQ(t->skipped_lines, 0);

  // Sorted by submit, shifted so the first ("1m") is 0.
  const TraceJob& hi = t->jobs[0];
  EXPECT_EQ(hi.id, "say \"hi\"");
  EXPECT_EQ(hi.submit, milliseconds(0));
  EXPECT_EQ(hi.duration, milliseconds(250));
  EXPECT_EQ(hi.group, "");
  EXPECT_EQ(hi.queue, "carol");  // no queue: the user
  EXPECT_EQ(hi.priority, -1);
  EXPECT_EQ(hi.gpus_per_pod, 0);

  const TraceJob& a = t->jobs[1];
  EXPECT_EQ(a.id, "train-a");
  EXPECT_EQ(a.submit, milliseconds(40'000));
  EXPECT_EQ(a.duration, milliseconds(5'400'000));
  EXPECT_EQ(a.group, "research");
  EXPECT_EQ(a.queue, "research");
  EXPECT_EQ(a.user, "alice");
  EXPECT_EQ(a.priority, 10);
  EXPECT_EQ(a.pods, 2);
  EXPECT_EQ(a.gpus_per_pod, 8);
  EXPECT_EQ(a.cpu_milli_per_pod, 16'000);
  EXPECT_EQ(a.memory_bytes_per_pod, 64 * kGi);
  EXPECT_EQ(a.gpu_models, (std::vector<std::string>{"H100", "A100"}));

  const TraceJob& b = t->jobs[2];
  EXPECT_EQ(b.id, "eval,b");
  EXPECT_EQ(b.submit, milliseconds(70'500));
  EXPECT_EQ(b.duration, milliseconds(600'000));
  EXPECT_EQ(b.queue, "nlp");
  EXPECT_EQ(b.priority, 0);  // none given: the default
  EXPECT_EQ(b.pods, 1);
  EXPECT_EQ(b.gpus_per_pod, 1);
  EXPECT_EQ(b.cpu_milli_per_pod, 500);
  EXPECT_EQ(b.memory_bytes_per_pod, 512 << 20);
  EXPECT_TRUE(b.gpu_models.empty());
}

TEST(ChamberCsvTest, ColumnOrderComesFromTheHeader) {
  const std::string text =
      "duration,submit_time,id,gpus_per_pod\r\n"
      "10,5,x,2\r\n"
      "20,7,y,0\r\n";
  Result<Trace> t = ParseTrace(text, "t.csv", TraceFormat::kChamberCsv, {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].id, "x");
  EXPECT_EQ(t->jobs[0].duration, milliseconds(10'000));
  EXPECT_EQ(t->jobs[0].gpus_per_pod, 2);
  EXPECT_EQ(t->jobs[0].queue, "default");  // neither queue nor user
  EXPECT_EQ(t->jobs[1].submit, milliseconds(2'000));
}

TEST(ChamberCsvTest, GpuFractions) {
  const std::string text =
      "id,submit_time,duration,gpus_per_pod,gpu_milli_per_pod\n"
      "half,0,1,0,500\n"
      "whole,0,1,0,1000\n"
      "bad,0,1,2,500\n";
  Result<Trace> t = ParseTrace(text, "t.csv", TraceFormat::kChamberCsv, Skipping());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].id, "half");
  EXPECT_EQ(t->jobs[0].gpus_per_pod, 0);
  EXPECT_EQ(t->jobs[0].gpu_milli_per_pod, 500);
  EXPECT_EQ(t->jobs[1].id, "whole");
  EXPECT_EQ(t->jobs[1].gpus_per_pod, 1);
  EXPECT_EQ(t->jobs[1].gpu_milli_per_pod, 0);
  ASSERT_EQ(t->skipped_examples.size(), 1u);
  EXPECT_EQ(t->skipped_examples[0],
            "t.csv:4:11: column gpu_milli_per_pod: a GPU fraction (500) is for pods with less "
            "than one GPU, but gpus_per_pod is 2");
}

// Each malformed line, alone after a good one, fails with its exact place.
TEST(ChamberCsvTest, ErrorsNameFileLineColumnAndColumnName) {
  const std::string header = "id,queue,user,priority,submit_time,duration,pods,gpus_per_pod\n";
  const std::string good = "ok,q,u,1,0,10,1,1\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bad1,q,u,1,xx,10,1,1\n",
       "t.csv:3:12: column submit_time: \"xx\" is not a time (use seconds, a duration like 1h30m, "
       "or \"YYYY-MM-DD HH:MM:SS\")"},
      {"bad2,q,u,1,0,10,0,1\n", "t.csv:3:17: column pods: \"0\" is out of range [1, 2147483647]"},
      {"bad3,q,u,1,0,10,1\n", "t.csv:3:18: expected 8 fields as in the header, found 7"},
      {"bad4,q,u,1,0,10,1,1,9\n", "t.csv:3:21: expected 8 fields as in the header, found 9"},
      {"bad5,\"q\"x,u,1,0,10,1,1\n", "t.csv:3:9: unexpected text after a closing quote"},
      {"\xC3\xBCn\xC3\xAF,q,u,1,zz,10,1,1\n",  // "ünï": columns count characters, not bytes
       "t.csv:3:11: column submit_time: \"zz\" is not a time (use seconds, a duration like 1h30m, "
       "or \"YYYY-MM-DD HH:MM:SS\")"},
      {",q,u,1,0,10,1,1\n", "t.csv:3:1: column id: must not be empty"},
      {"bad6,q,u,high,0,10,1,1\n", "t.csv:3:10: column priority: \"high\" is not an integer"},
      {"ok,q,u,1,0,10,1,1\n", "t.csv:3:1: column id: duplicate id \"ok\" (first on line 2)"},
      {"bad7,q,u,1,0,10,1,-2\n",
       "t.csv:3:19: column gpus_per_pod: \"-2\" is out of range [0, 2147483647]"},
      {"bad8,q,u,1,0,10,1,1,\"open\n", "t.csv:3:21: unterminated quoted field"},
  };
  for (const auto& [line, want] : cases) {
    Result<Trace> t = ParseTrace(header + good + line, "t.csv", TraceFormat::kChamberCsv, {});
    ASSERT_FALSE(t.ok()) << line;
    EXPECT_EQ(t.status().message(), want) << line;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(ChamberCsvTest, SkipBadLinesCountsAndKeepsTheFirstFiveReasons) {
  std::string text = "id,submit_time,duration\nok,0,1\n";
  for (int i = 0; i < 7; ++i) text += "bad" + std::to_string(i) + ",0,x" + std::to_string(i) + "\n";
  text += "ok2,5,1\n";
  Result<Trace> t = ParseTrace(text, "t.csv", TraceFormat::kChamberCsv, Skipping());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[1].id, "ok2");
  EXPECT_EQ(t->skipped_lines, 7);
  ASSERT_EQ(t->skipped_examples.size(), 5u);
  EXPECT_EQ(t->skipped_examples[0].substr(0, 31), "t.csv:3:8: column duration: \"x0");
  EXPECT_EQ(t->skipped_examples[4].substr(0, 31), "t.csv:7:8: column duration: \"x4");
}

TEST(ChamberCsvTest, HeaderProblemsAreFatalEvenWhenSkipping) {
  EXPECT_EQ(
      ParseTrace("id,submit_time,duration,gpus\n", "t.csv", TraceFormat::kChamberCsv, Skipping())
          .status()
          .message(),
      "t.csv:1:25: column gpus: unknown column (known: id,queue,user,priority,submit_time,"
      "duration,pods,gpus_per_pod,gpu_milli_per_pod,cpu_per_pod,memory_per_pod,gpu_models,"
      "mig_profile,mig_devices_per_pod,gpu_memory_per_pod)");
  EXPECT_EQ(
      ParseTrace("id,duration\n", "t.csv", TraceFormat::kChamberCsv, Skipping()).status().message(),
      "t.csv:1:12: column submit_time: missing from the header (expected columns id,queue,user,"
      "priority,submit_time,duration,pods,gpus_per_pod,gpu_milli_per_pod,cpu_per_pod,memory_per_"
      "pod,gpu_models,mig_profile,mig_devices_per_pod,gpu_memory_per_pod)");
  // A header alone is an empty trace.
  Result<Trace> empty =
      ParseTrace("id,submit_time,duration\n\n", "t.csv", TraceFormat::kChamberCsv, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->jobs.empty());
}

TEST(ChamberJsonlTest, ReadsJobs) {
  const std::string text =
      R"({"id": "a", "queue": "research", "user": "alice", "priority": 5, "submitTime": 10, )"
      R"("duration": "2h", "pods": 2, "gpusPerPod": 4, "cpuPerPod": "8", "memoryPerPod": "32Gi", )"
      R"("gpuModels": ["H100"]})"
      "\n"
      R"({"id": "b", "submitTime": 12.5, "duration": 30, "gpuMilliPerPod": 500, "cpuPerPod": 2, )"
      R"("memoryPerPod": 1073741824, "user": "bob"})"
      "\r\n\n"
      R"({"id": "c", "submitTime": "1m", "duration": 1, "gpuModels": "A100|H100", "priority": null})";
  Result<Trace> t = ParseTrace(text, "t.jsonl", TraceFormat::kChamberJsonl, {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 3u);
  const TraceJob& a = t->jobs[0];
  EXPECT_EQ(a.id, "a");
  EXPECT_EQ(a.submit, milliseconds(0));
  EXPECT_EQ(a.duration, milliseconds(7'200'000));
  EXPECT_EQ(a.queue, "research");
  EXPECT_EQ(a.priority, 5);
  EXPECT_EQ(a.pods, 2);
  EXPECT_EQ(a.gpus_per_pod, 4);
  EXPECT_EQ(a.cpu_milli_per_pod, 8000);
  EXPECT_EQ(a.memory_bytes_per_pod, 32 * kGi);
  EXPECT_EQ(a.gpu_models, std::vector<std::string>{"H100"});
  const TraceJob& b = t->jobs[1];
  EXPECT_EQ(b.id, "b");
  EXPECT_EQ(b.submit, milliseconds(2'500));
  EXPECT_EQ(b.queue, "bob");
  EXPECT_EQ(b.gpus_per_pod, 0);
  EXPECT_EQ(b.gpu_milli_per_pod, 500);
  EXPECT_EQ(b.cpu_milli_per_pod, 2000);
  EXPECT_EQ(b.memory_bytes_per_pod, kGi);
  const TraceJob& c = t->jobs[2];
  EXPECT_EQ(c.id, "c");
  EXPECT_EQ(c.submit, milliseconds(50'000));
  EXPECT_EQ(c.priority, 0);
  EXPECT_EQ(c.queue, "default");
  EXPECT_EQ(c.gpu_models, (std::vector<std::string>{"A100", "H100"}));
}

TEST(ChamberJsonlTest, ErrorsNameLineColumnAndField) {
  const std::string good = R"({"id": "ok", "submitTime": 0, "duration": 1})"
                           "\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"id": "d", "submitTime": 1, "duration": -3})",
       "t.jsonl:2:30: field duration: seconds out of range"},
      {R"({"id": "e", "submitTime": 1, "duration": 3, "gpus": 2})",
       "t.jsonl:2:45: field gpus: unknown field (known: id, queue, user, priority, submitTime, "
       "duration, pods, gpusPerPod, gpuMilliPerPod, cpuPerPod, memoryPerPod, gpuModels, "
       "migProfile, migDevicesPerPod, gpuMemoryPerPod)"},
      {R"({"id": "f", "duration": 3})", "t.jsonl:2:1: field submitTime: is required"},
      {R"({"id": "g", "submitTime": 1, "duration": 3, "pods": "two"})",
       "t.jsonl:2:45: field pods: \"two\" is not an integer"},
      {R"({"id": "h", "submitTime": 1, "duration": 3, "cpuPerPod": "2 cores"})",
       "t.jsonl:2:45: field cpuPerPod: \"2 cores\": unknown CPU unit \" cores\""},
      {R"(["not", "an", "object"])", "t.jsonl:2:1: expected a JSON object, got array"},
      {R"({"id": "ok", "submitTime": 1, "duration": 3})",
       "t.jsonl:2:2: field id: duplicate id \"ok\" (first on line 1)"},
      {R"({"id": "j", "id": "k", "submitTime": 1, "duration": 1})",
       "t.jsonl:2:2: field id: appears twice"},
      {R"({"id": "k", "submitTime": {"s": 1}, "duration": 1})",
       "t.jsonl:2:13: field submitTime: expected a string, number or list of strings, got object"},
      {R"({"id": "l", "submitTime": 1, "duration": 1, "gpuModels": [["A100"]]})",
       "t.jsonl:2:45: field gpuModels: expected a list of strings"},
      {R"({"id": "i", "submitTime": 1,)",
       "t.jsonl:2:29: invalid JSON: syntax error while parsing object key - unexpected end of "
       "input; expected string literal"},
  };
  for (const auto& [line, want] : cases) {
    Result<Trace> t = ParseTrace(good + line + "\n", "t.jsonl", TraceFormat::kChamberJsonl, {});
    ASSERT_FALSE(t.ok()) << line;
    EXPECT_EQ(t.status().message(), want) << line;
  }
  Result<Trace> skipped = ParseTrace(good + cases[0].first + "\n" + cases[1].first, "t.jsonl",
                                     TraceFormat::kChamberJsonl, Skipping());
  ASSERT_TRUE(skipped.ok());
  EXPECT_EQ(skipped->jobs.size(), 1u);
  EXPECT_EQ(skipped->skipped_lines, 2);
  EXPECT_EQ(skipped->skipped_examples[0], cases[0].second);
}

TEST(ChamberFormatTest, WriterOutput) {
  TraceJob j;
  j.id = "a,\"b\"";
  j.queue = "q";
  j.user = " u";
  j.priority = 3;
  j.submit = milliseconds(1500);
  j.duration = milliseconds(60'000);
  j.pods = 2;
  j.gpus_per_pod = 4;
  j.cpu_milli_per_pod = 500;
  j.memory_bytes_per_pod = kGi;
  j.gpu_models = {"A100", "H100"};
  TraceJob mig;
  mig.id = "m";
  mig.queue = "inference";
  mig.duration = milliseconds(1000);
  mig.mig_profile = "3g.40gb";
  mig.mig_devices_per_pod = 2;
  TraceJob share;
  share.id = "s";
  share.duration = milliseconds(2000);
  share.gpu_memory_mib_per_pod = 20480;
  EXPECT_EQ(WriteChamberCsv({j, mig, share}),
            "id,queue,user,priority,submit_time,duration,pods,gpus_per_pod,gpu_milli_per_pod,"
            "cpu_per_pod,memory_per_pod,gpu_models,mig_profile,mig_devices_per_pod,"
            "gpu_memory_per_pod\n"
            "\"a,\"\"b\"\"\",q,\" u\",3,1.5,60,2,4,,500m,1073741824,A100|H100,,,\n"
            "m,inference,,0,0,1,1,0,,,,,3g.40gb,2,\n"
            "s,,,0,0,2,1,0,,,,,,,20480\n");
}

// MIG devices of one profile per pod: the profile alone is one device; a count without a
// profile, a name that is not a profile's, a count out of range, or MIG devices beside GPUs are
// errors that name the column.
TEST(ChamberCsvTest, MigDevices) {
  const std::string header =
      "id,submit_time,duration,gpus_per_pod,gpu_milli_per_pod,mig_profile,mig_devices_per_pod\n";
  Result<Trace> t = ParseTrace(header +
                                   "one,0,1,,,1g.10gb,\ntwo,1,1,0,,3g.40gb,2\n"
                                   "me,2,1,,,1g.10gb+me,1\na30,3,1,,,2g.12gb,\n",
                               "t.csv", TraceFormat::kChamberCsv, {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 4u);
  EXPECT_EQ(t->jobs[0].mig_profile, "1g.10gb");
  EXPECT_EQ(t->jobs[0].mig_devices_per_pod, 1);
  EXPECT_EQ(t->jobs[0].gpus_per_pod, 0);
  EXPECT_EQ(t->jobs[1].mig_profile, "3g.40gb");
  EXPECT_EQ(t->jobs[1].mig_devices_per_pod, 2);
  EXPECT_EQ(t->jobs[2].mig_profile, "1g.10gb+me");
  EXPECT_EQ(t->jobs[3].mig_profile, "2g.12gb");

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a,0,1,,,,2\n",
       "t.csv:2:10: column mig_devices_per_pod: asks for 2 MIG devices of no profile: mig_profile "
       "is empty"},
      {"b,0,1,,,4x.10gb,\n",
       "t.csv:2:9: column mig_profile: \"4x.10gb\" is not a MIG profile (e.g. 1g.10gb, 3g.40gb, "
       "1g.10gb+me)"},
      {"c,0,1,,,1g.10gb,256\n",
       "t.csv:2:17: column mig_devices_per_pod: must be between 1 and 255, got 256"},
      {"d,0,1,1,,1g.10gb,\n",
       "t.csv:2:10: column mig_profile: a pod asks for MIG devices or for GPUs, not both: "
       "gpus_per_pod is 1"},
      {"e,0,1,,250,1g.10gb,\n",
       "t.csv:2:12: column mig_profile: a pod asks for MIG devices or for GPUs, not both: "
       "gpu_milli_per_pod is 250"},
      {"f,0,1,,,1g.10gb,-1\n",
       "t.csv:2:17: column mig_devices_per_pod: \"-1\" is out of range [0, 2147483647]"},
  };
  for (const auto& [line, want] : cases) {
    Result<Trace> bad = ParseTrace(header + line, "t.csv", TraceFormat::kChamberCsv, {});
    ASSERT_FALSE(bad.ok()) << line;
    EXPECT_EQ(bad.status().message(), want) << line;
  }
}

// A share's GPU memory (docs/traces.md): MiB or a quantity of whole MiB, with a fraction or
// alone; beside whole GPUs or MIG devices, or not an amount of memory, an error naming the
// column.
TEST(ChamberCsvTest, GpuMemoryOfAShare) {
  const std::string header =
      "id,submit_time,duration,gpus_per_pod,gpu_milli_per_pod,mig_profile,gpu_memory_per_pod\n";
  Result<Trace> t =
      ParseTrace(header + "both,0,1,,250,,20Gi\nalone,1,1,0,,,10240\nnone,2,1,,500,,\n", "t.csv",
                 TraceFormat::kChamberCsv, {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 3u);
  EXPECT_EQ(t->jobs[0].gpu_milli_per_pod, 250);
  EXPECT_EQ(t->jobs[0].gpu_memory_mib_per_pod, 20480);
  EXPECT_EQ(t->jobs[1].gpu_milli_per_pod, 0);
  EXPECT_EQ(t->jobs[1].gpus_per_pod, 0);
  EXPECT_EQ(t->jobs[1].gpu_memory_mib_per_pod, 10240);
  EXPECT_EQ(t->jobs[2].gpu_memory_mib_per_pod, 0);

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a,0,1,1,,,20Gi\n",
       "t.csv:2:11: column gpu_memory_per_pod: GPU memory (20480 MiB) is asked for by a share of "
       "one GPU, but gpus_per_pod is 1 (a pod with whole GPUs has all of their memory)"},
      {"b,0,1,,1000,,512\n",
       "t.csv:2:14: column gpu_memory_per_pod: GPU memory (512 MiB) is asked for by a share of one "
       "GPU, but gpus_per_pod is 1 (a pod with whole GPUs has all of their memory)"},
      {"c,0,1,,,1g.10gb,512\n",
       "t.csv:2:9: column mig_profile: a pod asks for MIG devices or for a share of a GPU, not "
       "both: gpu_memory_per_pod is 512 MiB"},
      {"d,0,1,,,,1.5Mi\n",
       "t.csv:2:10: column gpu_memory_per_pod: \"1.5Mi\" is not a whole number of MiB"},
      {"e,0,1,,,,0\n",
       "t.csv:2:10: column gpu_memory_per_pod: \"0\" is not a positive amount of MiB"},
      {"f,0,1,,,,lots\n",
       "t.csv:2:10: column gpu_memory_per_pod: \"lots\" is not an amount of GPU memory (MiB as a "
       "plain number, or a quantity such as 10Gi)"},
  };
  for (const auto& [line, want] : cases) {
    Result<Trace> bad = ParseTrace(header + line, "t.csv", TraceFormat::kChamberCsv, {});
    ASSERT_FALSE(bad.ok()) << line;
    EXPECT_EQ(bad.status().message(), want) << line;
  }
}

TEST(ChamberJsonlTest, GpuMemoryOfAShare) {
  Result<Trace> t = ParseTrace(
      R"({"id": "a", "submitTime": 0, "duration": 1, "gpuMilliPerPod": 500, "gpuMemoryPerPod": "40Gi"})"
      "\n"
      R"({"id": "b", "submitTime": 0, "duration": 1, "gpuMemoryPerPod": 20480})",
      "t.jsonl", TraceFormat::kChamberJsonl, {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].gpu_milli_per_pod, 500);
  EXPECT_EQ(t->jobs[0].gpu_memory_mib_per_pod, 40960);
  EXPECT_EQ(t->jobs[1].gpu_memory_mib_per_pod, 20480);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"id": "c", "submitTime": 0, "duration": 1, "gpuMemoryPerPod": 1.5})",
       "t.jsonl:1:45: field gpuMemoryPerPod: expected MiB or a quantity such as \"20Gi\", got "
       "number"},
      {R"({"id": "d", "submitTime": 0, "duration": 1, "gpuMemoryPerPod": -5})",
       "t.jsonl:1:45: field gpuMemoryPerPod: \"-5\" is not a positive amount of memory"},
      {R"({"id": "e", "submitTime": 0, "duration": 1, "gpusPerPod": 2, "gpuMemoryPerPod": "1Gi"})",
       "t.jsonl:1:62: field gpuMemoryPerPod: GPU memory (1024 MiB) is asked for by a share of one "
       "GPU, but gpusPerPod is 2 (a pod with whole GPUs has all of their memory)"},
  };
  for (const auto& [line, want] : cases) {
    Result<Trace> bad = ParseTrace(line, "t.jsonl", TraceFormat::kChamberJsonl, {});
    ASSERT_FALSE(bad.ok()) << line;
    EXPECT_EQ(bad.status().message(), want) << line;
  }
}

TEST(ChamberJsonlTest, MigDevices) {
  Result<Trace> t = ParseTrace(
      R"({"id": "a", "submitTime": 0, "duration": 1, "migProfile": "1g.10gb", "migDevicesPerPod": 3})"
      "\n"
      R"({"id": "b", "submitTime": 0, "duration": 1, "migProfile": "7g.80gb", "migDevicesPerPod": null})",
      "t.jsonl", TraceFormat::kChamberJsonl, {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].mig_profile, "1g.10gb");
  EXPECT_EQ(t->jobs[0].mig_devices_per_pod, 3);
  EXPECT_EQ(t->jobs[1].mig_devices_per_pod, 1);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"id": "c", "submitTime": 0, "duration": 1, "migProfile": 7})",
       "t.jsonl:1:45: field migProfile: expected a string, got number"},
      {R"({"id": "d", "submitTime": 0, "duration": 1, "migProfile": "3g.40gb", "gpusPerPod": 8})",
       "t.jsonl:1:45: field migProfile: a pod asks for MIG devices or for GPUs, not both: "
       "gpusPerPod is 8"},
      {R"({"id": "e", "submitTime": 0, "duration": 1, "migDevicesPerPod": 1})",
       "t.jsonl:1:45: field migDevicesPerPod: asks for 1 MIG device of no profile: migProfile "
       "is empty"},
  };
  for (const auto& [line, want] : cases) {
    Result<Trace> bad = ParseTrace(line, "t.jsonl", TraceFormat::kChamberJsonl, {});
    ASSERT_FALSE(bad.ok()) << line;
    EXPECT_EQ(bad.status().message(), want) << line;
  }
}

TEST(TraceFormatTest, Names) {
  EXPECT_EQ(*ParseTraceFormat("helios", "x"), TraceFormat::kHelios);
  EXPECT_EQ(*ParseTraceFormat("philly", "x"), TraceFormat::kPhilly);
  EXPECT_EQ(*ParseTraceFormat("openb", "x"), TraceFormat::kOpenb);
  EXPECT_EQ(*ParseTraceFormat("chamber", "jobs.csv"), TraceFormat::kChamberCsv);
  EXPECT_EQ(*ParseTraceFormat("chamber", "jobs.jsonl"), TraceFormat::kChamberJsonl);
  EXPECT_EQ(*ParseTraceFormat("chamber", DataPath("chamber.csv")), TraceFormat::kChamberCsv);
  EXPECT_EQ(*ParseTraceFormat("chamber-jsonl", "jobs.txt"), TraceFormat::kChamberJsonl);
  EXPECT_EQ(ParseTraceFormat("alibaba", "x").status().message(),
            "unknown trace format \"alibaba\" (known: chamber, chamber-csv, chamber-jsonl, "
            "helios, philly, openb)");
}

TEST(TraceFormatTest, MissingFileNamesThePath) {
  Result<Trace> t = ReadTrace("/nonexistent/trace.csv", TraceFormat::kChamberCsv, {});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(t.status().message(), "/nonexistent/trace.csv: No such file or directory");
}

}  // namespace
}  // namespace chamber::sim
