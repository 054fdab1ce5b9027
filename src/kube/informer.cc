#include "kube/informer.h"

#include <spdlog/spdlog.h>

#include "kube/errors.h"

namespace chamber::kube {

InformerCore::InformerCore(Client* client, InformerOptions options, Decode decode,
                           Handlers handlers)
    : client_(client),
      options_(std::move(options)),
      decode_(std::move(decode)),
      handlers_(std::move(handlers)),
      rng_(static_cast<uint64_t>(Clock::now().time_since_epoch().count())) {}

InformerCore::~InformerCore() { Stop(); }

void InformerCore::AddIndex(const std::string& name, IndexFunc func) {
  std::lock_guard<std::mutex> lock(mu_);
  index_funcs_[name] = std::move(func);
  auto& idx = indexes_[name];
  idx.clear();
  for (const auto& [key, e] : items_)
    for (const std::string& v : index_funcs_[name](e.object.get())) idx[v].insert(key);
}

void InformerCore::Start() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
  if (options_.resync_period.count() > 0) resync_thread_ = std::thread([this] { ResyncLoop(); });
}

void InformerCore::Stop() {
  {
    std::lock_guard<std::mutex> lock(sleep_mu_);
    stop_ = true;
    watch_cancel_ = true;
  }
  sleep_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (resync_thread_.joinable()) resync_thread_.join();
}

bool InformerCore::WaitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(sync_mu_);
  return sync_cv_.wait_for(lock, timeout, [this] { return synced_.load(); });
}

bool InformerCore::Sleep(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(sleep_mu_);
  return !sleep_cv_.wait_for(lock, d, [this] { return stop_.load(); });
}

InformerCore::Ptr InformerCore::Get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = items_.find(key);
  return it == items_.end() ? nullptr : it->second.object;
}

std::vector<InformerCore::Ptr> InformerCore::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Ptr> out;
  out.reserve(items_.size());
  for (const auto& [key, e] : items_) out.push_back(e.object);
  return out;
}

std::vector<std::string> InformerCore::Keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [key, e] : items_) out.push_back(key);
  return out;
}

std::vector<InformerCore::Ptr> InformerCore::ByIndex(const std::string& index,
                                                     const std::string& value) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Ptr> out;
  auto idx = indexes_.find(index);
  if (idx == indexes_.end()) return out;
  auto keys = idx->second.find(value);
  if (keys == idx->second.end()) return out;
  for (const std::string& k : keys->second) out.push_back(items_.at(k).object);
  return out;
}

InformerStats InformerCore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void InformerCore::RestartWatchFrom(const std::string& rv) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    forced_rv_ = rv;
  }
  watch_cancel_ = true;
}

std::string InformerCore::last_resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resource_version_;
}

void InformerCore::IndexAdd(const std::string& key, const Entry& e) {
  for (const auto& [name, func] : index_funcs_)
    for (const std::string& v : func(e.object.get())) indexes_[name][v].insert(key);
}

void InformerCore::IndexRemove(const std::string& key, const Entry& e) {
  for (const auto& [name, func] : index_funcs_) {
    auto& idx = indexes_[name];
    for (const std::string& v : func(e.object.get())) {
      auto it = idx.find(v);
      if (it == idx.end()) continue;
      it->second.erase(key);
      if (it->second.empty()) idx.erase(it);
    }
  }
}

// Requires mu_. Queues the handler call to run after the lock is released.
void InformerCore::Put(const std::string& key, Entry entry,
                       std::vector<std::function<void()>>* calls) {
  auto it = items_.find(key);
  if (it == items_.end()) {
    IndexAdd(key, entry);
    Ptr obj = entry.object;
    items_.emplace(key, std::move(entry));
    if (handlers_.on_add) calls->push_back([this, obj] { handlers_.on_add(obj.get()); });
    return;
  }
  IndexRemove(key, it->second);
  Ptr old = it->second.object;
  it->second = std::move(entry);
  IndexAdd(key, it->second);
  Ptr obj = it->second.object;
  if (handlers_.on_update)
    calls->push_back([this, old, obj] { handlers_.on_update(old.get(), obj.get()); });
}

void InformerCore::Remove(const std::string& key, std::vector<std::function<void()>>* calls) {
  auto it = items_.find(key);
  if (it == items_.end()) return;
  IndexRemove(key, it->second);
  Ptr old = it->second.object;
  items_.erase(it);
  if (handlers_.on_delete) calls->push_back([this, old] { handlers_.on_delete(old.get()); });
}

void InformerCore::Dispatch(std::vector<std::function<void()>>& calls) {
  if (calls.empty()) return;
  std::lock_guard<std::mutex> lock(dispatch_mu_);
  for (auto& c : calls) c();
}

