// `chamber sim`: replay a trace (real or synthetic) on a described cluster under several policies
// in one run, and report how each did.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "common/config_file.h"
#include "common/file.h"
#include "common/time.h"
#include "core/io/config_yaml.h"
#include "core/io/queue_yaml.h"
#include "sim/cluster_spec.h"
#include "sim/policy.h"
#include "sim/report.h"
#include "sim/saturation.h"
#include "sim/simulator.h"
#include "sim/synthetic.h"
#include "sim/trace/trace.h"

namespace chamber::cli {
namespace {

constexpr std::string_view kDefaultPolicies = "chamber,fifo,kube-default";
constexpr std::string_view kDefaultSaturationPolicies = "first-fit,best-fit,chamber";

struct SimCommandOptions {
  std::string cluster;
  std::string trace;
  std::string format = "chamber";
  std::string queues;
  std::string config;
  std::string mapping;
  std::string policies{kDefaultPolicies};
  std::string output = "table";
  std::string out;
  std::string events;
  bool skip_bad_lines = false;
  bool fresh_cycles = false;
  int64_t synthetic = 0;
  std::string profile = "helios";
  int32_t teams = 4;
  std::string span = "7d";
  uint64_t seed = 1;
  std::string checkpoint_interval = "30m";
  std::string restart_overhead = "60s";
  double gpu_mtbf_hours = 0;
  std::string repair_time = "4h";
  std::string horizon = "0";
  bool saturation = false;
  double saturation_until = 1.3;
  double saturation_step = 0.05;
  std::string saturation_order = "trace";
};

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

Result<core::Duration> Flag(const std::string& name, const std::string& value) {
  Result<core::Duration> d = ParseDuration(value);
  if (!d.ok()) return Status::InvalidArgument("--" + name + ": " + d.status().message());
  return d;
}

Status WriteReport(const SimCommandOptions& o, const std::string& text) {
  if (o.out.empty()) {
    std::cout << text;
  } else {
    std::ofstream f(o.out);
    if (!f) return Status::InvalidArgument("--out: cannot write " + o.out);
    f << text;
  }
  return Status::Ok();
}

// --saturation: pods arrive in trace order (then drawn from its mix) and never finish, under
// GPU-sharing policies.
Status RunSaturation(const SimCommandOptions& o, const std::vector<core::Node>& nodes,
                     const sim::Trace& trace, const sim::RunInfo& run) {
  if (!o.events.empty())
    return Status::InvalidArgument("--events: saturation mode has no event log");
  for (const core::Node& n : nodes)
    for (uint8_t devices : n.mig_devices)
      if (devices > 0)
        return Status::InvalidArgument(
            "--saturation: " + o.cluster + ": node " + n.name +
            " has GPUs in MIG mode (mig:), which saturation mode does not simulate");
  sim::SaturationOptions options;
  options.until_permille = std::llround(o.saturation_until * 1000);
  options.step_permille = std::llround(o.saturation_step * 1000);
  options.seed = o.seed;
  options.sampled = o.saturation_order == "sampled";
  if (options.step_permille <= 0)
    return Status::InvalidArgument("--saturation-step must be at least 0.001");
  if (options.until_permille < options.step_permille)
    return Status::InvalidArgument("--saturation-until must be at least --saturation-step");
  const std::vector<core::ShareNodeSpec> share_nodes = sim::ShareNodesOf(nodes);
  const core::ShareCluster empty(share_nodes);
  CHAMBER_ASSIGN_OR_RETURN(const sim::SaturationArrivals arrivals,
                           sim::MakeSaturationArrivals(trace, empty, options));
  sim::SaturationInfo info{run.trace, run.cluster, arrivals.from_trace, arrivals.sampled};
  const std::string policies =
      o.policies == kDefaultPolicies ? std::string(kDefaultSaturationPolicies) : o.policies;
  std::vector<sim::SaturationCurve> curves;
  for (const std::string& name : SplitCommas(policies)) {
    CHAMBER_ASSIGN_OR_RETURN(sim::SaturationCurve c,
                             sim::RunSaturation(share_nodes, arrivals, name, options));
    curves.push_back(std::move(c));
  }
  if (curves.empty()) return Status::InvalidArgument("--policies names no policy");
  const std::string text = o.output == "json"   ? sim::SaturationToJson(info, curves).dump(2) + "\n"
                           : o.output == "html" ? sim::SaturationHtml(info, curves)
                                                : sim::SaturationTable(info, curves);
  return WriteReport(o, text);
}

Status RunSim(const SimCommandOptions& o) {
  if (o.cluster.empty()) return Status::InvalidArgument("--cluster is required");
  if (o.trace.empty() == (o.synthetic == 0))
    return Status::InvalidArgument("give either --trace FILE or --synthetic N");

  CHAMBER_ASSIGN_OR_RETURN(sim::ClusterSpec cluster, sim::LoadClusterSpec(o.cluster));
  const std::vector<core::Node> nodes = sim::BuildNodes(cluster);

  core::EngineConfig base;
  if (!o.config.empty()) {
    CHAMBER_ASSIGN_OR_RETURN(const ConfigFile file, ConfigFile::Load(o.config));
    CHAMBER_ASSIGN_OR_RETURN(base, core::io::ReadEngineConfig(file));
  }
  sim::SimOptions options;
  options.mig_profiles = cluster.MigProfiles();
  options.mig_gpus = cluster.MigGpus();
  if (!o.queues.empty()) {
    CHAMBER_ASSIGN_OR_RETURN(options.queues, core::io::LoadQueuesFile(o.queues));
  }
  CHAMBER_ASSIGN_OR_RETURN(options.checkpoint_interval,
                           Flag("checkpoint-interval", o.checkpoint_interval));
  CHAMBER_ASSIGN_OR_RETURN(options.restart_overhead, Flag("restart-overhead", o.restart_overhead));
  CHAMBER_ASSIGN_OR_RETURN(options.repair_time, Flag("repair-time", o.repair_time));
  CHAMBER_ASSIGN_OR_RETURN(options.horizon, Flag("horizon", o.horizon));
  if (o.gpu_mtbf_hours < 0) return Status::InvalidArgument("--gpu-mtbf-hours must not be negative");
  options.gpu_mtbf_hours = o.gpu_mtbf_hours;
  options.seed = o.seed;
  options.fresh_cycles = o.fresh_cycles;

  sim::RunInfo info;
  info.cluster = o.cluster;
  sim::Trace trace;
  if (o.synthetic > 0) {
    sim::SyntheticSpec spec;
    if (o.profile != "helios" && o.profile != "philly" && o.profile != "openb")
      return Status::InvalidArgument("--profile must be helios, philly or openb");
    spec.profile = o.profile == "helios"   ? sim::SyntheticSpec::Profile::kHelios
                   : o.profile == "philly" ? sim::SyntheticSpec::Profile::kPhilly
                                           : sim::SyntheticSpec::Profile::kOpenb;
    spec.jobs = o.synthetic;
    spec.teams = o.teams;
    CHAMBER_ASSIGN_OR_RETURN(spec.span, Flag("span", o.span));
    spec.seed = o.seed;
    spec.max_gpus = static_cast<int32_t>(std::min<int64_t>(1024, cluster.TotalGpus()));
    trace = sim::GenerateSyntheticTrace(spec);
    info.trace = "synthetic " + o.profile + " (" + std::to_string(o.synthetic) + " jobs, seed " +
                 std::to_string(o.seed) + ")";
    if (options.queues.empty() && spec.teams > 1) {
      // Without a queue file, each synthetic team gets an equal quota of the cluster.
      const int64_t each = cluster.TotalGpus() / spec.teams;
      for (int32_t t = 0; t < spec.teams; ++t) {
        core::Queue q;
        q.name = "team-" + std::to_string(t);
        q.res(core::Resource::kGpu).quota = core::Gpus(each);
        options.queues.push_back(q);
      }
    }
  } else {
    CHAMBER_ASSIGN_OR_RETURN(sim::TraceFormat format, sim::ParseTraceFormat(o.format, o.trace));
    sim::TraceReadOptions read;
    read.skip_bad_lines = o.skip_bad_lines;
    if (!o.mapping.empty()) {
      CHAMBER_ASSIGN_OR_RETURN(std::string text, ReadFile(o.mapping));
      CHAMBER_ASSIGN_OR_RETURN(read.rules, sim::ParseMappingRules(text, o.mapping));
    }
    CHAMBER_ASSIGN_OR_RETURN(trace, sim::ReadTrace(o.trace, format, read));
    info.trace = o.trace;
    info.skipped_lines = trace.skipped_lines;
  }

  if (o.saturation) return RunSaturation(o, nodes, trace, info);

  std::ofstream events_file;
  if (!o.events.empty()) {
    events_file.open(o.events);
    if (!events_file) return Status::InvalidArgument("--events: cannot write " + o.events);
  }
  const bool show_progress = isatty(STDERR_FILENO) != 0;
  std::vector<sim::SimMetrics> runs;
  for (const std::string& name : SplitCommas(o.policies)) {
    CHAMBER_ASSIGN_OR_RETURN(sim::SimPolicy policy, sim::MakePolicy(name, base));
    sim::EventSink sink;
    if (events_file.is_open())
      sink = [&](const sim::SimEvent& e) {
        events_file << sim::EventJsonLine(e, name, nodes) << '\n';
      };
    auto progress = [&](double f) {
      if (!show_progress) return;
      const int width = 30;
      const int filled = static_cast<int>(f * width);
      std::fprintf(stderr, "\r%-14s [%s%s] %3d%%", name.c_str(), std::string(filled, '#').c_str(),
                   std::string(width - filled, ' ').c_str(), static_cast<int>(f * 100));
      if (f >= 1.0) std::fprintf(stderr, "\n");
    };
    CHAMBER_ASSIGN_OR_RETURN(sim::SimMetrics m,
                             sim::Simulate(nodes, trace, policy, options, sink, progress));
    info.fractional_jobs = m.fractional_jobs;
    runs.push_back(std::move(m));
  }
  if (runs.empty()) return Status::InvalidArgument("--policies names no policy");

  std::string text = o.output == "json"   ? sim::ReportToJson(info, runs).dump(2) + "\n"
                     : o.output == "html" ? sim::ReportHtml(info, runs)
                                          : sim::ReportTable(info, runs);
  return WriteReport(o, text);
}

}  // namespace

void RegisterSimCommand(CommandRegistry& registry) {
  auto o = std::make_shared<SimCommandOptions>();
  CLI::App* cmd = registry.Add("sim", "Replay a workload trace under several policies and compare",
                               [o] { return RunSim(*o); });
  cmd->add_option("--cluster", o->cluster, "Cluster YAML, or an openb node list CSV")->required();
  cmd->add_option("--trace", o->trace, "Trace file");
  cmd->add_option("--format", o->format, "Trace format: chamber, helios, philly, openb")
      ->capture_default_str();
  cmd->add_option("--synthetic", o->synthetic, "Generate N synthetic jobs instead of a trace");
  cmd->add_option("--profile", o->profile,
                  "Synthetic profile: helios, philly, or openb (GPU-sharing pods)")
      ->capture_default_str();
  cmd->add_option("--teams", o->teams, "Synthetic teams (queues team-0...)")->capture_default_str();
  cmd->add_option("--span", o->span, "Synthetic submissions span")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed for synthetic jobs and failures")->capture_default_str();
  cmd->add_option("--queues", o->queues, "Queues YAML (Queue resources or a queues: list)");
  cmd->add_option("--config", o->config, "Engine configuration YAML");
  cmd->add_option("--mapping", o->mapping, "Queue and priority mapping rules YAML");
  cmd->add_flag("--skip-bad-lines", o->skip_bad_lines, "Skip and count malformed trace lines");
  cmd->add_option(
         "--policies", o->policies,
         "Comma-separated: chamber, fifo, kube-default, drf, las, quota; with "
         "--saturation: first-fit, best-fit, fgd, chamber (FGD weighed by demand), default "
         "first-fit,best-fit,chamber")
      ->capture_default_str();
  cmd->add_option("-o,--output", o->output, "Report format")
      ->check(CLI::IsMember({"table", "json", "html"}))
      ->capture_default_str();
  cmd->add_option("--out", o->out, "Write the report here instead of standard output");
  cmd->add_option("--events", o->events, "Write every event as JSON Lines to this file");
  cmd->add_option("--checkpoint-interval", o->checkpoint_interval,
                  "Jobs save a checkpoint this often (0: never)")
      ->capture_default_str();
  cmd->add_option("--restart-overhead", o->restart_overhead, "Added to a job when it resumes")
      ->capture_default_str();
  cmd->add_option("--gpu-mtbf-hours", o->gpu_mtbf_hours,
                  "Mean time between failures per GPU (0: none)")
      ->capture_default_str();
  cmd->add_option("--repair-time", o->repair_time, "Time to repair a failed GPU")
      ->capture_default_str();
  cmd->add_option("--horizon", o->horizon, "Stop at this simulated time (0: when all jobs end)")
      ->capture_default_str();
  cmd->add_flag("--saturation", o->saturation,
                "Saturation mode: pods arrive in order and never finish, placed by GPU-sharing "
                "policies; reports unallocated and stranded GPU capacity against arrived demand");
  cmd->add_option("--saturation-until", o->saturation_until,
                  "Saturation: stop once arrived demand reaches this multiple of capacity")
      ->capture_default_str();
  cmd->add_option("--saturation-step", o->saturation_step,
                  "Saturation: record a point at every step of arrived demand (of capacity)")
      ->capture_default_str();
  cmd->add_option("--saturation-order", o->saturation_order,
                  "Saturation: pods arrive in trace order (then drawn from its pods), or all "
                  "drawn from its pods with --seed")
      ->check(CLI::IsMember({"trace", "sampled"}))
      ->capture_default_str();
  cmd->add_flag("--fresh-cycles", o->fresh_cycles,
                "Load the whole snapshot every cycle instead of keeping state between cycles "
                "(the same decisions, slower; for comparison)");
}

}  // namespace chamber::cli
