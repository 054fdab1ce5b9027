#include "kube/leader_election.h"

#include <random>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/time.h"
#include "kube/errors.h"

namespace chamber::kube {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::string RecordOf(const Lease& l) {
  return l.holder_identity + "|" + std::to_string(l.lease_duration_seconds.value_or(0)) + "|" +
         l.acquire_time + "|" + l.renew_time + "|" + std::to_string(l.lease_transitions);
}

std::chrono::milliseconds Jittered(std::chrono::milliseconds d) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> f(1.0, 1.2);  // client-go's JitterFactor 1.2
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(d.count()) * f(rng)));
}

}  // namespace

CancellationToken::CancellationToken() : state_(std::make_shared<State>()) {}

void CancellationToken::Cancel() const {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->cancelled = true;
  }
  state_->cv.notify_all();
}

bool CancellationToken::cancelled() const {
  if (state_->cancelled.load()) return true;
  const int64_t d = state_->deadline_ns.load();
  if (d == 0 || SteadyClock::now().time_since_epoch().count() <= d) return false;
  state_->cancelled = true;  // a passed deadline is final: a later set_deadline cannot undo it
  return true;
}

bool CancellationToken::WaitFor(std::chrono::milliseconds d) const {
  auto until = SteadyClock::now() + d;
  const int64_t deadline = state_->deadline_ns.load();
  if (deadline != 0)
    until = std::min(until, SteadyClock::time_point(SteadyClock::duration(deadline)));
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait_until(lock, until, [this] { return state_->cancelled.load(); });
  return cancelled();
}

void CancellationToken::set_deadline(SteadyClock::time_point t) const {
  const int64_t next =
      std::chrono::duration_cast<SteadyClock::duration>(t.time_since_epoch()).count();
  int64_t d = state_->deadline_ns.load();
  do {
    if (cancelled()) return;
  } while (!state_->deadline_ns.compare_exchange_weak(d, next));
}

Result<std::unique_ptr<LeaderElector>> LeaderElector::Create(Client* client,
                                                             LeaderElectionConfig config) {
  if (config.lease_name.empty())
    return Status::InvalidArgument("leader election: lease_name is empty");
  if (config.identity.empty()) return Status::InvalidArgument("leader election: identity is empty");
  if (config.lease_duration <= config.renew_deadline)
    return Status::InvalidArgument(
        "leader election: lease_duration must be greater than renew_deadline");
  if (config.renew_deadline.count() <= config.retry_period.count() * 12 / 10)
    return Status::InvalidArgument(
        "leader election: renew_deadline must be greater than 1.2 x retry_period");
  if (config.lease_duration < std::chrono::seconds(1))
    return Status::InvalidArgument("leader election: lease_duration must be at least 1s");
  return std::unique_ptr<LeaderElector>(new LeaderElector(client, std::move(config)));
}

bool LeaderElector::IsLeader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return is_leader_ && !leading_.cancelled();
}

LeaderElector::Activity LeaderElector::activity() const {
  std::lock_guard<std::mutex> lock(mu_);
  return activity_;
}

std::string LeaderElector::leader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return observed_lease_.holder_identity;
}

std::string LeaderElector::term() const {
  std::lock_guard<std::mutex> lock(mu_);
  return is_leader_ && !leading_.cancelled() ? term_ : "";
}

// Requires mu_.
void LeaderElector::Observe(const Lease& lease, SteadyClock::time_point now) {
  const std::string record = RecordOf(lease);
  if (!have_observed_ || record != observed_record_) {
    observed_record_ = record;
    observed_time_ = now;  // the local time of the last change we saw
  }
  observed_lease_ = lease;
  have_observed_ = true;
}

