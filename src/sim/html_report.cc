// `chamber sim -o html`: one self-contained page that opens offline. Inline CSS and inline SVG
// drawn here, no scripts, fonts or images. Every string from user files (trace, cluster, queue
// and policy names) passes through Escape.
#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "sim/report.h"
#include "sim/saturation.h"

namespace chamber::sim {
namespace {

constexpr size_t kMaxLinePoints = 500;
constexpr size_t kMaxQueueGroups = 24;  // the busiest queues, so bars stay readable
constexpr double kWidth = 960;
constexpr std::array<std::pair<const char*, double Summary::*>, 3> kStats = {
    {{"mean", &Summary::mean}, {"p50", &Summary::p50}, {"p99", &Summary::p99}}};
constexpr double kNone = std::numeric_limits<double>::quiet_NaN();  // no bar

// Okabe-Ito: distinguishable under the common colour-vision deficiencies.
constexpr std::array<const char*, 8> kPalette = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                                 "#56B4E9", "#D55E00", "#000000", "#F0E442"};
const char* Colour(size_t i) { return kPalette[i % kPalette.size()]; }

std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    const char* e = c == '&'    ? "&amp;"
                    : c == '<'  ? "&lt;"
                    : c == '>'  ? "&gt;"
                    : c == '"'  ? "&quot;"
                    : c == '\'' ? "&#39;"
                                : nullptr;
    if (e != nullptr)
      out += e;
    else
      out += c;
  }
  return out;
}

// Cuts a label to `max` bytes without splitting a UTF-8 sequence.
std::string Shorten(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t n = max - 1;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n)) + "\u2026";
}

// Names in reading order: "team-2" before "team-10".
bool NaturalLess(std::string_view a, std::string_view b) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (!digit(a[i]) || !digit(b[j])) {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
      continue;
    }
    while (i < a.size() && a[i] == '0') ++i;  // numbers compare by length, then digits
    while (j < b.size() && b[j] == '0') ++j;
    size_t ie = i, je = j;
    while (ie < a.size() && digit(a[ie])) ++ie;
    while (je < b.size() && digit(b[je])) ++je;
    const std::string_view x = a.substr(i, ie - i), y = b.substr(j, je - j);
    if (x.size() != y.size()) return x.size() < y.size();
    if (x != y) return x < y;
    i = ie, j = je;
  }
  return a.size() - i < b.size() - j;
}

// Axis from 0 to a round number at or above `max`, with 4 to 8 evenly spaced ticks.
struct Scale {
  double top = 1, step = 1;
};
Scale NiceScale(double max) {
  if (!(max > 0)) max = 1;
  const double raw = max / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 2.5, 5.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  return {std::ceil(max / step - 1e-9) * step, step};
}

std::string Num(double v) { return fmt::format("{:g}", v); }

// A plot area in SVG coordinates with linear scales from 0 to the scales' tops.
struct Frame {
  double x = 0, y = 0, w = 0, h = 0;
  Scale xs, ys;
  double X(double v) const { return x + v / xs.top * w; }
  double Y(double v) const { return y + h - v / ys.top * h; }
};

template <typename... Args>
void Put(std::string& out, fmt::format_string<Args...> f, Args&&... args) {
  fmt::format_to(std::back_inserter(out), f, std::forward<Args>(args)...);
}

void SvgOpen(std::string& out, double height, std::string_view label) {
  Put(out, "<svg viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">\n", kWidth, height,
      Escape(label));
}

// Horizontal grid lines with tick labels on the left, and an optional rotated axis label.
void YAxis(std::string& out, const Frame& f, std::string_view label, std::string_view unit = "") {
  for (int i = 0; i * f.ys.step <= f.ys.top + 1e-9; ++i) {
    const double v = i * f.ys.step, y = f.Y(v);
    Put(out, "<line class=\"grid\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>", f.x,
        f.x + f.w, y, y);
    Put(out, "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}{}</text>\n",
        f.x - 6, y + 4, Num(v), unit);
  }
  if (!label.empty())
    Put(out,
        "<text class=\"label\" transform=\"translate({:.1f},{:.1f}) rotate(-90)\" "
        "text-anchor=\"middle\">{}</text>\n",
        f.x - 44, f.y + f.h / 2, Escape(label));
  Put(out, "<line class=\"axis\" x1=\"{0:.1f}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\"/>\n",
      f.x, f.x + f.w, f.y + f.h);
}

