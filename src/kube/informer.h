// Informers: a cache of one resource kept current by list and watch on a background thread,
// with handlers called on every change, periodic resync, and indexes.
//
// The loop: list (all pages), replace the cache, then watch from the list's resourceVersion
// with bookmarks, reconnecting from the last version seen whenever the server ends the watch.
// When the version has expired (410 Gone, as an HTTP status or an ERROR event) it lists again;
// the re-list is compared with the cache, so objects that vanished meanwhile get a delete, new
// ones an add, changed ones an update, and nothing is added twice. Other errors back off and
// retry; malformed data from the server is logged and the object skipped (after repeated
// stream errors the informer re-lists), so the cache never holds what it could not decode.
//
// Threading: handlers run on the informer's thread (and on the resync thread, never at the same
// time), one at a time, after the cache is updated; keep them short. The read methods (Get,
// List, ByIndex) may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/types.h"

namespace chamber::kube {

struct InformerOptions {
  ResourceType type;
  std::string namespace_name;  // "" for all namespaces
  std::string label_selector;
  std::string field_selector;
  int64_t page_size = 500;
  int watch_timeout_seconds = 300;
  std::chrono::milliseconds resync_period{0};  // 0: no resync
  BackoffPolicy backoff;                       // after a failed list or watch
};

struct InformerStats {
  int64_t lists = 0;    // successful lists, the first one included
  int64_t watches = 0;  // watch requests started
  int64_t gone = 0;     // times a 410 made the informer list again
  int64_t events = 0;   // watch events applied
  int64_t decode_errors = 0;
};

// The untyped core of Informer<T>: objects are held as shared_ptr<const void> made by `decode`.
class InformerCore {
 public:
  using Ptr = std::shared_ptr<const void>;
  struct Decoded {
    Ptr object;
    std::string key;  // "namespace/name"
    std::string resource_version;
  };
  using Decode = std::function<Result<Decoded>(Json)>;
  using IndexFunc = std::function<std::vector<std::string>(const void*)>;
  struct Handlers {
    std::function<void(const void*)> on_add;
    std::function<void(const void*, const void*)> on_update;
    std::function<void(const void*)> on_delete;
  };

  InformerCore(Client* client, InformerOptions options, Decode decode, Handlers handlers);
  ~InformerCore();

  void AddIndex(const std::string& name, IndexFunc func);
  void Start();
  void Stop();
  bool HasSynced() const { return synced_.load(); }
  bool WaitForSync(std::chrono::milliseconds timeout) const;

  Ptr Get(const std::string& key) const;
  std::vector<Ptr> List() const;
  std::vector<Ptr> ByIndex(const std::string& index, const std::string& value) const;
  std::vector<std::string> Keys() const;
  InformerStats stats() const;
  std::string last_resource_version() const;
  // Test seam: ends the current watch and resumes from `rv` (an expired one forces a 410).
  void RestartWatchFrom(const std::string& rv);

 private:
  // The object and its resourceVersion; the rest of its metadata is the object's own.
  struct Entry {
    Ptr object;
    std::string resource_version;
  };
  void Run();
  void ResyncLoop();
  bool Sleep(std::chrono::milliseconds d);  // false when stopped
  Status ListAndReplace(std::string* resource_version);
  void Apply(WatchEvent&& event);
  void Put(const std::string& key, Entry entry, std::vector<std::function<void()>>* calls);
  void Remove(const std::string& key, std::vector<std::function<void()>>* calls);
  void IndexAdd(const std::string& key, const Entry& e);
  void IndexRemove(const std::string& key, const Entry& e);
  void Dispatch(std::vector<std::function<void()>>& calls);

  Client* client_;
  const InformerOptions options_;
  const Decode decode_;
  const Handlers handlers_;

  mutable std::mutex mu_;  // guards the cache, indexes, stats
  std::map<std::string, Entry> items_;
  std::map<std::string, IndexFunc> index_funcs_;
  std::map<std::string, std::map<std::string, std::set<std::string>>> indexes_;
  InformerStats stats_;
  std::string resource_version_;

