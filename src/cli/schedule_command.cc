// `chamber schedule`: one engine cycle over a snapshot file or the built-in example, printed as
// tables or JSON. The same engine the daemon and the simulator run.
#include <bit>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "cli/command.h"
#include "common/config_file.h"
#include "common/time.h"
#include "core/engine.h"
#include "core/io/config_yaml.h"
#include "core/io/example.h"
#include "core/io/result_json.h"
#include "core/io/snapshot_yaml.h"

namespace chamber::cli {
namespace {

using core::CycleResult;
using core::Snapshot;

struct ScheduleOptions {
  std::string snapshot_path;
  std::string config_path;
  bool example = false;
  bool print_example = false;
  std::string output = "table";
};

std::string GpuList(uint64_t mask) {
  std::string out;
  for (; mask != 0; mask &= mask - 1) {
    if (!out.empty()) out += ",";
    out += std::to_string(std::countr_zero(mask));
  }
  return out;
}

// Where each pod goes: node[GPUs], or node[MIG <profile>] for a pod of MIG devices.
std::string Placement(const Snapshot& s, core::WorkloadId w,
                      const std::vector<core::PodAssignment>& pods) {
  std::string out;
  for (const core::PodAssignment& a : pods) {
    if (!out.empty()) out += " ";
    const std::vector<core::PodSet>& sets = s.workloads[w.index()].pod_sets;
    const auto set = static_cast<size_t>(a.pod_set);
    const core::MigAsk mig = set < sets.size() ? sets[set].mig : core::MigAsk{};
    std::string where = GpuList(a.placement.gpu_mask);
    if (mig.any() && static_cast<size_t>(mig.profile) < s.mig_profiles.size())
      where = (mig.devices > 1 ? std::to_string(mig.devices) + " x " : "") + "MIG " +
              s.mig_profiles[static_cast<size_t>(mig.profile)].name;
    out += s.nodes[a.placement.node.index()].name + "[" + where + "]";
  }
  return out;
}

void PrintTables(const Snapshot& s, const CycleResult& r, std::ostream& out) {
  auto name = [&](core::WorkloadId w) { return s.workloads[w.index()].name; };
  int64_t gpus = 0, mig_devices = 0;
  for (const core::Node& n : s.nodes) {
    gpus += static_cast<int64_t>(n.gpus.size());
    for (uint8_t d : n.mig_devices) mig_devices += d;
  }
  const std::string mig =
      mig_devices > 0 ? fmt::format(", {} MIG devices", mig_devices) : std::string();
  out << fmt::format("Cycle at {} over {} nodes ({} GPUs{}), {} queues, {} workloads\n\n",
                     FormatDuration(s.now), s.nodes.size(), gpus, mig, s.queues.size(),
                     s.workloads.size());

  out << fmt::format("{:<9} {:<28} {}\n", "DECISION", "WORKLOAD", "DETAIL");
  for (const core::BindDecision& b : r.binds)
    out << fmt::format("{:<9} {:<28} {}{}\n", "bind", name(b.workload),
                       Placement(s, b.workload, b.pods), b.borrowing ? "  (borrowing)" : "");
  for (const core::ResumeDecision& b : r.resumes)
    out << fmt::format("{:<9} {:<28} {}{}\n", "resume", name(b.workload),
                       Placement(s, b.workload, b.pods), b.borrowing ? "  (borrowing)" : "");
  for (const core::PreemptDecision& p : r.preemptions)
    out << fmt::format("{:<9} {:<28} {}: {}; grace {}s, {:.1f} GPU-hours lost\n", "preempt",
                       name(p.workload), core::PreemptReasonName(p.reason), p.message,
                       p.grace_seconds, p.gpu_hours_lost);
  for (const core::NominationDecision& n : r.nominations)
    out << fmt::format("{:<9} {:<28} {}  (held while its victims leave)\n", "nominate",
                       name(n.workload), Placement(s, n.workload, n.pods));
  for (const core::PendingDecision& p : r.pending) {
    out << fmt::format("{:<9} {:<28} {}: {}", "pending", name(p.workload),
                       core::PendingReasonName(p.reason), p.message());
    if (p.queue_position > 0) out << fmt::format(" (#{} in queue)", p.queue_position);
    out << "\n";
    for (const std::string& d : p.details()) out << fmt::format("{:<39}{}\n", "", d);
  }

  out << fmt::format("\n{:<12} {:>9} {:>10} {:>6} {:>6} {:>8} {:>5} {:>7} {:>7}\n", "QUEUE",
                     "GPU USED", "FAIR SHARE", "QUOTA", "LIMIT", "BORROWED", "LENT", "RUNNING",
                     "PENDING");
  for (size_t i = 0; i < r.queues.size(); ++i) {
    const core::QueueStatus& q = r.queues[i];
    const core::QueueResource& gpu = s.queues[i].res(core::Resource::kGpu);
    const std::string label = s.queues[i].parent.empty() ? q.name : "  " + q.name;
    if (!q.error.empty()) {
      out << fmt::format("{:<12} invalid: {}\n", label, q.error);
      continue;
    }
    out << fmt::format(
        "{:<12} {:>9} {:>10.1f} {:>6} {:>6} {:>8} {:>5} {:>7} {:>7}\n", label,
        core::FormatGpus(q.allocated.gpu_milli()), q.fair_share[0] / core::kMilliPerGpu,
        core::FormatGpus(gpu.quota),
        gpu.limit == core::kUnlimited ? std::string("-") : core::FormatGpus(gpu.limit),
        core::FormatGpus(q.borrowed.gpu_milli()), core::FormatGpus(q.lent.gpu_milli()),
        q.running_workloads, q.pending_workloads);
  }
  if (!r.issues.empty()) {
    out << "\nSnapshot issues:\n";
    for (const core::SnapshotIssue& i : r.issues)
      out << "  " << i.object << ": " << i.message << "\n";
  }
}

Status RunSchedule(const ScheduleOptions& o) {
  if (o.print_example) {
    std::cout << core::io::ExampleSnapshotYaml();
    return Status::Ok();
  }
  if (o.example == !o.snapshot_path.empty())
    return Status::InvalidArgument("give either --example or --snapshot FILE");
  core::EngineConfig config;
  if (!o.config_path.empty()) {
    CHAMBER_ASSIGN_OR_RETURN(const ConfigFile file, ConfigFile::Load(o.config_path));
    CHAMBER_ASSIGN_OR_RETURN(config, core::io::ReadEngineConfig(file));
  }
  Result<Snapshot> snapshot =
      o.example ? core::io::ParseSnapshot(core::io::ExampleSnapshotYaml(), "example")
                : core::io::LoadSnapshotFile(o.snapshot_path);
  if (!snapshot.ok()) return snapshot.status();
  const core::Engine engine(config);
  const CycleResult result = engine.Schedule(*snapshot);
  if (o.output == "json") {
    std::cout << core::io::CycleResultToJson(*snapshot, result).dump(2) << "\n";
  } else {
    PrintTables(*snapshot, result, std::cout);
  }
  return Status::Ok();
}

}  // namespace

void RegisterScheduleCommand(CommandRegistry& registry) {
  auto options = std::make_shared<ScheduleOptions>();
  CLI::App* cmd =
      registry.Add("schedule", "Run one scheduling cycle over a snapshot and print the decisions",
                   [options] { return RunSchedule(*options); });
  cmd->add_option("--snapshot", options->snapshot_path, "Snapshot YAML file (see docs/engine.md)");
  cmd->add_flag("--example", options->example, "Use the built-in example cluster");
  cmd->add_flag("--print-example", options->print_example,
                "Print the built-in example snapshot as YAML and exit");
  cmd->add_option("--config", options->config_path,
                  "Engine configuration YAML (see docs/configuration.md)");
  cmd->add_option("-o,--output", options->output, "Output format")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
}

}  // namespace chamber::cli
