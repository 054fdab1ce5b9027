// The fault-injection harness (docs/reliability.md, "Faults on the real control plane"): two
// chamberd replicas reach the control plane through the fault proxy (tools/faultproxy) while a
// seeded stream of Jobs arrives and a seeded injector kills and stops the leader, slows the API,
// answers it with errors, cuts its watches, answers them 410 Gone and drops every connection.
// A checker reads the real apiserver directly every 200 ms and records every broken promise;
// once the faults stop and the system settles it checks how every Job ended.
//
// CHAMBER_FAULTS sets how many faults are injected (default 50, the CI-sized run; 0 skips it),
// CHAMBER_FAULT_SEED the seed (default: a random one, printed), CHAMBER_FAULT_KINDS the kinds
// (default: all). scripts/fault-run.sh runs the
// long version.
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "agent/report.h"
#include "backend/kube/snapshot_builder.h"
#include "chamberd/test/chamberd_fixture.h"
#include "chamberd/test/e2e_support.h"
#include "chamberd/test/health_e2e_support.h"
#include "kube/client.h"

namespace chamber::chamberd {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using e2e::Eventually;
using kube::Json;

// The replicas' timing, which the bounds below derive from.
constexpr double kCycleSeconds = 0.3;
constexpr double kLeaseSeconds = 3, kRenewSeconds = 2, kRetrySeconds = 0.5;
constexpr int kWriters = 4;
// The longest fault spells the injector sets.
constexpr int kMaxLatencyMs = 800;
constexpr double kMaxSpellSeconds = 3;
// The agents' reports: the round from which the sick node's GPU is faulty, and how old a
// report `report-repeat` may send again (under the health controller's staleAfter, 60 s: an
// older one is taken as a clock stepped back).
constexpr int kSickAfterRounds = 5;
constexpr int kReplayWithinSeconds = 45;
constexpr int kNodes = 16, kGpusPerNode = 8, kLargestGang = 16;

// How long a Job may be partly bound: a leader may stop or die half-way through a gang's binds,
// and the next one binds the rest. That takes the lease running out (kLeaseSeconds), the next
// replica's next try (kRetrySeconds), an outage spell on the way (kMaxSpellSeconds), one cycle
// to see the gang, and the binds themselves: kLargestGang / kWriters rounds, each one request
// slowed by at most kMaxLatencyMs plus a second of the apiserver's own time on 2 busy cores.
constexpr double kPartialGangBoundSeconds =
    kLeaseSeconds + kRetrySeconds + kMaxSpellSeconds + 2 * kCycleSeconds +
    (kLargestGang / kWriters) * (kMaxLatencyMs / 1000.0 + 1.0);

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// The fault proxy, started on the control plane's certificates.
class FaultProxy {
 public:
  ~FaultProxy() { Stop(); }

  bool Start(const std::filesystem::path& dir, const std::string& pki, const std::string& upstream,
             uint64_t seed) {
    kubeconfig_ = (dir / "proxy.kubeconfig").string();
    const std::string addr_file = (dir / "proxy.addr").string();
    pid_ = e2e::SpawnLogged(
        {CHAMBER_FAULTPROXY, "--pki", pki, "--upstream", upstream, "--kubeconfig-out", kubeconfig_,
         "--addr-file", addr_file, "--seed", std::to_string(seed)},
        (dir / "faultproxy.log").string());
    if (pid_ <= 0) return false;
    if (!Eventually([&] { return std::filesystem::exists(addr_file); }, 10s)) return false;
    std::ifstream in(addr_file);
    std::string proxy, control;
    in >> proxy >> control;
    control_port_ = std::stoi(control.substr(control.rfind(':') + 1));
    return control_port_ > 0;
  }

  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  // POST to the control endpoint; true when it answered 200.
  bool Post(const std::string& path) {
    httplib::Client c("127.0.0.1", control_port_);
    c.set_connection_timeout(2);
    auto r = c.Post(path);
    return r && r->status == 200;
  }

  std::string Stats() { return Get("/stats"); }

  // The requests /hold caught, and the answers of those released (JSON).
  Json Held() {
    const std::string body = Get("/held");
    Json held = Json::parse(body, nullptr, false);
    return held.is_array() ? held : Json::array();
  }

  const std::string& kubeconfig() const { return kubeconfig_; }

 private:
  std::string Get(const std::string& path) {
    httplib::Client c("127.0.0.1", control_port_);
    auto r = c.Get(path);
    return r ? r->body : "";
  }

  pid_t pid_ = -1;
  int control_port_ = 0;
  std::string kubeconfig_;
};

// What the checker keeps between samples.
struct JobRecord {
  std::string queue;
  int pods = 0;
  int gpus = 0;
  bool reserved = false;
};

class FaultE2E : public e2e::ChamberdCluster {
 protected:
  void SetUp() override {
    NewNamespace("fault-", "chamberd-");
    if (HasFailure()) return;
    std::ofstream(dir_ / "config.yaml") << "cyclePeriod: 300ms\n"
                                           "preemption:\n"
                                           "  minRuntime: 0s\n"
                                           "  checkpointGraceSeconds: 1\n";
  }

  void TearDown() override {
    for (auto& [name, pid] : chamberd_)
      if (pid > 0) kill(pid, SIGCONT);
    // CHAMBER_FAULT_LOG_DIR (scripts/fault-run.sh --keep): the replicas' logs are kept there,
    // passed or not, named after the test.
    if (const char* keep = std::getenv("CHAMBER_FAULT_LOG_DIR"); keep != nullptr && *keep) {
      const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
      for (const auto& [name, pid] : chamberd_) {
        std::error_code ec;
        std::filesystem::copy_file(
            dir_ / (name + ".log"),
            std::filesystem::path(keep) / (test + "-chamberd-" + name + ".log"),
            std::filesystem::copy_options::overwrite_existing, ec);
        if (ec) std::cerr << "could not keep the log of " << name << ": " << ec.message() << "\n";
      }
    }
    proxy_.Stop();
    if (!fence_.empty()) e2e::DeleteLeaderFence(fence_, dir_);
    ChamberdCluster::TearDown();
  }

  // The chart's leader fence for this test's Lease (e2e::ApplyLeaderFence).
  void InstallLeaderFence() {
    Result<std::string> file = e2e::ApplyLeaderFence(CHAMBER_CHART, ns_, dir_);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    fence_ = *file;
  }

  // Records a broken promise (printed at once, and listed in the summary).
  void Violation(const std::string& what) {
    std::lock_guard lock(mu_);
    const double t = std::chrono::duration<double>(Clock::now() - start_).count();
    std::ostringstream line;
    line << "[" << std::fixed;
    line.precision(1);
    line << t << " s] " << what;
    std::cerr << "VIOLATION " << line.str() << "\n";
    violations_.push_back(line.str());
  }

  std::map<std::string, JobRecord> JobsSoFar() {
    std::lock_guard lock(mu_);
    return jobs_;
  }

