#include <gtest/gtest.h>

#include "common/file.h"
#include "sim/trace/test/test_util.h"
#include "sim/trace/trace.h"

namespace chamber::sim {
namespace {

using std::chrono::milliseconds;
using testing::DataPath;
using testing::Skipping;

constexpr milliseconds Sec(int64_t s) { return milliseconds(s * 1000); }

TEST(PhillyTest, ReadsTheFixtureSkippingJobsThatNeverFinished) {
  Result<Trace> t =
      ReadTrace(DataPath("philly_cluster_job_log.json"), TraceFormat::kPhilly, Skipping());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 3u);
  EXPECT_EQ(t->skipped_lines, 2);
  const std::string file = DataPath("philly_cluster_job_log.json");
  EXPECT_EQ(t->skipped_examples,
            (std::vector<std::string>{
                file + ":4:3: job 2 (application_1506638472019_3): field attempts: no attempts: "
                       "the job never ran",
                file + ":5:3: job 3 (application_1506638472019_4): field attempts[0].end_time: "
                       "missing: the job was still running when the log ended"}));

  // Submitted 01:00:00, the earliest kept job: two machines of 8 GPUs for two hours.
  const TraceJob& two = t->jobs[0];
  EXPECT_EQ(two.id, "application_1506638472019_2");
  EXPECT_EQ(two.submit, Sec(0));
  EXPECT_EQ(two.duration, Sec(7200));
  EXPECT_EQ(two.pods, 2);
  EXPECT_EQ(two.gpus_per_pod, 8);
  EXPECT_EQ(two.user, "a1b2c3");
  EXPECT_EQ(two.group, "b436b2");
  EXPECT_EQ(two.queue, "b436b2");

  // The README's example job: two attempts; run time from the first start (10-07 01:12:09) to
  // the last end (10-09 06:53:12).
  const TraceJob& readme = t->jobs[1];
  EXPECT_EQ(readme.id, "application_1506638472019_14199");
  EXPECT_EQ(readme.submit, Sec(699));
  EXPECT_EQ(readme.duration, Sec(2 * 86400 + 5 * 3600 + 41 * 60 + 3));
  EXPECT_EQ(readme.pods, 1);
  EXPECT_EQ(readme.gpus_per_pod, 8);
  EXPECT_EQ(readme.queue, "ee9e8c");

  // Retried on a larger allocation: the largest attempt counts (8 GPUs on 2 machines).
  const TraceJob& retried = t->jobs[2];
  EXPECT_EQ(retried.id, "application_1506638472019_5");
  EXPECT_EQ(retried.submit, Sec(1800));
  EXPECT_EQ(retried.duration, Sec(3600));
  EXPECT_EQ(retried.pods, 2);
  EXPECT_EQ(retried.gpus_per_pod, 4);
}

TEST(PhillyTest, WithoutSkippingTheFirstBadJobFails) {
  Result<std::string> text = ReadFile(DataPath("philly_cluster_job_log.json"));
  ASSERT_TRUE(text.ok());
  Result<Trace> t = ParseTrace(*text, "cluster_job_log", TraceFormat::kPhilly, {});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "cluster_job_log:4:3: job 2 (application_1506638472019_3): field attempts: no "
            "attempts: the job never ran");
}

