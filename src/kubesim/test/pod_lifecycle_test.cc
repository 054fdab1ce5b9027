#include "kubesim/pod_lifecycle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/time.h"

namespace chamber::kubesim {
namespace {

using namespace std::chrono_literals;
using kube::Json;
using ::testing::HasSubstr;

kube::Pod MakePod(Json extra_meta = Json::object(), Json status = Json::object()) {
  Json meta = {{"name", "p"}, {"namespace", "ns"}, {"uid", "u1"}, {"resourceVersion", "7"}};
  if (extra_meta.is_object()) meta.update(extra_meta);
  Json raw = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", meta},
              {"spec",
               {{"nodeName", "n-0"},
                {"containers", {{{"name", "main"}, {"image", "busybox"}}}},
                {"initContainers", {{{"name", "init"}, {"image", "busybox"}}}}}},
              {"status", status}};
  Result<kube::Pod> pod = kube::Pod::FromJson(raw);
  EXPECT_TRUE(pod.ok()) << pod.status().ToString();
  return *pod;
}

TEST(KubesimParseDurationSeconds, AcceptsDecimals) {
  EXPECT_EQ(*ParseDurationSeconds("2.5"), 2500ms);
  EXPECT_EQ(*ParseDurationSeconds("30"), 30000ms);
  EXPECT_EQ(*ParseDurationSeconds("0"), 0ms);
  EXPECT_EQ(*ParseDurationSeconds(".25"), 250ms);
  EXPECT_EQ(*ParseDurationSeconds("1."), 1000ms);
  EXPECT_EQ(*ParseDurationSeconds("0.0004"), 0ms);
}

TEST(KubesimParseDurationSeconds, RejectsWithTheTextQuoted) {
  for (const char* bad : {"", "-1", "+1", "abc", "1e3", "inf", "nan", "1.2.3", " 1", "1s", "."}) {
    Result<std::chrono::milliseconds> d = ParseDurationSeconds(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(d.status().message(), HasSubstr(std::string("\"") + bad + "\""));
  }
  EXPECT_THAT(ParseDurationSeconds("999999999999").status().message(), HasSubstr("ten years"));
}

TEST(KubesimParseExitCode, Range) {
  EXPECT_EQ(*ParseExitCode("0"), 0);
  EXPECT_EQ(*ParseExitCode("255"), 255);
  for (const char* bad : {"256", "-1", "x", "", "1.0", "0001"})
    EXPECT_THAT(ParseExitCode(bad).status().message(), HasSubstr("not an exit code")) << bad;
}

TEST(KubesimPlanFor, ReadsAnnotationsAndNamesTheBadOne) {
  Result<PodPlan> none = PlanFor(MakePod());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->duration.has_value());
  EXPECT_EQ(none->exit_code, 0);

  Result<PodPlan> plan = PlanFor(
      MakePod({{"annotations", {{kDurationAnnotation, "1.5"}, {kExitCodeAnnotation, "3"}}}}));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->duration, 1500ms);
  EXPECT_EQ(plan->exit_code, 3);