void XAxisNumeric(std::string& out, const Frame& f, std::string_view label) {
  for (int i = 0; i * f.xs.step <= f.xs.top + 1e-9; ++i) {
    const double v = i * f.xs.step, x = f.X(v);
    Put(out, "<line class=\"axis\" x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\"/>",
        x, f.y + f.h, f.y + f.h + 4);
    Put(out, "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x,
        f.y + f.h + 17, Num(v));
  }
  Put(out, "<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
      f.x + f.w / 2, f.y + f.h + 34, Escape(label));
}

struct LegendEntry {
  std::string label;
  std::string colour;
  enum Kind { kLine, kDashed, kBox, kMark } kind = kBox;
};

void Legend(std::string& out, double x, double y, const std::vector<LegendEntry>& entries) {
  for (const LegendEntry& e : entries) {
    if (e.kind == LegendEntry::kBox)
      Put(out, "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>", x,
          y - 10, e.colour);
    else
      Put(out,
          "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
          "stroke-width=\"{}\"{}/>",
          x, x + 16, y - 4, y - 4, e.colour, e.kind == LegendEntry::kMark ? 3 : 2,
          e.kind == LegendEntry::kDashed ? " stroke-dasharray=\"5 3\"" : "");
    Put(out, "<text class=\"legend\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", x + 20, y,
        Escape(e.label));
    x += 34 + 7.0 * static_cast<double>(e.label.size());
  }
}

std::vector<LegendEntry> PolicyLegend(const std::vector<SimMetrics>& runs, LegendEntry::Kind k) {
  std::vector<LegendEntry> out;
  for (size_t i = 0; i < runs.size(); ++i) out.push_back({runs[i].policy, Colour(i), k});
  return out;
}

// The series as (hours, value) pairs, averaged over equal runs of points when it is longer than
// kMaxLinePoints (each point is already an interval average, so the means stay exact).
std::vector<std::pair<double, double>> Downsample(const std::vector<SeriesPoint>& s,
                                                  double SeriesPoint::*field) {
  std::vector<std::pair<double, double>> out;
  const size_t n = s.size(), m = std::min(n, kMaxLinePoints);
  for (size_t b = 0; b < m; ++b) {
    const size_t lo = b * n / m, hi = (b + 1) * n / m;
    double sum = 0;
    for (size_t i = lo; i < hi; ++i) sum += s[i].*field;
    out.emplace_back(s[hi - 1].hours, sum / static_cast<double>(hi - lo));
  }
  return out;
}

// A line per policy over time; `capacity` > 0 adds a dashed capacity line.
std::string TimePlot(const std::vector<SimMetrics>& runs, double SeriesPoint::*field,
                     std::string_view title, std::string_view y_label, double capacity) {
  std::vector<std::vector<std::pair<double, double>>> lines;
  double max_x = 0, max_y = capacity;
  for (const SimMetrics& m : runs) {
    lines.push_back(Downsample(m.series, field));
    for (const auto& [x, y] : lines.back()) {
      max_x = std::max(max_x, x);
      max_y = std::max(max_y, y);
    }
  }
  const Frame f{70, 40, kWidth - 90, 230, NiceScale(max_x), NiceScale(max_y * 1.05)};
  std::string out;
  SvgOpen(out, 320, title);
  YAxis(out, f, y_label);
  XAxisNumeric(out, f, "hours since the first submission");
  std::vector<LegendEntry> legend = PolicyLegend(runs, LegendEntry::kLine);
  if (capacity > 0) {
    Put(out,
        "<line class=\"capacity\" x1=\"{0:.1f}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\"/>\n",
        f.x, f.x + f.w, f.Y(capacity));
    legend.push_back(
        {fmt::format("capacity ({} GPUs)", Num(capacity)), "#666", LegendEntry::kDashed});
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    Put(out, "<polyline class=\"series\" stroke=\"{}\" points=\"", Colour(i));
    for (size_t p = 0; p < lines[i].size(); ++p)
      Put(out, "{}{:.1f},{:.1f}", p == 0 ? "" : " ", f.X(lines[i][p].first),
          f.Y(lines[i][p].second));
    Put(out, "\"><title>{}</title></polyline>\n", Escape(runs[i].policy));
  }
  Legend(out, f.x, 20, legend);
  out += "</svg>\n";
  return out;
}