TEST(PhillyTest, Errors) {
  const std::string ok =
      R"({"jobid": "ok", "vc": "v", "user": "u", "submitted_time": "2017-10-03 02:54:47", )"
      R"("attempts": [{"start_time": "2017-10-03 02:55:00", "end_time": "2017-10-03 03:00:00", )"
      R"("detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"jobid": "a", "submitted_time": "None", "attempts": []})",
       "p:2:1: job 1 (a): field submitted_time: missing"},
      {R"({"jobid": "b", "submitted_time": "2017-10-03 02:54:47", "attempts": [{"start_time": )"
       R"("2017-10-03 02:54:50", "end_time": "2017-10-03 02:53:00"}]})",
       "p:2:1: job 1 (b): field attempts[0].end_time: is before attempts[0].start_time"},
      {R"({"jobid": "c", "submitted_time": "2017-10-03 02:54:47", "attempts": [{"start_time": )"
       R"("yesterday", "end_time": "None"}]})",
       "p:2:1: job 1 (c): field attempts[0].start_time: \"yesterday\" is not a time (use "
       "seconds, a duration like 1h30m, or \"YYYY-MM-DD HH:MM:SS\")"},
      {R"({"jobid": 7})", "p:2:1: job 1: field jobid: expected a string"},
      {R"({"jobid": "f", "submitted_time": 1506999287})",
       "p:2:1: job 1 (f): field submitted_time: expected a string"},
      {R"({"jobid": "g", "submitted_time": "2017-10-03 02:54:47", "attempts": {}})",
       "p:2:1: job 1 (g): field attempts: expected a list"},
      {R"({"jobid": "h", "submitted_time": "2017-10-03 02:54:47", "attempts": ["x"]})",
       "p:2:1: job 1 (h): field attempts[0]: expected an object"},
      {R"({"jobid": "i", "submitted_time": "2017-10-03 02:54:47", "attempts": [{"start_time": )"
       R"("2017-10-03 02:55:00", "end_time": 3}]})",
       "p:2:1: job 1 (i): field attempts[0].end_time: expected a string"},
      {R"({"jobid": "d", "submitted_time": "2017-10-03 02:54:47", "attempts": [{"start_time": )"
       R"("2017-10-03 02:55:00", "end_time": "2017-10-03 02:56:00", "detail": [{"gpus": 3}]}]})",
       "p:2:1: job 1 (d): field attempts[0].detail[0].gpus: expected a list"},
      {R"({"jobid": "j", "submitted_time": "2017-10-03 02:54:47", "attempts": [{"start_time": )"
       R"("2017-10-03 02:55:00", "end_time": "2017-10-03 02:56:00", "detail": [{}, []]}]})",
       "p:2:1: job 1 (j): field attempts[0].detail[1]: expected an object"},
      {R"({"jobid": "e", "attempts": [}, )",
       "p:2:29: job 1: invalid JSON: syntax error while "
       "parsing value - unexpected '}'; expected '[', '{', "
       "or a literal"},
      {ok, "p:2:1: job 1 (ok): field jobid: duplicate id \"ok\" (first at job 0)"},
  };
  for (const auto& [job, want] : cases) {
    Result<Trace> t = ParseTrace("[" + ok + ",\n" + job + "]", "p", TraceFormat::kPhilly, {});
    ASSERT_FALSE(t.ok()) << job;
    EXPECT_EQ(t.status().message(), want) << job;
  }
}

TEST(PhillyTest, StructureErrorsAndEdgeCases) {
  EXPECT_EQ(ParseTrace("{}", "p", TraceFormat::kPhilly, Skipping()).status().message(),
            "p:1:1: expected a JSON array of jobs (Philly cluster_job_log)");
  EXPECT_EQ(ParseTrace("[\n", "p", TraceFormat::kPhilly, Skipping()).status().message(),
            "p:2:1: unterminated array: missing ']'");
  EXPECT_EQ(ParseTrace("[] x", "p", TraceFormat::kPhilly, Skipping()).status().message(),
            "p:1:4: unexpected text after the array of jobs");
  Result<Trace> empty = ParseTrace(" [ ]\n", "p", TraceFormat::kPhilly, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->jobs.empty());
  // null times and a truncated last job, skipped.
  Result<Trace> t = ParseTrace(
      R"([{"jobid": "n", "submitted_time": null, "attempts": null}, {"jobid": "cut", "attem)", "p",
      TraceFormat::kPhilly, Skipping());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "p:1:83: unterminated array: missing ']'");
}

}  // namespace
}  // namespace chamber::sim
