#include "agent/pod_resources.h"

#include <chrono>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "agent/proto/kubelet_podresources_v1.grpc.pb.h"

namespace chamber::agent {

namespace {

// The kubelet's List answer grows with the pods on the node; gRPC's default cap is 4 MiB.
constexpr int kMaxResponseBytes = 16 << 20;

const char* GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    default:
      return "UNKNOWN";
  }
}

// "GPU-<uuid>::<n>" (a time-sliced replica) -> "GPU-<uuid>".
std::string WithoutReplica(const std::string& id) {
  size_t sep = id.find("::");
  return sep == std::string::npos ? id : id.substr(0, sep);
}

std::optional<int> ParseIndex(const std::string& id) {
  if (id.empty() || id.size() > 4) return std::nullopt;
  int n = 0;
  for (char c : id) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

// "<gpu index>:<mig index>" (a MIG device under deviceIDStrategy=index) -> the two indices.
std::optional<std::pair<int, int>> ParseMigIndex(const std::string& id) {
  size_t colon = id.find(':');
  if (colon == std::string::npos) return std::nullopt;
  std::optional<int> gpu = ParseIndex(id.substr(0, colon));
  std::optional<int> mig = ParseIndex(id.substr(colon + 1));
  if (!gpu || !mig) return std::nullopt;
  return std::make_pair(*gpu, *mig);
}

}  // namespace

const char* AttributionStateName(AttributionState state) {
  switch (state) {
    case AttributionState::kDisabled:
      return "disabled";
    case AttributionState::kUnavailable:
      return "unavailable";
    case AttributionState::kAvailable:
      return "available";
  }
  return "unknown";
}

Result<std::vector<DeviceAssignment>> ListPodDevices(const std::string& socket_path,
                                                     double timeout_s) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxResponseBytes);
  // A new channel per call: the kubelet recreates its socket when it restarts, and a fresh
  // channel connects at once instead of waiting out the old one's reconnect backoff.
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel("unix:" + socket_path, grpc::InsecureChannelCredentials(), args);
  std::unique_ptr<v1::PodResourcesLister::Stub> stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(
                           std::chrono::duration<double>(timeout_s)));
  v1::ListPodResourcesResponse response;
  grpc::Status status = stub->List(&context, v1::ListPodResourcesRequest(), &response);
  if (!status.ok()) {
    return Status::Unavailable(fmt::format("pod-resources socket {}: List failed: {}{}{}",
                                           socket_path, GrpcCodeName(status.error_code()),
                                           status.error_message().empty() ? "" : ": ",
                                           status.error_message()));
  }
  std::vector<DeviceAssignment> out;
  for (const v1::PodResources& pod : response.pod_resources()) {
    for (const v1::ContainerResources& container : pod.containers()) {
      for (const v1::ContainerDevices& devices : container.devices()) {
        for (const std::string& id : devices.device_ids()) {
          out.push_back(
              {devices.resource_name(), id, pod.namespace_(), pod.name(), container.name()});
        }
      }
    }
  }
  return out;
}

PodAttribution Attribute(const Inventory& inventory, const std::vector<DeviceAssignment>& devices) {
  PodAttribution out;
  out.state = AttributionState::kAvailable;
  for (const DeviceAssignment& d : devices) {
    if (!d.resource_name.starts_with("nvidia.com/")) continue;
    const std::string id = WithoutReplica(d.device_id);
    const std::optional<int> index = ParseIndex(id);
    const std::optional<std::pair<int, int>> mig_index = ParseMigIndex(id);
    const GpuInfo* gpu = nullptr;
    const MigInstance* mig = nullptr;
    for (const GpuInfo& g : inventory.gpus) {
      if (g.uuid == id || (index && g.index == *index)) gpu = &g;
      for (const MigInstance& m : g.mig) {
        bool by_index = mig_index && g.index == mig_index->first && m.index == mig_index->second;
        if ((!m.uuid.empty() && m.uuid == id) || by_index) {
          gpu = &g;
          mig = &m;
        }
      }
    }
    if (gpu != nullptr) {
      DeviceAssignment held = d;
      if (mig != nullptr) held.mig_uuid = mig->uuid;
      out.by_gpu[gpu->uuid].push_back(std::move(held));
    } else {
      out.unmatched.push_back(d);
    }
  }
  return out;
}

}  // namespace chamber::agent
