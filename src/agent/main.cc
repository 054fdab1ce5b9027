// chamber-agent: one per GPU node. `chamber-agent --once -o json` prints the inventory, one
// sample and the health verdict, then exits; without --once it serves until SIGTERM.

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "common/log.h"
#include "common/tls.h"
#include "common/version.h"

namespace {

using chamber::agent::Agent;
using chamber::agent::AgentOptions;

std::string EnvOr(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

void PrintText(const chamber::agent::AgentSnapshot& snap) {
  const auto& inv = snap.inventory;
  if (!inv.nvml_loaded) {
    std::cout << "no GPUs found: " << inv.nvml_error << "\n";
    return;
  }
  std::cout << fmt::format("driver {}  CUDA {}  GPUs {}\n", inv.driver_version,
                           inv.cuda_driver_version, inv.gpus.size());
  for (const auto& f : inv.missing_functions) std::cout << "missing: " << f << "\n";
  for (const auto& g : inv.gpus) {
    std::cout << fmt::format(
        "GPU {}  {}  {}  {} MiB  {}  health {}\n", g.index, g.uuid, g.name,
        g.memory_total_bytes >> 20, g.pci_bus_id,
        chamber::agent::SeverityName(snap.gpu_severity.count(g.uuid)
                                         ? snap.gpu_severity.at(g.uuid)
                                         : chamber::agent::Severity::kHealthy));
    for (const auto& m : g.mig) {
      std::cout << fmt::format(
          "  MIG {}  {}  {}  {}  gi {}  ci {}\n", m.index, m.uuid,
          m.profile.empty() ? m.name : m.profile,
          m.memory_total_bytes ? fmt::format("{} MiB", *m.memory_total_bytes >> 20) : "- MiB",
          m.gpu_instance_id ? std::to_string(*m.gpu_instance_id) : "-",
          m.compute_instance_id ? std::to_string(*m.compute_instance_id) : "-");
    }
  }
  for (const auto& s : snap.samples) {
    std::cout << fmt::format("GPU {}  util {} ({})  power {} W  temp {} C\n", s.index,
                             s.sm_active         ? fmt::format("{:.0f}%", *s.sm_active)
                             : s.gpu_utilization ? fmt::format("{:.0f}%", *s.gpu_utilization)
                                                 : std::string("-"),
                             chamber::agent::UtilizationSourceName(s.utilization_source),
                             s.power_watts ? fmt::format("{:.0f}", *s.power_watts) : "-",
                             s.temperature_c ? std::to_string(*s.temperature_c) : "-");
  }
  const chamber::agent::PodAttribution& pods = snap.pod_attribution;
  if (pods.state == chamber::agent::AttributionState::kUnavailable) {
    std::cout << "pods: unavailable: " << pods.error << "\n";
  }
  for (const auto& [uuid, held] : pods.by_gpu) {
    for (const auto& d : held) {
      std::cout << fmt::format("{}{}  pod {}/{}  container {}\n", uuid,
                               d.mig_uuid.empty() ? "" : " " + d.mig_uuid, d.namespace_name, d.pod,
                               d.container);
    }
  }
  for (const auto& d : pods.unmatched) {
    std::cout << fmt::format("{} ({})  pod {}/{}  container {}\n", d.device_id, d.resource_name,
                             d.namespace_name, d.pod, d.container);
  }
  for (const auto& i : snap.open_incidents) {
    std::cout << fmt::format("incident {}  GPU {}  {}  {}: {}\n", i.id, i.gpu_index,
                             chamber::agent::SeverityName(i.severity), i.cause, i.message);
    for (const chamber::Evidence& e : i.evidence)
      std::cout << fmt::format("  {:<15}  {}\n", chamber::EvidenceType(e),
                               chamber::EvidenceText(e));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chamber-agent: GPU discovery, metrics and health for one node"};
  AgentOptions opt;
  opt.node_name = EnvOr("NODE_NAME", HostName());
  opt.nvml_library = EnvOr("CHAMBER_NVML_LIBRARY", chamber::agent::kDefaultNvmlLibrary);
  bool once = false;
  std::string output = "text";
  std::string listen = "0.0.0.0:9401";
  double boot_time = -1;
  chamber::logging::LogOptions log;
  app.set_version_flag("--version",
                       fmt::format("chamber-agent {} ({})", CHAMBER_VERSION, CHAMBER_GIT_COMMIT));
  app.add_flag("--once", once, "Print the inventory, one sample and health, then exit");
  app.add_option("-o,--output", output, "Output of --once")->check(CLI::IsMember({"text", "json"}));
  app.add_option("--node-name", opt.node_name, "Node name in reports (default $NODE_NAME)");
  app.add_option("--nvml-library", opt.nvml_library,
                 "NVML library to load (default $CHAMBER_NVML_LIBRARY or libnvidia-ml.so.1)");
  app.add_option("--kernel-log", opt.kernel_log,
                 "Kernel log read at start for earlier Xids: /dev/kmsg or a file of dmesg lines; "
                 "empty to skip");
  app.add_option("--host-proc", opt.host_proc,
                 "The node's /proc (the host's, mounted, unless the pod shares the host's PID "
                 "namespace), to find which pod each GPU process runs in")
      ->capture_default_str();
  app.add_option("--interval", opt.interval_s, "Seconds between samples")
      ->check(CLI::Range(0.01, 3600.0));
  app.add_option("--pod-resources-socket", opt.pod_resources_socket,
                 "The kubelet's pod-resources socket, for per-pod GPU attribution; empty to "
                 "disable");
  app.add_option("--pod-resources-interval", opt.pod_resources_interval_s,
                 "Seconds between asks for which pods hold which GPUs")
      ->check(CLI::Range(0.05, 3600.0));
  app.add_option("--pod-resources-timeout", opt.pod_resources_timeout_s,
                 "Deadline of one ask to the kubelet, seconds")
      ->check(CLI::Range(0.01, 60.0));
  app.add_option("--listen", listen,
                 "host:port for /metrics, /healthz and /v1/report (port 0: "
                 "any free port)");
  app.add_option("--port-file", opt.port_file, "Write the bound port to this file");
  app.add_option("--chamberd-url", opt.chamberd_url,
                 "POST reports to this http:// or https:// URL (default: no push)");
  app.add_option("--chamberd-ca-file", opt.chamberd_ca_file,
                 "PEM CA bundle that chamberd's certificate must chain to, for an https:// "
                 "--chamberd-url (default: the system's trust store); the host name is checked");
  const std::string sa_token = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  if (std::filesystem::exists(sa_token)) opt.token_file = sa_token;
  app.add_option("--token-file", opt.token_file,
                 "Bearer token for pushes, read before each push (default: the service "
                 "account token when mounted; empty: none)");
  app.add_option("--push-interval", opt.push_interval_s, "Seconds between pushes")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--debounce", opt.health.debounce_samples,
                 "Consecutive bad samples before a sample check opens an incident")
      ->check(CLI::Range(1, 1000));
  app.add_option("--clear-after", opt.health.clear_after_s,
                 "Seconds a check must be good before its incident closes")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--boot-grace", opt.health.boot_grace_s,
                 "Seconds after host boot in which degraded-class checks open no incidents")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--boot-time", boot_time, "Host boot time, unix seconds (default: /proc/uptime)");
  app.add_option("--app-xid-repeats", opt.health.app_xid_repeats,
                 "Application Xids on one GPU within --app-xid-window that open an incident")
      ->check(CLI::Range(1, 1000));
  app.add_option("--app-xid-window", opt.health.app_xid_window_s,
                 "Window for --app-xid-repeats, seconds")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--nvlink-error-window", opt.health.nvlink_error_window_s,
                 "NVLink counters that grew this many seconds ago or less count as bad")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--xid-clear-after", opt.health.xid_clear_after_s,
                 "Seconds after the last hardware Xid its incident closes (0: never)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--log-level", log.level, "trace, debug, info, warn, error, critical or off");
  app.add_flag("--log-json", log.json, "Log one JSON object per line");
  CLI11_PARSE(app, argc, argv);

  if (chamber::Status s = chamber::logging::Setup(log); !s.ok()) {
    std::cerr << "chamber-agent: " << s.ToString() << "\n";
    return 2;
  }
  size_t colon = listen.rfind(':');
  try {
    if (colon == std::string::npos) throw std::invalid_argument("no port");
    opt.listen_host = listen.substr(0, colon);
    opt.listen_port = std::stoi(listen.substr(colon + 1));
    if (opt.listen_port < 0 || opt.listen_port > 65535) throw std::out_of_range("port");
  } catch (const std::exception&) {
    std::cerr << "chamber-agent: --listen " << listen << ": expected host:port\n";
    return 2;
  }
  if (!opt.chamberd_url.empty() && !opt.chamberd_url.starts_with("http://") &&
      !opt.chamberd_url.starts_with("https://")) {
    std::cerr << "chamber-agent: --chamberd-url " << opt.chamberd_url
              << ": expected an http:// or https:// URL\n";
    return 2;
  }
  if (!opt.chamberd_ca_file.empty()) {
    if (chamber::Status s = chamber::tls::CheckCaFile({"--chamberd-ca-file", opt.chamberd_ca_file});
        !s.ok()) {
      std::cerr << "chamber-agent: " << s.message() << "\n";
      return 2;
    }
  }
  opt.boot_time = boot_time >= 0 ? boot_time : chamber::agent::HostBootTime();

  if (once) {
    Agent agent(opt);
    agent.Start();
    // GPM figures are rates over an interval: give the second sample one.
    if (agent.UsesGpm()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    agent.SampleOnce();
    agent.RefreshPodResources();
    auto snap = agent.Snapshot();
    if (output == "json") {
      std::cout << chamber::agent::ReportJson(snap).dump(2) << "\n";
    } else {
      PrintText(snap);
    }
    return 0;
  }

  // SIGTERM and SIGINT are taken by one thread with sigwait; every other thread blocks them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Agent agent(opt);
  agent.Start();
  std::atomic<bool> done{false};
  std::thread signal_thread([&] {
    timespec tick{0, 200'000'000};
    while (!done) {
      int sig = sigtimedwait(&signals, nullptr, &tick);
      if (sig == SIGTERM || sig == SIGINT) {
        spdlog::info("received {}, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        agent.Stop();
        return;
      }
    }
  });
  chamber::Status status = agent.Serve();
  done = true;
  signal_thread.join();
  if (!status.ok()) {
    spdlog::error("{}", status.ToString());
    return 1;
  }
  return 0;
}
