// What chamberd's cycle keeps in memory per pod and per node, stage by stage, measured in
// process with the allocator's own count (no control plane needed): the decoded objects as the
// informers keep them, the build cache, the snapshot and its sources, the last snapshot kept for
// reuse, one engine cycle, and what the daemon publishes of the cycle for the API (the fleet
// state: nodes with their GPUs, workloads, queues and the rolled-up view). The pods are what the
// API server and a kubelet make of a plain single-GPU pod: defaulted spec, two default tolerations,
// five conditions.
//
//   chamberd_memory_bench [--nodes 10000] [--pods 100000] [--gpus 16]
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "backend/kube/kube_backend.h"
#include "backend/kube/snapshot_builder.h"
#include "common/proc_status.h"
#include "core/engine.h"
#include "daemon/daemon.h"
#include "daemon/fleet_input.h"
#include "daemon/workload_ledger.h"

namespace chamber::backend {
namespace {

using kube::Json;

size_t HeapInUse() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

Json NodeJson(int n, int gpus) {
  const std::string name = "gpu-node-" + std::to_string(n);
  Json labels = {{"beta.kubernetes.io/arch", "amd64"},
                 {"beta.kubernetes.io/os", "linux"},
                 {"kubernetes.io/arch", "amd64"},
                 {"kubernetes.io/hostname", name},
                 {"kubernetes.io/os", "linux"},
                 {"node.kubernetes.io/instance-type", "p5.48xlarge"},
                 {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                 {"nvidia.com/gpu.memory", "81559"},
                 {"nvidia.com/gpu.count", std::to_string(gpus)},
                 {"topology.kubernetes.io/region", "us-east-1"},
                 {"topology.kubernetes.io/zone", "us-east-1" + std::string(1, 'a' + n % 3)},
                 {"chamber.io/block", "block-" + std::to_string(n / 32)}};
  Json cond = Json::array();
  for (const char* t : {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"})
    cond.push_back({{"type", t},
                    {"status", std::string(t) == "Ready" ? "True" : "False"},
                    {"lastHeartbeatTime", "2026-12-01T10:00:00Z"},
                    {"lastTransitionTime", "2026-11-01T10:00:00Z"},
                    {"reason", std::string("Kubelet") + t},
                    {"message", "kubelet reports its state"}});
  const Json resources = {{"cpu", "192"},
                          {"memory", "2063425108Ki"},
                          {"pods", "110"},
                          {"ephemeral-storage", "7499362116Ki"},
                          {"nvidia.com/gpu", std::to_string(gpus)}};
  return {{"metadata",
           {{"name", name},
            {"uid", "5b6c1a2e-0000-4000-8000-" + std::to_string(100000000000 + n)},
            {"resourceVersion", std::to_string(100000 + n)},
            {"creationTimestamp", "2026-11-01T10:00:00Z"},
            {"labels", labels},
            {"annotations",
             {{"node.alpha.kubernetes.io/ttl", "0"},
              {"volumes.kubernetes.io/controller-managed-attach-detach", "true"}}}}},
          {"spec", {{"providerID", "aws:///us-east-1a/i-0" + std::to_string(n)}}},
          {"status",
           {{"capacity", resources},
            {"allocatable", resources},
            {"conditions", cond},
            {"addresses",
             {{{"type", "InternalIP"}, {"address", "10.0." + std::to_string(n % 250) + ".1"}},
              {{"type", "Hostname"}, {"address", name}}}},
            {"nodeInfo",
             {{"machineID", "ec2" + std::to_string(n)},
              {"kernelVersion", "6.1.0"},
              {"osImage", "Ubuntu 22.04.4 LTS"},
              {"containerRuntimeVersion", "containerd://1.7.13"},
              {"kubeletVersion", "v1.31.0"},
              {"architecture", "amd64"},
              {"operatingSystem", "linux"}}}}}};
}

// A running single-GPU pod of a team's queue, bound by chamber to GPU `p % gpus` of a node.
Json PodJson(int p, int nodes, int gpus) {
  const std::string t = "2026-12-01T10:00:00Z";
  Json container = {{"name", "main"},
                    {"image", "registry.example.com/ml/trainer:2026.11"},
                    {"resources",
                     {{"requests", {{"cpu", "4"}, {"memory", "64Gi"}, {"nvidia.com/gpu", "1"}}},
                      {"limits", {{"nvidia.com/gpu", "1"}}}}},
                    {"terminationMessagePath", "/dev/termination-log"},
                    {"terminationMessagePolicy", "File"},
                    {"imagePullPolicy", "IfNotPresent"}};
  Json tolerations = Json::array();
  for (const char* k : {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
    tolerations.push_back(
        {{"key", k}, {"operator", "Exists"}, {"effect", "NoExecute"}, {"tolerationSeconds", 300}});
  Json conditions = Json::array();
  for (const char* c :
       {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"})
    conditions.push_back({{"type", c}, {"status", "True"}, {"lastTransitionTime", t}});
  return {{"metadata",
           {{"name", "train-" + std::to_string(p)},
            {"namespace", "team-" + std::to_string(p % 20)},
            {"uid", "0c2f6a9e-1111-4000-8000-" + std::to_string(100000000000 + p)},
            {"resourceVersion", std::to_string(200000 + p)},
            {"creationTimestamp", t},
            {"labels", {{"chamber.io/queue", "team-" + std::to_string(p % 20)}, {"app", "train"}}},
            {"annotations", {{"chamber.io/gpu-indices", std::to_string(p % gpus)}}}}},
          {"spec",
           {{"schedulerName", "chamber"},
            {"nodeName", "gpu-node-" + std::to_string(p / gpus % nodes)},
            {"priority", 0},
            {"restartPolicy", "Never"},
            {"containers", Json::array({container})},
            {"tolerations", tolerations}}},
          {"status",
           {{"phase", "Running"},
            {"startTime", t},
            {"hostIP", "10.0.0.1"},
            {"podIP", "10.1.0.1"},
            {"qosClass", "Burstable"},
            {"conditions", conditions}}}};
}

// Resident memory of the process, MiB.
double ResidentMiB() { return static_cast<double>(ProcStatusKib(0, "VmRSS:")) / 1024; }

struct Meter {
  size_t last = HeapInUse();
  void Report(const char* what, size_t count, const char* per) {
    const size_t now = HeapInUse();
    const double diff = static_cast<double>(now) - static_cast<double>(last);
    std::printf("%-44s %10.1f MiB  %8.0f bytes per %s\n", what, diff / (1 << 20),
                count > 0 ? diff / static_cast<double>(count) : 0.0, per);
    last = now;
  }
};

int Main(int argc, char** argv) {
  int nodes = 10000, pods = 100000, gpus = 16;
  CLI::App app{"chamberd's memory per pod and node, stage by stage"};
  app.add_option("--nodes", nodes, "nodes")->capture_default_str();
  app.add_option("--pods", pods, "running single-GPU pods")->capture_default_str();
  app.add_option("--gpus", gpus, "GPUs per node")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (int64_t{nodes} * gpus < pods) {
    std::fprintf(stderr, "--pods %d do not fit %d nodes of %d GPUs\n", pods, nodes, gpus);
    return 2;
  }

  Meter m;
  const size_t start = m.last;
  ClusterObjects in;
  for (int n = 0; n < nodes; ++n) {
    kube::Node node = kube::Node::FromJson(NodeJson(n, gpus)).value();
    kube::TrimNode(node);
    in.nodes.push_back(std::make_shared<const kube::Node>(std::move(node)));
  }
  m.Report("nodes as the informer keeps them", static_cast<size_t>(nodes), "node");
  for (int p = 0; p < pods; ++p) {
    kube::Pod pod = kube::Pod::FromJson(PodJson(p, nodes, gpus)).value();
    kube::TrimPod(pod);
    in.pods.push_back(std::make_shared<const kube::Pod>(std::move(pod)));
  }
  m.Report("pods as the informer keeps them", static_cast<size_t>(pods), "pod");
  for (int q = 0; q < 20; ++q) {
    core::Queue queue;
    queue.name = "team-" + std::to_string(q);
    queue.res(core::Resource::kGpu).quota = core::Gpus(int64_t{nodes} * gpus / 20);
    in.queues.push_back(queue);
  }

  BuildCache cache;
  BuildOptions o;
  o.now = core::Time(1'796'030'000'000);
  o.cache = &cache;
  o.derive_threads = 1;
  cache.Prepare(in, o);
  m.Report("build cache", static_cast<size_t>(pods), "pod");
  BuiltSnapshot built = BuildSnapshot(in, o);
  m.Report("snapshot and sources", static_cast<size_t>(pods), "pod");
  BuiltSnapshot retired = std::move(built);
  o.recycle = &retired;
  built = BuildSnapshot(in, o);
  m.Report("second build, the first lent to it", static_cast<size_t>(pods), "pod");
  const auto free_begin = std::chrono::steady_clock::now();
  retired = BuiltSnapshot{};
  const double free_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - free_begin)
          .count();
  std::printf("freeing the lent snapshot took %.2f ms\n", free_ms);
  m.Report("the first freed", static_cast<size_t>(pods), "pod");
  const core::Engine engine;
  core::CycleResult result = engine.Schedule(built.snapshot);
  m.Report("one engine cycle's result", static_cast<size_t>(pods), "pod");
  // The daemon's view of the cycle, as Daemon::Tick builds it. Two are alive while a cycle
  // replaces the published one.
  daemon::Observation obs;
  obs.snapshot = &built.snapshot;
  ListWorkloadPods(built, obs);
  fleet::ActivityTracker activity(0.05);
  daemon::WorkloadLedger ledger(3'600'000);
  const int64_t now_ms = o.now.count();
  auto state = std::make_shared<daemon::FleetState>();
  // daemon::AddObserved's steps, one by one to measure each.
  state->input.workloads = ledger.Workloads(obs);
  m.Report("fleet state: workloads", static_cast<size_t>(pods), "pod");
  state->input.nodes = daemon::FleetNodes(obs, activity, now_ms);
  daemon::MarkHolders(obs, state->input.workloads, state->input.nodes);
  state->input.queues = daemon::FleetQueues(built.snapshot, result.queues);
  m.Report("fleet state: nodes and GPUs (and activity)", static_cast<size_t>(nodes), "node");
  state->view = fleet::ComputeFleet(state->input, fleet::FleetOptions{});
  m.Report("fleet state: the rolled-up view", static_cast<size_t>(nodes), "node");
  // The next cycle's, while the first is still published: the workloads that did not change
  // are the first state's.
  ListWorkloadPods(built, obs);
  auto next = std::make_shared<daemon::FleetState>();
  daemon::AddObserved(obs, ledger, activity, result.queues, now_ms + 1000, next->input);
  next->view = fleet::ComputeFleet(next->input, fleet::FleetOptions{});
  m.Report("the next cycle's fleet state, the first alive", static_cast<size_t>(pods), "pod");
  const double total = static_cast<double>(HeapInUse()) - static_cast<double>(start);
  std::printf("%-44s %10.1f MiB  %8.0f bytes per pod\n", "total", total / (1 << 20), total / pods);
  std::printf("binds %zu, preemptions %zu (a settled fleet: both should be 0)\n",
              result.binds.size(), result.preemptions.size());
  // What chamberd does after each cycle: the first state is replaced, then free pages go back.
  state.reset();
  const double rss = ResidentMiB();
  const auto trim_begin = std::chrono::steady_clock::now();
  malloc_trim(0);
  const double trim_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - trim_begin)
          .count();
  std::printf("resident %.1f MiB; malloc_trim took %.1f ms and left %.1f MiB\n", rss, trim_ms,
              ResidentMiB());
  return 0;
}

}  // namespace
}  // namespace chamber::backend

int main(int argc, char** argv) { return chamber::backend::Main(argc, argv); }
