#include "admission/webhook_server.h"

#include <httplib.h>

#include <array>
#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/tls.h"
#include "kube/errors.h"

namespace chamber::admission {
namespace {

constexpr char kJson[] = "application/json";

// The API group and version of an apiVersion: "apps/v1" -> {"apps", "v1"}, "v1" -> {"", "v1"}.
std::pair<std::string, std::string> SplitApiVersion(const std::string& api_version) {
  const size_t slash = api_version.find('/');
  if (slash == std::string::npos) return {"", api_version};
  return {api_version.substr(0, slash), api_version.substr(slash + 1)};
}

// Reads through `inner` until `deadline`; later reads fail at once, naming the budget.
class Budgeted : public ObjectSource {
 public:
  Budgeted(ObjectSource* inner, std::chrono::steady_clock::time_point deadline,
           std::chrono::milliseconds budget)
      : inner_(inner), deadline_(deadline), budget_(budget) {}
  Result<kube::ObjectMeta> Owner(const std::string& ns, const kube::OwnerReference& ref) override {
    CHAMBER_RETURN_IF_ERROR(InTime());
    return inner_->Owner(ns, ref);
  }
  Result<kube::ObjectMeta> Namespace(const std::string& name) override {
    CHAMBER_RETURN_IF_ERROR(InTime());
    return inner_->Namespace(name);
  }

 private:
  Status InTime() const {
    if (std::chrono::steady_clock::now() < deadline_) return Status::Ok();
    return Status::Unavailable("the webhook's " + std::to_string(budget_.count()) +
                               " ms for reading owners ran out");
  }
  ObjectSource* inner_;
  std::chrono::steady_clock::time_point deadline_;
  std::chrono::milliseconds budget_;
};

}  // namespace

Result<kube::ObjectMeta> ApiObjectSource::Owner(const std::string& ns,
                                                const kube::OwnerReference& ref) {
  auto [group, version] = SplitApiVersion(ref.api_version);
  if (version.empty() || ref.kind.empty() || ref.name.empty())
    return kube::ApiErrorStatus(
        "owner reference " + ref.api_version + " " + ref.kind + " " + ref.name, 404,
        "an owner reference without apiVersion, kind or name");
  const kube::ResourceType type{.group = group,
                                .version = version,
                                .plural = GuessPlural(ref.kind),
                                .kind = ref.kind,
                                .namespaced = true};
  CHAMBER_ASSIGN_OR_RETURN(kube::Json object, client_->Get(type, ns, ref.name));
  return kube::DecodeMeta(object, ref.kind + " " + ns + "/" + ref.name);
}

Result<kube::ObjectMeta> ApiObjectSource::Namespace(const std::string& name) {
  CHAMBER_ASSIGN_OR_RETURN(kube::Json object, client_->Get(kube::resources::kNamespaces, "", name));
  return kube::DecodeMeta(object, "namespace " + name);
}

CachingObjectSource::CachingObjectSource(ObjectSource* inner, std::chrono::milliseconds ttl,
                                         size_t max_entries, Clock now)
    : inner_(inner), ttl_(ttl), max_entries_(max_entries), now_(std::move(now)) {}

Result<kube::ObjectMeta> CachingObjectSource::Lookup(
    const std::string& key, const std::function<Result<kube::ObjectMeta>()>& read) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end() && now_() < it->second.until) return it->second.answer;
  }
  Result<kube::ObjectMeta> answer = read();  // outside the lock: reads run in parallel
  if (answer.ok() || kube::IsNotFound(answer.status())) {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= max_entries_) entries_.clear();
    entries_.insert_or_assign(key, Entry{now_() + ttl_, answer});
  }
  return answer;
}

Result<kube::ObjectMeta> CachingObjectSource::Owner(const std::string& ns,
                                                    const kube::OwnerReference& ref) {
  return Lookup(
      "owner/" + ns + "/" + ref.api_version + "/" + ref.kind + "/" + ref.name + "/" + ref.uid,
      [&] { return inner_->Owner(ns, ref); });
}

