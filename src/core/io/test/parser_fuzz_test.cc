// Property-based fuzzing of the YAML readers: whatever bytes come in, a reader returns a value
// or an error naming the source, never crashes (this binary also runs under ASan and UBSan), and
// the engine accepts whatever the snapshot reader accepted.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "common/testing/mutate_text.h"
#include "core/engine.h"
#include "core/io/config_yaml.h"
#include "core/io/example.h"
#include "core/io/queue_yaml.h"
#include "core/io/snapshot_yaml.h"

namespace chamber::core::io {
namespace {

// Insertions draw on YAML's own pieces and odd values.
std::string Mutate(const std::string& text, const std::vector<int>& ops) {
  static constexpr std::string_view kTokens[] = {
      "- ", ": ", "{",    "}", "[",  "]",  "\n  ", "-1", "99999999999999999999",
      "Gi", "m",  "null", "~", "&a", "*a", "\"",   "'",  "#",
      "\t", "1h", "0"};
  return fuzz::MutateText(text, ops, kTokens);
}

std::vector<int> Ops() {
  return *rc::gen::container<std::vector<int>>(*rc::gen::inRange<size_t>(3, 30),
                                               rc::gen::inRange(0, 1 << 20));
}

RC_GTEST_PROP(ParserFuzz, SnapshotReaderNeverCrashes, ()) {
  const std::string text = Mutate(std::string(ExampleSnapshotYaml()), Ops());
  Result<Snapshot> s = ParseSnapshot(text, "fuzz.yaml");
  if (!s.ok()) {
    RC_ASSERT(s.status().message().rfind("fuzz.yaml", 0) == 0);
    return;
  }
  const CycleResult r = Engine().Schedule(*s);
  RC_ASSERT(r.binds.size() + r.resumes.size() + r.pending.size() <= s->workloads.size());
}

RC_GTEST_PROP(ParserFuzz, QueueReaderNeverCrashes, ()) {
  const std::string base = R"(queues:
  - name: research
    resources: {gpu: {quota: 24, limit: 40}, cpu: {quota: "100"}, memory: {quota: 1Ti}}
  - name: nlp
    parent: research
    queueing: StrictFIFO
    resources: {gpu: {quota: 16, overQuotaWeight: 2, lendingLimit: 4}}
)";
  Result<std::vector<Queue>> q = ParseQueues(Mutate(base, Ops()), "fuzz.yaml");
  if (!q.ok()) RC_ASSERT(q.status().message().rfind("fuzz.yaml", 0) == 0);
}

RC_GTEST_PROP(ParserFuzz, ConfigReaderNeverCrashes, ()) {
  const std::string base = EngineConfigToYaml(EngineConfig{});
  Result<EngineConfig> c = ParseEngineConfig(Mutate(base, Ops()), "fuzz.yaml");
  if (!c.ok()) {
    RC_ASSERT(c.status().message().rfind("fuzz.yaml", 0) == 0);
  } else {
    RC_ASSERT(c->max_preemptions_per_window >= 1);
    RC_ASSERT(c->cycle_period >= Duration(10));
  }
}

}  // namespace
}  // namespace chamber::core::io