  // One sample of the cluster, straight from the apiserver: double booking, rebinding, gangs
  // partly bound too long, reserved work suspended.
  void Sample() {
    auto pods = client_->List(kube::resources::kPods, ns_);
    auto jobs = client_->List(kube::resources::kJobs, ns_);
    if (!pods.ok() || !jobs.ok()) {
      ++failed_samples_;
      return;
    }
    ++samples_;
    const std::map<std::string, JobRecord> known = JobsSoFar();
    std::map<std::string, std::map<int, std::string>> held;  // node -> slot -> pod
    std::map<std::string, std::pair<int, int>> gang;         // job -> (bound, pending)
    for (Json& j : pods->items) {
      kube::Pod p = kube::Pod::FromJson(std::move(j)).value();
      const std::string& name = p.metadata.name;
      ++pods_checked_;
      if (!p.node_name.empty()) {
        auto [it, fresh] = node_of_.emplace(p.metadata.uid, p.node_name);
        if (!fresh && it->second != p.node_name)
          Violation("pod " + name + " moved from " + it->second + " to " + p.node_name);
      }
      const bool finished = p.phase == "Succeeded" || p.phase == "Failed";
      const bool deleting = !p.metadata.deletion_timestamp.empty();
      auto job = p.metadata.labels.find("batch.kubernetes.io/job-name");
      if (job != p.metadata.labels.end() && !deleting && !finished)
        ++(p.node_name.empty() ? gang[job->second].second : gang[job->second].first);
      if (p.node_name.empty() || finished) continue;
      auto slots = p.metadata.annotations.find(backend::keys::kGpuIndices);
      if (slots == p.metadata.annotations.end()) {
        Violation("pod " + name + " is bound to " + p.node_name + " without GPU slots");
        continue;
      }
      Result<std::vector<int>> indices = backend::ParseIndexList(slots->second);
      if (!indices.ok()) {
        Violation("pod " + name + ": " + indices.status().message());
        continue;
      }
      if (static_cast<int64_t>(indices->size()) != p.Request(backend::kGpuResource))
        Violation("pod " + name + " holds " + std::to_string(indices->size()) + " slots for " +
                  std::to_string(p.Request(backend::kGpuResource)) + " GPUs");
      for (int g : *indices) {
        if (g < 0 || g >= kGpusPerNode) {
          Violation("pod " + name + " holds GPU " + std::to_string(g) + " of " + p.node_name +
                    ", which has " + std::to_string(kGpusPerNode));
          continue;
        }
        auto [it, fresh] = held[p.node_name].emplace(g, name);
        const std::string key = p.node_name + "/" + std::to_string(g);
        if (!fresh && !double_booked_.contains(key)) {
          double_booked_.insert(key);
          Violation("GPU " + std::to_string(g) + " of " + p.node_name + " is held by " +
                    it->second + " and " + name);
        }
      }
    }
    const auto now = Clock::now();
    std::set<std::string> partial_now;
    for (const auto& [job, counts] : gang) {
      if (counts.first == 0 || counts.second == 0) continue;
      partial_now.insert(job);
      const int failovers = failovers_;
      auto [it, fresh] = partial_since_.emplace(job, Partial{now, failovers});
      const double held_for = std::chrono::duration<double>(now - it->second.since).count();
      const int covered = 1 + failovers - it->second.failovers;
      if (held_for > covered * kPartialGangBoundSeconds && !partial_reported_.contains(job)) {
        partial_reported_.insert(job);
        Violation("Job " + job + " has been partly bound (" + std::to_string(counts.first) +
                  " bound, " + std::to_string(counts.second) + " pending) for " +
                  std::to_string(held_for) + " s, through " + std::to_string(covered - 1) +
                  " failover(s)");
      }
    }
    for (auto it = partial_since_.begin(); it != partial_since_.end();)
      if (partial_now.contains(it->first)) {
        ++it;
      } else {
        partial_reported_.erase(it->first);
        it = partial_since_.erase(it);
      }
    for (Json& j : jobs->items) {
      kube::Job job = kube::Job::FromJson(std::move(j)).value();
      auto rec = known.find(job.metadata.name);
      if (rec == known.end() || !rec->second.reserved) continue;
      // Preempted, that is. A Job suspended to roll back a failed gang bind (its rolled-back-at
      // record) lost nothing it had run.
      const bool rolled_back = job.metadata.annotations.contains(backend::keys::kRolledBackAt);
      if (((job.suspend && !rolled_back) ||
           job.metadata.annotations.contains(backend::keys::kPreemptedAt)) &&
          !reserved_suspended_.contains(job.metadata.name)) {
        reserved_suspended_.insert(job.metadata.name);
        Violation("reserved Job " + job.metadata.name + " was suspended");
      }
    }
  }

  // What is left to tell why the Job controller counted pods of Job `name` as failed: its pods
  // that ended Failed (the kubelet's reason and exit codes; the simulated kubelet deletes
  // finished pods, so most are gone by the end), and the Events of the Job and its pods, the
  // Job controller's among them. Into pod_failure_traces_, a line each.
  void TracePodFailures(const std::string& name) {
    for (const kube::Pod& p : JobPods(name)) {
      if (p.phase != "Failed") continue;
      std::string line = name + ": pod " + p.metadata.name + " Failed on " + p.node_name;
      const kube::Json& status = p.raw.contains("status") ? p.raw["status"] : kube::Json();
      if (status.is_object() && status.contains("reason"))
        line += " (" + status.value("reason", "") + ": " + status.value("message", "") + ")";
      if (status.is_object() && status.contains("containerStatuses"))
        for (const kube::Json& c : status["containerStatuses"])
          if (c.contains("state") && c["state"].contains("terminated"))
            line += "; " + c.value("name", "") + " exit " +
                    std::to_string(c["state"]["terminated"].value("exitCode", -1));
      pod_failure_traces_.push_back(line);
    }
    auto events = client_->List(kube::resources::kEvents, ns_);
    if (!events.ok()) return;
    for (const kube::Json& e : events->items) {
      const std::string about = e.contains("involvedObject")
                                    ? e["involvedObject"].value("name", std::string())
                                    : std::string();
      if (about != name && !about.starts_with(name + "-")) continue;
      const std::string source =
          e.contains("source") ? e["source"].value("component", std::string()) : std::string();
      pod_failure_traces_.push_back(name + ": event on " + about + " from " +
                                    (source.empty() ? "?" : source) + ": " + e.value("reason", "") +
                                    ": " + e.value("message", "") + " (x" +
                                    std::to_string(e.value("count", 1)) + ")");
    }
  }

  // How every Job stands once the faults have stopped: each finished, fully running, suspended
  // by Chamber (its preempted-at annotation) or pending with Chamber's reason on every pod; and
  // no queue over its limit. Returns what is wrong (nothing: settled).
  std::vector<std::string> FinalState(std::map<std::string, int>* outcome) {
    std::vector<std::string> wrong;
    outcome->clear();
    jobs_with_pod_failures_.clear();
    pod_failure_traces_.clear();
    const std::map<std::string, JobRecord> known = JobsSoFar();
    std::map<std::string, int> queue_gpus;
    // Pending with a reason: the Job, the reason and message on its first pod, and how many of
    // its pods exist.
    std::vector<std::tuple<std::string, JobRecord, std::string, int>> waiting;
    for (const auto& [name, rec] : known) {
      auto got = client_->Get(kube::resources::kJobs, ns_, name);
      if (!got.ok()) {
        wrong.push_back("Job " + name + " is gone: " + got.status().ToString());
        continue;
      }
      kube::Job job = kube::Job::FromJson(std::move(*got)).value();
      bool complete = false, failed = false;
      for (const kube::Condition& c : job.conditions) {
        complete |= c.type == "Complete" && c.status == "True";
        failed |= c.type == "Failed" && c.status == "True";
      }
      if (job.failed > 0) {
        (*outcome)["pod failures counted by the Job controller"] += job.failed;
        jobs_with_pod_failures_.push_back(name + " (" + std::to_string(job.failed) + ")");
        TracePodFailures(name);
      }
      if (complete) {
        ++(*outcome)["finished"];
        continue;
      }
      if (failed) {
        wrong.push_back("Job " + name + " failed");
        continue;
      }
      if (job.suspend) {
        if (job.metadata.annotations.contains(backend::keys::kPreemptedAt)) {
          ++(*outcome)["suspended"];
        } else if (job.metadata.annotations.contains(backend::keys::kRolledBackAt)) {
          // Resumed as soon as it fits: once settled, only while the room is not there.
          ++(*outcome)["suspended by a rollback"];
        } else {
          wrong.push_back("Job " + name + " is suspended without Chamber's record of it");
        }
        continue;
      }
      int bound = 0, done = 0, live = 0;
      std::string reason;
      std::vector<std::string> unexplained;
      for (const kube::Pod& p : JobPods(name)) {
        if (!p.metadata.deletion_timestamp.empty()) continue;
        live += p.phase != "Failed";
        if (p.phase == "Succeeded") {
          ++done;
        } else if (!p.node_name.empty() && p.phase != "Failed") {
          ++bound;
          queue_gpus[rec.queue] += static_cast<int>(p.Request(backend::kGpuResource));
        } else if (p.node_name.empty()) {
          bool explained = false;
          for (const kube::Condition& c : p.conditions)
            if (c.type == "PodScheduled" && c.status == "False" && !c.reason.empty() &&
                !c.message.empty()) {
              explained = true;
              if (reason.empty()) reason = c.reason + ": " + c.message;
            }
          if (!explained) {
            std::string about = p.metadata.name + " (phase " + p.phase;
            for (const kube::Condition& c : p.conditions)
              about += ", " + c.type + "=" + c.status + " " + c.reason + ": " + c.message;
            unexplained.push_back(about + ")");
          }
        }
      }
      if (bound + done == rec.pods) {
        ++(*outcome)[bound > 0 ? "running" : "finishing"];
      } else if (bound == 0 && live == done) {
        // No pod waits (some may have finished): the Job controller has not created the rest,
        // or waits out its failure backoff; there is no pod to carry a reason.
        ++(*outcome)["no pods yet (the Job controller)"];
      } else if (bound == 0 && unexplained.empty() && done == 0) {
        // A gang short of pods (the Job controller creating them, or waiting out its failure
        // backoff of 10 s doubling up to 6 min) waits with WaitingForPods.
        ++(*outcome)[reason.starts_with("WaitingForPods") ? "waiting for its pods, with the reason"
                                                          : "pending with a reason"];
        waiting.emplace_back(name, rec, reason, live);
      } else {
        wrong.push_back(
            "Job " + name + " (active " + std::to_string(job.active) + ", failed " +
            std::to_string(job.failed) + "): " + std::to_string(bound) + " of " +
            std::to_string(rec.pods) + " pods bound, " + std::to_string(done) +
            " done, pending without a reason: " + ::testing::PrintToString(unexplained));
      }
    }
    // A reason must be true: a gang of 1-GPU pods that fits in the free GPUs and in its
    // queue's quota (guaranteed work, nothing to wait for) does not wait.
    int used = 0;
    for (const auto& [queue, gpus] : queue_gpus) used += gpus;
    for (const auto& [name, rec, why, live] : waiting)
      if (why.starts_with("BindBackoff")) {
        continue;  // its bind failed a moment ago (an injected fault): it waits a backoff out
      } else if (why.starts_with("WaitingForPods")) {
        if (live >= rec.pods)
          wrong.push_back("Job " + name + " has all its " + std::to_string(rec.pods) +
                          " pods and waits for pods (" + why + ")");
      } else if (rec.gpus == 1 && rec.pods <= kNodes * kGpusPerNode - used &&
                 queue_gpus[rec.queue] + rec.pods <= quotas_[rec.queue])
        wrong.push_back("Job " + name + " (" + std::to_string(rec.pods) +
                        " GPUs) is pending while " + std::to_string(kNodes * kGpusPerNode - used) +
                        " GPUs are free and its " + "queue holds " +
                        std::to_string(queue_gpus[rec.queue]) + " of its quota (" + why + ")");
    for (const auto& [queue, limit] : limits_)
      if (queue_gpus[queue] > limit)
        wrong.push_back("queue " + queue + " holds " + std::to_string(queue_gpus[queue]) +
                        " GPUs, over its limit of " + std::to_string(limit));
    return wrong;
  }

