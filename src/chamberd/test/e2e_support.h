// What chamberd's end-to-end tests share: waiting for a condition, starting a process with its
// output in a log file, and a client of the test control plane with the Queue CRD installed.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/kube/queue_resource.h"
#include "kube/client.h"
#include "kube/config.h"

extern char** environ;

namespace chamber::chamberd::e2e {

// The admission policies tests use to make the API server refuse a write (a binding, a delete).
inline const kube::ResourceType kValidatingAdmissionPolicies{"admissionregistration.k8s.io", "v1",
                                                             "validatingadmissionpolicies",
                                                             "ValidatingAdmissionPolicy", false};
inline const kube::ResourceType kValidatingAdmissionPolicyBindings{
    "admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding", false};

// Polls `f` until it returns true or `timeout` passes; returns its last answer.
template <typename F>
bool Eventually(F f, std::chrono::milliseconds timeout,
                std::chrono::milliseconds poll = std::chrono::milliseconds(100)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(poll);
  }
  return f();
}

// Starts `args` with stdout and stderr appended to `log` and this process's environment plus
// `extra_env` ("NAME=value"). Returns the pid, or -1.
inline pid_t SpawnLogged(std::vector<std::string> args, const std::string& log,
                         const std::vector<std::string>& extra_env = {}) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data()) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// An unthrottled client of the control plane the ctest fixture started
// (CHAMBER_TEST_KUBECONFIG), after installing the Queue CRD from `crd_file`.
inline Result<std::unique_ptr<kube::Client>> ConnectWithQueueCrd(const std::string& crd_file) {
  const char* kubeconfig = std::getenv("CHAMBER_TEST_KUBECONFIG");
  if (kubeconfig == nullptr)
    return Status::FailedPrecondition(
        "CHAMBER_TEST_KUBECONFIG is not set: run through ctest, whose controlplane fixture sets "
        "it");
  CHAMBER_ASSIGN_OR_RETURN(kube::RestConfig rc, kube::LoadKubeconfig(kubeconfig));
  rc.qps = 0;
  CHAMBER_ASSIGN_OR_RETURN(std::unique_ptr<kube::Client> client, kube::Client::Create(rc));
  std::ifstream in(crd_file);
  std::stringstream text;
  text << in.rdbuf();
  CHAMBER_ASSIGN_OR_RETURN(std::vector<nlohmann::json> docs,
                           backend::ManifestToJson(text.str(), crd_file));
  if (docs.empty()) return Status::InvalidArgument(crd_file + ": no manifest");
  CHAMBER_RETURN_IF_ERROR(backend::ApplyQueueCrd(*client, docs.front()));
  return client;
}

}  // namespace chamber::chamberd::e2e
