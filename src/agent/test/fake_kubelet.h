// A stand-in for the kubelet's pod-resources endpoint in tests: a real gRPC server implementing
// PodResourcesLister on a unix socket, answering List with the assignments the test sets.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/pod_resources.h"

namespace grpc {
class Server;
}

namespace chamber::agent::test {

class FakeKubelet {
 public:
  // Listens on `socket_path` (removed first when it exists).
  explicit FakeKubelet(std::string socket_path);
  ~FakeKubelet();
  FakeKubelet(const FakeKubelet&) = delete;
  FakeKubelet& operator=(const FakeKubelet&) = delete;

  // What List answers from now on. Assignments of one pod and container are grouped the way the
  // kubelet groups them (pod -> containers -> devices by resource name).
  void SetAssignments(std::vector<DeviceAssignment> assignments);
  // While true, List does not answer until the caller gives up (its deadline) or this is reset.
  void SetHang(bool hang);
  int calls() const { return calls_; }
  const std::string& socket_path() const { return socket_path_; }

 private:
  class Service;
  std::string socket_path_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<int> calls_{0};
};

}  // namespace chamber::agent::test
