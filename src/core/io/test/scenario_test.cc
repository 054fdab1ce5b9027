// The fairness scenario suite: each file in scenarios/ is a `chamber schedule` snapshot whose
// comment lines say what one cycle over it must decide (docs/fairness.md). The lines:
//
//   # expect: bind NAME                        NAME is bound
//   # expect: resume NAME                      NAME is resumed
//   # expect: preempt NAME REASON              NAME is preempted for REASON (Reclaim, Priority,
//                                              HardwareFault)
//   # expect: pending NAME REASON [TEXT]       NAME waits for REASON, its message holding TEXT
//   # config: YAML                             the engine configuration, one line of flow YAML
//
// Binds, resumes and preemptions must be exactly those expected: a scenario with no preempt
// line expects no preemption. Pending lines are checked for the workloads they name.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/engine.h"
#include "core/io/config_yaml.h"
#include "core/io/snapshot_yaml.h"

namespace chamber::core::io {
namespace {

const std::filesystem::path kDir = CHAMBER_SCENARIO_DIR;

struct Scenario {
  std::string path;
  EngineConfig config;
  std::set<std::string> binds, resumes, preempts;  // "name" and "name Reason"
  struct Pending {
    std::string name, reason, text;
    int line = 0;
  };
  std::vector<Pending> pending;
  std::string error;  // a malformed expectation
};

Scenario Read(const std::filesystem::path& path) {
  Scenario sc;
  sc.path = path.string();
  std::ifstream in(path);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string where = path.filename().string() + ":" + std::to_string(n) + ": ";
    if (line.rfind("# config:", 0) == 0) {
      Result<EngineConfig> c = ParseEngineConfig(line.substr(9), where);
      if (!c.ok()) sc.error = c.status().message();
      if (c.ok()) sc.config = *c;
      continue;
    }
    if (line.rfind("# expect:", 0) != 0) continue;
    std::istringstream words(line.substr(9));
    std::string kind, name, reason;
    words >> kind >> name;
    if (kind == "bind") {
      sc.binds.insert(name);
    } else if (kind == "resume") {
      sc.resumes.insert(name);
    } else if (kind == "preempt" && (words >> reason)) {
      sc.preempts.insert(name + " " + reason);
    } else if (kind == "pending" && (words >> reason)) {
      std::string text;
      std::getline(words, text);
      text.erase(0, text.find_first_not_of(' '));
      sc.pending.push_back({name, reason, text, n});
    } else {
      sc.error = where + "cannot read expectation: " + line;
    }
  }
  return sc;
}

std::vector<std::string> ScenarioFiles() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(kDir))
    if (e.path().extension() == ".yaml") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class ScenarioTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScenarioTest, DecidesAsExpected) {
  const Scenario sc = Read(kDir / GetParam());
  ASSERT_TRUE(sc.error.empty()) << sc.error;
  Result<Snapshot> s = LoadSnapshotFile(sc.path);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const CycleResult r = Engine(sc.config).Schedule(*s);
  auto name = [&](WorkloadId w) { return s->workloads[w.index()].name; };
  std::set<std::string> binds, resumes, preempts;
  for (const BindDecision& d : r.binds) binds.insert(name(d.workload));
  for (const ResumeDecision& d : r.resumes) resumes.insert(name(d.workload));
  for (const PreemptDecision& d : r.preemptions)
    preempts.insert(name(d.workload) + " " + std::string(PreemptReasonName(d.reason)));
  std::string decided;
  for (const PendingDecision& p : r.pending)
    decided += "\n  pending " + name(p.workload) + " " + std::string(PendingReasonName(p.reason)) +
               ": " + p.message();
  EXPECT_EQ(binds, sc.binds) << "binds" << decided;
  EXPECT_EQ(resumes, sc.resumes) << "resumes" << decided;
  EXPECT_EQ(preempts, sc.preempts) << "preemptions" << decided;
  for (const Scenario::Pending& want : sc.pending) {
    const auto it = std::find_if(r.pending.begin(), r.pending.end(), [&](const PendingDecision& p) {
      return name(p.workload) == want.name;
    });
    ASSERT_NE(it, r.pending.end())
        << "line " << want.line << ": " << want.name << " is not pending" << decided;
    EXPECT_EQ(PendingReasonName(it->reason), want.reason) << "line " << want.line << decided;
    EXPECT_NE(it->message().find(want.text), std::string::npos)
        << "line " << want.line << ": message of " << want.name << ": " << it->message();
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ScenarioTest, ::testing::ValuesIn(ScenarioFiles()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param.substr(0, info.param.size() - 5);
                           std::replace_if(
                               n.begin(), n.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return n;
                         });

// The suite is as large as docs/fairness.md says, and every file has expectations.
TEST(ScenarioSuite, HasAtLeastSixtyScenariosEachWithExpectations) {
  const std::vector<std::string> files = ScenarioFiles();
  EXPECT_GE(files.size(), 60u);
  for (const std::string& f : files) {
    const Scenario sc = Read(kDir / f);
    EXPECT_FALSE(sc.binds.empty() && sc.resumes.empty() && sc.preempts.empty() &&
                 sc.pending.empty())
        << f << " expects nothing";
  }
}

}  // namespace
}  // namespace chamber::core::io