  Result<PodPlan> bad = PlanFor(MakePod({{"annotations", {{kDurationAnnotation, "soon"}}}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("pod ns/p: annotation chamber.io/sim-duration-seconds: \"soon\""));
}

TEST(KubesimNextStep, PendingStartsAtOnceAndBadAnnotationsFail) {
  const auto now = Clock::now();
  const kube::Pod pod = MakePod();
  Step s = NextStep(pod, PlanFor(pod), {now, {}, {}, 2s});
  EXPECT_EQ(s.action, Action::kStart);
  EXPECT_EQ(s.at, now);
  const kube::Pod bad = MakePod({{"annotations", {{kExitCodeAnnotation, "-2"}}}});
  EXPECT_EQ(NextStep(bad, PlanFor(bad), {now, {}, {}, 2s}).action, Action::kFailInvalid);
}

TEST(KubesimNextStep, RunningFinishesAfterItsDuration) {
  const auto now = Clock::now();
  const kube::Pod pod = MakePod({{"annotations", {{kDurationAnnotation, "2.5"}}}},
                                {{"phase", "Running"}, {"startTime", "2026-01-02T03:04:05Z"}});
  // Without a local start time, status.startTime counts.
  Step s = NextStep(pod, PlanFor(pod), {now, {}, {}, 2s});
  EXPECT_EQ(s.action, Action::kFinish);
  EXPECT_EQ(s.at, *ParseRfc3339("2026-01-02T03:04:05Z") + 2500ms);
  s = NextStep(pod, PlanFor(pod), {now, {}, now - 1s, 2s});
  EXPECT_EQ(s.at, now + 1500ms);
  // No duration: runs until deleted.
  const kube::Pod forever = MakePod({}, {{"phase", "Running"}});
  EXPECT_EQ(NextStep(forever, PlanFor(forever), {now, {}, {}, 2s}).action, Action::kNone);
  const kube::Pod done = MakePod({}, {{"phase", "Succeeded"}});
  EXPECT_EQ(NextStep(done, PlanFor(done), {now, {}, {}, 2s}).action, Action::kNone);
}

TEST(KubesimNextStep, DeletionWaitsForTheSmallerOfGraceAndCap) {
  const auto now = Clock::now();
  auto deleting = [](int64_t grace, const char* phase) {
    return MakePod(
        {{"deletionTimestamp", "2026-01-02T03:04:05Z"}, {"deletionGracePeriodSeconds", grace}},
        {{"phase", phase}});
  };
  const kube::Pod g30 = deleting(30, "Running");
  Step s = NextStep(g30, PlanFor(g30), {now, now - 500ms, {}, 2s});
  EXPECT_EQ(s.action, Action::kDelete);
  EXPECT_EQ(s.at, now + 1500ms);
  const kube::Pod g1 = deleting(1, "Pending");
  EXPECT_EQ(NextStep(g1, PlanFor(g1), {now, now, {}, 2s}).at, now + 1s);
  const kube::Pod done = deleting(30, "Succeeded");
  EXPECT_EQ(NextStep(done, PlanFor(done), {now, now, {}, 2s}).at, now);
  const kube::Pod g0 = deleting(0, "Running");
  EXPECT_EQ(NextStep(g0, PlanFor(g0), {now, now, {}, 2s}).action, Action::kNone);
}

TEST(KubesimPatches, RunningAndFinished) {
  const auto now = *ParseRfc3339("2026-01-02T03:04:05Z");
  const kube::Pod pod = MakePod();
  const Json run = RunningPatch(pod, "10.64.0.7", now);
  EXPECT_EQ(run["metadata"]["resourceVersion"], "7");
  EXPECT_EQ(run["status"]["phase"], "Running");
  EXPECT_EQ(run["status"]["startTime"], "2026-01-02T03:04:05Z");
  EXPECT_EQ(run["status"]["hostIP"], "10.64.0.7");
  EXPECT_EQ(run["status"]["podIP"], FakePodIp("u1"));
  EXPECT_EQ(run["status"]["containerStatuses"][0]["name"], "main");
  EXPECT_EQ(run["status"]["containerStatuses"][0]["ready"], true);
  EXPECT_TRUE(run["status"]["containerStatuses"][0]["state"].contains("running"));
  EXPECT_EQ(run["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"], 0);
  int true_conditions = 0;
  for (const Json& c : run["status"]["conditions"]) true_conditions += c["status"] == "True";
  EXPECT_EQ(true_conditions, 5);

  const kube::Pod running =
      MakePod({}, {{"phase", "Running"}, {"startTime", "2026-01-02T03:00:00Z"}});
  const Json ok = FinishedPatch(running, 0, now);
  EXPECT_EQ(ok["status"]["phase"], "Succeeded");
  const Json& term = ok["status"]["containerStatuses"][0]["state"]["terminated"];
  EXPECT_EQ(term["exitCode"], 0);
  EXPECT_EQ(term["reason"], "Completed");
  EXPECT_EQ(term["startedAt"], "2026-01-02T03:00:00Z");
  EXPECT_EQ(term["finishedAt"], "2026-01-02T03:04:05Z");
  const Json failed = FinishedPatch(running, 2, now);
  EXPECT_EQ(failed["status"]["phase"], "Failed");
  EXPECT_EQ(failed["status"]["containerStatuses"][0]["state"]["terminated"]["reason"], "Error");
  for (const Json& c : failed["status"]["conditions"])
    if (c["type"] == "Ready") {
      EXPECT_EQ(c["status"], "False");
    }

  const Json invalid = InvalidPatch(pod, Status::InvalidArgument("bad"), now);
  EXPECT_EQ(invalid["status"]["phase"], "Failed");
  EXPECT_EQ(invalid["status"]["reason"], "InvalidSimulation");
  EXPECT_EQ(invalid["status"]["message"], "bad");
}

}  // namespace
}  // namespace chamber::kubesim
