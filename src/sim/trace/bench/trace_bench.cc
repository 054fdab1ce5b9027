// Reading a million-job trace in each format (docs/traces.md, "Performance"). The texts are
// generated in memory, so the numbers measure parsing, not the disk:
//   build/release/src/sim/trace/bench/trace_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true   (one command line)
#include <string>

#include <benchmark/benchmark.h>

#include "sim/trace/trace.h"

namespace chamber::sim {
namespace {

constexpr int kJobs = 1'000'000;

std::string TwoDigits(int v) { return (v < 10 ? "0" : "") + std::to_string(v); }

// "2020-06-DD HH:MM:SS" for second `s` of June 2020.
std::string Stamp(int s) {
  return "2020-06-" + TwoDigits(1 + s / 86400 % 28) + " " + TwoDigits(s / 3600 % 24) + ":" +
         TwoDigits(s / 60 % 60) + ":" + TwoDigits(s % 60);
}

const std::string& Text(TraceFormat format) {
  static std::string texts[5];
  std::string& out = texts[static_cast<int>(format)];
  if (!out.empty()) return out;
  switch (format) {
    case TraceFormat::kChamberCsv:
      out =
          "id,queue,user,priority,submit_time,duration,pods,gpus_per_pod,cpu_per_pod,"
          "memory_per_pod,gpu_models\n";
      for (int i = 0; i < kJobs; ++i) {
        out += "job-" + std::to_string(i) + ",team-" + std::to_string(i % 16) + ",user-" +
               std::to_string(i % 300) + "," + std::to_string(i % 3) + "," + std::to_string(i * 2) +
               ".5," + std::to_string(60 + i % 7200) + "," + std::to_string(1 + i % 4) +
               ",8,16,64Gi,H100|A100\n";
      }
      break;
    case TraceFormat::kChamberJsonl:
      for (int i = 0; i < kJobs; ++i) {
        out += R"({"id": "job-)" + std::to_string(i) + R"(", "queue": "team-)" +
               std::to_string(i % 16) + R"(", "user": "u", "submitTime": )" +
               std::to_string(i * 2) + R"(, "duration": )" + std::to_string(60 + i % 7200) +
               R"(, "pods": 2, "gpusPerPod": 8, "cpuPerPod": "16", "memoryPerPod": "64Gi"})"
               "\n";
      }
      break;
    case TraceFormat::kHelios:
      out =
          "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
          "duration,queue\n";
      for (int i = 0; i < kJobs; ++i) {
        const std::string t = Stamp(i * 2);
        out += std::to_string(1000000 + i) + ",uXBbc,vc" + std::to_string(i % 20) + "," +
               std::to_string(i % 9) + ",4,1,COMPLETED," + t + "," + t + "," + t + "," +
               std::to_string(i % 5000) + ",0\n";
      }
      break;
    case TraceFormat::kPhilly:
      out = "[";
      for (int i = 0; i < kJobs; ++i) {
        const std::string t = Stamp(i * 2);
        out += std::string(i ? ",\n" : "") +
               R"({"status": "Pass", "vc": "ee9e8c", "jobid": "app_)" + std::to_string(i) +
               R"(", "attempts": [{"start_time": ")" + t + R"(", "end_time": ")" + t +
               R"(", "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}], "submitted_time": ")" +
               t + R"(", "user": "ce2f4c"})";
      }
      out += "]\n";
      break;
    case TraceFormat::kOpenb:
      out =
          "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
          "deletion_time,scheduled_time\n";
      for (int i = 0; i < kJobs; ++i) {
        out += "openb-pod-" + std::to_string(i) + ",12000,16384,1," +
               std::to_string(i % 2 ? 1000 : 460) + ",V100M16|V100M32,LS,Running," +
               std::to_string(i * 3) + "," + std::to_string(i * 3 + 500) + "," +
               std::to_string(i * 3 + 1) + "\n";
      }
      break;
  }
  return out;
}

void BM_Read(benchmark::State& state, TraceFormat format) {
  const std::string& text = Text(format);
  for (auto _ : state) {
    Result<Trace> t = ParseTrace(text, "bench", format, {});
    if (!t.ok() || t->jobs.size() != static_cast<size_t>(kJobs)) {
      state.SkipWithError(t.ok() ? "wrong job count" : t.status().message().c_str());
      break;
    }
    benchmark::DoNotOptimize(t->jobs.data());
  }
  state.SetItemsProcessed(state.iterations() * kJobs);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}

BENCHMARK_CAPTURE(BM_Read, chamber_csv, TraceFormat::kChamberCsv)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Read, chamber_jsonl, TraceFormat::kChamberJsonl)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Read, helios, TraceFormat::kHelios)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Read, philly, TraceFormat::kPhilly)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Read, openb, TraceFormat::kOpenb)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace chamber::sim