// Bars grouped by category, one bar per policy; values[policy][group], NaN for no bar. `marks`,
// when given, draws a dark tick across each bar (entitlement against share).
struct BarData {
  std::vector<std::string> groups;
  std::vector<std::vector<double>> values;
  std::vector<std::vector<double>> marks;
  std::vector<std::vector<std::string>> tips;  // hover text per bar
};

void Bars(std::string& out, const Frame& f, const BarData& d, bool rotate_labels) {
  const double slot = f.w / static_cast<double>(std::max<size_t>(1, d.groups.size()));
  const size_t n = std::max<size_t>(1, d.values.size());
  const double bar = std::min(28.0, slot * 0.8 / static_cast<double>(n));
  for (size_t g = 0; g < d.groups.size(); ++g) {
    const double left = f.x + slot * static_cast<double>(g) + (slot - bar * n) / 2;
    for (size_t p = 0; p < d.values.size(); ++p) {
      const double v = d.values[p][g], x = left + bar * static_cast<double>(p);
      if (std::isnan(v)) continue;
      Put(out,
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
          "<title>{}</title></rect>",
          x + 0.5, f.Y(v), std::max(1.0, bar - 1), f.Y(0) - f.Y(v), Colour(p),
          Escape(d.tips[p][g]));
      if (!d.marks.empty() && !std::isnan(d.marks[p][g]))
        Put(out,
            "<line class=\"mark\" x1=\"{0:.1f}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\"/>", x,
            x + bar, f.Y(d.marks[p][g]));
    }
    const double cx = f.x + slot * (static_cast<double>(g) + 0.5), ty = f.y + f.h + 16;
    if (rotate_labels)
      Put(out,
          "<text class=\"tick\" transform=\"translate({:.1f},{:.1f}) rotate(-35)\" "
          "text-anchor=\"end\">{}<title>{}</title></text>\n",
          cx + 4, ty - 4, Escape(Shorten(d.groups[g], 20)), Escape(d.groups[g]));
    else
      Put(out, "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
          cx, ty, Escape(Shorten(d.groups[g], 20)));
  }
}

double MaxOf(const std::vector<std::vector<double>>& v) {
  double m = 0;
  for (const auto& row : v)
    for (double x : row)
      if (!std::isnan(x)) m = std::max(m, x);
  return m;
}