bool LeaderElector::TryAcquireOrRenew() {
  const auto now = SteadyClock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    activity_.started = now;
  }
  const std::string now_text =
      FormatRfc3339(std::chrono::system_clock::now(), TimeFraction::kMicros);
  const auto duration_s = static_cast<int32_t>(
      std::chrono::duration_cast<std::chrono::seconds>(config_.lease_duration).count());
  std::string new_leader;
  bool acquired = false;
  [&] {
    Result<Json> got =
        client_->Get(resources::kLeases, config_.lease_namespace, config_.lease_name);
    if (!got.ok() && !IsNotFound(got.status())) {
      spdlog::warn("leader election: reading lease {}/{}: {}", config_.lease_namespace,
                   config_.lease_name, got.status().message());
      return;
    }
    Lease desired;
    desired.metadata.name = config_.lease_name;
    desired.metadata.namespace_name = config_.lease_namespace;
    desired.holder_identity = config_.identity;
    desired.lease_duration_seconds = duration_s;
    desired.renew_time = now_text;
    if (!got.ok()) {  // no lease yet: create it
      desired.acquire_time = now_text;
      desired.raw = Json::object();
      Result<Json> created =
          client_->Create(resources::kLeases, config_.lease_namespace, desired.ToJson());
      if (!created.ok()) {
        spdlog::info("leader election: creating lease: {}", created.status().message());
        return;
      }
      Result<Lease> l = Lease::FromJson(std::move(*created));
      if (!l.ok()) return;
      std::lock_guard<std::mutex> lock(mu_);
      Observe(*l, now);
      acquired = true;
      return;
    }
    Result<Lease> current = Lease::FromJson(std::move(*got));
    if (!current.ok()) {
      spdlog::warn("leader election: {}", current.status().message());
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      Observe(*current, now);
      const auto held_for =
          std::chrono::seconds(current->lease_duration_seconds.value_or(duration_s));
      if (!current->holder_identity.empty() && current->holder_identity != config_.identity &&
          now < observed_time_ + held_for) {
        return;  // someone else holds a lease that has not expired
      }
    }
    Lease next = *current;
    next.holder_identity = config_.identity;
    next.lease_duration_seconds = duration_s;
    next.renew_time = now_text;
    if (current->holder_identity != config_.identity) {
      next.acquire_time = now_text;
      next.lease_transitions = current->lease_transitions + 1;
    }
    Result<Json> updated =
        client_->Update(resources::kLeases, config_.lease_namespace, next.ToJson());
    if (!updated.ok()) {
      spdlog::info("leader election: updating lease: {}", updated.status().message());
      return;
    }
    Result<Lease> l = Lease::FromJson(std::move(*updated));
    if (!l.ok()) return;
    std::lock_guard<std::mutex> lock(mu_);
    Observe(*l, now);
    acquired = true;
  }();
  {
    std::lock_guard<std::mutex> lock(mu_);
    activity_.finished = SteadyClock::now();
    if (have_observed_ && observed_lease_.holder_identity != reported_leader_) {
      reported_leader_ = observed_lease_.holder_identity;
      new_leader = reported_leader_;
    }
  }
  if (!new_leader.empty() && config_.on_new_leader) config_.on_new_leader(new_leader);
  return acquired;
}

Status LeaderElector::Release() {
  Lease lease;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!have_observed_ || observed_lease_.holder_identity != config_.identity) return Status::Ok();
    lease = observed_lease_;
  }
  const std::string now_text =
      FormatRfc3339(std::chrono::system_clock::now(), TimeFraction::kMicros);
  lease.holder_identity.clear();
  lease.lease_duration_seconds = 1;
  lease.acquire_time = now_text;
  lease.renew_time = now_text;
  Result<Json> updated =
      client_->Update(resources::kLeases, config_.lease_namespace, lease.ToJson());
  if (!updated.ok()) return updated.status().WithContext("leader election: release");
  Result<Lease> l = Lease::FromJson(std::move(*updated));
  if (l.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    Observe(*l, SteadyClock::now());
  }
  return Status::Ok();
}

void LeaderElector::Run(const CancellationToken& stop) {
  // Campaign.
  while (!stop.cancelled()) {
    if (TryAcquireOrRenew()) break;
    if (stop.WaitFor(Jittered(config_.retry_period))) return;
  }
  if (stop.cancelled()) return;

  CancellationToken leading;
  leading.set_deadline(SteadyClock::now() + config_.renew_deadline);
  {
    std::lock_guard<std::mutex> lock(mu_);
    leading_ = leading;
    is_leader_ = true;
    // The Lease as this candidate acquired it: later observations may show a successor's.
    term_ =
        observed_lease_.holder_identity + "/" + std::to_string(observed_lease_.lease_transitions);
  }
  spdlog::info("leader election: {} leads {}/{}", config_.identity, config_.lease_namespace,
               config_.lease_name);
  std::thread worker;
  if (config_.on_started_leading)
    worker = std::thread([this, leading] { config_.on_started_leading(leading); });

  // Renew until a renewal round fails for the whole renew deadline, or until stopped.
  while (!stop.cancelled()) {
    if (stop.WaitFor(config_.retry_period)) break;
    // A round lasts until the leadership token's deadline, the renew deadline after the last
    // renewal: once that has passed the worker has been told to stop, so a renewal that
    // succeeds later must not keep the Lease for a leader that no longer works.
    bool renewed = false;
    while (!stop.cancelled() && !leading.cancelled()) {
      if (TryAcquireOrRenew()) {
        leading.set_deadline(SteadyClock::now() + config_.renew_deadline);
        renewed = !leading.cancelled();
        break;
      }
      if (stop.WaitFor(config_.retry_period)) break;
    }
    if (!renewed && !stop.cancelled()) {
      spdlog::warn("leader election: {} lost {}/{}: no renewal within the renew deadline",
                   config_.identity, config_.lease_namespace, config_.lease_name);
      break;
    }
  }
  leading.Cancel();
  {
    std::lock_guard<std::mutex> lock(mu_);
    is_leader_ = false;
    term_.clear();
  }
  if (stop.cancelled() && config_.release_on_cancel) {
    Status s = Release();
    if (!s.ok()) spdlog::warn("{}", s.message());
  }
  if (worker.joinable()) worker.join();
  if (config_.on_stopped_leading) config_.on_stopped_leading();
}

}  // namespace chamber::kube
