#include "cli/soak.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

namespace chamber::cli {
namespace {

std::string Fixed(double v, int decimals = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string SignedPercent(double fraction) {
  return (fraction >= 0 ? "+" : "") + Fixed(fraction * 100) + "%";
}

}  // namespace

SoakTrend FitSoakTrend(const std::vector<SoakSample>& samples, double SoakSample::*value) {
  SoakTrend out;
  if (samples.empty()) return out;
  const double n = static_cast<double>(samples.size());
  double mw = 0, mt = 0, my = 0;
  for (const SoakSample& s : samples) {
    mw += static_cast<double>(s.running + s.pending) / n;
    mt += s.hours / n;
    my += s.*value / n;
  }
  out.mean = my;
  // The centred normal equations of y on (workloads, hours).
  double sww = 0, stt = 0, swt = 0, swy = 0, sty = 0;
  for (const SoakSample& s : samples) {
    const double w = static_cast<double>(s.running + s.pending) - mw, t = s.hours - mt,
                 y = s.*value - my;
    sww += w * w;
    stt += t * t;
    swt += w * t;
    swy += w * y;
    sty += t * y;
  }
  if (stt <= 0) return out;
  const double det = sww * stt - swt * swt;
  if (sww < 1e-9 || det <= 1e-9 * sww * stt) {
    out.per_hour = sty / stt;
    return out;
  }
  out.per_workload = (swy * stt - sty * swt) / det;
  out.per_hour = (sww * sty - swt * swy) / det;
  return out;
}

std::vector<SoakCheck> JudgeSoak(const std::vector<SoakSample>& samples, const SoakLimits& limits) {
  std::vector<SoakCheck> checks = {{"memory", "", false},
                                   {"resident memory", "", false},
                                   {"open files", "", false},
                                   {"cycle time", "", false}};
  // The baseline: the last sample of the warm-up (the first sample when there is none).
  size_t base = 0;
  for (size_t i = 0; i < samples.size(); ++i)
    if (samples[i].hours <= limits.warmup_hours) base = i;
  const size_t after = samples.empty() ? 0 : samples.size() - base - 1;
  if (after < 2) {
    for (SoakCheck& c : checks)
      c.detail = "fewer than two samples after the warm-up of " + Fixed(limits.warmup_hours) +
                 " h: run longer or sample more often";
    return checks;
  }
  const SoakSample& b = samples[base];
  const auto rest =
      std::vector<SoakSample>(samples.begin() + static_cast<ptrdiff_t>(base) + 1, samples.end());
  const double span = rest.back().hours - rest.front().hours;
  const auto work = [](const SoakSample& s) { return std::to_string(s.running + s.pending); };
  const std::string while_work =
      " while the workloads held went from " + work(rest.front()) + " to " + work(rest.back());

  // Growth over the judged hours that the work held does not explain.
  const auto judge = [&](SoakCheck& check, double SoakSample::*value, double limit,
                         const std::string& unit, int decimals) {
    const SoakTrend trend = FitSoakTrend(rest, value);
    const double growth = trend.mean > 0 ? trend.per_hour * span / trend.mean : 0;
    check.ok = growth <= limit;
    check.detail =
        (trend.per_hour >= 0 ? "+" : "") + Fixed(trend.per_hour, 3) + " " + unit +
        " per simulated hour beyond what the work held explains (" + Fixed(trend.per_workload, 4) +
        " " + unit + " per workload): " + SignedPercent(growth) + " of the mean " +
        Fixed(trend.mean, decimals) + " " + unit + " over " + Fixed(span) + " h (limit " +
        SignedPercent(limit) + "); " + Fixed(rest.front().*value, decimals) + " to " +
        Fixed(rest.back().*value, decimals) + " " + unit + while_work;
  };
  judge(checks[0], &SoakSample::heap_mib, limits.max_heap_growth, "MiB", 1);
  judge(checks[1], &SoakSample::rss_mib, limits.max_rss_growth, "MiB", 1);
  judge(checks[3], &SoakSample::cycle_ms_p50, limits.max_cycle_growth, "ms", 2);

  const auto top_files = std::max_element(
      rest.begin(), rest.end(),
      [](const SoakSample& x, const SoakSample& y) { return x.open_files < y.open_files; });
  const int64_t more = top_files->open_files - b.open_files;
  checks[2].ok = more <= limits.max_open_files_growth;
  checks[2].detail = std::to_string(b.open_files) + " at " + Fixed(b.hours) + " h, at most " +
                     std::to_string(top_files->open_files) + " after (" + (more >= 0 ? "+" : "") +
                     std::to_string(more) + "; limit +" +
                     std::to_string(limits.max_open_files_growth) + ")";
  return checks;
}

nlohmann::json SoakJson(const std::vector<SoakSample>& samples,
                        const std::vector<SoakCheck>& checks, const nlohmann::json& options) {
  nlohmann::json out = {{"options", options},
                        {"samples", nlohmann::json::array()},
                        {"checks", nlohmann::json::array()}};
  for (const SoakSample& s : samples) {
    out["samples"].push_back({{"hours", s.hours},
                              {"cycles", s.cycles},
                              {"rssMiB", s.rss_mib},
                              {"heapMiB", s.heap_mib},
                              {"openFiles", s.open_files},
                              {"historyMiB", s.history_mib},
                              {"running", s.running},
                              {"pending", s.pending},
                              {"cycleMsP50", s.cycle_ms_p50},
                              {"cycleMsP95", s.cycle_ms_p95}});
  }
  bool ok = true;
  for (const SoakCheck& c : checks) {
    out["checks"].push_back({{"name", c.name}, {"ok", c.ok}, {"detail", c.detail}});
    ok = ok && c.ok;
  }
  out["ok"] = ok;
  return out;
}

namespace {

constexpr double kWidth = 720, kPanel = 200, kLeft = 64, kRight = 16, kTop = 36, kGap = 56;

// A round step for about five ticks up to `max`.
double TickStep(double max) {
  if (max <= 0) return 1;
  const double raw = max / 5;
  const double p = std::pow(10, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

struct Series {
  std::string name;
  std::string colour;
  double SoakSample::*field;
};

void Panel(std::string& out, const std::vector<SoakSample>& samples, double warmup_hours,
           double top, std::string_view label, const std::vector<Series>& series) {
  const double hours = std::max(samples.empty() ? 1.0 : samples.back().hours, 1e-9);
  double max = 0;
  for (const SoakSample& s : samples)
    for (const Series& se : series) max = std::max(max, s.*se.field);
  const double y_step = TickStep(max * 1.1);
  const double y_max = std::max(y_step, std::ceil(max * 1.1 / y_step) * y_step);
  const double w = kWidth - kLeft - kRight;
  auto x = [&](double h) { return kLeft + w * h / hours; };
  auto y = [&](double v) { return top + kPanel * (1 - v / y_max); };
  out += "<rect x=\"" + Fixed(kLeft) + "\" y=\"" + Fixed(top) + "\" width=\"" +
         Fixed(x(std::min(warmup_hours, hours)) - kLeft) + "\" height=\"" + Fixed(kPanel) +
         "\" fill=\"#eee\"><title>warm-up</title></rect>\n";
  out += "<text x=\"" + Fixed(kLeft) + "\" y=\"" + Fixed(top - 8) + "\">" + std::string(label) +
         "</text>\n";
  for (double v = 0; v <= y_max + 1e-9; v += y_step) {
    out += "<line x1=\"" + Fixed(kLeft) + "\" x2=\"" + Fixed(kLeft + w) + "\" y1=\"" + Fixed(y(v)) +
           "\" y2=\"" + Fixed(y(v)) + "\" stroke=\"#ddd\"/>\n";
    out += "<text class=\"tick\" x=\"" + Fixed(kLeft - 6) + "\" y=\"" + Fixed(y(v) + 4) +
           "\" text-anchor=\"end\">" + Fixed(v, y_step < 1 ? 2 : 0) + "</text>\n";
  }
  const double x_step = TickStep(hours);
  for (double h = 0; h <= hours + 1e-9; h += x_step) {
    out += "<text class=\"tick\" x=\"" + Fixed(x(h)) + "\" y=\"" + Fixed(top + kPanel + 16) +
           "\" text-anchor=\"middle\">" + Fixed(h, x_step < 1 ? 1 : 0) + " h</text>\n";
  }
  double legend_x = kLeft + w;
  for (auto it = series.rbegin(); it != series.rend(); ++it) {
    out += "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"" + it->colour + "\" points=\"";
    for (const SoakSample& s : samples)
      out += Fixed(x(s.hours)) + "," + Fixed(y(s.*it->field)) + " ";
    out += "\"/>\n";
    out += "<text x=\"" + Fixed(legend_x) + "\" y=\"" + Fixed(top - 8) +
           "\" text-anchor=\"end\" fill=\"" + it->colour + "\">" + it->name + "</text>\n";
    legend_x -= 12 + 8 * static_cast<double>(it->name.size());
  }
}

}  // namespace

std::string SoakSvg(const std::vector<SoakSample>& samples, double warmup_hours,
                    const std::string& title) {
  const double height = kTop + 2 * kPanel + kGap + 40;
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + Fixed(kWidth) +
                    " " + Fixed(height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out += "<title>" + title + "</title>\n";
  out += "<text x=\"" + Fixed(kLeft) + "\" y=\"16\" font-weight=\"bold\">" + title + "</text>\n";
  Panel(out, samples, warmup_hours, kTop + 20, "Memory (MiB): resident, and allocated on the heap",
        {{"RSS", "#1f77b4", &SoakSample::rss_mib}, {"heap", "#9467bd", &SoakSample::heap_mib}});
  Panel(out, samples, warmup_hours, kTop + 20 + kPanel + kGap,
        "Cycle time (ms, per sample interval)",
        {{"p50", "#2ca02c", &SoakSample::cycle_ms_p50},
         {"p95", "#d62728", &SoakSample::cycle_ms_p95}});
  out += "</svg>\n";
  return out;
}

}  // namespace chamber::cli
