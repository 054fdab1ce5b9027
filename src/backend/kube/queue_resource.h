// The Queue custom resource (queues.chamber.io v1alpha1, deploy/helm/chamber/crds/): its spec
// decoded into the engine's core::Queue by core/io's queue reader (one parser for files and for
// the API), and the engine's per-cycle core::QueueStatus encoded as the resource's status.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "core/decision.h"
#include "core/model.h"
#include "kube/client.h"

namespace chamber::backend {

extern const kube::ResourceType kQueues;                     // chamber.io/v1alpha1 queues
extern const kube::ResourceType kCustomResourceDefinitions;  // apiextensions.k8s.io/v1
inline constexpr std::string_view kQueueCrdName = "queues.chamber.io";

// A Queue object as the API server returns it. Errors name the object and the field:
// "queue team-a: field spec.resources.gpu.quota: must not be negative".
Result<core::Queue> QueueFromResource(const nlohmann::json& object);

// The status object in the CRD's shape: GPUs as integers, CPU ("1500m", "2") and memory
// ("64Gi", or bytes when no binary unit divides it) as Kubernetes quantities, fair share of GPUs
// rounded to 2 decimals. The Valid condition is False with reason InvalidSpec and the error as
// message when `s.error` is set, else True with reason Accepted.
nlohmann::json QueueStatusJson(const core::QueueStatus& s, int64_t observed_generation);
// One entry of status.models, for the queue per GPU model `s` ("team/H100"): its model's name,
// GPUs allocated, fair share (2 decimals) and borrowed, and its workloads pending and running.
nlohmann::json QueueModelStatusJson(const core::QueueStatus& s);

// A queue's decayed GPU-hours as status.decayedUsage holds them, for the next leader:
// {"gpuHours": 12.345, "time": "2026-12-02T18:40:57Z"} (GPU-hours as of that time, to 3
// decimals).
nlohmann::json DecayedUsageJson(double gpu_hours, int64_t unix_ms);
// What status.decayedUsage of a Queue object says; nullopt when it is absent or malformed (a
// queue then starts from zero).
struct StoredUsage {
  double gpu_hours = 0;
  int64_t unix_ms = 0;
};
std::optional<StoredUsage> DecayedUsageFromResource(const nlohmann::json& object);
// The same of each GPU model's entry of status.models[] (its own decayedUsage), by the model's
// name, in the list's order; entries without one, or whose one is malformed, are left out.
std::vector<std::pair<std::string, StoredUsage>> ModelDecayedUsageFromResource(
    const nlohmann::json& object);

// Kubernetes quantity text for CPU millicores and memory bytes, as QueueStatusJson writes them.
std::string CpuQuantity(int64_t millicores);
std::string MemoryQuantity(int64_t bytes);

// The documents of a YAML manifest (e.g. the CRD file) as JSON; `source` names it in errors.
// Plain scalars become numbers, booleans or null where YAML 1.2's core schema says so; quoted
// scalars stay strings.
Result<std::vector<nlohmann::json>> ManifestToJson(std::string_view yaml_text,
                                                   std::string_view source);

// Creates or updates the CRD (server-side apply, so it is idempotent) and waits until the API
// server reports it Established.
Status ApplyQueueCrd(kube::Client& client, const nlohmann::json& crd,
                     std::chrono::milliseconds timeout = std::chrono::seconds(30));
// The same for any CustomResourceDefinition (named by its metadata.name).
Status ApplyCrd(kube::Client& client, const nlohmann::json& crd,
                std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace chamber::backend