  std::string Leader() { return LeaseHolder(); }

  // `nodes` fake nodes of 8 GPUs, queue `queue` with all their GPUs as quota and limit, and
  // one replica, r1 with `writers` bind writers, leading through the fault proxy (with
  // `leader_elect` false, r1 runs with --no-leader-elect and takes no Lease).
  void OneReplicaThroughTheProxy(int nodes, const std::string& queue, const std::string& writers,
                                 bool leader_elect = true) {
    const char* cp_dir = std::getenv("CHAMBER_TEST_CONTROLPLANE_DIR");
    ASSERT_NE(cp_dir, nullptr) << "CHAMBER_TEST_CONTROLPLANE_DIR is not set: run through ctest";
    Nodes(nodes, kGpusPerNode);
    StartSim();
    Queue(queue, nodes * kGpusPerNode, nodes * kGpusPerNode);
    ASSERT_FALSE(HasFailure());
    auto rc = kube::LoadKubeconfig(std::getenv("CHAMBER_TEST_KUBECONFIG"));
    ASSERT_TRUE(rc.ok()) << rc.status().ToString();
    ASSERT_TRUE(proxy_.Start(dir_, std::string(cp_dir) + "/pki", rc->server, 1));
    chamberd_kubeconfig_ = proxy_.kubeconfig();
    if (!leader_elect) {
      StartChamberd("r1", {"--writers", writers, "--no-leader-elect"});
      return;
    }
    StartChamberd("r1", {"--writers", writers});
    ASSERT_TRUE(Eventually([&] { return Leader() == "r1"; }, 30s));
  }

  // Restarts a component of a control plane this run has to itself (scripts/fault-run.sh's), as
  // its pids file names it: TERM (KILL after 5 s), then the same command line and log again,
  // the pids file updated for `scripts/controlplane.sh stop`; waits until the API answers.
  bool RestartComponent(const std::string& cp_dir, const std::string& component) {
    struct Row {
      std::string name;
      pid_t pid;
      std::string binary;
    };
    std::vector<Row> rows;
    {
      std::ifstream in(cp_dir + "/pids");
      Row r;
      while (in >> r.name >> r.pid >> r.binary) rows.push_back(r);
    }
    for (Row& r : rows) {
      if (r.name != component) continue;
      std::ifstream cmdline("/proc/" + std::to_string(r.pid) + "/cmdline");
      std::vector<std::string> args;
      for (std::string a; std::getline(cmdline, a, '\0');) args.push_back(a);
      if (args.empty()) return false;
      kill(r.pid, SIGTERM);
      const auto kill_at = Clock::now() + 5s;
      for (int status = 0;;) {
        if (waitpid(r.pid, &status, WNOHANG) == r.pid || kill(r.pid, 0) != 0) break;
        if (Clock::now() > kill_at) kill(r.pid, SIGKILL);
        std::this_thread::sleep_for(50ms);
      }
      r.pid = e2e::SpawnLogged(args, cp_dir + "/logs/" + component + ".log");
      if (r.pid <= 0) return false;
      std::ofstream out(cp_dir + "/pids");
      for (const Row& w : rows) out << w.name << " " << w.pid << " " << w.binary << "\n";
      out.close();
      const bool up = Eventually(
          [&] { return client_->Get(kube::resources::kNamespaces, "", ns_).ok(); }, 90s, 200ms);
      SuperviseControllerManager(cp_dir);
      return up;
    }
    return false;
  }

  // The control plane's kube-controller-manager (its Job controller makes the Jobs' pods): on a
  // control plane of the run's own, started again when it exits, as the kubelet restarts a
  // control plane's static pods. It exits when the API server goes away while it starts (an
  // apiserver-restart in its first seconds): a run without it would create Jobs that never get
  // pods, and check nothing. Read from the control plane's pids file at the start.
  struct Component {
    pid_t pid = -1;
    std::string binary;
    std::vector<std::string> args;
  };
  std::optional<Component> controller_manager_;
  int controller_manager_restarts_ = 0;

  void WatchControllerManager(const std::string& cp_dir) {
    std::ifstream in(cp_dir + "/pids");
    std::string name, binary;
    pid_t pid = -1;
    while (in >> name >> pid >> binary) {
      if (name != "kube-controller-manager") continue;
      std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
      Component c{pid, binary, {}};
      for (std::string a; std::getline(cmdline, a, '\0');) c.args.push_back(a);
      if (!c.args.empty()) controller_manager_ = std::move(c);
    }
  }

  void SuperviseControllerManager(const std::string& cp_dir) {
    if (!controller_manager_) return;
    Component& c = *controller_manager_;
    int status = 0;
    char exe[4096];
    const ssize_t n =
        readlink(("/proc/" + std::to_string(c.pid) + "/exe").c_str(), exe, sizeof exe - 1);
    const std::string running = n > 0 ? std::string(exe, static_cast<size_t>(n)) : "";
    const bool alive = waitpid(c.pid, &status, WNOHANG) != c.pid &&
                       (running == c.binary || running == c.binary + " (deleted)");
    if (alive) return;
    c.pid = e2e::SpawnLogged(c.args, cp_dir + "/logs/kube-controller-manager.log");
    ++controller_manager_restarts_;
    std::cout << "[" << std::chrono::duration<double>(Clock::now() - start_).count()
              << " s] kube-controller-manager had exited: started again" << std::endl;
    // controlplane.sh stop reads the pids file: it must stop the new one.
    std::vector<std::string> lines;
    {
      std::ifstream in(cp_dir + "/pids");
      for (std::string line; std::getline(in, line);) {
        if (line.starts_with("kube-controller-manager "))
          line = "kube-controller-manager " + std::to_string(c.pid) + " " + c.binary;
        lines.push_back(line);
      }
    }
    std::ofstream out(cp_dir + "/pids");
    for (const std::string& line : lines) out << line << "\n";
  }

  // Lines of the replicas' logs that contain `text`.
  int LoggedLines(const std::string& text) {
    int n = 0;
    for (const auto& [name, pid] : chamberd_) {
      std::ifstream log(dir_ / (name + ".log"));
      for (std::string line; std::getline(log, line);) n += line.find(text) != std::string::npos;
    }
    return n;
  }