Result<kube::ObjectMeta> CachingObjectSource::Namespace(const std::string& name) {
  return Lookup("namespace/" + name, [&] { return inner_->Namespace(name); });
}

struct WebhookServer::Impl {
  std::shared_ptr<tls::ServingCertificate> certificate;  // outlives the server below
  std::unique_ptr<httplib::Server> server;
  std::thread thread;
};

WebhookServer::WebhookServer(WebhookOptions options, ObjectSource* source)
    : impl_(std::make_unique<Impl>()), options_(std::move(options)), source_(source) {}

WebhookServer::~WebhookServer() { Stop(); }

namespace {

constexpr std::array<std::string_view, 2> kPaths = {"/mutate/pods", "/mutate/workloads"};
enum WebhookResult : size_t { kMutated, kUnchanged, kRefused, kBadRequest, kNotFound };
constexpr std::array<std::string_view, 5> kResultNames = {"mutated", "unchanged", "refused",
                                                          "bad_request", "not_found"};

size_t PathSlot(std::string_view path) {
  for (size_t i = 0; i < kPaths.size(); ++i)
    if (kPaths[i] == path) return i;
  return kPaths.size();  // any other
}

}  // namespace

uint64_t WebhookServer::mutated() const {
  uint64_t n = 0;
  for (const auto& by_result : requests_) n += by_result[kMutated].load();
  return n;
}

uint64_t WebhookServer::refused() const {
  uint64_t n = 0;
  for (const auto& by_result : requests_) n += by_result[kRefused].load();
  return n;
}

void WebhookServer::WriteMetrics(prometheus::TextWriter& out) const {
  auto path_name = [](size_t slot) { return slot < kPaths.size() ? kPaths[slot] : "other"; };
  out.Family("chamber_webhook_requests_total",
             "Admission requests this replica answered since it started, by path and result.",
             prometheus::MetricType::kCounter);
  for (size_t p = 0; p < kPathSlots; ++p)
    for (size_t r = 0; r < kResults; ++r)
      out.Sample({{"path", path_name(p)}, {"result", kResultNames[r]}},
                 static_cast<double>(requests_[p][r].load()));
  out.Family("chamber_webhook_request_seconds_total",
             "Time this replica spent answering admission requests, by path.",
             prometheus::MetricType::kCounter);
  for (size_t p = 0; p < kPathSlots; ++p)
    out.Sample({{"path", path_name(p)}}, static_cast<double>(request_ns_[p].load()) / 1e9);
  out.Family("chamber_webhook_certificate_reloads_total",
             "Times a renewed serving certificate was taken into service.",
             prometheus::MetricType::kCounter);
  out.Sample(certificate_reloads());
}

