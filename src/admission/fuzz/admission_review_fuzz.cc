// AdmissionReview v1 bodies as the API server posts them to chamberd's webhook
// (admission/admission_review.h), then the pod and workload decisions over what was read, with
// owners and namespaces that do not exist. Properties: an error names the AdmissionReview (and
// a field); a parsed request has a uid and an operation, and its answer reads back as JSON with
// the same uid; a patch is a list of operations on paths under /spec or /metadata.
#include <cstddef>
#include <cstdint>
#include <string>

#include "admission/admission_review.h"
#include "admission/opt_in.h"
#include "common/fuzz/fuzz_check.h"
#include "kube/errors.h"

namespace {

namespace admission = chamber::admission;

class Nothing : public admission::ObjectSource {
 public:
  chamber::Result<chamber::kube::ObjectMeta> Owner(const std::string& ns,
                                                   const chamber::kube::OwnerReference&) override {
    return chamber::kube::ApiErrorStatus("GET owner in " + ns, 404, "");
  }
  chamber::Result<chamber::kube::ObjectMeta> Namespace(const std::string& name) override {
    chamber::kube::ObjectMeta m;
    m.name = name;
    m.labels["chamber.io/queue"] = "default";
    return m;
  }
};

void CheckPatch(const admission::Json& patch) {
  namespace fuzz = chamber::fuzz;
  fuzz::Check(patch.is_array(), "a patch that is not a list");
  for (const admission::Json& op : patch) {
    const std::string path = op.value("path", "");
    fuzz::Check(op.value("op", "") == "add", "a patch operation other than add", op.dump());
    fuzz::Check(path.starts_with("/spec/") || path.starts_with("/metadata"),
                "a patch outside /spec and /metadata", path);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = chamber::fuzz;
  chamber::Result<admission::AdmissionRequest> r =
      admission::ParseAdmissionReview(fuzz::Text(data, size));
  if (!r.ok()) {
    fuzz::CheckError(r.status(), "AdmissionReview: ");
    return 0;
  }
  fuzz::Check(!r->uid.empty(), "a request without a uid");
  fuzz::Check(!r->operation.empty(), "a request without an operation");

  Nothing source;
  chamber::Result<admission::PodDecision> pod =
      admission::DecidePod(*r, admission::OptInPolicy{}, source);
  if (pod.ok()) {
    CheckPatch(pod->patch);
    fuzz::Check(pod->patch.empty() == (pod->outcome != admission::PodOutcome::kMutate),
                "a pod patched without being opted in, or opted in without a patch");
  } else {
    fuzz::Check(!pod.status().message().empty(), "a pod error without a message");
  }
  chamber::Result<admission::WorkloadDecision> w =
      admission::DecideWorkload(*r, admission::OptInPolicy{});
  if (w.ok()) CheckPatch(w->patch);

  admission::AdmissionResponse answer =
      admission::AdmissionResponse::Allow(r->uid, pod.ok() ? pod->patch : admission::Json());
  const admission::Json back = admission::Json::parse(admission::WriteAdmissionReview(answer));
  fuzz::Check(back["response"]["uid"] == r->uid, "the answer's uid differs from the request's");
  return 0;
}
