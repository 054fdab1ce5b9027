// Which pods chamberd's admission webhook hands to Chamber, and what it changes
// (docs/admission.md).
//
// A pod opts in through the first of these that names a queue (`chamber.io/queue`, annotation
// then label, as the scheduler reads it): the pod itself; its owners, walked up through their
// controller references (Pod -> Job -> CronJob, Pod -> ReplicaSet -> Deployment, Pod -> any
// kind), nearest first; its namespace's label (the namespace's default queue). An opted-in pod
// gets `spec.schedulerName` set to Chamber's, and, when its queue came from an owner, the
// owner's queue as its own label, so that the pod names its queue wherever it came from. Pods
// already naming Chamber, pods naming another scheduler than the default one, pods in excluded
// namespaces, a DaemonSet's pods and pods created with spec.nodeName are left as they are.
//
// The workload decision serves the fail-closed half: a top-level object (Job, Deployment, ...)
// labelled with a queue at creation gets the label copied into its pod templates, so that its
// pods carry it and fall under the webhook entry that refuses pods while chamberd is down.
//
// Both are functions of the request and of what an ObjectSource answers: no clocks, no I/O of
// their own.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "admission/admission_review.h"
#include "common/status.h"
#include "kube/types.h"

namespace chamber::admission {

// Where the pod decision reads what the request does not carry.
class ObjectSource {
 public:
  virtual ~ObjectSource() = default;
  // The metadata of the object `ref` names in namespace `ns`. NotFound when it does not exist;
  // Forbidden when chamberd may not read that kind.
  virtual Result<kube::ObjectMeta> Owner(const std::string& ns,
                                         const kube::OwnerReference& ref) = 0;
  virtual Result<kube::ObjectMeta> Namespace(const std::string& name) = 0;
};

struct OptInPolicy {
  std::string scheduler_name = "chamber";
  std::string queue_key = "chamber.io/queue";
  // Never touched: kube-system and chamberd's own namespace.
  std::set<std::string> excluded_namespaces = {"kube-system"};
  // Owners read at most, nearest first (Pod -> ReplicaSet -> Deployment is 2).
  int max_owner_depth = 4;
};

// Either way, a pod of Chamber's asking for a share of a GPU (`chamber.io/gpu-fraction`,
// `chamber.io/gpu-memory`) also gets, in `patch`, the environment that gives its containers the
// GPU chamberd binds it to (docs/sharing.md, "Asking for a share").
enum class PodOutcome {
  kMutate,             // opted in: `patch` sets the scheduler (and the queue label)
  kAlreadyChamber,     // names Chamber already: nothing to change but a share's environment
  kOtherScheduler,     // names another scheduler than the default one: its choice stands
  kNotOptedIn,         // no queue on the pod, its owners or its namespace
  kExcludedNamespace,  // kube-system, chamberd's own
  kPlaced,             // a DaemonSet's pod (one per node, placed by its controller) or one
                       // created with spec.nodeName: no scheduler places it
  kNotPodCreate,       // another kind, operation or a subresource
};
std::string_view PodOutcomeName(PodOutcome outcome);

struct PodDecision {
  PodOutcome outcome = PodOutcome::kNotOptedIn;
  std::string queue;   // the queue it opted in with
  std::string source;  // where that came from: "the pod", "Job ml/train", "namespace ml"
  Json patch = Json::array();
  std::vector<std::string> warnings;  // owners chamberd could not read, and so skipped
};

// Decides for a Pod CREATE. An error when an owner or the namespace could not be read for
// another reason than NotFound or Forbidden (the API server timed out, say): the webhook then
// refuses the pod, whose creator retries, rather than guess.
Result<PodDecision> DecidePod(const AdmissionRequest& request, const OptInPolicy& policy,
                              ObjectSource& source);

struct WorkloadDecision {
  bool mutate = false;
  std::string queue;
  std::vector<std::string> template_paths;  // the pod templates labelled: "/spec/template"
  Json patch = Json::array();
};

// Decides for the CREATE of a top-level object: one with the queue label or annotation and no
// controller owner gets the label in each of its pod templates that lacks it, wherever its kind
// keeps them (found by shape, a `spec` holding `containers`: a Job's or Deployment's
// spec.template, a CronJob's spec.jobTemplate.spec.template, a JobSet's replicated jobs', a
// RayCluster's head and worker groups', a LeaderWorkerSet's leader and worker templates, a
// PyTorchJob's replica specs'). Updates are left alone: a changed template would roll a
// Deployment's pods.
Result<WorkloadDecision> DecideWorkload(const AdmissionRequest& request, const OptInPolicy& policy);

// The plural resource of a kind, as Kubernetes guesses it without discovery
// (meta.UnsafeGuessKindToResource): "Job" -> "jobs", "Policy" -> "policies", "Ingress" ->
// "ingresses".
std::string GuessPlural(std::string_view kind);

}  // namespace chamber::admission