Status InformerCore::ListAndReplace(std::string* resource_version) {
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  lo.limit = options_.page_size;
  // Decoded page by page: the list's JSON is never held whole.
  std::map<std::string, Entry> fresh;
  int64_t bad = 0;
  CHAMBER_ASSIGN_OR_RETURN(ObjectList list,
                           client_->ListEach(
                               options_.type, options_.namespace_name, lo,
                               [&](Json&& item) {
                                 Result<Decoded> d = decode_(std::move(item));
                                 if (!d.ok()) {
                                   ++bad;
                                   spdlog::warn("kube informer {}: skipping an object: {}",
                                                options_.type.plural, d.status().message());
                                   return;
                                 }
                                 fresh.insert_or_assign(
                                     std::move(d->key),
                                     Entry{std::move(d->object), std::move(d->resource_version)});
                               },
                               [&] {
                                 fresh.clear();
                                 bad = 0;
                               }));
  std::vector<std::function<void()>> calls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> gone;
    for (const auto& [key, e] : items_)
      if (fresh.find(key) == fresh.end()) gone.push_back(key);
    for (const std::string& key : gone) Remove(key, &calls);
    for (auto& [key, e] : fresh) {
      auto it = items_.find(key);
      // Unchanged objects (same resourceVersion) raise no event.
      if (it != items_.end() && it->second.resource_version == e.resource_version &&
          !e.resource_version.empty())
        continue;
      Put(key, std::move(e), &calls);
    }
    ++stats_.lists;
    stats_.decode_errors += bad;
    resource_version_ = list.resource_version;
  }
  *resource_version = list.resource_version;
  Dispatch(calls);
  if (!synced_.exchange(true)) {
    std::lock_guard<std::mutex> lock(sync_mu_);
    sync_cv_.notify_all();
  }
  return Status::Ok();
}

void InformerCore::Apply(WatchEvent&& ev) {
  std::vector<std::function<void()>> calls;
  if (ev.type == WatchEventType::kBookmark) {
    std::lock_guard<std::mutex> lock(mu_);
    auto m = ev.object.find("metadata");
    if (m != ev.object.end() && m->is_object() && m->contains("resourceVersion") &&
        (*m)["resourceVersion"].is_string())
      resource_version_ = (*m)["resourceVersion"].get<std::string>();
    return;
  }
  Result<Decoded> d = decode_(std::move(ev.object));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.events;
    if (!d.ok()) {
      ++stats_.decode_errors;
      spdlog::warn("kube informer {}: skipping a {} event: {}", options_.type.plural,
                   WatchEventTypeName(ev.type), d.status().message());
      return;
    }
    if (!d->resource_version.empty()) resource_version_ = d->resource_version;
    if (ev.type == WatchEventType::kDeleted) {
      Remove(d->key, &calls);
    } else {
      Put(d->key, Entry{std::move(d->object), std::move(d->resource_version)}, &calls);
    }
  }
  Dispatch(calls);
}

void InformerCore::Run() {
  int failures = 0;
  while (!stop_) {
    std::string rv;
    Status listed = ListAndReplace(&rv);
    if (!listed.ok()) {
      const auto delay = options_.backoff.Delay(std::min(failures++, 10), rng_);
      spdlog::warn("kube informer {}: list failed, retrying in {} ms: {}", options_.type.plural,
                   delay.count(), listed.message());
      if (!Sleep(delay)) return;
      continue;
    }
    failures = 0;
    int watch_failures = 0;
    while (!stop_) {
      WatchOptions wo;
      wo.label_selector = options_.label_selector;
      wo.field_selector = options_.field_selector;
      wo.resource_version = rv;
      wo.timeout_seconds = options_.watch_timeout_seconds;
      wo.cancel = &watch_cancel_;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.watches;
        if (!forced_rv_.empty()) wo.resource_version = std::exchange(forced_rv_, "");
      }
      if (stop_) return;
      watch_cancel_ = false;
      Result<std::string> w = client_->Watch(options_.type, options_.namespace_name, wo,
                                             [this](WatchEvent&& ev) { Apply(std::move(ev)); });
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!resource_version_.empty()) rv = resource_version_;
      }
      if (stop_) return;
      if (w.ok()) {
        watch_failures = 0;  // the server ended the watch: resume from the last version
        continue;
      }
      if (stop_) return;
      if (IsGone(w.status())) {
        spdlog::info("kube informer {}: resourceVersion {} expired, listing again",
                     options_.type.plural, rv);
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.gone;
        break;
      }
      const auto delay = options_.backoff.Delay(std::min(watch_failures, 10), rng_);
      spdlog::warn("kube informer {}: watch failed, retrying in {} ms: {}", options_.type.plural,
                   delay.count(), w.status().message());
      if (!Sleep(delay)) return;
      if (++watch_failures >= 3) break;  // list again rather than trust a broken stream
    }
  }
}

void InformerCore::ResyncLoop() {
  while (Sleep(options_.resync_period)) {
    if (!synced_) continue;
    std::vector<std::function<void()>> calls;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (handlers_.on_update)
        for (const auto& [key, e] : items_) {
          Ptr obj = e.object;
          calls.push_back([this, obj] { handlers_.on_update(obj.get(), obj.get()); });
        }
    }
    Dispatch(calls);
  }
}

}  // namespace chamber::kube
