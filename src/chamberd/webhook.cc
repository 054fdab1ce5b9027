#include "chamberd/webhook.h"

#include <spdlog/spdlog.h>

#include "backend/kube/snapshot_builder.h"

namespace chamber::chamberd {

Webhook::Webhook(std::unique_ptr<kube::Client> client, admission::WebhookOptions options)
    : client_(std::move(client)),
      source_(std::make_unique<admission::ApiObjectSource>(client_.get())),
      cache_(std::make_unique<admission::CachingObjectSource>(source_.get(), kWebhookCacheTtl)),
      server_(std::make_unique<admission::WebhookServer>(std::move(options), cache_.get())) {}

Result<std::unique_ptr<Webhook>> StartWebhook(const Flags& f, const kube::RestConfig& rest,
                                              const std::string& own_namespace) {
  if (f.webhook_tls_cert_file.empty()) return std::unique_ptr<Webhook>();
  CHAMBER_ASSIGN_OR_RETURN(auto listen, ParseListen(f.webhook_listen, "--webhook-listen"));
  // Reads that answer within the API server's wait or not at all: a second to connect, two to
  // answer, one retry; the decision's budget bounds a walk of several owners.
  kube::RestConfig quick = rest;
  quick.connect_timeout = std::chrono::milliseconds(1000);
  quick.request_timeout = std::chrono::milliseconds(2000);
  quick.user_agent = "chamberd-webhook";
  kube::TransportOptions transport;
  transport.backoff.max_retries = 1;
  transport.backoff.initial = std::chrono::milliseconds(100);
  transport.backoff.max = std::chrono::milliseconds(500);
  CHAMBER_ASSIGN_OR_RETURN(auto client, kube::Client::Create(quick, transport));

  admission::WebhookOptions o;
  o.host = listen.first;
  o.port = listen.second;
  o.cert_file = f.webhook_tls_cert_file;
  o.key_file = f.webhook_tls_key_file;
  o.policy.scheduler_name = f.scheduler_name;
  o.policy.queue_key = backend::keys::kQueue;
  o.policy.excluded_namespaces = {f.webhook_exclude_namespaces.begin(),
                                  f.webhook_exclude_namespaces.end()};
  if (!own_namespace.empty()) o.policy.excluded_namespaces.insert(own_namespace);
  o.budget = std::chrono::milliseconds(static_cast<int64_t>(f.webhook_budget_s * 1000));
  auto webhook = std::make_unique<Webhook>(std::move(client), std::move(o));
  CHAMBER_RETURN_IF_ERROR(webhook->Start());
  std::string excluded;
  for (const std::string& ns : f.webhook_exclude_namespaces) excluded += ns + ", ";
  spdlog::info("serving the admission webhook on https://{}:{} (scheduler {}; never in {}{})",
               listen.first, webhook->port(), f.scheduler_name, excluded, own_namespace);
  return webhook;
}

}  // namespace chamber::chamberd
