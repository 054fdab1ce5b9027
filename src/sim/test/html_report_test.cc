// The HTML report: self-contained, escaped, one SVG per plot, series downsampled.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/report.h"

namespace chamber::sim {
namespace {

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

SimMetrics Metrics(std::string policy, size_t points, double scale) {
  SimMetrics m;
  m.policy = std::move(policy);
  m.capacity_gpus = 16;
  m.jobs = 3;
  m.finished = 3;
  m.makespan_hours = static_cast<double>(points) / 10;
  m.allocation = 0.5 * scale;
  for (size_t i = 0; i < points; ++i) {
    SeriesPoint p;
    p.hours = static_cast<double>(i + 1) / 10;
    p.allocated_gpus = static_cast<double>(i % 16) * scale;
    p.waiting_jobs = static_cast<double>(i % 3);
    p.queue_gpus = {1, 2};
    m.series.push_back(p);
  }
  m.queues = {{"team-a", 10 * scale, 0.25, 0.5}, {"a<b&c", 30 * scale, 0.75, 0.5}};
  m.wait_hours = {3, 0.5 * scale, 0.25, 2};
  m.wait_by_gang = {{"1 gpu", {2, 0.1, 0.1, 0.2}}, {"2-8 gpu", {1, 1.5 * scale, 1.5, 1.5}}};
  m.wait_by_priority = {{"reserved", {1, 0.1, 0.1, 0.1}}, {"elastic", {2, 0.8, 0.5, 1.5}}};
  return m;
}

// The `points` attribute of the first polyline, as a list of "x,y" pairs.
std::vector<std::string> FirstPolylinePoints(const std::string& html) {
  const size_t line = html.find("<polyline");
  const size_t begin = html.find("points=\"", line) + 8;
  const std::string attr = html.substr(begin, html.find('"', begin) - begin);
  std::vector<std::string> out;
  for (size_t at = 0; at < attr.size();) {
    const size_t end = std::min(attr.find(' ', at), attr.size());
    out.push_back(attr.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

TEST(HtmlReport, SelfContainedPageWithOneSvgPerPlot) {
  RunInfo info{"trace.csv", "cluster.yaml", 2, 1};
  const std::string html = ReportHtml(info, {Metrics("chamber", 40, 1), Metrics("fifo", 20, 0.5)});
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  // Allocation, queue depth, share per queue, waits.
  EXPECT_EQ(Count(html, "<svg"), 4u);
  EXPECT_EQ(Count(html, "</svg>"), 4u);
  // Two policies on each of the two time plots.
  EXPECT_EQ(Count(html, "<polyline"), 4u);
  for (const char* s : {"chamber", "fifo", "team-a", "trace.csv", "cluster.yaml", "16 GPUs",
                        "placed as shares of one GPU", "2-8 gpu", "reserved", "elastic"})
    EXPECT_NE(html.find(s), std::string::npos) << s;
  // Nothing to fetch: no scripts, no external sources, no links at all.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
}

TEST(HtmlReport, EscapesNamesFromUserFiles) {
  RunInfo info{"<b>trace</b>", "c&d.yaml", 0, 0};
  const std::string html = ReportHtml(info, {Metrics("p\"<x>", 5, 1)});
  EXPECT_NE(html.find("a&lt;b&amp;c"), std::string::npos);
  EXPECT_EQ(html.find("a<b&c"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;trace&lt;/b&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<b>trace"), std::string::npos);
  EXPECT_NE(html.find("c&amp;d.yaml"), std::string::npos);
  EXPECT_NE(html.find("p&quot;&lt;x&gt;"), std::string::npos);
  EXPECT_EQ(html.find("p\"<x>"), std::string::npos);
}

TEST(HtmlReport, DownsamplesLongSeries) {
  // 1,200 points average down to 500, 2.4 points each; the short series keeps all of its 30.
  const std::string html = ReportHtml({}, {Metrics("chamber", 1200, 1), Metrics("fifo", 30, 1)});
  const std::vector<std::string> points = FirstPolylinePoints(html);
  ASSERT_EQ(points.size(), 500u);
  EXPECT_NE(points.front().find(','), std::string::npos);
  const size_t second = html.find("<polyline", html.find("<polyline") + 1);
  const size_t begin = html.find("points=\"", second) + 8;
  EXPECT_EQ(Count(html.substr(begin, html.find('"', begin) - begin), " ") + 1, 30u);
}

TEST(HtmlReport, NoRuns) {
  const std::string html = ReportHtml({"t", "c", 0, 0}, {});
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("No policy was run"), std::string::npos);
}

}  // namespace
}  // namespace chamber::sim
