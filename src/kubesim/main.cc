// chamber-kubesim: fake GPU nodes and a pod lifecycle simulator for a control plane without
// kubelets (see docs/kubesim.md).
//
//   chamber-kubesim --kubeconfig F nodes create --count 100 --gpus 8 --prefix gpu
//   chamber-kubesim --kubeconfig F nodes delete
//   chamber-kubesim --kubeconfig F run            (until SIGINT or SIGTERM)

#include <signal.h>

#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/log.h"
#include "common/version.h"
#include "kube/client.h"
#include "kubesim/nodes.h"
#include "kubesim/simulator.h"

namespace {

using namespace chamber;

Result<std::unique_ptr<kube::Client>> Connect(const std::string& kubeconfig,
                                              const std::string& context) {
  Result<kube::RestConfig> cfg = kubeconfig.empty() && context.empty()
                                     ? kube::LoadDefaultConfig()
                                     : kube::LoadKubeconfig(kubeconfig, context);
  if (!cfg.ok()) return cfg.status();
  cfg->qps = 0;  // thousands of writes; the server's own limits apply
  cfg->user_agent = "chamber-kubesim";
  return kube::Client::Create(*cfg);
}

int Fail(const Status& s) {
  std::fprintf(stderr, "chamber-kubesim: %s\n", s.ToString().c_str());
  return 1;
}

int Run(kube::Client& client, const kubesim::SimulatorOptions& options, double stats_interval) {
  // SIGINT and SIGTERM are taken here with sigwait; the simulator's threads block them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  kubesim::Simulator sim(&client, options);
  if (Status s = sim.Start(); !s.ok()) return Fail(s);
  const auto interval = static_cast<long>(stats_interval * 1e9);
  const timespec tick{interval / 1'000'000'000, interval % 1'000'000'000};
  while (true) {
    const int sig = sigtimedwait(&signals, nullptr, &tick);
    const kubesim::SimulatorStats st = sim.stats();
    spdlog::info("kubesim: started {} succeeded {} failed {} deleted {} conflicts {} errors {}",
                 st.started, st.succeeded, st.failed, st.deleted, st.conflicts, st.errors);
    if (sig == SIGINT || sig == SIGTERM) break;
  }
  sim.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chamber-kubesim: fake GPU nodes and pod lifecycle for a kubelet-less cluster"};
  app.set_version_flag("--version",
                       fmt::format("chamber-kubesim {} ({})", CHAMBER_VERSION, CHAMBER_GIT_COMMIT));
  app.require_subcommand(1);
  std::string kubeconfig, context;
  logging::LogOptions log;
  app.add_option("--kubeconfig", kubeconfig,
                 "Kubeconfig file(s) (default $KUBECONFIG, "
                 "~/.kube/config, in-cluster)");
  app.add_option("--context", context, "Kubeconfig context (default: current-context)");
  app.add_option("--log-level", log.level, "trace, debug, info, warn, error");

  CLI::App* nodes = app.add_subcommand("nodes", "Create or delete fake GPU nodes");
  nodes->require_subcommand(1);
  kubesim::NodePoolSpec spec;
  std::vector<std::string> labels, taints;
  int threads = 16;
  CLI::App* create = nodes->add_subcommand("create", "Create a pool of fake GPU nodes");
  create->add_option("--count", spec.count, "Number of nodes")->required();
  create->add_option("--prefix", spec.prefix, "Node names: <prefix>-<index>");
  create->add_option("--first-index", spec.first_index, "Index of the first node");
  create->add_option("--gpus", spec.gpus, "nvidia.com/gpu per node");
  create->add_option("--model", spec.gpu_model, "GPU model (label nvidia.com/gpu.product)");
  create->add_option("--cpu", spec.cpu, "CPU capacity (quantity)");
  create->add_option("--memory", spec.memory, "Memory capacity (quantity)");
  create->add_option("--pods", spec.pods, "Pod capacity");
  create->add_option("--label", labels, "Extra label key=value (repeatable)");
  create->add_option("--taint", taints, "Taint key[=value]:Effect (repeatable)");
  create->add_option("--threads", threads, "Parallel writers")->check(CLI::Range(1, 256));
  CLI::App* del = nodes->add_subcommand("delete",
                                        "Delete every node labelled "
                                        "chamber.io/fake-node=true");
  del->add_option("--threads", threads, "Parallel writers")->check(CLI::Range(1, 256));

  kubesim::SimulatorOptions sim;
  double grace_cap = 2, stats_interval = 10;
  CLI::App* run = app.add_subcommand("run", "Run the pod lifecycle simulator until SIGINT/SIGTERM");
  run->add_option("--node-selector", sim.node_selector, "Label selector of the simulated nodes");
  run->add_option("--grace-cap", grace_cap, "Longest wait, seconds, before deleting a pod")
      ->check(CLI::Range(0.0, 3600.0));
  run->add_option("--writers", sim.writers, "Parallel writers")->check(CLI::Range(1, 256));
  run->add_option("--stats-interval", stats_interval, "Seconds between progress lines")
      ->check(CLI::Range(0.1, 3600.0));

  CLI11_PARSE(app, argc, argv);
  if (Status s = logging::Setup(log); !s.ok()) return Fail(s);

  Result<std::unique_ptr<kube::Client>> client = Connect(kubeconfig, context);
  if (!client.ok()) return Fail(client.status());

  if (*create) {
    for (const auto& l : labels) {
      auto kv = kubesim::ParseLabel(l, "--label");
      if (!kv.ok()) return Fail(kv.status());
      spec.labels[kv->first] = kv->second;
    }
    for (const auto& t : taints) {
      auto taint = kubesim::ParseTaint(t, "--taint");
      if (!taint.ok()) return Fail(taint.status());
      spec.taints.push_back(*taint);
    }
    auto st = kubesim::CreateFakeNodes(**client, spec, threads);
    if (!st.ok()) return Fail(st.status());
    std::printf("created %d nodes (%d already existed) in %.2fs: %.0f nodes/s\n", st->created,
                st->existing, st->seconds,
                (st->created + st->existing) / std::max(st->seconds, 1e-9));
    return 0;
  }
  if (*del) {
    auto st = kubesim::DeleteFakeNodes(**client, threads);
    if (!st.ok()) return Fail(st.status());
    std::printf("deleted %d nodes in %.2fs\n", st->deleted, st->seconds);
    return 0;
  }
  sim.grace_cap = std::chrono::milliseconds(static_cast<int64_t>(grace_cap * 1000));
  return Run(**client, sim, stats_interval);
}
