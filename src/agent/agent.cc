#include "agent/agent.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agent/xid_log.h"
#include "common/prometheus_text.h"

namespace chamber::agent {

struct Agent::Http {
  httplib::Server server;
};

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double HostBootTime() {
  std::ifstream in("/proc/uptime");
  double uptime = 0;
  if (in >> uptime) return UnixNow() - uptime;
  return UnixNow();
}

Agent::Agent(AgentOptions options)
    : options_(std::move(options)),
      classifier_(std::make_unique<HealthClassifier>(options_.health, options_.boot_time)),
      http_(std::make_unique<Http>()) {
  if (!options_.pod_resources_socket.empty()) {
    pod_attribution_.state = AttributionState::kUnavailable;
    pod_attribution_.error = "the kubelet has not been asked yet";
  }
}

Agent::~Agent() { Stop(); }

void Agent::Start() {
  Inventory inv;
  // Taken before loading, so that "initialized_at" is never later than NVML's own start.
  double load_started = UnixNow();
  auto lib = NvmlLibrary::Load(options_.nvml_library);
  if (!lib.ok()) {
    inv.nvml_library = options_.nvml_library;
    inv.nvml_error = lib.status().message();
    spdlog::warn("no GPUs found: NVML is not available ({}); serving an empty inventory",
                 inv.nvml_error);
  } else {
    for (const std::string& f : (*lib)->MissingFunctions()) {
      spdlog::warn("NVML function missing in this driver: {}", f);
    }
    collector_ = std::make_unique<GpuCollector>(std::move(lib).value(), options_.host_proc);
    inv = collector_->Discover(UnixNow());
    inv.nvml_initialized_at = load_started;
    inv.xid_events = collector_->RegisterXidEvents();
    spdlog::info("NVML {} loaded: driver {}, CUDA {}, {} GPUs", inv.nvml_library,
                 inv.driver_version, inv.cuda_driver_version, inv.gpus.size());
    for (const GpuInfo& g : inv.gpus) {
      spdlog::info("GPU {}: {} {} {} MiB at {}{}", g.index, g.uuid, g.name,
                   g.memory_total_bytes >> 20, g.pci_bus_id,
                   g.HasNvLink() ? fmt::format(", {} NVLinks", g.nvlinks_total) : "");
      for (const MigInstance& m : g.mig) {
        spdlog::info("GPU {} MIG device {}: {} {} {} MiB, GPU instance {}, compute instance {}",
                     g.index, m.index, m.uuid, m.name, m.memory_total_bytes.value_or(0) >> 20,
                     m.gpu_instance_id ? std::to_string(*m.gpu_instance_id) : "?",
                     m.compute_instance_id ? std::to_string(*m.compute_instance_id) : "?");
      }
    }
    if (inv.gpus.empty()) spdlog::warn("NVML loaded but found no GPUs");
  }
  std::map<std::string, std::string> labels = NodeLabels(inv);
  {
    std::lock_guard lock(mu_);
    inventory_ = inv;
    labels_ = labels;
    classifier_->SetInventory(inv);
  }
  for (const auto& [key, value] : labels) spdlog::info("node label {}={}", key, value);

  if (!options_.kernel_log.empty() && !inv.gpus.empty()) {
    auto entries = ScanKernelLog(options_.kernel_log);
    if (!entries.ok()) {
      spdlog::warn("{}; Xids from before the agent started are not seen",
                   entries.status().message());
    } else {
      for (const XidLogEntry& e : *entries) {
        XidEvent ev;
        ev.xid = e.xid;
        ev.pci_bus_id = e.pci_bus_id;
        ev.message = e.message;
        ev.source = "kernel-log";
        ev.time = UnixNow();
        auto address = ParsePciAddress(e.pci_bus_id);
        for (const GpuInfo& g : inv.gpus) {
          if (address && ParsePciAddress(g.pci_bus_id) == address) {
            ev.gpu_index = g.index;
            ev.gpu_uuid = g.uuid;
            ev.pci_bus_id = g.pci_bus_id;
          }
        }
        spdlog::info("kernel log: Xid {} on {} (GPU {}): {}", e.xid, e.pci_bus_id, ev.gpu_index,
                     e.message);
        HandleXid(std::move(ev));
      }
    }
  }
}

bool Agent::UsesGpm() const {
  std::lock_guard lock(mu_);
  return std::any_of(inventory_.gpus.begin(), inventory_.gpus.end(),
                     [](const GpuInfo& g) { return g.gpm_supported; });
}

void Agent::SampleOnce() {
  if (!collector_) return;
  std::vector<int> indices;
  {
    std::lock_guard lock(mu_);
    for (const GpuInfo& g : inventory_.gpus) indices.push_back(g.index);
  }
  for (int index : indices) {
    GpuSample s = collector_->Sample(index, UnixNow());
    std::lock_guard lock(mu_);
    Record(classifier_->OnSample(s, s.time));
    latest_[index] = std::move(s);
  }
}

void Agent::RefreshPodResources() {
  if (options_.pod_resources_socket.empty()) return;
  auto devices = ListPodDevices(options_.pod_resources_socket, options_.pod_resources_timeout_s);
  std::lock_guard lock(mu_);
  PodAttribution next;
  if (devices.ok()) {
    next = Attribute(inventory_, *devices);
    next.updated_at = UnixNow();
    if (pod_resources_ok_ != true) {
      spdlog::info("per-pod GPU attribution available from {}: {} of {} GPUs held by pods",
                   options_.pod_resources_socket, next.by_gpu.size(), inventory_.gpus.size());
    }
  } else {
    next.state = AttributionState::kUnavailable;
    next.error = devices.status().message();
    next.updated_at = pod_attribution_.updated_at;
    if (pod_resources_ok_ != false) {
      spdlog::warn(
          "per-pod GPU attribution unavailable: {}; GPUs are reported without pods "
          "until the kubelet answers",
          next.error);
    }
  }
  pod_resources_ok_ = devices.ok();
  if (next.by_gpu != pod_attribution_.by_gpu) {
    // chamberd learns of a pod change with the next push rather than at the next interval.
    push_due_ = true;
    wake_.notify_all();
  }
  pod_attribution_ = std::move(next);
}

void Agent::PodResourcesLoop() {
  auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(options_.pod_resources_interval_s));
  auto next = std::chrono::steady_clock::now();
  while (!stop_) {
    RefreshPodResources();
    next = std::max(next + period, std::chrono::steady_clock::now());
    std::unique_lock lock(mu_);
    wake_.wait_until(lock, next, [&] { return stop_.load(); });
  }
}