  // The largest number logged just before `suffix` ("... (3 rollback(s) in a row)": 3), 0 if
  // none.
  int MostLogged(const std::string& suffix) {
    int most = 0;
    for (const auto& [name, pid] : chamberd_) {
      std::ifstream log(dir_ / (name + ".log"));
      for (std::string line; std::getline(log, line);) {
        size_t end = line.find(suffix);
        if (end == std::string::npos) continue;
        size_t begin = end;
        while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1]))) --begin;
        if (begin < end) most = std::max(most, std::stoi(line.substr(begin, end - begin)));
      }
    }
    return most;
  }

  // Stands in for the kubelet: a replica that exited (a leader that lost its Lease exits) is
  // started again.
  void Supervise(const std::vector<std::string>& flags) {
    if (const char* cp = std::getenv("CHAMBER_TEST_CONTROLPLANE_DIR"); cp != nullptr)
      SuperviseControllerManager(cp);
    for (auto& [name, pid] : chamberd_) {
      int status = 0;
      if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        ++restarts_;
        StartChamberd(name, flags);
      }
    }
  }

  // Sleeps `seconds`, supervising the replicas meanwhile.
  void Sleep(double seconds, const std::vector<std::string>& flags) {
    const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(seconds));
    while (Clock::now() < end) {
      Supervise(flags);
      std::this_thread::sleep_for(std::min<Clock::duration>(100ms, end - Clock::now()));
    }
  }

  // The agents' reports (docs/health.md, "Reports and authentication"): each node's whole state,
  // pushed every second to the leader's API, as the chart's agents push to the Service that
  // selects the leader. Every node is healthy but `sick_node_`, whose GPU 0 has an open
  // `unhealthy` incident from the run's kSickAfterRounds-th round on. Fault `report-loss` stops
  // the pushes for a spell; `report-repeat` pushes again reports already sent: the newest of
  // some nodes twice, and older ones, younger than the staleness limit, out of order.
  Json AgentReport(const std::string& node, bool faulty) const {
    agent::AgentSnapshot snap;  // what an agent holds; agent::ReportJson writes it as agents do
    snap.node = node;
    snap.time = e2e::UnixNow();
    snap.inventory.nvml_loaded = true;
    for (int g = 0; g < kGpusPerNode; ++g) {
      agent::GpuInfo gpu;
      gpu.index = g;
      gpu.uuid = "GPU-" + node + "-" + std::to_string(g);
      agent::GpuSample sample;
      sample.index = g;
      sample.uuid = gpu.uuid;
      sample.time = snap.time;
      snap.gpu_severity[gpu.uuid] =
          faulty && g == 0 ? GpuSeverity::kUnhealthy : GpuSeverity::kHealthy;
      snap.inventory.gpus.push_back(std::move(gpu));
      snap.samples.push_back(std::move(sample));
    }
    if (faulty) {
      GpuIncident incident;
      incident.id = 1;
      incident.gpu_index = 0;
      incident.gpu_uuid = "GPU-" + node + "-0";
      incident.pci_bus_id = "00000000:18:00.0";
      incident.cause = "ecc-uncorrectable";
      incident.severity = GpuSeverity::kUnhealthy;
      incident.message = "injected by the fault harness";
      incident.opened_at = sick_since_.load();
      incident.last_seen = snap.time;
      snap.open_incidents.push_back(std::move(incident));
    }
    return agent::ReportJson(snap);
  }

  // Posts a report to the API of `leader` (the replica the Lease names); false when it did not
  // get there (no leader, a replica stopped or gone: the report is lost, as an agent's push
  // would be).
  bool PostReport(const std::string& body, const std::string& leader) {
    if (leader.empty()) return false;
    int port = 0;
    {
      std::lock_guard lock(reports_mu_);
      port = report_ports_[leader];
    }
    if (port == 0) port = LoggedApiPort(leader);
    if (port == 0) return false;
    httplib::Client api("127.0.0.1", port);
    api.set_connection_timeout(1);
    api.set_read_timeout(2);
    api.set_write_timeout(2);
    auto r = api.Post("/api/v1/agent/reports", body, "application/json");
    {
      // Without an answer the leader may have moved, or restarted on another port.
      std::lock_guard lock(reports_mu_);
      report_ports_[leader] = r ? port : 0;
    }
    // A report the leader refuses as bad is the harness's error, not a fault's; 5xx (a replica
    // leaving its leadership) is a lost report.
    if (r && r->status >= 400 && r->status < 500)
      Violation("an agent report was refused, " + std::to_string(r->status) + ": " + r->body);
    return r && r->status == 202;
  }

  // One round: every node's report, unless a `report-loss` spell holds them back.
  void ReportRound(int round) {
    if (round == kSickAfterRounds) sick_since_ = e2e::UnixNow();
    if (reports_held_) return;
    const std::string leader = Leader();
    bool reached = true;  // after a push that got nowhere, the round's others are lost too
    for (const std::string& node : report_nodes_) {
      const std::string body =
          AgentReport(node, node == sick_node_ && round >= kSickAfterRounds).dump();
      reached = reached && PostReport(body, leader);
      (reached ? reports_sent_ : reports_lost_)++;
      std::lock_guard lock(reports_mu_);
      sent_reports_.push_back({Clock::now(), body});
    }
    std::lock_guard lock(reports_mu_);
    while (!sent_reports_.empty() &&
           Clock::now() - sent_reports_.front().first > std::chrono::seconds(kReplayWithinSeconds))
      sent_reports_.pop_front();
  }

  // `report-repeat`: `count` reports already sent, drawn with `rng`, and the newest of each
  // node again.
  void RepeatReports(std::mt19937_64& rng, int count) {
    std::vector<std::string> again;
    {
      std::lock_guard lock(reports_mu_);
      if (sent_reports_.empty()) return;
      std::uniform_int_distribution<size_t> pick(0, sent_reports_.size() - 1);
      for (int i = 0; i < count; ++i) again.push_back(sent_reports_[pick(rng)].second);
      const size_t nodes = std::min(sent_reports_.size(), report_nodes_.size());
      for (size_t i = sent_reports_.size() - nodes; i < sent_reports_.size(); ++i)
        again.push_back(sent_reports_[i].second);
    }
    const std::string leader = Leader();
    bool reached = true;
    for (const std::string& body : again) {
      reached = reached && PostReport(body, leader);
      (reached ? reports_repeated_ : reports_lost_)++;
    }
  }

  // The health controller's fences, as the Nodes carry them: no healthy node is ever fenced,
  // tainted or marked unhealthy, and the sick node's GPU 0, once fenced, stays fenced (its
  // incident never closes; neither a lost report nor an older one may lift it).
  void CheckFences() {
    auto nodes = client_->List(kube::resources::kNodes, "");
    if (!nodes.ok()) return;
    for (const Json& n : nodes->items) {
      const std::string name = n["metadata"].value("name", "");
      if (std::find(report_nodes_.begin(), report_nodes_.end(), name) == report_nodes_.end())
        continue;
      const std::string fenced = e2e::UnhealthyGpus(n);
      const Json condition = e2e::Condition(n);
      const bool unhealthy = !condition.is_null() && condition.value("status", "") == "False";
      if (name == sick_node_) {
        if (fenced == "0") {
          sick_fenced_ = true;
        } else if (sick_fenced_ && !sick_unfenced_reported_) {
          sick_unfenced_reported_ = true;
          Violation("the faulty GPU 0 of " + name + " was fenced, then not (unhealthy-gpus \"" +
                    fenced + "\"): its incident is still open");
        }
      } else if ((!fenced.empty() || e2e::Tainted(n) || unhealthy) &&
                 !wrongly_fenced_.contains(name)) {
        wrongly_fenced_.insert(name);
        Violation("healthy node " + name + " is fenced (unhealthy-gpus \"" + fenced +
                  "\", tainted " + (e2e::Tainted(n) ? "yes" : "no") + ", condition " +
                  condition.dump() + ")");
      }
    }
  }

  std::vector<std::string> report_nodes_;
  std::string sick_node_;
  std::atomic<double> sick_since_{0};
  std::atomic<bool> reports_held_{false};
  std::atomic<int64_t> reports_sent_{0}, reports_lost_{0}, reports_repeated_{0};
  std::mutex reports_mu_;                    // guards the two below
  std::map<std::string, int> report_ports_;  // each replica's API port, as last logged
  std::deque<std::pair<Clock::time_point, std::string>> sent_reports_;
  bool sick_fenced_ = false, sick_unfenced_reported_ = false;  // the checker's thread only
  std::set<std::string> wrongly_fenced_;                       // the checker's thread only

  FaultProxy proxy_;
  std::mutex mu_;
  std::vector<std::string> violations_;
  std::map<std::string, JobRecord> jobs_;
  std::map<std::string, int> limits_, quotas_;
  Clock::time_point start_ = Clock::now();
  // The checker's own state (its thread only).
  std::map<std::string, std::string> node_of_;
  // Partly bound Jobs: since when, and how many failovers had begun then (failovers_).
  struct Partial {
    Clock::time_point since;
    int failovers = 0;
  };
  std::map<std::string, Partial> partial_since_;
  std::set<std::string> partial_reported_, reserved_suspended_, double_booked_;
  std::atomic<int64_t> samples_{0}, failed_samples_{0}, pods_checked_{0};
  int restarts_ = 0;  // replicas that exited on their own and were started again
  std::vector<std::string> jobs_with_pod_failures_;  // "<job> (<failed>)", by FinalState
  std::vector<std::string> pod_failure_traces_;      // by TracePodFailures
  std::string fence_;  // the applied leader fence's file, deleted in TearDown
  // While the control plane restarts: the stream waits, the checker pauses (and a gang's time
  // partly bound starts again after it).
  std::atomic<bool> restarting_{false};
  // Faults each of which the bound on a partly bound gang covers once: a leader killed or
  // stopped, the API server or etcd restarted. A gang partly bound through several of them may
  // take that bound for each: every new leader starts its own wait for the lease.
  std::atomic<int> failovers_{0};
};

