// Property tests: every reader, fed mutations of a valid file, returns a trace or an error that
// starts with the source name, and never crashes (this binary also runs under ASan and UBSan);
// WriteChamberCsv and ParseTrace are inverses.
#include <algorithm>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "common/file.h"
#include "common/testing/mutate_text.h"
#include "sim/trace/test/test_util.h"
#include "sim/trace/trace.h"

namespace chamber::sim {
namespace {

using std::chrono::milliseconds;

// Insertions draw on tokens the formats care about.
std::string Mutate(const std::string& text, const std::vector<int>& ops) {
  static constexpr std::string_view kTokens[] = {",",    "\"",
                                                 "\"\"", "\n",
                                                 "\r\n", "|",
                                                 "-1",   "99999999999999999999",
                                                 "1h",   "nan",
                                                 "None", "null",
                                                 "{",    "}",
                                                 "[",    "]",
                                                 ":",    " ",
                                                 "\\",   "0.0005",
                                                 "1e9",  "2020-02-30 25:61:61",
                                                 "\xC3", "\xEF\xBB\xBF",
                                                 "1000", "0",
                                                 "\t",   "\"None\"",
                                                 "[]"};
  return fuzz::MutateText(text, ops, kTokens);
}

std::vector<int> Ops() {
  return *rc::gen::container<std::vector<int>>(*rc::gen::inRange<size_t>(3, 45),
                                               rc::gen::inRange(0, 1 << 20));
}

const std::string& Fixture(const std::string& name) {
  static std::map<std::string, std::string> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    Result<std::string> text = ReadFile(testing::DataPath(name));
    it = cache.emplace(name, text.ok() ? *text : std::string()).first;
  }
  return it->second;
}

bool StartsWith(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Reads a mutated fixture; checks what any accepted trace must satisfy.
void CheckReader(const std::string& fixture, TraceFormat format) {
  RC_PRE(!Fixture(fixture).empty());
  TraceReadOptions options;
  options.skip_bad_lines = *rc::gen::arbitrary<bool>();
  const std::string text = Mutate(Fixture(fixture), Ops());
  Result<Trace> t = ParseTrace(text, "fuzz.src", format, options);
  RC_CLASSIFY(t.ok() && !t->jobs.empty(), "read jobs");
  RC_CLASSIFY(t.ok() && t->skipped_lines > 0, "skipped lines");
  if (!t.ok()) {
    RC_ASSERT(StartsWith(t.status().message(), "fuzz.src:"));
    return;
  }
  RC_ASSERT(t->skipped_examples.size() <= kMaxSkippedExamples);
  RC_ASSERT(static_cast<int64_t>(t->skipped_examples.size()) <= t->skipped_lines);
  for (const std::string& e : t->skipped_examples) RC_ASSERT(StartsWith(e, "fuzz.src:"));
  if (!options.skip_bad_lines) RC_ASSERT(t->skipped_lines == 0);
  if (t->jobs.empty()) return;
  RC_ASSERT(t->jobs.front().submit == milliseconds(0));
  for (size_t i = 0; i < t->jobs.size(); ++i) {
    const TraceJob& j = t->jobs[i];
    RC_ASSERT(!j.id.empty());
    RC_ASSERT(!j.queue.empty());
    RC_ASSERT(j.pods >= 1);
    RC_ASSERT(j.gpus_per_pod >= 0);
    RC_ASSERT(j.gpu_milli_per_pod >= 0 && j.gpu_milli_per_pod < 1000);
    RC_ASSERT(j.gpu_milli_per_pod == 0 || j.gpus_per_pod == 0);
    RC_ASSERT(j.duration >= milliseconds(0));
    RC_ASSERT(j.cpu_milli_per_pod >= 0 && j.memory_bytes_per_pod >= 0);
    if (i > 0) {
      const TraceJob& p = t->jobs[i - 1];
      RC_ASSERT(p.submit < j.submit || (p.submit == j.submit && p.id < j.id));
    }
  }
}

RC_GTEST_PROP(TraceFuzz, ChamberCsvReaderNeverCrashes, ()) {
  CheckReader("chamber.csv", TraceFormat::kChamberCsv);
}

RC_GTEST_PROP(TraceFuzz, ChamberJsonlReaderNeverCrashes, ()) {
  static const std::string jsonl = [] {
    std::string s;
    s += R"({"id": "a", "queue": "research", "user": "alice", "priority": 5, "submitTime": 10, )"
         R"("duration": "2h", "pods": 2, "gpusPerPod": 4, "cpuPerPod": "8", )"
         R"("memoryPerPod": "32Gi", "gpuModels": ["H100", "A100"]})"
         "\n";
    s += R"({"id": "b", "submitTime": 12.5, "duration": 30, "gpuMilliPerPod": 500, )"
         R"("cpuPerPod": 2, "memoryPerPod": 1073741824})"
         "\r\n\n";
    s += R"({"id": "c", "submitTime": "2020-06-09 18:41:01", "duration": 1, "gpuModels": "T4"})"
         "\n";
    return s;
  }();
  TraceReadOptions options;
  options.skip_bad_lines = *rc::gen::arbitrary<bool>();
  Result<Trace> t =
      ParseTrace(Mutate(jsonl, Ops()), "fuzz.src", TraceFormat::kChamberJsonl, options);
  if (!t.ok()) RC_ASSERT(StartsWith(t.status().message(), "fuzz.src:"));
}

RC_GTEST_PROP(TraceFuzz, HeliosReaderNeverCrashes, ()) {
  CheckReader("helios_cluster_log.csv", TraceFormat::kHelios);
}

RC_GTEST_PROP(TraceFuzz, PhillyReaderNeverCrashes, ()) {
  CheckReader("philly_cluster_job_log.json", TraceFormat::kPhilly);
}

RC_GTEST_PROP(TraceFuzz, OpenbReaderNeverCrashes, ()) {
  CheckReader("openb_pod_list.csv", TraceFormat::kOpenb);
}

RC_GTEST_PROP(TraceFuzz, OpenbNodeReaderNeverCrashes, ()) {
  RC_PRE(!Fixture("openb_node_list.csv").empty());
  Result<std::vector<OpenbNode>> n =
      ParseOpenbNodes(Mutate(Fixture("openb_node_list.csv"), Ops()), "fuzz.src");
  if (!n.ok()) {
    RC_ASSERT(StartsWith(n.status().message(), "fuzz.src:"));
    return;
  }
  for (const OpenbNode& node : *n) RC_ASSERT(!node.name.empty() && node.gpus >= 0);
}

RC_GTEST_PROP(TraceFuzz, MappingRulesReaderNeverCrashes, ()) {
  RC_PRE(!Fixture("mapping.yaml").empty());
  Result<MappingRules> r = ParseMappingRules(Mutate(Fixture("mapping.yaml"), Ops()), "fuzz.src");
  if (!r.ok()) RC_ASSERT(StartsWith(r.status().message(), "fuzz.src"));
}

// Text from printable ASCII plus the characters CSV must quote.
rc::Gen<std::string> Text(size_t min_size) {
  static const std::string kChars =
      " !\"#$%&'()*+,-./"
      "0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz"
      "{|}~\t\r\n";
  return rc::gen::suchThat(rc::gen::container<std::string>(rc::gen::elementOf(kChars)),
                           [min_size](const std::string& s) { return s.size() >= min_size; });
}

RC_GTEST_PROP(TraceRoundTrip, WriteChamberCsvThenParseGivesTheSameJobs, ()) {
  const size_t n = *rc::gen::inRange<size_t>(1, 25);
  static const std::vector<std::string> kModels = {"A100", "H100", "T4", "V100M32", "L4"};
  std::vector<TraceJob> jobs;
  for (size_t i = 0; i < n; ++i) {
    TraceJob j;
    j.id = *Text(0) + "#" + std::to_string(i);  // unique
    j.user = *Text(0);
    j.queue = *Text(1);
    j.group = j.queue;  // what the reader takes the queue column for
    j.priority = *rc::gen::arbitrary<int32_t>();
    j.submit = milliseconds(*rc::gen::inRange<int64_t>(0, 1'000'000'000'000));
    j.duration = milliseconds(*rc::gen::inRange<int64_t>(0, 1'000'000'000'000));
    j.pods = *rc::gen::inRange(1, 1000);
    j.gpus_per_pod = *rc::gen::inRange(0, 65);
    if (j.gpus_per_pod == 0) j.gpu_milli_per_pod = *rc::gen::inRange(0, 1000);
    if (j.gpus_per_pod == 0 && j.gpu_milli_per_pod == 0 && *rc::gen::inRange(0, 2) == 0) {
      j.mig_profile = *rc::gen::element<std::string>("1g.10gb", "3g.40gb", "1g.10gb+me", "2g.12gb");
      j.mig_devices_per_pod = *rc::gen::inRange(1, 256);
    }
    if (j.gpus_per_pod == 0 && j.mig_profile.empty() && *rc::gen::inRange(0, 2) == 0)
      j.gpu_memory_mib_per_pod = *rc::gen::inRange<int64_t>(1, 1'000'000'000'000);
    j.cpu_milli_per_pod = *rc::gen::inRange<int64_t>(0, 1'000'000'000);
    j.memory_bytes_per_pod = *rc::gen::inRange<int64_t>(0, 1'000'000'000'000'000);
    for (const std::string& m : kModels) {
      if (*rc::gen::inRange(0, 3) == 0) j.gpu_models.push_back(m);
    }
    jobs.push_back(std::move(j));
  }
  const milliseconds first =
      std::min_element(jobs.begin(), jobs.end(), [](const TraceJob& a, const TraceJob& b) {
        return a.submit < b.submit;
      })->submit;
  for (TraceJob& j : jobs) j.submit -= first;
  std::sort(jobs.begin(), jobs.end(), [](const TraceJob& a, const TraceJob& b) {
    return a.submit != b.submit ? a.submit < b.submit : a.id < b.id;
  });

  const std::string csv = WriteChamberCsv(jobs);
  Result<Trace> t = ParseTrace(csv, "rt.csv", TraceFormat::kChamberCsv, {});
  RC_ASSERT(t.ok());
  RC_ASSERT(t->skipped_lines == 0);
  RC_ASSERT(t->jobs.size() == jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) RC_ASSERT(t->jobs[i] == jobs[i]);
}

}  // namespace
}  // namespace chamber::sim
