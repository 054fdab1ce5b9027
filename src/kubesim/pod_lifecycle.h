// What a kubelet would do next with a pod on a fake node, as pure functions of the pod, the
// simulation annotations and the time: start it, finish it after its declared duration, or
// remove it once it is being deleted. The Simulator applies these steps through the API.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "kube/client.h"
#include "kube/types.h"

namespace chamber::kubesim {

using Clock = std::chrono::system_clock;

// How long the pod runs, in seconds, decimals allowed ("2.5"); absent: until deleted.
inline constexpr char kDurationAnnotation[] = "chamber.io/sim-duration-seconds";
// The exit code of its containers when the duration ends (default 0; nonzero: phase Failed).
inline constexpr char kExitCodeAnnotation[] = "chamber.io/sim-exit-code";

// "2.5" -> 2500 ms. Only plain non-negative decimals up to ten years; errors quote the text.
Result<std::chrono::milliseconds> ParseDurationSeconds(std::string_view text);
// "0".."255".
Result<int> ParseExitCode(std::string_view text);

struct PodPlan {
  std::optional<std::chrono::milliseconds> duration;  // empty: runs until deleted
  int exit_code = 0;
};
// Reads the annotations; the error names the pod and the annotation.
Result<PodPlan> PlanFor(const kube::Pod& pod);

enum class Action { kNone, kStart, kFinish, kFailInvalid, kDelete };
std::string_view ActionName(Action action);

struct Step {
  Action action = Action::kNone;
  Clock::time_point at;  // not before this time
};

struct StepInput {
  Clock::time_point now;
  // When the simulator first saw the pod's deletionTimestamp (empty: not seen being deleted).
  std::optional<Clock::time_point> deleting_since;
  // When the simulator started the pod; without it status.startTime (whole seconds) is used.
  std::optional<Clock::time_point> started_at;
  std::chrono::milliseconds grace_cap{2000};
};

// The next step for a pod bound to a fake node. A pod being deleted is removed when it is
// terminal, or after min(deletionGracePeriodSeconds, grace_cap) from when it was first seen
// deleting; with a grace period of 0 the API server removes it itself.
Step NextStep(const kube::Pod& pod, const Result<PodPlan>& plan, const StepInput& in);

// Merge patches for pods/status. Each carries metadata.resourceVersion, so a patch against a
// changed pod fails with a conflict instead of overwriting what it did not see.
kube::Json RunningPatch(const kube::Pod& pod, const std::string& host_ip, Clock::time_point now);
kube::Json FinishedPatch(const kube::Pod& pod, int exit_code, Clock::time_point now);
// Phase Failed without running, for a pod whose annotations cannot be read.
kube::Json InvalidPatch(const kube::Pod& pod, const Status& why, Clock::time_point now);

// A fake pod IP derived from the pod's UID (10.128.0.0/10).
std::string FakePodIp(const std::string& uid);

}  // namespace chamber::kubesim