TEST_F(FaultE2E, FaultsOnTheControlPlaneBreakNoPromise) {
  const char* cp_dir = std::getenv("CHAMBER_TEST_CONTROLPLANE_DIR");
  if (std::string(CHAMBER_FAULTPROXY).empty()) GTEST_SKIP() << "the fault proxy is not built";
  ASSERT_NE(cp_dir, nullptr) << "CHAMBER_TEST_CONTROLPLANE_DIR is not set: run through ctest";
  const int faults = EnvInt("CHAMBER_FAULTS", 50);
  if (faults <= 0) GTEST_SKIP() << "CHAMBER_FAULTS=" << faults << ": no faults to inject";
  // The harness's Jobs allow many pod failures, so that a failure is counted in the summary
  // rather than failing the run (docs/reliability.md, "Faults on the real control plane",
  // finding 1); CHAMBER_FAULT_BACKOFF_LIMIT=0 fails the run at the first.
  const int backoff = EnvInt("CHAMBER_FAULT_BACKOFF_LIMIT", 1000);
  const uint64_t seed = std::getenv("CHAMBER_FAULT_SEED") != nullptr
                            ? std::strtoull(std::getenv("CHAMBER_FAULT_SEED"), nullptr, 10)
                            : std::random_device{}();
  std::cout << "fault harness: " << faults << " faults, seed " << seed
            << " (rerun: CHAMBER_FAULT_SEED=" << seed << "); a Job may be partly bound for "
            << kPartialGangBoundSeconds << " s per failover" << std::endl;

  // Every failover goes through the chart's fence, as in a cluster.
  ASSERT_NO_FATAL_FAILURE(InstallLeaderFence());
  Nodes(kNodes, kGpusPerNode);
  // The node whose GPU 0 the agent reports faulty: no Job goes there (a taint none tolerates),
  // so its fence takes nothing from the 128 GPUs the checks count.
  Nodes(1, kGpusPerNode, "sick", {{"chamber.io/fault-harness", "sick", "NoSchedule"}});
  for (int i = 0; i < kNodes; ++i) report_nodes_.push_back(ns_ + "-gpu-" + std::to_string(i));
  sick_node_ = ns_ + "-sick-0";
  report_nodes_.push_back(sick_node_);
  StartSim();
  // Team a's quota is 64 of 128 GPUs and it may borrow up to 96; team b has 48, up to 64.
  const std::string qa = ns_ + "-a", qb = ns_ + "-b";
  Queue(qa, 64, 96);
  Queue(qb, 48, 64);
  limits_ = {{qa, 96}, {qb, 64}};
  quotas_ = {{qa, 64}, {qb, 48}};
  const std::string low = ns_ + "-low", mid = ns_ + "-mid", reserved = ns_ + "-reserved";
  PriorityClass(low, 10);
  PriorityClass(mid, 50);
  PriorityClass(reserved, 1000);
  ASSERT_FALSE(HasFailure());

  auto rc = kube::LoadKubeconfig(std::getenv("CHAMBER_TEST_KUBECONFIG"));
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  ASSERT_TRUE(proxy_.Start(dir_, std::string(cp_dir) + "/pki", rc->server, seed))
      << "the fault proxy did not start; see " << (dir_ / "faultproxy.log");
  chamberd_kubeconfig_ = proxy_.kubeconfig();
  const std::vector<std::string> flags = {
      "--lease-duration", std::to_string(static_cast<int>(kLeaseSeconds)),
      "--renew-deadline", std::to_string(static_cast<int>(kRenewSeconds)),
      "--retry-period",   "0.5",
      "--writers",        std::to_string(kWriters)};
  StartChamberd("r1", flags);
  ASSERT_TRUE(Eventually([&] { return Leader() == "r1"; }, 30s));
  StartChamberd("r2", flags);
  start_ = Clock::now();

  std::atomic<bool> stop_checker{false}, stop_stream{false};
  std::vector<std::string> kinds = {"kill-leader", "stop-leader", "latency",
                                    "errors",      "watch-cut",   "410-gone",
                                    "outage",      "report-loss", "report-repeat"};
  // Only on a control plane of the run's own: the ctest fixture's is shared with other tests.
  const char* own = std::getenv("CHAMBER_FAULT_OWN_CONTROLPLANE");
  if (own != nullptr && std::string(own) == "1") {
    kinds.push_back("apiserver-restart");
    kinds.push_back("etcd-restart");
    WatchControllerManager(cp_dir);
    ASSERT_TRUE(controller_manager_.has_value())
        << "no running kube-controller-manager in " << cp_dir
        << "/pids: the Jobs would get no pods (scripts/controlplane.sh start --controller-manager)";
  }
  // CHAMBER_FAULT_KINDS: only these (comma-separated), e.g. the restarts alone in CI's short run
  // on a control plane of its own (scripts/fault-run.sh --kinds).
  if (const char* only = std::getenv("CHAMBER_FAULT_KINDS"); only != nullptr && *only != '\0') {
    std::vector<std::string> chosen;
    std::stringstream list(only);
    for (std::string k; std::getline(list, k, ',');) {
      ASSERT_NE(std::find(kinds.begin(), kinds.end(), k), kinds.end())
          << "CHAMBER_FAULT_KINDS: " << k << " is not a fault this run can inject (restarts need "
          << "CHAMBER_FAULT_OWN_CONTROLPLANE=1)";
      chosen.push_back(k);
    }
    kinds = chosen;
  }
  std::thread checker([&] {
    for (int round = 0; !stop_checker; ++round) {
      if (restarting_) {
        partial_since_.clear();
        std::this_thread::sleep_for(100ms);
        continue;
      }
      Sample();
      if (round % 5 == 0) CheckFences();
      std::this_thread::sleep_for(200ms);
    }
  });
  // The agents: a round of reports every second until the checks end.
  std::thread reporter([&] {
    for (int round = 0; !stop_checker; ++round) {
      const auto next = Clock::now() + 1s;
      ReportRound(round);
      std::this_thread::sleep_until(next);
    }
  });

  // The stream: a Job every 0.5 to 1.5 s, running 4 to 16 s; gangs of 1 to 16 pods of 1 GPU, or 1
  // to 2 pods of 8. Reserved Jobs go to team a, inside its quota; elastic ones to either team.
  std::mt19937_64 stream_rng(seed ^ 0x5eed);
  std::thread stream([&] {
    int n = 0;
    while (!stop_stream) {
      if (restarting_) {
        std::this_thread::sleep_for(100ms);
        continue;
      }
      std::uniform_real_distribution<double> pause(0.5, 1.5), secs(4, 16);
      std::uniform_int_distribution<int> kind(0, 99), sizes(0, 5);
      const int sizes_of[] = {1, 2, 4, 4, 8, 16};
      JobRecord rec;
      const int k = kind(stream_rng);
      rec.reserved = k < 12;
      std::string pc = rec.reserved ? reserved : k < 40 ? mid : low;
      rec.queue = rec.reserved || kind(stream_rng) < 55 ? qa : qb;
      if (kind(stream_rng) < 15) {
        rec.pods = 1 + kind(stream_rng) % 2;
        rec.gpus = 8;
      } else {
        rec.pods = sizes_of[sizes(stream_rng)];
        rec.gpus = 1;
      }
      if (rec.reserved) rec.pods = std::min(rec.pods, 4);
      const std::string name = "job-" + std::to_string(n++);
      JobSpec s(rec.queue, rec.pods);
      s.Gpus(rec.gpus).Seconds(secs(stream_rng)).Priority(pc).Grace("1").BackoffLimit(backoff);
      Job(name, s);
      {
        std::lock_guard lock(mu_);
        jobs_[name] = rec;
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(pause(stream_rng)));
    }
  });

  // The injector.
  std::mt19937_64 rng(seed);
  std::map<std::string, int> injected;
  auto uniform = [&](double a, double b) {
    return std::uniform_real_distribution<double>(a, b)(rng);
  };
  auto sleep_s = [&](double s) { Sleep(s, flags); };
  for (int i = 0; i < faults; ++i) {
    sleep_s(uniform(0.3, 1.5));
    const std::string kind = kinds[std::uniform_int_distribution<size_t>(0, kinds.size() - 1)(rng)];
    const std::string leader = Leader();
    const bool have_leader = chamberd_.contains(leader) && chamberd_[leader] > 0;
    if (((kind == "kill-leader" || kind == "stop-leader") && have_leader) ||
        kind == "apiserver-restart" || kind == "etcd-restart")
      ++failovers_;
    if (kind == "kill-leader" && have_leader) {
      Stop(chamberd_[leader], SIGKILL);
      sleep_s(uniform(0, 1));
      StartChamberd(leader, flags);
    } else if (kind == "stop-leader" && have_leader) {
      kill(chamberd_[leader], SIGSTOP);
      sleep_s(kLeaseSeconds + uniform(0.5, 2));
      kill(chamberd_[leader], SIGCONT);
    } else if (kind == "latency") {
      proxy_.Post("/latency?ms=" + std::to_string(static_cast<int>(uniform(100, kMaxLatencyMs))));
      sleep_s(uniform(1, kMaxSpellSeconds));
      proxy_.Post("/latency?ms=0");
    } else if (kind == "errors") {
      proxy_.Post("/errors?share=" + std::to_string(uniform(0.1, 0.5)) + "&codes=500,503,429");
      sleep_s(uniform(1, kMaxSpellSeconds));
      proxy_.Post("/errors?share=0");
    } else if (kind == "watch-cut") {
      proxy_.Post("/cut");
    } else if (kind == "410-gone") {
      proxy_.Post("/gone?seconds=" + std::to_string(uniform(0.5, kMaxSpellSeconds)));
    } else if (kind == "apiserver-restart" || kind == "etcd-restart") {
      restarting_ = true;
      const bool up = RestartComponent(cp_dir, kind == "etcd-restart" ? "etcd" : "kube-apiserver");
      restarting_ = false;
      if (!up) Violation(kind + " did not come back; see " + cp_dir + "/logs");
    } else if (kind == "report-loss") {
      reports_held_ = true;
      sleep_s(uniform(1, 8));
      reports_held_ = false;
    } else if (kind == "report-repeat") {
      RepeatReports(rng, 1 + static_cast<int>(uniform(0, 20)));
    } else if (kind == "outage") {
      const double d = uniform(0.5, kMaxSpellSeconds);
      proxy_.Post("/outage?seconds=" + std::to_string(d));
      sleep_s(d);
    } else {
      --i;  // no leader to kill or stop just now: choose again
      continue;
    }
    ++injected[kind];
    std::cout << "[" << std::chrono::duration<double>(Clock::now() - start_).count() << " s] fault "
              << i + 1 << ": " << kind << (kind.ends_with("leader") ? " " + leader : "")
              << std::endl;
  }
  proxy_.Post("/reset");
  stop_stream = true;
  stream.join();
  const double faulting = std::chrono::duration<double>(Clock::now() - start_).count();

  // Settling: first a quiet spell as long as a failover and a few cycles, so that no Job is
  // judged by what a fault just left it; then every Job must reach a state it may stay in
  // (finished, running, suspended or pending with a reason) within 90 s.
  Sleep(kLeaseSeconds + kRetrySeconds + 10 * kCycleSeconds + 2, flags);
  std::map<std::string, int> outcome;
  std::vector<std::string> unsettled;
  Eventually(
      [&] {
        Supervise(flags);
        return (unsettled = FinalState(&outcome)).empty();
      },
      90s, 1s);
  stop_checker = true;
  checker.join();
  reporter.join();
  for (const std::string& w : unsettled) Violation("after settling: " + w);
  if (!sick_fenced_)
    Violation(
        "the sick node's faulty GPU was never seen fenced: the fence checks held vacuously (" +
        std::to_string(reports_sent_.load()) + " reports taken)");
  // A run whose Jobs got no pods checked nothing: the Job controller makes them (a few may end
  // the run in its failure backoff, pod-less).
  const int jobs_created = static_cast<int>(JobsSoFar().size());
  const int podless = outcome["no pods yet (the Job controller)"];
  if (pods_checked_ == 0 || podless * 10 > jobs_created)
    Violation(std::to_string(podless) + " of " + std::to_string(jobs_created) +
              " Jobs have no pods at the end and " + std::to_string(pods_checked_.load()) +
              " pod checks were made: the run exercised too little (is the control plane's "
              "kube-controller-manager running? see its log)");

  const double total = std::chrono::duration<double>(Clock::now() - start_).count();
  std::cout << "---- fault harness summary (seed " << seed << ") ----\n";
  int total_faults = 0;
  for (const auto& [kind, n] : injected) {
    std::cout << "  injected " << kind << ": " << n << "\n";
    total_faults += n;
  }
  std::cout << "  faults injected: " << total_faults << " in " << faulting << " s\n"
            << "  Jobs created: " << JobsSoFar().size() << "; at the end:";
  for (const auto& [what, n] : outcome) std::cout << " " << what << " " << n << ";";
  std::cout << "\n  samples: " << samples_ << " (" << failed_samples_ << " failed to list), "
            << pods_checked_ << " pod checks\n"
            << "  replicas that exited on their own and were restarted: " << restarts_
            << " (leadership lost: " << LoggedLines("leadership lost") << ")\n"
            << "  agent reports taken: " << reports_sent_ << ", lost: " << reports_lost_
            << ", sent again: " << reports_repeated_ << "\n"
            << "  kube-controller-manager started again after it exited: "
            << controller_manager_restarts_ << "\n"
            << "  gang binds rolled back, each starting or doubling its gang's bind backoff: "
            << LoggedLines("rolling back")
            << " (most in a row: " << MostLogged(" rollback(s) in a row") << ")\n"
            << "  Jobs with pod failures (look them up in the kept logs, --keep): "
            << (jobs_with_pod_failures_.empty() ? std::string("none")
                                                : ::testing::PrintToString(jobs_with_pod_failures_))
            << "\n";
  for (const std::string& t : pod_failure_traces_) std::cout << "    " << t << "\n";
  std::cout << "  cycles whose binds the leader fence refused while leading (tried again): "
            << LoggedLines("refused by the leader fence") << "\n"
            << "  proxy: " << proxy_.Stats() << "  violations: " << violations_.size() << "\n"
            << "  run time (from the first replica leading): " << total << " s" << std::endl;
  for (const std::string& v : violations_) ADD_FAILURE() << v;
}

