// chamberd's mutating admission webhook (docs/admission.md): HTTPS on a port of its own, served
// by every replica, leader or not, so that pods are admitted while the Lease changes hands.
//
//   POST /mutate/pods       Pod CREATE: DecidePod (opt_in.h); the owners and the namespace are
//                           read from the API server with a short deadline
//   POST /mutate/workloads  top-level objects' CREATE: DecideWorkload (the queue label into the
//                           pod templates)
//
// A body that is not an AdmissionReview v1 gets 400 and a message naming the field; a decision
// that could not be made (an owner unreadable in time) is a refusal with code 500 and the
// reason, which the API server passes to the pod's creator, who retries; an object that does
// not read (a field of the wrong type) is a refusal with code 400 naming the field.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "admission/opt_in.h"
#include "common/prometheus_text.h"
#include "common/status.h"
#include "kube/client.h"

namespace chamber::admission {

// An ObjectSource over the API server: owners by their owner reference (the resource's plural
// guessed from the kind, GuessPlural), namespaces by name.
class ApiObjectSource : public ObjectSource {
 public:
  explicit ApiObjectSource(kube::Client* client) : client_(client) {}
  Result<kube::ObjectMeta> Owner(const std::string& ns, const kube::OwnerReference& ref) override;
  Result<kube::ObjectMeta> Namespace(const std::string& name) override;

 private:
  kube::Client* client_;
};

// Remembers what `inner` answered (an object's metadata, or that it does not exist) for `ttl`:
// the pods of one Job, created together, read their Job and namespace once, and the common case,
// a pod of a plain namespace, costs the API server a read per owner and namespace every `ttl`,
// not per pod. An owner is known by its UID as well, so a Job deleted and created again under
// its name is read anew. Errors are not kept. Thread-safe; at most `max_entries` kept (then it
// starts afresh).
class CachingObjectSource : public ObjectSource {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  CachingObjectSource(ObjectSource* inner, std::chrono::milliseconds ttl,
                      size_t max_entries = 10000, Clock now = std::chrono::steady_clock::now);
  Result<kube::ObjectMeta> Owner(const std::string& ns, const kube::OwnerReference& ref) override;
  Result<kube::ObjectMeta> Namespace(const std::string& name) override;

 private:
  struct Entry {
    std::chrono::steady_clock::time_point until;
    Result<kube::ObjectMeta> answer;
  };
  Result<kube::ObjectMeta> Lookup(const std::string& key,
                                  const std::function<Result<kube::ObjectMeta>()>& read);

  ObjectSource* inner_;
  std::chrono::milliseconds ttl_;
  size_t max_entries_;
  Clock now_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
};

struct WebhookOptions {
  std::string host = "0.0.0.0";
  int port = 9443;                  // 0: any free port
  std::string cert_file, key_file;  // PEM; read again as they are replaced
  OptInPolicy policy;
  size_t max_body = size_t{4} << 20;  // an AdmissionReview holds up to two objects of 1.5 MB
  // A decision gives up reading owners after this long (the webhook's timeoutSeconds is longer).
  std::chrono::milliseconds budget{4000};
};

class WebhookServer {
 public:
  // `source` answers the pod decisions' reads; it must outlive the server.
  WebhookServer(WebhookOptions options, ObjectSource* source);
  ~WebhookServer();
  WebhookServer(const WebhookServer&) = delete;
  WebhookServer& operator=(const WebhookServer&) = delete;

  // Binds and serves on a thread of its own. Errors name the flag at fault.
  Status Start();
  void Stop();  // idempotent
  int port() const { return port_; }

  // Answers one AdmissionReview body for `path` ("/mutate/pods"): the HTTP status and body.
  // What the server does per request, callable without a socket.
  std::pair<int, std::string> Handle(const std::string& path, std::string_view body);

  // Times a replaced certificate file was taken into service (tls::ServingCertificate).
  int certificate_reloads() const;
  uint64_t mutated() const;  // requests answered with a patch, over both paths
  uint64_t refused() const;  // requests refused (the AdmissionReview's allowed: false)

  // What this replica answered since it started, in the Prometheus text format (served on the
  // health port's /metrics by every replica, docs/admission.md#metrics):
  //   chamber_webhook_requests_total{path, result}  result: mutated, unchanged, refused,
  //                                                 bad_request (no AdmissionReview), not_found
  //   chamber_webhook_request_seconds_total{path}   time spent answering them
  //   chamber_webhook_certificate_reloads_total
  void WriteMetrics(prometheus::TextWriter& out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  WebhookOptions options_;
  ObjectSource* source_;
  int port_ = 0;
  // By path (kPaths, then one for any other) and result (WebhookResult).
  static constexpr size_t kPathSlots = 3, kResults = 5;
  std::array<std::array<std::atomic<uint64_t>, kResults>, kPathSlots> requests_{};
  std::array<std::atomic<uint64_t>, kPathSlots> request_ns_{};
};

}  // namespace chamber::admission
