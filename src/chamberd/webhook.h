// The admission webhook as chamberd runs it (--webhook-listen, --webhook-tls-cert-file,
// --webhook-tls-key-file; docs/admission.md): on every replica, leader or standby, from start to
// stop, with a Kubernetes client of its own whose short time-outs keep each answer inside the
// API server's timeoutSeconds. What it reads (owners, namespaces) it keeps for
// kWebhookCacheTtl.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "admission/webhook_server.h"
#include "chamberd/flags.h"
#include "common/status.h"
#include "kube/client.h"
#include "kube/config.h"

namespace chamber::chamberd {

// How long the webhook keeps an owner's or a namespace's labels: a label added to a namespace
// or an owner is seen by the pods created that much later.
inline constexpr std::chrono::seconds kWebhookCacheTtl{5};

class Webhook {
 public:
  Webhook(std::unique_ptr<kube::Client> client, admission::WebhookOptions options);
  Status Start() { return server_->Start(); }
  int port() const { return server_->port(); }
  void WriteMetrics(prometheus::TextWriter& out) const { server_->WriteMetrics(out); }

 private:
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<admission::ApiObjectSource> source_;
  std::unique_ptr<admission::CachingObjectSource> cache_;
  std::unique_ptr<admission::WebhookServer> server_;
};

// Starts the webhook when --webhook-tls-cert-file is set; null when it is not. Pods in
// `own_namespace` (chamberd's) and in --webhook-exclude-namespace are never changed.
Result<std::unique_ptr<Webhook>> StartWebhook(const Flags& f, const kube::RestConfig& rest,
                                              const std::string& own_namespace);

}  // namespace chamber::chamberd
