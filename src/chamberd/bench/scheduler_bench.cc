// chamberd against kube-scheduler on the same control plane, in one run: fake GPU nodes, a
// namespace of pending single-GPU pods per scheduler, then the scheduler is started and the
// time until every pod is bound is measured, with the scheduler's peak memory (VmHWM). Run it
// through scripts/bench-schedulers.sh, which starts a control plane for it.
//
// The pods are created before each scheduler starts, so what is timed is the scheduler (its
// start, its informers' first list, its decisions and its binds), not the API server's create
// rate. chamberd's own cycle times come from its log ("cycle: snapshot=... engine=...").
//
// With --held-pods N, N more pods are created bound to the nodes before the runs: running work
// that every scheduler keeps in its caches, for measuring memory at scale (RSS at the end of the
// run and its peak).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string_view>
#include <thread>
#include <tuple>

#include <CLI/CLI.hpp>

#include "backend/kube/kube_backend.h"
#include "backend/kube/queue_resource.h"
#include "common/proc_status.h"
#include "kube/client.h"
#include "kube/errors.h"
#include "kube/informer.h"
#include "kubesim/nodes.h"

extern char** environ;

namespace chamber::chamberd {
namespace {

using backend::ApplyQueueCrd;
using backend::kQueues;
using backend::ManifestToJson;
using kube::Json;
using Clock = std::chrono::steady_clock;

struct Run {
  std::string name;  // "chamberd", "kube-scheduler", "kube-scheduler-qps"
  std::vector<std::string> argv;
  std::string scheduler_name;
  std::string log;
};

struct Outcome {
  double seconds_to_all_bound = -1;
  double seconds_to_first_bound = -1;
  int64_t peak_rss_kib = 0;
  int64_t rss_kib = 0;  // at the end of the run
  int bound = 0;
  // chamberd, per cycle: snapshot + engine, wall and CPU time of the cycle's thread.
  std::vector<double> decide_ms, decide_cpu_ms;
};

pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// With `nodes` > 0, each pod is created bound (spec.nodeName) to one of the fake nodes in turn:
// work already running, which a scheduler keeps in its caches.
Status CreatePods(kube::Client& client, const std::string& ns, const std::string& scheduler,
                  int count, int threads, int nodes = 0) {
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  Status first_error;
  std::mutex mu;
  std::vector<std::jthread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i = next++; i < count && !failed; i = next++) {
        const Json container = {
            {"name", "main"},
            {"image", "trainer"},
            {"resources",
             {{"requests", {{"cpu", "100m"}, {"memory", "256Mi"}, {"nvidia.com/gpu", 1}}},
              {"limits", {{"nvidia.com/gpu", 1}}}}}};
        const Json pod = {
            {"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata",
             {{"name", "p-" + std::to_string(i)},
              {"namespace", ns},
              {"labels", {{"chamber.io/queue", "bench"}}}}},
            {"spec", {{"schedulerName", scheduler}, {"containers", Json::array({container})}}}};
        Json placed = pod;
        if (nodes > 0) placed["spec"]["nodeName"] = "bench-gpu-" + std::to_string(i % nodes);
        Result<Json> r = client.Create(kube::resources::kPods, ns, placed);
        if (!r.ok() && !kube::IsAlreadyExists(r.status())) {
          std::lock_guard<std::mutex> l(mu);
          if (!failed.exchange(true)) first_error = r.status();
        }
      }
    });
  pool.clear();
  return failed ? first_error : Status::Ok();
}

// Per cycle of chamberd's log: snapshot + engine, wall time and CPU time.
std::pair<std::vector<double>, std::vector<double>> DecideTimes(const std::string& log) {
  std::vector<double> wall, cpu;
  std::ifstream in(log);
  std::string line;
  const std::regex re(R"(cycle: snapshot=([0-9.]+)ms engine=([0-9.]+)ms cpu=([0-9.]+)ms)");
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, re)) {
      wall.push_back(std::stod(m[1]) + std::stod(m[2]));
      cpu.push_back(std::stod(m[3]));
    }
  return {wall, cpu};
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