// A gang member's bind that fails for a moment (a 503, whether or not the API server acted on
// it) is tried again, not rolled back: the Job loses no pod, so even `backoffLimit: 0` holds.
// When every try of a bind is carried out by the API server and only its answer is lost, the
// tries after the first fail too (the pod has moved on): chamberd reads the pod back, finds it
// bound, and the gang goes on whole; taken for failed, it would be rolled back.
TEST_F(FaultE2E, ATransientBindFailureIsTriedAgainNotRolledBack) {
  if (std::string(CHAMBER_FAULTPROXY).empty()) GTEST_SKIP() << "the fault proxy is not built";
  const std::string q = ns_ + "-q";
  // One bind at a time, so that a rule's failures fall on the tries of one pod.
  ASSERT_NO_FATAL_FAILURE(OneReplicaThroughTheProxy(2, q, "1"));
  // The first bind refused before the API server sees it; one whose answer is lost; one whose
  // three tries all lose their answers.
  const std::vector<std::pair<std::string, std::string>> rules = {
      {"refused", "count=1&after=0"}, {"lost", "count=1&after=1"}, {"all-lost", "count=3&after=1"}};
  for (const auto& [name, rule] : rules) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(proxy_.Post("/fail?suffix=/binding&code=503&" + rule));
    const std::string job = "gang-" + name;
    Job(job, JobSpec(q, 4));  // backoffLimit 0: one pod lost fails the Job
    ASSERT_TRUE(Eventually([&] { return Bound(job) == 4; }, 30s)) << Bound(job) << " of 4 bound";
    const kube::Job j = GetJob(job);
    EXPECT_EQ(j.failed, 0) << "the gang was rolled back and the Job counted its pods as failed";
    EXPECT_EQ(LoggedLines("rolling back"), 0);
  }
  EXPECT_NE(proxy_.Stats().find("\"errors\":5"), std::string::npos) << proxy_.Stats();
  ExpectNoDoubleBooking(kGpusPerNode);
}