  std::mutex dispatch_mu_;  // one handler at a time
  std::atomic<bool> stop_{false};
  std::atomic<bool> watch_cancel_{false};  // ends the current watch (Stop, RestartWatchFrom)
  std::string forced_rv_;                  // guarded by mu_
  std::atomic<bool> synced_{false};
  mutable std::mutex sync_mu_;
  mutable std::condition_variable sync_cv_;
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
  std::thread thread_, resync_thread_;
  std::mt19937_64 rng_;
};

// Typed informer over T (Pod, Node, Job, ..., or Object for custom resources).
template <typename T>
class Informer {
 public:
  struct Handlers {
    std::function<void(const T&)> on_add;
    std::function<void(const T& old_obj, const T& new_obj)> on_update;
    std::function<void(const T&)> on_delete;
  };
  using IndexFunc = std::function<std::vector<std::string>(const T&)>;

  // With `trim`, each decoded object is passed through it before it is cached: a cache that
  // keeps only what its reader needs (e.g. TrimPod) holds many more objects in the same memory.
  using Trim = std::function<void(T&)>;

  Informer(Client* client, InformerOptions options, Handlers handlers = {}, Trim trim = {})
      : core_(client, std::move(options), DecodeWith(std::move(trim)), Wrap(std::move(handlers))) {}

  void AddIndex(const std::string& name, IndexFunc func) {
    core_.AddIndex(
        name, [func = std::move(func)](const void* p) { return func(*static_cast<const T*>(p)); });
  }
  void Start() { core_.Start(); }
  void Stop() { core_.Stop(); }
  bool HasSynced() const { return core_.HasSynced(); }
  bool WaitForSync(std::chrono::milliseconds timeout) const { return core_.WaitForSync(timeout); }

  std::shared_ptr<const T> Get(const std::string& key) const {
    return std::static_pointer_cast<const T>(core_.Get(key));
  }
  std::vector<std::shared_ptr<const T>> List() const { return Cast(core_.List()); }
  std::vector<std::shared_ptr<const T>> ByIndex(const std::string& index,
                                                const std::string& value) const {
    return Cast(core_.ByIndex(index, value));
  }
  std::vector<std::string> Keys() const { return core_.Keys(); }
  InformerStats stats() const { return core_.stats(); }
  std::string last_resource_version() const { return core_.last_resource_version(); }
  void RestartWatchFrom(const std::string& rv) { core_.RestartWatchFrom(rv); }

 private:
  static InformerCore::Decode DecodeWith(Trim trim) {
    return [trim = std::move(trim)](Json j) -> Result<InformerCore::Decoded> {
      CHAMBER_ASSIGN_OR_RETURN(T obj, T::FromJson(std::move(j)));
      if (trim) trim(obj);
      std::string key = obj.metadata.Key(), rv = obj.metadata.resource_version;
      return InformerCore::Decoded{std::make_shared<const T>(std::move(obj)), std::move(key),
                                   std::move(rv)};
    };
  }
  static InformerCore::Handlers Wrap(Handlers h) {
    InformerCore::Handlers out;
    if (h.on_add) out.on_add = [f = h.on_add](const void* p) { f(*static_cast<const T*>(p)); };
    if (h.on_update)
      out.on_update = [f = h.on_update](const void* a, const void* b) {
        f(*static_cast<const T*>(a), *static_cast<const T*>(b));
      };
    if (h.on_delete)
      out.on_delete = [f = h.on_delete](const void* p) { f(*static_cast<const T*>(p)); };
    return out;
  }
  // Moves the pointers: a cycle lists 10k+ objects, and copying would touch every object's
  // reference count twice.
  static std::vector<std::shared_ptr<const T>> Cast(std::vector<InformerCore::Ptr> v) {
    std::vector<std::shared_ptr<const T>> out;
    out.reserve(v.size());
    for (auto& p : v) out.push_back(std::static_pointer_cast<const T>(std::move(p)));
    return out;
  }

  InformerCore core_;
};

// Index functions for AddIndex.
namespace index {
constexpr char kNamespace[] = "namespace";
constexpr char kLabel[] = "label";    // values "key=value"
constexpr char kNodeName[] = "node";  // pods by spec.nodeName

template <typename T>
std::vector<std::string> ByNamespace(const T& obj) {
  return {obj.metadata.namespace_name};
}
template <typename T>
std::vector<std::string> ByLabel(const T& obj) {
  std::vector<std::string> out;
  for (const auto& [k, v] : obj.metadata.labels) out.push_back(k + "=" + v);
  return out;
}
inline std::vector<std::string> PodsByNode(const Pod& pod) {
  if (pod.node_name.empty()) return {};
  return {pod.node_name};
}
}  // namespace index

}  // namespace chamber::kube