void Agent::HandleXid(XidEvent event) {
  std::lock_guard lock(mu_);
  ++xid_counts_[{event.gpu_index, event.xid}];
  const XidRule* rule = FindXidRule(event.xid);
  spdlog::log(rule && rule->cls == XidClass::kHardware ? spdlog::level::warn : spdlog::level::info,
              "Xid {} on GPU {} ({}) from {}: {}", event.xid, event.gpu_index, event.pci_bus_id,
              event.source,
              rule ? fmt::format("{} ({})", rule->name, XidClassName(rule->cls))
                   : std::string("not in the Xid table"));
  Record(classifier_->OnXid(event, UnixNow()));
}

void Agent::Record(const std::vector<IncidentChange>& changes) {
  for (const IncidentChange& c : changes) {
    const GpuIncident& i = c.incident;
    if (c.kind == IncidentChange::Kind::kOpened) {
      spdlog::warn("incident {} opened: GPU {} {} {} {}: {}", i.id, i.gpu_index, i.gpu_uuid,
                   SeverityName(i.severity), i.cause, i.message);
    } else {
      spdlog::info("incident {} closed: GPU {} {} {} after {:.1f} s", i.id, i.gpu_index, i.gpu_uuid,
                   i.cause, i.closed_at.value_or(i.last_seen) - i.opened_at);
    }
  }
  if (!changes.empty()) {
    push_due_ = true;
    wake_.notify_all();
  }
}

AgentSnapshot Agent::Snapshot() const {
  std::lock_guard lock(mu_);
  AgentSnapshot snap;
  snap.node = options_.node_name;
  snap.time = UnixNow();
  snap.inventory = inventory_;
  for (const auto& [index, s] : latest_) snap.samples.push_back(s);
  snap.open_incidents = classifier_->OpenIncidents();
  const auto& closed = classifier_->ClosedIncidents();
  size_t keep = std::min<size_t>(closed.size(), 32);
  snap.recently_closed.assign(closed.end() - static_cast<std::ptrdiff_t>(keep), closed.end());
  for (const GpuInfo& g : inventory_.gpus) {
    snap.gpu_severity[g.uuid] = classifier_->GpuSeverity(g.uuid);
  }
  snap.labels = labels_;
  snap.pod_attribution = pod_attribution_;
  snap.xid_counts = xid_counts_;
  snap.push_success = push_success_;
  snap.push_failure = push_failure_;
  return snap;
}

void Agent::EventLoop() {
  while (!stop_) {
    auto event = collector_->WaitXid(200, &UnixNow);
    if (event) HandleXid(std::move(*event));
  }
}

namespace {

struct PushTarget {
  std::string base;  // scheme://host:port
  std::string path;
};

Result<PushTarget> ParseUrl(const std::string& url) {
  size_t scheme = url.starts_with("http://") ? 7 : url.starts_with("https://") ? 8 : 0;
  if (scheme == 0) {
    return Status::InvalidArgument(
        fmt::format("--chamberd-url {}: expected an http:// or https:// URL", url));
  }
  size_t slash = url.find('/', scheme);
  PushTarget t;
  t.base = url.substr(0, slash);
  t.path = slash == std::string::npos ? "/" : url.substr(slash);
  if (t.base.size() <= scheme) {
    return Status::InvalidArgument(fmt::format("--chamberd-url {}: no host", url));
  }
  return t;
}

// The token file's first line, without surrounding whitespace.
Result<std::string> ReadToken(const std::string& path) {
  std::ifstream in(path);
  std::string token;
  if (!in || !std::getline(in, token))
    return Status::NotFound(fmt::format("--token-file {}: cannot read it", path));
  const auto first = token.find_first_not_of(" \t\r");
  const auto last = token.find_last_not_of(" \t\r");
  if (first == std::string::npos)
    return Status::InvalidArgument(fmt::format("--token-file {}: the file is empty", path));
  return token.substr(first, last - first + 1);
}

}  // namespace