// A bind whose answers are all lost, and the API server cannot be asked since: the pod may be
// bound, so chamberd holds its GPUs as if it were (an assumed bind) and rolls it back with its
// gang like a bound member. A gang of bare pods `a` and `b`: every try of `a`'s bind is bound
// by the API server and answered 503, and so are chamberd's reads of `a` after them. `a` is
// deleted and created again, pending, with `b`; then the whole gang starts. Taken for failed,
// `a` would be left bound, alone, under its first uid, its GPU free in chamberd's books until
// the informer showed it.
TEST_F(FaultE2E, APodThatMayBeBoundIsRolledBackWithItsGang) {
  if (std::string(CHAMBER_FAULTPROXY).empty()) GTEST_SKIP() << "the fault proxy is not built";
  const std::string q = ns_ + "-q";
  ASSERT_NO_FATAL_FAILURE(OneReplicaThroughTheProxy(1, q, "1"));
  // a's three bind tries, and the read of a after them with the client's five retries.
  ASSERT_TRUE(proxy_.Post("/fail?suffix=/pods/a/binding,/pods/a&code=503&count=9&after=1"));
  std::map<std::string, std::string> first_uid;
  for (const std::string name : {"a", "b"}) {
    const Json pod = {{"metadata",
                       {{"name", name},
                        // min-member 2: a cycle between the two creates must not place `a` alone.
                        {"labels",
                         {{"chamber.io/pod-group", "g"},
                          {"chamber.io/min-member", "2"},
                          {"chamber.io/queue", q}}}}},
                      {"spec",
                       {{"schedulerName", "chamber"},
                        {"containers", Json::array({{{"name", "main"},
                                                     {"image", "trainer:latest"},
                                                     {"resources",
                                                      {{"requests", {{"nvidia.com/gpu", 1}}},
                                                       {"limits", {{"nvidia.com/gpu", 1}}}}}}})}}}};
    auto made = client_->Create(kube::resources::kPods, ns_, pod);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    first_uid[name] = (*made)["metadata"].value("uid", "");
  }
  ASSERT_TRUE(Eventually([&] { return LoggedLines("perhaps bound") >= 1; }, 60s))
      << "chamberd did not take a's bind for perhaps done";
  auto bound_anew = [&](const std::string& name) {
    Result<Json> p = client_->Get(kube::resources::kPods, ns_, name);
    return p.ok() && !p->value("/spec/nodeName"_json_pointer, std::string()).empty() &&
           p->value("/metadata/uid"_json_pointer, std::string()) != first_uid[name];
  };
  EXPECT_TRUE(Eventually([&] { return bound_anew("a") && bound_anew("b"); }, 30s))
      << "a was not rolled back with its gang, or the gang did not start again";
  EXPECT_EQ(LoggedLines("rolling back"), 1);
  EXPECT_NE(proxy_.Stats().find("\"errors\":9"), std::string::npos) << proxy_.Stats();
  ExpectNoDoubleBooking(kGpusPerNode);
}

// A gang bind that fails for good after a member was bound is rolled back by suspending the
// Job (so the Job controller counts no failure) and resuming it: with `backoffLimit: 0` the Job
// still runs whole, and its record of the rollback is gone once it is resumed.
TEST_F(FaultE2E, ARolledBackJobIsSuspendedAndResumedNotFailed) {
  if (std::string(CHAMBER_FAULTPROXY).empty()) GTEST_SKIP() << "the fault proxy is not built";
  const std::string q = ns_ + "-q";
  // One bind at a time: the first goes through.
  ASSERT_NO_FATAL_FAILURE(OneReplicaThroughTheProxy(1, q, "1"));
  // The first bind passes; the second member's three tries are all refused.
  ASSERT_TRUE(proxy_.Post("/fail?suffix=/binding&code=500&count=3&skip=1"));
  Job("gang", JobSpec(q, 2));  // backoffLimit 0: one pod counted as failed fails the Job
  ASSERT_TRUE(Eventually([&] { return LoggedLines("rolling back") >= 1; }, 30s));
  ASSERT_TRUE(Eventually(
      [&] {
        const kube::Job j = GetJob("gang");
        return Bound("gang") == 2 && !j.suspend &&
               !j.metadata.annotations.contains(backend::keys::kRolledBackAt);
      },
      60s))
      << Bound("gang") << " of 2 bound";
  const kube::Job j = GetJob("gang");
  EXPECT_EQ(j.failed, 0) << "the rollback's deletes were counted as failures";
  EXPECT_FALSE(j.metadata.annotations.contains(backend::keys::kPreemptedAt))
      << "a rollback is not a preemption";
  EXPECT_EQ(LoggedLines("rolling back"), 1);
  EXPECT_EQ(LoggedLines("; placed again in 5 s at the earliest (1 rollback(s) in a row)"), 1)
      << "the first rollback's bind backoff: 5 s";
  EXPECT_EQ(MostLogged(" rollback(s) in a row"), 1);
  EXPECT_NE(proxy_.Stats().find("\"errors\":3"), std::string::npos) << proxy_.Stats();
  const std::vector<std::string> reasons = EventReasons("gang");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "Resumed"), reasons.end())
      << ::testing::PrintToString(reasons);
  ExpectNoDoubleBooking(kGpusPerNode);
}

// A single replica (--no-leader-elect) stopped half-way through a gang's binds finishes them
// before it exits: no other replica would bind the rest, so the gang would stay half bound,
// holding its GPUs, until chamberd ran again. The proxy holds the first of a 3-pod gang's binds
// (one writer: binds go one at a time); chamberd gets SIGTERM while it waits; once the bind is
// let through, it binds the other two, then exits.
TEST_F(FaultE2E, ASingleReplicaStoppedHalfWayThroughAGangBindsTheRestBeforeItExits) {
  if (std::string(CHAMBER_FAULTPROXY).empty()) GTEST_SKIP() << "the fault proxy is not built";
  const std::string q = ns_ + "-q";
  ASSERT_NO_FATAL_FAILURE(OneReplicaThroughTheProxy(1, q, "1", /*leader_elect=*/false));
  ASSERT_TRUE(proxy_.Post("/hold?suffix=/binding&count=1"));
  Job("gang", JobSpec(q, 3));
  ASSERT_TRUE(Eventually([&] { return proxy_.Held().size() == 1; }, 30s))
      << "no bind of the gang reached the proxy";
  pid_t pid = chamberd_.at("r1");
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  ASSERT_TRUE(Eventually([&] { return LoggedLines("stopping") >= 1; }, 10s))
      << "chamberd did not take the signal";
  ASSERT_TRUE(proxy_.Post("/release"));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  chamberd_.at("r1") = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  // Nothing runs chamberd now: what is bound was bound before it exited.
  EXPECT_EQ(Bound("gang"), 3) << "the gang was left half bound";
  EXPECT_EQ(LoggedLines("half-way"), 0);
  ExpectNoDoubleBooking(kGpusPerNode);
}

