// Kubernetes client benchmarks:
//   BM_DecodePods/N        parse a PodList of N pods from JSON and decode every Pod (no I/O)
//   BM_ListPods            list the pods of $CHAMBER_BENCH_NAMESPACE from the API server in
//                          $CHAMBER_TEST_KUBECONFIG (pages of 500), decode them; with
//                          $CHAMBER_BENCH_PODS=N it first creates pods until the namespace
//                          holds N (16 writers, not timed)
//   BM_KubectlListPods     the same list with `$CHAMBER_BENCH_KUBECTL get pods -o json`
//   BM_WatchEvents         decode a watch stream of N MODIFIED pod events (no I/O)
// peak_rss_mib is the process's peak resident set size after the case (getrusage).
#include <sys/resource.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "kube/client.h"
#include "kube/types.h"

namespace chamber::kube {
namespace {

Json SamplePod(int i) {
  const std::string name = "train-" + std::to_string(i);
  return Json::parse(
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
      R"(","namespace":"ml","uid":"6f1c2a4e-0000-4000-8000-)" + std::to_string(100000000000 + i) +
      R"(","resourceVersion":")" + std::to_string(1000 + i) +
      R"(","creationTimestamp":"2026-01-01T00:00:00Z","labels":{"chamber.io/queue":"research","job-name":"train"},
"annotations":{"chamber.io/checkpoint-grace-seconds":"30"},"ownerReferences":[{"apiVersion":"batch/v1",
"kind":"Job","name":"train","uid":"11111111-2222-3333-4444-555555555555","controller":true,"blockOwnerDeletion":true}],
"managedFields":[{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2026-01-01T00:00:00Z",
"fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:job-name":{}}}}}]},
"spec":{"schedulerName":"chamber","priority":50,"priorityClassName":"elastic","nodeName":"gpu-)" +
      std::to_string(i % 5000) + R"(","restartPolicy":"Never",
"containers":[{"name":"trainer","image":"registry.example/train:1.2.3","command":["python","train.py"],
"env":[{"name":"EPOCHS","value":"10"}],"resources":{"requests":{"cpu":"8","memory":"64Gi","nvidia.com/gpu":"8"},
"limits":{"nvidia.com/gpu":"8"}},"volumeMounts":[{"name":"data","mountPath":"/data"}]}],
"volumes":[{"name":"data","emptyDir":{}}],"nodeSelector":{"pool":"h100"},
"tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}]},
"status":{"phase":"Running","conditions":[{"type":"PodScheduled","status":"True","lastTransitionTime":"2026-01-01T00:00:01Z"},
{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T00:00:05Z"}],"hostIP":"10.0.0.1","podIP":"10.1.0.1",
"startTime":"2026-01-01T00:00:02Z"}})");
}

double PeakRssMib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