Result<Outcome> Measure(kube::Client& client, const Run& run, int pods, int writers,
                        std::chrono::seconds timeout, std::chrono::seconds settle) {
  const std::string ns = "bench-" + run.name;
  (void)client.Delete(kube::resources::kNamespaces, "", ns);
  for (int i = 0; i < 600; ++i) {  // a namespace being deleted cannot take pods
    if (kube::IsNotFound(client.Get(kube::resources::kNamespaces, "", ns).status())) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  CHAMBER_RETURN_IF_ERROR(
      client.Create(kube::resources::kNamespaces, "", {{"metadata", {{"name", ns}}}}).status());
  const auto created_at = Clock::now();
  CHAMBER_RETURN_IF_ERROR(CreatePods(client, ns, run.scheduler_name, pods, writers));
  std::cerr << run.name << ": " << pods << " pods created in "
            << std::chrono::duration<double>(Clock::now() - created_at).count() << " s\n";

  std::atomic<int> bound{0};
  auto on_bound = [&](const kube::Pod& p) {
    if (!p.node_name.empty()) ++bound;
  };
  kube::InformerOptions io;
  io.type = kube::resources::kPods;
  io.namespace_name = ns;
  kube::Informer<kube::Pod> informer(&client, io,
                                     {.on_add = on_bound,
                                      .on_update =
                                          [&](const kube::Pod& a, const kube::Pod& b) {
                                            if (a.node_name.empty() && !b.node_name.empty())
                                              ++bound;
                                          },
                                      .on_delete = nullptr});
  informer.Start();
  if (!informer.WaitForSync(std::chrono::seconds(120)))
    return Status::Unavailable("the pod informer did not sync");

  Outcome out;
  const auto start = Clock::now();
  const pid_t pid = Spawn(run.argv, run.log);
  if (pid <= 0) return Status::Unavailable("could not start " + run.argv[0]);
  while (Clock::now() - start < timeout) {
    if (out.seconds_to_first_bound < 0 && bound > 0)
      out.seconds_to_first_bound = std::chrono::duration<double>(Clock::now() - start).count();
    if (bound >= pods) {
      out.seconds_to_all_bound = std::chrono::duration<double>(Clock::now() - start).count();
      break;
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid)
      return Status::Unavailable(run.name + " exited early; see " + run.log);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Some cycles over the full cluster before the scheduler stops (chamberd's cycle times).
  std::this_thread::sleep_for(settle);
  out.peak_rss_kib = ProcStatusKib(pid, "VmHWM:");
  out.rss_kib = ProcStatusKib(pid, "VmRSS:");
  out.bound = bound;
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  informer.Stop();
  std::tie(out.decide_ms, out.decide_cpu_ms) = DecideTimes(run.log);
  // No kubelet finishes a deletion here: the pods go at once, so the next scheduler finds every
  // GPU free.
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  // On a busy machine deleting 10,000 pods can outlast the client's time-out; what is left is
  // deleted by the next try.
  Status deleted;
  for (int attempt = 0; attempt < 5; ++attempt)
    if ((deleted = client.Delete(kube::resources::kPods, ns, "", now)).ok()) break;
  CHAMBER_RETURN_IF_ERROR(deleted);
  (void)client.Delete(kube::resources::kNamespaces, "", ns);
  return out;
}

int Main(int argc, char** argv) {
  std::string kubeconfig, chamberd, baseline, kube_scheduler,
      work_dir = "/tmp/chamber-scheduler-bench";
  int nodes = 5000, gpus = 8, pods = 10000, held = 0, writers = 32, timeout_s = 1200, settle_s = 15;
  double raised_qps = 500;
  std::string runs = "chamberd,chamberd-qps,kube-scheduler,kube-scheduler-qps";
  CLI::App app{"chamberd against kube-scheduler: time to bind every pending pod, and memory"};
  app.add_option("--kubeconfig", kubeconfig, "admin kubeconfig of the control plane")->required();
  app.add_option("--chamberd", chamberd, "the chamberd binary")->required();
  app.add_option("--kube-scheduler", kube_scheduler, "the kube-scheduler binary")->required();
  app.add_option("--baseline-chamberd", baseline,
                 "another chamberd binary (e.g. an earlier build), run as chamberd-baseline with "
                 "the chamberd run's arguments, for a comparison in the same session");
  app.add_option("--nodes", nodes, "fake nodes")->capture_default_str();
  app.add_option("--gpus", gpus, "GPUs per node")->capture_default_str();
  app.add_option("--pods", pods, "single-GPU pods per scheduler")->capture_default_str();
  app.add_option("--held-pods", held,
                 "single-GPU pods created already bound to the nodes (namespace bench-held), "
                 "for every run: running work the schedulers keep in their caches")
      ->capture_default_str();
  app.add_option("--raised-qps", raised_qps, "kube-scheduler's client QPS in the raised run")
      ->capture_default_str();
  app.add_option("--runs", runs, "comma-separated runs")->capture_default_str();
  app.add_option("--work-dir", work_dir, "logs and configs")->capture_default_str();
  app.add_option("--timeout", timeout_s, "seconds each scheduler may take")->capture_default_str();
  app.add_option("--settle", settle_s, "seconds each scheduler runs on after all are bound")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto rest = kube::LoadKubeconfig(kubeconfig);
  if (!rest.ok()) {
    std::cerr << rest.status().message() << "\n";
    return 2;
  }
  rest->qps = 0;
  auto client = kube::Client::Create(*rest);
  if (!client.ok()) {
    std::cerr << client.status().message() << "\n";
    return 2;
  }
  kube::Client& c = **client;
  std::filesystem::create_directories(work_dir);

  // The Queue CRD and one queue that holds the whole cluster, for chamberd.
  {
    std::ifstream in(CHAMBER_QUEUE_CRD);
    std::stringstream text;
    text << in.rdbuf();
    auto docs = ManifestToJson(text.str(), CHAMBER_QUEUE_CRD);
    if (!docs.ok() || !ApplyQueueCrd(c, docs->at(0)).ok()) {
      std::cerr << "could not install the Queue CRD\n";
      return 1;
    }
    Json q = {{"apiVersion", "chamber.io/v1alpha1"},
              {"kind", "Queue"},
              {"metadata", {{"name", "bench"}}},
              {"spec", {{"resources", {{"gpu", {{"quota", nodes * gpus}}}}}}}};
    (void)c.Create(kQueues, "", q);
  }
  kubesim::NodePoolSpec spec;
  spec.count = nodes;
  spec.gpus = gpus;
  spec.prefix = "bench-gpu";
  auto made = kubesim::CreateFakeNodes(c, spec, writers);
  if (!made.ok()) {
    std::cerr << "fake nodes: " << made.status().message() << "\n";
    return 1;
  }
  std::cerr << nodes << " nodes ready (" << made->seconds << " s)\n";
  if (held > 0) {
    const auto at = Clock::now();
    (void)c.Create(kube::resources::kNamespaces, "", {{"metadata", {{"name", "bench-held"}}}});
    if (Status st = CreatePods(c, "bench-held", "chamber", held, writers, nodes); !st.ok()) {
      std::cerr << "held pods: " << st.message() << "\n";
      return 1;
    }
    std::cerr << held << " bound pods created ("
              << std::chrono::duration<double>(Clock::now() - at).count() << " s)\n";
  }

  auto scheduler_config = [&](const std::string& name, double qps) {
    const std::string path = work_dir + "/" + name + ".yaml";
    std::ofstream(path) << "apiVersion: kubescheduler.config.k8s.io/v1\n"
                           "kind: KubeSchedulerConfiguration\n"
                           "clientConnection:\n"
                           "  kubeconfig: "
                        << kubeconfig << "\n  qps: " << qps << "\n  burst: " << 2 * qps
                        << "\nleaderElection:\n  leaderElect: false\n";
    return path;
  };
  std::vector<Run> all = {
      {"chamberd",
       {chamberd, "--kubeconfig", kubeconfig, "--no-leader-elect", "--anonymous", "--listen",
        "127.0.0.1:0", "--health-listen", "127.0.0.1:0", "--scheduler-name", "chamber",
        "--log-level", "debug"},
       "chamber",
       work_dir + "/chamberd.log"},
      {"chamberd-qps",
       {chamberd, "--kubeconfig", kubeconfig, "--no-leader-elect", "--anonymous", "--listen",
        "127.0.0.1:0", "--health-listen", "127.0.0.1:0", "--scheduler-name", "chamber",
        "--log-level", "debug", "--kube-api-qps", std::to_string(static_cast<int>(raised_qps)),
        "--kube-api-burst", std::to_string(static_cast<int>(2 * raised_qps))},
       "chamber",
       work_dir + "/chamberd-qps.log"},
      {"chamberd-baseline",
       {baseline, "--kubeconfig", kubeconfig, "--no-leader-elect", "--anonymous", "--listen",
        "127.0.0.1:0", "--health-listen", "127.0.0.1:0", "--scheduler-name", "chamber",
        "--log-level", "debug"},
       "chamber",
       work_dir + "/chamberd-baseline.log"},
      // kube-scheduler's own default client QPS (50, burst 100).
      {"kube-scheduler",
       {kube_scheduler, "--config", scheduler_config("kube-scheduler", 50), "--secure-port", "0"},
       "default-scheduler",
       work_dir + "/kube-scheduler.log"},
      {"kube-scheduler-qps",
       {kube_scheduler, "--config", scheduler_config("kube-scheduler-qps", raised_qps),
        "--secure-port", "0"},
       "default-scheduler",
       work_dir + "/kube-scheduler-qps.log"},
  };

  // Decide: chamberd's snapshot + engine per cycle (all cycles of the run), wall and CPU time.
  std::printf("%-20s %8s %13s %12s %13s %8s %7s %9s %9s %9s %9s\n", "scheduler", "bound",
              "first bind s", "all bound s", "peak RSS MiB", "RSS MiB", "cycles", "p50 ms",
              "p99 ms", "cpu p50", "cpu p99");
  for (const Run& run : all) {
    if (("," + runs + ",").find("," + run.name + ",") == std::string::npos) continue;
    Result<Outcome> o = Measure(c, run, pods, writers, std::chrono::seconds(timeout_s),
                                std::chrono::seconds(settle_s));
    if (!o.ok()) {
      std::cerr << run.name << ": " << o.status().message() << "\n";
      return 1;
    }
    std::printf("%-20s %8d %13.2f %12.2f %13.1f %8.1f %7zu %9.1f %9.1f %9.1f %9.1f\n",
                run.name.c_str(), o->bound, o->seconds_to_first_bound, o->seconds_to_all_bound,
                static_cast<double>(o->peak_rss_kib) / 1024, static_cast<double>(o->rss_kib) / 1024,
                o->decide_ms.size(), Percentile(o->decide_ms, 0.5), Percentile(o->decide_ms, 0.99),
                Percentile(o->decide_cpu_ms, 0.5), Percentile(o->decide_cpu_ms, 0.99));
    std::fflush(stdout);
  }
  if (held > 0) {
    kube::DeleteOptions now;
    now.grace_period_seconds = 0;
    (void)c.Delete(kube::resources::kPods, "bench-held", "", now);
    (void)c.Delete(kube::resources::kNamespaces, "", "bench-held");
  }
  (void)kubesim::DeleteFakeNodes(c, writers);
  return 0;
}

}  // namespace
}  // namespace chamber::chamberd

int main(int argc, char** argv) { return chamber::chamberd::Main(argc, argv); }