void Agent::PushLoop() {
  auto target = ParseUrl(options_.chamberd_url);
  if (!target.ok()) {
    spdlog::error("{}; reports are not pushed", target.status().message());
    return;
  }
  httplib::Client client(target->base);
  client.enable_server_certificate_verification(true);
  if (!options_.chamberd_ca_file.empty()) client.set_ca_cert_path(options_.chamberd_ca_file);
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  client.set_write_timeout(5);
  double backoff = 0;
  auto next = std::chrono::steady_clock::now();
  while (!stop_) {
    {
      std::unique_lock lock(mu_);
      wake_.wait_until(lock, next, [&] { return stop_.load() || (push_due_ && backoff == 0); });
      if (stop_) break;
      push_due_ = false;
    }
    std::string body = ReportJson(Snapshot()).dump();
    httplib::Headers headers;
    if (!options_.token_file.empty()) {
      Result<std::string> token = ReadToken(options_.token_file);
      if (token.ok()) {
        headers.emplace("Authorization", "Bearer " + *token);
      } else {
        spdlog::warn("{}; pushing without a token", token.status().message());
      }
    }
    auto res = client.Post(target->path, headers, body, "application/json");
    bool ok = res && res->status >= 200 && res->status < 300;
    {
      std::lock_guard lock(mu_);
      ++(ok ? push_success_ : push_failure_);
    }
    if (ok) {
      if (backoff > 0) spdlog::info("push to {} works again", options_.chamberd_url);
      backoff = 0;
      next = std::chrono::steady_clock::now() +
             std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                 std::chrono::duration<double>(options_.push_interval_s));
    } else {
      backoff = backoff == 0 ? 1 : std::min(backoff * 2, options_.push_max_backoff_s);
      spdlog::warn("push to {} failed ({}); retrying in {:.0f} s", options_.chamberd_url,
                   res ? fmt::format("HTTP {}", res->status) : httplib::to_string(res.error()),
                   backoff);
      next = std::chrono::steady_clock::now() +
             std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                 std::chrono::duration<double>(backoff));
      // A failed push leaves the report due: it goes out when the backoff ends.
      std::lock_guard lock(mu_);
      push_due_ = true;
    }
  }
}

Status Agent::Serve() {
  httplib::Server& server = http_->server;
  server.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    AgentSnapshot snap = Snapshot();
    nlohmann::json body = {{"status", "ok"},
                           {"nvml", snap.inventory.nvml_loaded},
                           {"gpus", snap.inventory.gpus.size()}};
    if (!snap.inventory.nvml_loaded) body["reason"] = "no GPUs: " + snap.inventory.nvml_error;
    res.set_content(body.dump(), "application/json");
  });
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderMetrics(Snapshot()), std::string(prometheus::kContentType));
  });
  server.Get("/v1/report", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(ReportJson(Snapshot()).dump(), "application/json");
  });
  int port = options_.listen_port;
  if (port == 0) {
    port = server.bind_to_any_port(options_.listen_host.c_str());
  } else if (!server.bind_to_port(options_.listen_host.c_str(), port)) {
    port = -1;
  }
  if (port <= 0) {
    return Status::Unavailable(
        fmt::format("cannot listen on {}:{}", options_.listen_host, options_.listen_port));
  }
  spdlog::info("serving /metrics, /healthz and /v1/report on {}:{}", options_.listen_host, port);
  if (!options_.port_file.empty()) {
    std::ofstream(options_.port_file) << port << "\n";
  }
  std::atomic<bool> http_done{false};
  std::thread http([&server, &http_done] {
    server.listen_after_bind();
    http_done = true;
  });
  std::thread events;
  if (collector_ && inventory_.xid_events) events = std::thread([this] { EventLoop(); });
  std::thread push;
  if (!options_.chamberd_url.empty()) push = std::thread([this] { PushLoop(); });
  std::thread pods;
  if (!options_.pod_resources_socket.empty()) pods = std::thread([this] { PodResourcesLoop(); });

  auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(options_.interval_s));
  auto next = std::chrono::steady_clock::now();
  while (!stop_) {
    SampleOnce();
    next += period;
    std::unique_lock lock(mu_);
    wake_.wait_until(lock, next, [&] { return stop_.load(); });
  }
  // stop() only reaches a server that is already listening.
  while (!server.is_running() && !http_done) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  server.stop();
  http.join();
  if (events.joinable()) events.join();
  if (push.joinable()) push.join();
  if (pods.joinable()) pods.join();
  spdlog::info("agent stopped");
  return Status::Ok();
}

void Agent::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (http_) http_->server.stop();
}

}  // namespace chamber::agent
