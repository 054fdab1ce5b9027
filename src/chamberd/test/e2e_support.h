// What chamberd's end-to-end tests share: waiting for a condition, starting a process with its
// output in a log file, and a client of the test control plane with the Queue CRD installed.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/kube/queue_resource.h"
#include "backend/kube/snapshot_builder.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/errors.h"

extern char** environ;

namespace chamber::chamberd::e2e {

// The admission policies tests use to make the API server refuse a write (a binding, a delete).
inline const kube::ResourceType kValidatingAdmissionPolicies{"admissionregistration.k8s.io", "v1",
                                                             "validatingadmissionpolicies",
                                                             "ValidatingAdmissionPolicy", false};
inline const kube::ResourceType kValidatingAdmissionPolicyBindings{
    "admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding", false};

// The value of sample `sample` (`name{labels}` as written) of a /metrics page; -1 when the page
// has no such sample.
inline double MetricSample(const std::string& page, const std::string& sample) {
  const size_t at = page.find("\n" + sample + " ");
  return at == std::string::npos ? -1.0 : std::stod(page.substr(at + sample.size() + 2));
}

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

// `export NAME=value` from the control plane's env file (scripts/controlplane.sh writes it).
inline std::string ControlPlaneEnv(const std::string& name) {
  const char* dir = std::getenv("CHAMBER_TEST_CONTROLPLANE_DIR");
  if (dir == nullptr) return "";
  std::ifstream in(std::filesystem::path(dir) / "env");
  std::string line;
  const std::string prefix = "export " + name + "=";
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  return "";
}

// Runs `args` to the end, output appended to `log`; its exit status (-1: did not run).
inline int RunLogged(std::vector<std::string> args, const std::string& log,
                     const std::vector<std::string>& extra_env = {}) {
  const pid_t pid = SpawnLogged(std::move(args), log, extra_env);
  int status = -1;
  if (pid > 0) waitpid(pid, &status, 0);
  return pid > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The chart's leader fence (`chart`/templates/leader-fence.yaml) for the Lease `lease` of
// namespace `ns`, rendered by helm (release `ns`) into `dir` and applied by kubectl against the
// test control plane, as `helm install` in mode scheduling installs it; their output goes to
// `dir`/kubectl.log. Returns the rendered file (DeleteLeaderFence takes it). (helm renders the
// whole chart into `dir`/fence: it takes no --show-only with --output-dir.)
inline Result<std::string> ApplyLeaderFence(const std::string& chart, const std::string& ns,
                                            const std::filesystem::path& dir,
                                            const std::string& lease = "chamber-scheduler") {
  const std::string helm = ControlPlaneEnv("CHAMBER_HELM");
  const std::string kubectl = ControlPlaneEnv("CHAMBER_KUBECTL");
  if (helm.empty() || kubectl.empty())
    return Status::FailedPrecondition(
        "the control plane's env names no helm or kubectl (scripts/kube-tools.sh)");
  const std::string log = (dir / "kubectl.log").string();
  const std::vector<std::string> env = {std::string("KUBECONFIG=") +
                                        std::getenv("CHAMBER_TEST_KUBECONFIG")};
  if (RunLogged({helm, "template", ns, chart, "-n", ns, "--set", "mode=scheduling", "--set",
                 "chamberd.leaseName=" + lease, "--api-versions",
                 "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy", "--output-dir",
                 (dir / "fence").string()},
                log, env) != 0)
    return Status::Internal("helm template failed; see " + log);
  const std::string file = (dir / "fence" / "chamber" / "templates" / "leader-fence.yaml").string();
  if (RunLogged({kubectl, "apply", "-f", file}, log, env) != 0)
    return Status::Internal("kubectl apply failed; see " + log);
  return file;
}

inline void DeleteLeaderFence(const std::string& file, const std::filesystem::path& dir) {
  (void)RunLogged({ControlPlaneEnv("CHAMBER_KUBECTL"), "delete", "-f", file},
                  (dir / "kubectl.log").string(),
                  {std::string("KUBECONFIG=") + std::getenv("CHAMBER_TEST_KUBECONFIG")});
}

// Waits until the leader fence of the Lease `lease` ("<namespace>/<name>", which must exist)
// refuses a binding of a stale term (the API server loads a new policy within a second or so),
// binding probe pods of namespace `ns` that no scheduler takes to `node`. False if it never
// does within 20 s.
inline bool WaitForLeaderFence(kube::Client& client, const std::string& ns,
                               const std::string& lease, const std::string& node) {
  int probes = 0;
  return Eventually(
      [&] {
        const std::string name = "fence-probe-" + std::to_string(probes++);
        const kube::Json pod = {
            {"metadata", {{"name", name}}},
            {"spec",
             {{"schedulerName", "chamber-test-none"},
              {"containers", kube::Json::array({{{"name", "main"}, {"image", "pause"}}})}}}};
        auto made = client.Create(kube::resources::kPods, ns, pod);
        if (!made.ok()) return false;
        const Status bound = client.Bind(
            ns, name, (*made)["metadata"].value("uid", ""), node,
            {{backend::keys::kLeaderLease, lease}, {backend::keys::kLeaderTerm, "deposed/0"}});
        kube::DeleteOptions now;
        now.grace_period_seconds = 0;
        (void)client.Delete(kube::resources::kPods, ns, name, now);
        return kube::IsForbidden(bound);
      },
      std::chrono::seconds(20), std::chrono::milliseconds(500));
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

// A ValidatingAdmissionPolicy bound to namespace `ns` under which the API server refuses the
// bindings (pods/binding) that the CEL expression `refused` says (over `object`, the Binding:
// `object.metadata.name` is the pod's name), and those of pods named "probe-*". Lifted when
// destroyed.
class RefusedBindings {
 public:
  RefusedBindings(kube::Client* client, std::string ns, const std::string& refused)
      : client_(client), ns_(std::move(ns)), name_(ns_ + "-refuse-bind") {
    const kube::Json rules = kube::Json::array({{{"apiGroups", {""}},
                                                 {"apiVersions", {"v1"}},
                                                 {"operations", {"CREATE"}},
                                                 {"resources", {"pods/binding"}}}});
    const kube::Json policy = {
        {"apiVersion", "admissionregistration.k8s.io/v1"},
        {"kind", "ValidatingAdmissionPolicy"},
        {"metadata", {{"name", name_}}},
        {"spec",
         {{"failurePolicy", "Fail"},
          {"matchConstraints", {{"resourceRules", rules}}},
          {"validations",
           kube::Json::array(
               {{{"expression", "!(" + refused + " || object.metadata.name.startsWith('probe-'))"},
                 {"message", "binding refused by the test"}}})}}}};
    const kube::Json binding = {
        {"apiVersion", "admissionregistration.k8s.io/v1"},
        {"kind", "ValidatingAdmissionPolicyBinding"},
        {"metadata", {{"name", name_}}},
        {"spec",
         {{"policyName", name_},
          {"validationActions", {"Deny"}},
          {"matchResources",
           {{"namespaceSelector", {{"matchLabels", {{"kubernetes.io/metadata.name", ns_}}}}}}}}}};
    created_ = client_->Create(kValidatingAdmissionPolicies, "", policy).ok() &&
               client_->Create(kValidatingAdmissionPolicyBindings, "", binding).ok();
  }
  RefusedBindings(const RefusedBindings&) = delete;
  RefusedBindings& operator=(const RefusedBindings&) = delete;
  ~RefusedBindings() { Lift(); }

  // Whether the policy comes in force within `within`: the API server refuses a probe pod's
  // binding to `node` with its message (a probe bound before then is not tried again). The
  // probes are deleted after. last_refusal() says what the last try got.
  bool InForce(const std::string& node, std::chrono::milliseconds within) {
    if (!created_) {
      last_refusal_ = "the policy or its binding was not created";
      return false;
    }
    int probes = 0;
    const bool in_force = Eventually(
        [&] {
          const std::string name = "probe-" + std::to_string(probes++);
          const kube::Json probe = {
              {"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", ns_}}},
              {"spec",
               {{"schedulerName", "nobody"},
                {"containers", kube::Json::array({{{"name", "main"}, {"image", "pause"}}})}}}};
          if (!client_->Create(kube::resources::kPods, ns_, probe).ok()) return false;
          last_refusal_ = client_->Bind(ns_, name, "", node).message();
          return last_refusal_.find("binding refused by the test") != std::string::npos;
        },
        within);
    kube::DeleteOptions now;
    now.grace_period_seconds = 0;
    for (int i = 0; i < probes; ++i)
      (void)client_->Delete(kube::resources::kPods, ns_, "probe-" + std::to_string(i), now);
    return in_force;
  }
  const std::string& last_refusal() const { return last_refusal_; }

  void Lift() {
    (void)client_->Delete(kValidatingAdmissionPolicyBindings, "", name_);
    (void)client_->Delete(kValidatingAdmissionPolicies, "", name_);
  }

 private:
  kube::Client* client_;
  std::string ns_, name_;
  bool created_ = false;
  std::string last_refusal_;
};

}  // namespace chamber::chamberd::e2e