// Each queue's share of allocated GPU-hours per policy, with its entitlement marked.
std::string SharePlot(const std::vector<SimMetrics>& runs, std::string* note) {
  std::vector<std::pair<double, std::string>> busiest;  // by GPU-hours over all policies
  for (const SimMetrics& m : runs)
    for (const QueueMetrics& q : m.queues) {
      auto it = std::find_if(busiest.begin(), busiest.end(),
                             [&](const auto& b) { return b.second == q.name; });
      if (it == busiest.end()) it = busiest.insert(busiest.end(), {0.0, q.name});
      it->first += q.gpu_hours;
    }
  if (busiest.size() > kMaxQueueGroups) {
    std::stable_sort(busiest.begin(), busiest.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    *note = fmt::format(" The {} busiest of {} queues are shown.", kMaxQueueGroups, busiest.size());
    busiest.resize(kMaxQueueGroups);
  }
  BarData d;
  for (const auto& b : busiest) d.groups.push_back(b.second);
  std::sort(d.groups.begin(), d.groups.end(), NaturalLess);
  for (const SimMetrics& m : runs) {
    d.values.emplace_back(d.groups.size(), kNone);
    d.marks.emplace_back(d.groups.size(), kNone);
    d.tips.emplace_back(d.groups.size());
    for (size_t g = 0; g < d.groups.size(); ++g)
      for (const QueueMetrics& q : m.queues)
        if (q.name == d.groups[g]) {
          d.values.back()[g] = 100 * q.share;
          d.marks.back()[g] = 100 * q.entitlement;
          d.tips.back()[g] = fmt::format("{}, {}: {:.1f}% of GPU-hours, entitled to {:.1f}%",
                                         m.policy, q.name, 100 * q.share, 100 * q.entitlement);
        }
  }
  const bool rotate = d.groups.size() > 6;
  size_t longest = 0;  // characters of the longest label, for the room rotated labels need
  for (const std::string& g : d.groups) longest = std::max(longest, std::min<size_t>(g.size(), 20));
  const Frame f{70, 40, kWidth - 90, 220, {}, NiceScale(std::max(MaxOf(d.values), MaxOf(d.marks)))};
  std::string out;
  SvgOpen(out, rotate ? 300 + 3.8 * static_cast<double>(longest) : 310,
          "Share of GPU-hours per queue");
  YAxis(out, f, "share of allocated GPU-hours", "%");
  Bars(out, f, d, rotate);
  std::vector<LegendEntry> legend = PolicyLegend(runs, LegendEntry::kBox);
  legend.push_back({"entitlement", "#222", LegendEntry::kMark});
  Legend(out, f.x, 20, legend);
  out += "</svg>\n";
  return out;
}

// Waits by gang size (top row) and priority class (bottom row); one panel per statistic, each
// with its own scale so the means are not flattened by the p99s.
std::string WaitPlot(const std::vector<SimMetrics>& runs) {
  struct Row {
    const char* title;
    std::map<std::string, Summary> SimMetrics::*by;
    std::vector<std::string> order;
  };
  const std::array<Row, 2> rows = {
      {{"by gang size", &SimMetrics::wait_by_gang, {"1 gpu", "2-8 gpu", "9-64 gpu", "65+ gpu"}},
       {"by priority class", &SimMetrics::wait_by_priority, {"reserved", "elastic"}}}};
  const double panel_w = (kWidth - 20) / 3, panel_h = 170, row_h = 250;
  std::string out;
  SvgOpen(out, 40 + row_h * 2, "Queue wait by gang size and priority class");
  Legend(out, 60, 20, PolicyLegend(runs, LegendEntry::kBox));
  for (size_t r = 0; r < rows.size(); ++r) {
    BarData d;
    for (const std::string& g : rows[r].order)
      for (const SimMetrics& m : runs)
        if ((m.*rows[r].by).count(g) > 0) {
          d.groups.push_back(g);
          break;
        }
    for (size_t s = 0; s < kStats.size(); ++s) {
      d.values.clear();
      d.tips.clear();
      for (const SimMetrics& m : runs) {
        d.values.emplace_back(d.groups.size(), kNone);
        d.tips.emplace_back(d.groups.size());
        for (size_t g = 0; g < d.groups.size(); ++g) {
          auto it = (m.*rows[r].by).find(d.groups[g]);
          if (it == (m.*rows[r].by).end() || it->second.count == 0) continue;
          d.values.back()[g] = it->second.*kStats[s].second;
          d.tips.back()[g] =
              fmt::format("{}, {}: {} wait {:.2f} h ({} jobs)", m.policy, d.groups[g],
                          kStats[s].first, d.values.back()[g], it->second.count);
        }
      }
      const double x = 70 + panel_w * static_cast<double>(s), y = 70 + row_h * r;
      const Frame f{x, y, panel_w - 64, panel_h, {}, NiceScale(MaxOf(d.values))};
      Put(out, "<text class=\"panel\" x=\"{:.1f}\" y=\"{:.1f}\">{} wait (h), {}</text>\n", f.x,
          f.y - 12, kStats[s].first, rows[r].title);
      YAxis(out, f, "");
      Bars(out, f, d, false);
    }
  }
  out += "</svg>\n";
  return out;
}

std::string SummaryTable(const std::vector<SimMetrics>& runs) {
  std::string out = "<table>\n<thead><tr><th>metric</th>";
  for (size_t i = 0; i < runs.size(); ++i)
    Put(out, "<th><span class=\"swatch\" style=\"background:{}\"></span>{}</th>", Colour(i),
        Escape(runs[i].policy));
  out += "</tr></thead>\n<tbody>\n";
  auto row = [&](std::string_view label, auto value) {
    Put(out, "<tr><td>{}</td>", label);
    for (const SimMetrics& m : runs) Put(out, "<td>{}</td>", Escape(value(m)));
    out += "</tr>\n";
  };
  row("finished / jobs",
      [](const SimMetrics& m) { return fmt::format("{}/{}", m.finished, m.jobs); });
  row("makespan (h)", [](const SimMetrics& m) { return fmt::format("{:.1f}", m.makespan_hours); });
  row("GPU allocation",
      [](const SimMetrics& m) { return fmt::format("{:.1f}%", 100 * m.allocation); });
  row("allocation while jobs wait",
      [](const SimMetrics& m) { return fmt::format("{:.1f}%", 100 * m.allocation_while_waiting); });
  row("idle GPU-h while queued",
      [](const SimMetrics& m) { return fmt::format("{:.0f}", m.idle_gpu_hours_while_queued); });
  for (const auto& [name, summary] :
       {std::pair{"JCT", &SimMetrics::jct_hours}, {"wait", &SimMetrics::wait_hours}})
    for (const auto& [stat, field] : kStats)
      row(fmt::format("{} {} (h)", name, stat),
          // Copies, not the bindings: clang before 16 (the fuzz build's) cannot capture those.
          [s = summary, f = field](const SimMetrics& m) { return fmt::format("{:.2f}", m.*s.*f); });
  row("Jain&#39;s index (share/entitled)",
      [](const SimMetrics& m) { return fmt::format("{:.3f}", m.jain_index); });
  row("preemptions (GPU-h lost)", [](const SimMetrics& m) {
    return fmt::format("{} ({:.1f})", m.preemptions, m.gpu_hours_lost_preemption);
  });
  row("GPU failures (GPU-h lost)", [](const SimMetrics& m) {
    return fmt::format("{} ({:.1f})", m.gpu_failures, m.gpu_hours_lost_failures);
  });
  row("cycle CPU p50 (ms)",
      [](const SimMetrics& m) { return fmt::format("{:.3f}", m.cycle_ms.p50); });
  row("cycle CPU p99 (ms)",
      [](const SimMetrics& m) { return fmt::format("{:.3f}", m.cycle_ms.p99); });
  out += "</tbody>\n</table>\n";
  return out;
}

// A line per policy of a saturation measure against arrived demand, both in % of capacity.
std::string SaturationPlot(const std::vector<SaturationCurve>& curves,
                           double SaturationPoint::*field, std::string_view title) {
  double max_x = 0, max_y = 0;
  for (const SaturationCurve& c : curves)
    for (const SaturationPoint& p : c.points) {
      max_x = std::max(max_x, p.arrived_demand * 100);
      max_y = std::max(max_y, p.*field * 100);
    }
  const Frame f{70, 40, kWidth - 90, 230, NiceScale(max_x), NiceScale(std::max(1.0, max_y * 1.05))};
  std::string out;
  SvgOpen(out, 320, title);
  YAxis(out, f, title, "%");
  XAxisNumeric(out, f, "arrived GPU demand (% of capacity)");
  std::vector<LegendEntry> legend;
  for (size_t i = 0; i < curves.size(); ++i) {
    legend.push_back({curves[i].policy, Colour(i), LegendEntry::kLine});
    Put(out, "<polyline class=\"series\" stroke=\"{}\" points=\"", Colour(i));
    for (size_t p = 0; p < curves[i].points.size(); ++p)
      Put(out, "{}{:.1f},{:.1f}", p == 0 ? "" : " ", f.X(curves[i].points[p].arrived_demand * 100),
          f.Y(curves[i].points[p].*field * 100));
    Put(out, "\"><title>{}</title></polyline>\n", Escape(curves[i].policy));
  }
  Legend(out, f.x, 20, legend);
  out += "</svg>\n";
  return out;
}

constexpr std::string_view kStyle = R"(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
       margin: 0; background: #fafafa; }
main { max-width: 1000px; margin: 0 auto; padding: 24px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 12px; } h2 { font-size: 17px; margin: 28px 0 4px; }
dl { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; margin: 0; }
dt { color: #666; } dd { margin: 0; }
p.note { color: #555; margin: 0 0 6px; font-size: 13px; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 12px; white-space: nowrap; border-bottom: 1px solid #e4e4e4; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; }
svg { width: 100%; height: auto; display: block; }
svg text { font-size: 12px; fill: #333; } .tick { font-size: 11px; fill: #555; }
.panel { font-weight: 600; } .label { fill: #444; }
.grid { stroke: #e8e8e8; } .axis { stroke: #888; }
.series { fill: none; stroke-width: 1.6; stroke-linejoin: round; }
.capacity { stroke: #666; stroke-width: 1.5; stroke-dasharray: 6 4; }
.mark { stroke: #222; stroke-width: 3; }
)";

}  // namespace

std::string ReportHtml(const RunInfo& info, const std::vector<SimMetrics>& runs) {
  std::string out;
  Put(out,
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>Chamber simulation: {}</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n"
      "<h1>Chamber simulation report</h1>\n<dl>\n",
      Escape(info.trace), kStyle);
  const SimMetrics* first = runs.empty() ? nullptr : &runs.front();
  auto item = [&](std::string_view k, const std::string& v) {
    Put(out, "<dt>{}</dt><dd>{}</dd>\n", k, Escape(v));
  };
  item("trace", info.trace);
  item("cluster", info.cluster);
  if (first) {
    item("jobs", fmt::format("{}", first->jobs));
    item("capacity", fmt::format("{} GPUs", first->capacity_gpus));
  }
  item("skipped lines", fmt::format("{}", info.skipped_lines));
  item("fractional GPUs", info.fractional_jobs > 0
                              ? fmt::format("{} jobs asked for a fraction of a GPU: placed as "
                                            "shares of one GPU",
                                            info.fractional_jobs)
                              : "none");
  out += "</dl>\n";
  if (first == nullptr) return out + "<p>No policy was run.</p>\n</main>\n</body>\n</html>\n";

  std::string share_note;
  const std::string share = SharePlot(runs, &share_note);
  out += "<h2>Summary</h2>\n" + SummaryTable(runs);
  Put(out,
      "<h2>GPU allocation over time</h2>\n<p class=\"note\">Allocated GPUs, averaged over each "
      "interval; the dashed line is the capacity.</p>\n{}",
      TimePlot(runs, &SeriesPoint::allocated_gpus, "GPU allocation over time", "allocated GPUs",
               static_cast<double>(first->capacity_gpus)));
  Put(out,
      "<h2>Queue depth over time</h2>\n<p class=\"note\">Jobs waiting to start, averaged over "
      "each interval.</p>\n{}",
      TimePlot(runs, &SeriesPoint::waiting_jobs, "Queue depth over time", "waiting jobs", 0));
  Put(out,
      "<h2>Share per queue</h2>\n<p class=\"note\">Each queue&#39;s share of the allocated "
      "GPU-hours; the dark tick is its entitlement.{}</p>\n{}",
      Escape(share_note), share);
  Put(out,
      "<h2>Queue wait</h2>\n<p class=\"note\">Time from submission to first start, by gang size "
      "(GPUs per job) and priority class; nearest-rank percentiles.</p>\n{}",
      WaitPlot(runs));
  out += "</main>\n</body>\n</html>\n";
  return out;
}

std::string SaturationHtml(const SaturationInfo& info, const std::vector<SaturationCurve>& curves) {
  std::string out;
  Put(out,
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>Chamber saturation: {}</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n"
      "<h1>Chamber saturation report</h1>\n<dl>\n",
      Escape(info.trace), kStyle);
  auto item = [&](std::string_view k, const std::string& v) {
    Put(out, "<dt>{}</dt><dd>{}</dd>\n", k, Escape(v));
  };
  item("trace", info.trace);
  item("cluster", info.cluster);
  if (!curves.empty())
    item("capacity",
         fmt::format("{} GPUs", Num(static_cast<double>(curves.front().capacity_milli) / 1000.0)));
  item("arrivals",
       fmt::format("{} from the trace, {} drawn from its mix", info.from_trace, info.sampled));
  out += "</dl>\n";
  if (curves.empty()) return out + "<p>No policy was run.</p>\n</main>\n</body>\n</html>\n";
  out +=
      "<h2>Summary</h2>\n<table>\n<thead><tr><th>policy</th><th>pods placed</th>"
      "<th>unplaced</th><th>unallocated at 100%</th><th>stranded at 100%</th></tr></thead>\n"
      "<tbody>\n";
  for (size_t i = 0; i < curves.size(); ++i) {
    const SaturationCurve& c = curves[i];
    const SaturationPoint* at = nullptr;
    for (const SaturationPoint& p : c.points)
      if (std::abs(p.arrived_demand - 1.0) < 1e-9) at = &p;
    Put(out,
        "<tr><td><span class=\"swatch\" style=\"background:{}\"></span>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
        Colour(i), Escape(c.policy), c.placed, c.unplaced,
        at ? fmt::format("{:.1f}%", at->unallocated * 100) : "-",
        at ? fmt::format("{:.1f}%", at->stranded * 100) : "-");
  }
  out += "</tbody>\n</table>\n";
  Put(out,
      "<h2>Unallocated GPU capacity</h2>\n<p class=\"note\">Free GPU capacity over the "
      "cluster&#39;s, as pods arrive and never finish.</p>\n{}",
      SaturationPlot(curves, &SaturationPoint::unallocated, "unallocated GPU capacity"));
  Put(out,
      "<h2>Stranded GPU capacity</h2>\n<p class=\"note\">Free GPU capacity that no request "
      "class of the arrivals can use.</p>\n{}",
      SaturationPlot(curves, &SaturationPoint::stranded, "stranded GPU capacity"));
  out += "</main>\n</body>\n</html>\n";
  return out;
}

}  // namespace chamber::sim