// Fencing a deposed leader (docs/reliability.md#fencing-a-deposed-leader). r1 decides to bind a
// Job's pod to the node's 8 GPUs; its bind is on its way (held by the proxy) when r1 stops past
// its Lease. r2 takes over and binds a Job of higher priority to the same 8 GPUs. Then r1's bind
// arrives: the chart's policy refuses it (its term is r1's, the Lease's is r2's), so no GPU is
// held twice; without the fence it binds and all 8 GPUs are double-booked. r1, continued,
// finds itself deposed and exits. Both replicas go through the proxy.
TEST_F(FaultE2E, ADeposedLeadersLateBindIsRefusedByTheFence) {
  if (std::string(CHAMBER_FAULTPROXY).empty()) GTEST_SKIP() << "the fault proxy is not built";
  const char* cp_dir = std::getenv("CHAMBER_TEST_CONTROLPLANE_DIR");
  ASSERT_NE(cp_dir, nullptr) << "CHAMBER_TEST_CONTROLPLANE_DIR is not set: run through ctest";
  ASSERT_NO_FATAL_FAILURE(InstallLeaderFence());
  Nodes(1, kGpusPerNode);
  const std::string node = ns_ + "-gpu-0";
  StartSim();
  const std::string q = ns_ + "-q", low = ns_ + "-low", high = ns_ + "-high";
  Queue(q, kGpusPerNode, kGpusPerNode);
  PriorityClass(low, 10);
  PriorityClass(high, 50);
  ASSERT_FALSE(HasFailure());
  auto rc = kube::LoadKubeconfig(std::getenv("CHAMBER_TEST_KUBECONFIG"));
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  ASSERT_TRUE(proxy_.Start(dir_, std::string(cp_dir) + "/pki", rc->server, 1));
  const std::vector<std::string> flags = {
      "--lease-duration", std::to_string(static_cast<int>(kLeaseSeconds)),
      "--renew-deadline", std::to_string(static_cast<int>(kRenewSeconds)),
      "--retry-period",   "0.5",
      "--writers",        "1"};
  chamberd_kubeconfig_ = proxy_.kubeconfig();
  StartChamberd("r1", flags);
  ASSERT_TRUE(Eventually([&] { return Leader() == "r1"; }, 30s));
  ASSERT_TRUE(e2e::WaitForLeaderFence(*client_, ns_, ns_ + "/chamber-scheduler", node))
      << "the API server never refused a stale term";

  ASSERT_TRUE(proxy_.Post("/hold?suffix=/binding&count=1"));
  Job("first", JobSpec(q, 1).Gpus(kGpusPerNode).Priority(low));
  ASSERT_TRUE(Eventually([&] { return proxy_.Held().size() == 1; }, 30s))
      << "r1 never bound first's pod";
  kill(chamberd_["r1"], SIGSTOP);  // its bind on the way
  // The bind names first's pod as r1 read it (its resourceVersion a precondition): a write to
  // the pod in between, as r2's PodScheduled condition on it, would refuse it too. Those writes
  // fail here (r2 also goes through the proxy), as they may in a cluster, or come after the
  // late bind: the fence alone stands between r1's bind and r2's GPUs.
  const std::string held_path = proxy_.Held()[0].value("path", "");
  const std::string first_pod = held_path.substr(0, held_path.rfind("/binding"));
  ASSERT_TRUE(proxy_.Post("/fail?suffix=" + first_pod + "/status&code=503&count=100000"));
  Job("second", JobSpec(q, 1).Gpus(kGpusPerNode).Priority(high));
  StartChamberd("r2", flags);
  ASSERT_TRUE(Eventually([&] { return Bound("second") == 1; }, 60s))
      << "r2 did not take over and bind second";
  const std::vector<kube::Pod> second = JobPods("second");
  ASSERT_EQ(second.size(), 1u);
  const auto& annotations = second[0].metadata.annotations;
  EXPECT_EQ(annotations.at(backend::keys::kLeaderLease), ns_ + "/chamber-scheduler");
  EXPECT_EQ(annotations.at(backend::keys::kLeaderTerm), "r2/1");

  ASSERT_TRUE(proxy_.Post("/release"));
  Json held;
  ASSERT_TRUE(Eventually(
      [&] {
        held = proxy_.Held();
        return held.size() == 1 && !held[0].value("held", true);
      },
      30s));
  EXPECT_EQ(held[0].value("code", 0), 403) << held.dump();
  EXPECT_NE(held[0]
                .value("body", "")
                .find("chamber.io/leader-term r1/0 is not the term of lease " + ns_ +
                      "/chamber-scheduler now (r2/1)"),
            std::string::npos)
      << held.dump();
  EXPECT_EQ(Bound("first"), 0);
  ExpectNoDoubleBooking(kGpusPerNode);

  // r1, continued, finds its leadership gone: it writes nothing more and exits.
  kill(chamberd_["r1"], SIGCONT);
  int status = 0;
  EXPECT_TRUE(Eventually([&] { return waitpid(chamberd_["r1"], &status, WNOHANG) > 0; }, 20s))
      << "r1 did not exit after losing its Lease";
  chamberd_["r1"] = -1;
  EXPECT_EQ(Bound("first"), 0);
  EXPECT_EQ(Bound("second"), 1);
  ExpectNoDoubleBooking(kGpusPerNode);
}

// The checker itself: a double booking and a gang left partly bound, made by hand without
// chamberd, are each reported.
TEST_F(FaultE2E, TheCheckerSeesADoubleBookingAndAPartlyBoundGang) {
  Nodes(1, kGpusPerNode);
  const std::string node = ns_ + "-gpu-0";
  auto pod = [&](const std::string& name, const std::string& job) {
    Json container = {
        {"name", "main"},
        {"image", "trainer:latest"},
        {"resources",
         {{"requests", {{"nvidia.com/gpu", 1}}}, {"limits", {{"nvidia.com/gpu", 1}}}}}};
    Json p = {{"metadata", {{"name", name}, {"labels", {{"batch.kubernetes.io/job-name", job}}}}},
              {"spec", {{"schedulerName", "nobody"}, {"containers", Json::array({container})}}}};
    auto made = client_->Create(kube::resources::kPods, ns_, p);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    return made.ok() ? (*made)["metadata"].value("uid", "") : "";
  };
  const std::string a = pod("a", "gang"), b = pod("b", "other");
  pod("c", "gang");  // left pending: gang is partly bound
  ASSERT_TRUE(client_->Bind(ns_, "a", a, node, {{backend::keys::kGpuIndices, "3"}}).ok());
  ASSERT_TRUE(client_->Bind(ns_, "b", b, node, {{backend::keys::kGpuIndices, "3"}}).ok());
  Sample();
  ASSERT_EQ(violations_.size(), 1u) << ::testing::PrintToString(violations_);
  EXPECT_NE(violations_[0].find("GPU 3 of " + node + " is held by a and b"), std::string::npos)
      << violations_[0];
  std::this_thread::sleep_for(std::chrono::duration<double>(kPartialGangBoundSeconds + 0.5));
  Sample();
  ASSERT_EQ(violations_.size(), 2u) << ::testing::PrintToString(violations_);
  EXPECT_NE(violations_[1].find("Job gang has been partly bound (1 bound, 1 pending)"),
            std::string::npos)
      << violations_[1];
  violations_.clear();
}

// The fence checks of the agents' reports, without chamberd: a healthy node fenced by hand, and
// the sick node's GPU fenced, then not.
TEST_F(FaultE2E, TheCheckerSeesAHealthyNodeFencedAndAFaultyGpuUnfenced) {
  Nodes(1, kGpusPerNode);
  Nodes(1, kGpusPerNode, "sick");
  report_nodes_ = {ns_ + "-gpu-0", ns_ + "-sick-0"};
  sick_node_ = ns_ + "-sick-0";
  auto fence = [&](const std::string& node, const Json& gpus) {
    ASSERT_TRUE(
        client_
            ->MergePatch(kube::resources::kNodes, "", node,
                         {{"metadata", {{"annotations", {{backend::keys::kUnhealthyGpus, gpus}}}}}})
            .ok());
  };
  CheckFences();
  ASSERT_TRUE(violations_.empty()) << ::testing::PrintToString(violations_);
  EXPECT_FALSE(sick_fenced_);
  fence(sick_node_, "0");
  CheckFences();
  EXPECT_TRUE(sick_fenced_);
  ASSERT_TRUE(violations_.empty()) << ::testing::PrintToString(violations_);
  fence(ns_ + "-gpu-0", "3");
  fence(sick_node_, nullptr);
  CheckFences();
  ASSERT_EQ(violations_.size(), 2u) << ::testing::PrintToString(violations_);
  EXPECT_NE(violations_[0].find("healthy node " + ns_ + "-gpu-0 is fenced (unhealthy-gpus \"3\""),
            std::string::npos)
      << violations_[0];
  EXPECT_NE(violations_[1].find("the faulty GPU 0 of " + sick_node_ + " was fenced, then not"),
            std::string::npos)
      << violations_[1];
  violations_.clear();
}

}  // namespace
}  // namespace chamber::chamberd