std::pair<int, std::string> WebhookServer::Handle(const std::string& path, std::string_view body) {
  const auto begin = std::chrono::steady_clock::now();
  const size_t slot = PathSlot(path);
  auto answered = [&](WebhookResult result, std::pair<int, std::string> answer) {
    requests_[slot][result].fetch_add(1, std::memory_order_relaxed);
    request_ns_[slot].fetch_add(
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now() - begin)
                                  .count()),
        std::memory_order_relaxed);
    return answer;
  };
  if (slot == kPaths.size())
    return answered(kNotFound,
                    {404, "no webhook at " + path + " (POST /mutate/pods or /mutate/workloads)\n"});
  Result<AdmissionRequest> request = ParseAdmissionReview(body);
  if (!request.ok()) {
    spdlog::warn("webhook {}: refused a body: {}", path, request.status().message());
    return answered(kBadRequest, {400, request.status().message() + "\n"});
  }
  const AdmissionRequest& req = *request;
  const std::string what =
      req.kind.kind + " " + req.namespace_name + "/" + (req.name.empty() ? "*" : req.name);
  AdmissionResponse response = AdmissionResponse::Allow(req.uid);
  if (path == "/mutate/pods") {
    Budgeted budgeted(source_, std::chrono::steady_clock::now() + options_.budget, options_.budget);
    Result<PodDecision> d = DecidePod(req, options_.policy, budgeted);
    if (!d.ok() && d.status().code() == StatusCode::kUnavailable) {
      response = AdmissionResponse::Refuse(
          req.uid, 500,
          "chamber: cannot tell whether this pod opts in to Chamber (retry): " +
              d.status().message());
    } else if (!d.ok()) {
      response = AdmissionResponse::Refuse(req.uid, 400, "chamber: " + d.status().message());
    } else {
      if (d->outcome == PodOutcome::kMutate) {
        response.patch = d->patch;
        spdlog::debug("webhook: {}: scheduler {} (queue \"{}\" from {})", what,
                      options_.policy.scheduler_name, d->queue, d->source);
      } else if (!d->patch.empty()) {  // a share's environment (opt_in.h)
        response.patch = d->patch;
        spdlog::debug("webhook: {}: its GPU share's environment", what);
      } else {
        spdlog::debug("webhook: {}: unchanged ({})", what, PodOutcomeName(d->outcome));
      }
      response.warnings = d->warnings;
    }
  } else {  // /mutate/workloads
    Result<WorkloadDecision> d = DecideWorkload(req, options_.policy);
    if (!d.ok()) {
      response = AdmissionResponse::Refuse(req.uid, 400, "chamber: " + d.status().message());
    } else if (d->mutate) {
      response.patch = d->patch;
      spdlog::debug("webhook: {}: queue label \"{}\" into {} pod template(s), the first at {}",
                    what, d->queue, d->template_paths.size(), d->template_paths.front());
    }
  }
  WebhookResult result = kUnchanged;
  if (!response.allowed) {
    result = kRefused;
    spdlog::warn("webhook: {}: refused: {}", what, response.message);
  } else if (response.patch.is_array() && !response.patch.empty()) {
    result = kMutated;
  }
  return answered(result, {200, WriteAdmissionReview(response)});
}

Status WebhookServer::Start() {
  Impl& i = *impl_;
  CHAMBER_ASSIGN_OR_RETURN(
      i.certificate, tls::ServingCertificate::Load({"--webhook-tls-cert-file", options_.cert_file},
                                                   {"--webhook-tls-key-file", options_.key_file}));
  tls::ServingCertificate* certificate = i.certificate.get();
  auto ssl = std::make_unique<httplib::SSLServer>([certificate](SSL_CTX& ctx) {
    certificate->Install(ctx);
    return true;
  });
  if (!ssl->is_valid())
    return Status::InvalidArgument("--webhook-tls-cert-file " + options_.cert_file +
                                   ", --webhook-tls-key-file " + options_.key_file +
                                   ": OpenSSL cannot serve with them");
  i.server = std::move(ssl);
  i.server->new_task_queue = [] { return new httplib::ThreadPool(8); };
  i.server->set_payload_max_length(options_.max_body);
  i.server->set_read_timeout(10);
  i.server->set_write_timeout(10);
  // The API server keeps its connections; an idle one is closed after 5 s, which also bounds
  // how long Stop waits for the threads that hold one.
  i.server->set_keep_alive_timeout(5);
  for (const char* path : {"/mutate/pods", "/mutate/workloads"}) {
    const std::string p = path;
    i.server->Post(p, [this, p](const httplib::Request& req, httplib::Response& res) {
      auto [status, body] = Handle(p, req.body);
      res.status = status;
      res.set_content(body, status == 200 ? kJson : "text/plain");
    });
  }
  if (options_.port == 0) {
    port_ = i.server->bind_to_any_port(options_.host);
    if (port_ < 0) return Status::Unavailable("--webhook-port: cannot listen on " + options_.host);
  } else {
    if (!i.server->bind_to_port(options_.host, options_.port))
      return Status::Unavailable("--webhook-port: cannot listen on " + options_.host + ":" +
                                 std::to_string(options_.port) + " (is the port in use?)");
    port_ = options_.port;
  }
  i.thread = std::thread([&i] { i.server->listen_after_bind(); });
  return Status::Ok();
}

int WebhookServer::certificate_reloads() const {
  return impl_->certificate ? impl_->certificate->reloads() : 0;
}

void WebhookServer::Stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->server->stop();
  impl_->thread.join();
}

}  // namespace chamber::admission