void BM_DecodePods(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::string text;
  {
    Json list = {{"apiVersion", "v1"}, {"kind", "PodList"}, {"items", Json::array()}};
    for (int i = 0; i < n; ++i) list["items"].push_back(SamplePod(i));
    text = list.dump();
  }
  for (auto _ : state) {
    Json list = Json::parse(text);
    std::vector<Pod> pods;
    pods.reserve(list["items"].size());
    for (Json& item : list["items"]) {
      Result<Pod> p = Pod::FromJson(std::move(item));
      if (!p.ok()) state.SkipWithError(p.status().message().c_str());
      pods.push_back(std::move(*p));
    }
    benchmark::DoNotOptimize(pods.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
  state.counters["json_mib"] = static_cast<double>(text.size()) / (1 << 20);
  state.counters["peak_rss_mib"] = PeakRssMib();
}
BENCHMARK(BM_DecodePods)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_WatchEvents(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::string stream;
  for (int i = 0; i < n; ++i)
    stream += Json{{"type", "MODIFIED"}, {"object", SamplePod(i)}}.dump() + "\n";
  for (auto _ : state) {
    WatchStreamDecoder d("bench");
    int64_t decoded = 0;
    // 16 KiB chunks, as curl delivers them.
    for (size_t off = 0; off < stream.size(); off += 16384) {
      Status s = d.Feed(std::string_view(stream).substr(off, 16384), [&](WatchEvent&& e) {
        Result<Pod> p = Pod::FromJson(std::move(e.object));
        decoded += p.ok();
      });
      if (!s.ok()) state.SkipWithError(s.message().c_str());
    }
    benchmark::DoNotOptimize(decoded);
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_WatchEvents)->Arg(10'000)->Unit(benchmark::kMillisecond);

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// Creates pods (SamplePod without server-set fields) until `ns` holds `want`.
Status EnsurePods(Client& client, const std::string& ns, int want) {
  CHAMBER_ASSIGN_OR_RETURN(ObjectList have, client.List(resources::kPods, ns));
  std::atomic<int> next{static_cast<int>(have.items.size())};
  std::atomic<int> failures{0};
  std::string first_error;
  std::mutex mu;
  std::vector<std::thread> writers;
  for (int w = 0; w < 16; ++w) {
    writers.emplace_back([&] {
      for (int i; (i = next++) < want;) {
        Json pod = SamplePod(i);
        pod["metadata"] = {{"name", "bench-" + std::to_string(i)},
                           {"namespace", ns},
                           {"labels", pod["metadata"]["labels"]},
                           {"annotations", pod["metadata"]["annotations"]}};
        pod.erase("status");
        // The Priority admission plugin sets priority from a PriorityClass the bench lacks.
        pod["spec"].erase("priority");
        pod["spec"].erase("priorityClassName");
        Result<Json> created = client.Create(resources::kPods, ns, pod);
        if (!created.ok() && failures++ == 0) {
          std::lock_guard lock(mu);
          first_error = created.status().ToString();
        }
      }
    });
  }
  for (std::thread& t : writers) t.join();
  if (failures > 0)
    return Status::Unavailable(std::to_string(failures.load()) +
                               " pods were not created; the first error: " + first_error);
  return Status::Ok();
}

void BM_ListPods(benchmark::State& state) {
  const char* kc = Env("CHAMBER_TEST_KUBECONFIG");
  const char* ns = Env("CHAMBER_BENCH_NAMESPACE");
  if (kc == nullptr || ns == nullptr) {
    state.SkipWithError("set CHAMBER_TEST_KUBECONFIG and CHAMBER_BENCH_NAMESPACE");
    return;
  }
  Result<RestConfig> cfg = LoadKubeconfig(kc);
  if (!cfg.ok()) return state.SkipWithError(cfg.status().message().c_str());
  cfg->qps = 0;
  auto client = Client::Create(*cfg).value();
  if (const char* want = Env("CHAMBER_BENCH_PODS")) {
    if (Status st = EnsurePods(*client, ns, std::atoi(want)); !st.ok())
      return state.SkipWithError(st.ToString().c_str());
  }
  size_t count = 0;
  for (auto _ : state) {
    Result<ObjectList> list = client->List(resources::kPods, ns);
    if (!list.ok()) return state.SkipWithError(list.status().message().c_str());
    std::vector<Pod> pods;
    pods.reserve(list->items.size());
    for (Json& item : list->items) pods.push_back(Pod::FromJson(std::move(item)).value());
    count = pods.size();
    benchmark::DoNotOptimize(pods.data());
  }
  state.counters["pods"] = static_cast<double>(count);
  state.counters["peak_rss_mib"] = PeakRssMib();
}
BENCHMARK(BM_ListPods)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

void BM_KubectlListPods(benchmark::State& state) {
  const char* kc = Env("CHAMBER_TEST_KUBECONFIG");
  const char* ns = Env("CHAMBER_BENCH_NAMESPACE");
  const char* kubectl = Env("CHAMBER_BENCH_KUBECTL");
  if (kc == nullptr || ns == nullptr || kubectl == nullptr) {
    state.SkipWithError(
        "set CHAMBER_TEST_KUBECONFIG, CHAMBER_BENCH_NAMESPACE, CHAMBER_BENCH_KUBECTL");
    return;
  }
  const std::string cmd =
      std::string(kubectl) + " --kubeconfig " + kc + " -n " + ns + " get pods -o json > /dev/null";
  for (auto _ : state)
    if (std::system(cmd.c_str()) != 0) return state.SkipWithError("kubectl failed");
}
BENCHMARK(BM_KubectlListPods)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

}  // namespace
}  // namespace chamber::kube
