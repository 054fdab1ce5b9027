// chamberd: the scheduler and queue manager on Kubernetes (docs/scheduling.md).
//
// With leader election (the default) every replica campaigns for the Lease; the leader builds
// its state from the API server, schedules every cycle and serves the API and dashboard. A
// leader that loses the Lease stops writing at once and exits, so that it restarts as a
// candidate with nothing cached. Every healthy replica is ready; the serving leader labels its
// own pod chamber.io/leader=true (--pod-name), which the Service selects (leader_label.h).
// With --data-dir every replica keeps a history file of its own; a standby copies the leader's
// into it (--history-follow-url, history_replication.h) and writes on from there once it leads.
//
// This file reads the flags, opens the history and the client and stops on a signal;
// replica.h runs the election and lead.h what the leader does.
#include <csignal>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <filesystem>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "chamberd/flags.h"
#include "chamberd/replica.h"
#include "common/log.h"
#include "common/version.h"
#include "fleet/history_store.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/leader_election.h"

namespace chamber::chamberd {
namespace {

int Main(int argc, char** argv) {
#if defined(__GLIBC__)
  // Blocks of 1 MiB and more (a snapshot's or fleet state's vectors, which every cycle builds
  // anew beside the last) come from mmap and go back to the system when freed. glibc otherwise
  // raises this threshold after the first such free and serves them from the heap, where the
  // holes they leave stay resident until the next malloc_trim: about 10 MiB more at the peak
  // with 100,000 pods (docs/benchmarks.md).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
  Flags f;
  CLI::App app{"chamberd: Chamber's scheduler and queue manager on Kubernetes"};
  app.set_version_flag("--version", "chamberd " CHAMBER_VERSION " (" CHAMBER_GIT_COMMIT ")",
                       "Print the version and exit");
  AddFlags(app, f);
  CLI11_PARSE(app, argc, argv);

  logging::LogOptions lo;
  lo.level = f.log_level;
  lo.json = f.log_json;
  if (Status s = logging::Setup(lo); !s.ok()) {
    std::cerr << "chamberd: " << s.message() << "\n";
    return 2;
  }
  core::EngineConfig engine;
  if (Status s = ReadConfig(&f, &engine); !s.ok()) {
    std::cerr << "chamberd: " << s.message() << "\n";
    return 2;
  }
  if (f.pricing.rules.empty() && f.pricing.default_price_per_gpu_hour == 0)
    spdlog::info("pricing: no GPU prices (the config file's pricing: section); every cost reads 0");
  else
    spdlog::info("pricing: {} rules; GPUs no rule matches cost {} {} per GPU-hour",
                 f.pricing.rules.size(), f.pricing.default_price_per_gpu_hour, f.pricing.currency);
  if (Status s = CheckFlags(&f); !s.ok()) {
    std::cerr << "chamberd: " << s.message() << "\n";
    return 2;
  }
  // Every replica keeps a history file of its own, opened before the election: a standby copies
  // the leader's history into it, a leader writes its own.
  std::unique_ptr<fleet::HistoryStore> history;
  if (!f.data_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(f.data_dir, ec);
    if (ec) {
      std::cerr << "chamberd: --data-dir " << f.data_dir << ": " << ec.message() << "\n";
      return 2;
    }
    fleet::HistoryOptions ho;
    ho.fine_step_seconds = f.history_step_s;
    auto h =
        fleet::HistoryStore::Open((std::filesystem::path(f.data_dir) / "history.db").string(), ho);
    if (!h.ok()) {
      std::cerr << "chamberd: " << h.status().message() << "\n";
      return 2;
    }
    history = std::move(*h);
  }
  auto rest = f.kubeconfig.empty() ? kube::LoadDefaultConfig() : kube::LoadKubeconfig(f.kubeconfig);
  if (!rest.ok()) {
    std::cerr << "chamberd: " << rest.status().message() << "\n";
    return 2;
  }
  rest->qps = f.qps;
  rest->burst = f.burst;
  rest->user_agent = "chamberd";
  auto client = kube::Client::Create(*rest);
  if (!client.ok()) {
    std::cerr << "chamberd: " << client.status().message() << "\n";
    return 2;
  }

  // SIGINT and SIGTERM end the process cleanly: stop writing, release the Lease.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  kube::CancellationToken stop;
  std::jthread waiter([signals, stop] {
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("signal {}: stopping", sig);
    stop.Cancel();
  });
  waiter.detach();

  return RunReplica(f, engine, *rest, client->get(), std::move(history), stop);
}

}  // namespace
}  // namespace chamber::chamberd

int main(int argc, char** argv) { return chamber::chamberd::Main(argc, argv); }
