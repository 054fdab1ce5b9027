#include "agent/test/fake_kubelet.h"

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "agent/proto/kubelet_podresources_v1.grpc.pb.h"

namespace chamber::agent::test {

class FakeKubelet::Service final : public v1::PodResourcesLister::Service {
 public:
  explicit Service(std::atomic<int>* calls) : calls_(calls) {}

  grpc::Status List(grpc::ServerContext* context, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* response) override {
    ++*calls_;
    while (hang_ && !context->IsCancelled()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (context->IsCancelled()) return grpc::Status::CANCELLED;
    std::lock_guard lock(mu_);
    for (const DeviceAssignment& d : assignments_) {
      v1::PodResources* pod = nullptr;
      for (auto& p : *response->mutable_pod_resources()) {
        if (p.name() == d.pod && p.namespace_() == d.namespace_name) pod = &p;
      }
      if (pod == nullptr) {
        pod = response->add_pod_resources();
        pod->set_name(d.pod);
        pod->set_namespace_(d.namespace_name);
      }
      v1::ContainerResources* container = nullptr;
      for (auto& c : *pod->mutable_containers()) {
        if (c.name() == d.container) container = &c;
      }
      if (container == nullptr) {
        container = pod->add_containers();
        container->set_name(d.container);
      }
      v1::ContainerDevices* devices = nullptr;
      for (auto& cd : *container->mutable_devices()) {
        if (cd.resource_name() == d.resource_name) devices = &cd;
      }
      if (devices == nullptr) {
        devices = container->add_devices();
        devices->set_resource_name(d.resource_name);
      }
      devices->add_device_ids(d.device_id);
    }
    return grpc::Status::OK;
  }

  void Set(std::vector<DeviceAssignment> assignments) {
    std::lock_guard lock(mu_);
    assignments_ = std::move(assignments);
  }
  std::atomic<bool> hang_{false};

 private:
  std::atomic<int>* calls_;
  std::mutex mu_;
  std::vector<DeviceAssignment> assignments_;
};

FakeKubelet::FakeKubelet(std::string socket_path)
    : socket_path_(std::move(socket_path)), service_(std::make_unique<Service>(&calls_)) {
  std::remove(socket_path_.c_str());
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket_path_, grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_) throw std::runtime_error("fake kubelet: cannot listen on " + socket_path_);
}

FakeKubelet::~FakeKubelet() {
  service_->hang_ = false;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
  std::remove(socket_path_.c_str());
}

void FakeKubelet::SetAssignments(std::vector<DeviceAssignment> assignments) {
  service_->Set(std::move(assignments));
}

void FakeKubelet::SetHang(bool hang) { service_->hang_ = hang; }

}  // namespace chamber::agent::test
