// The Kubernetes API client: reads, watches and writes on any resource, objects as JSON (typed
// views are in types.h). One Client serves many threads (see transport.h for the connection
// pool and retry policy). Every error is a Status naming the request; API errors keep their HTTP
// code and reason (errors.h: IsNotFound, IsConflict, IsGone, ...).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "kube/config.h"
#include "kube/transport.h"

namespace chamber::kube {

using Json = nlohmann::json;

// Where a resource lives in the API: group "" is the core group (/api/v1).
struct ResourceType {
  std::string group;
  std::string version;
  std::string plural;
  std::string kind;
  bool namespaced = true;

  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
};

namespace resources {
extern const ResourceType kPods;
extern const ResourceType kNodes;
extern const ResourceType kNamespaces;
extern const ResourceType kConfigMaps;
extern const ResourceType kEvents;
extern const ResourceType kServiceAccounts;
extern const ResourceType kJobs;
extern const ResourceType kLeases;
extern const ResourceType kPriorityClasses;
extern const ResourceType kPodDisruptionBudgets;
extern const ResourceType kClusterRoleBindings;
}  // namespace resources

// "/api/v1/namespaces/ns/pods/name/status"; empty `ns` means cluster scope (or all namespaces
// for a list), empty `name` the collection.
std::string ResourcePath(const ResourceType& type, const std::string& ns,
                         const std::string& name = "", const std::string& subresource = "");
std::string UrlEncode(std::string_view text);

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 500;  // page size; 0: one unpaginated request
  std::string resource_version;
};

struct ObjectList {
  std::vector<Json> items;
  std::string resource_version;  // of the list: where a watch continues from
  int restarts = 0;              // times the list started over after its continue token expired
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark };
std::string_view WatchEventTypeName(WatchEventType type);

struct WatchEvent {
  WatchEventType type;
  Json object;
};

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // resume after this version
  int timeout_seconds = 300;     // the server ends the watch after this long
  bool allow_bookmarks = true;
  const std::atomic<bool>* cancel = nullptr;  // set it to end the watch
};

struct DeleteOptions {
  std::optional<int64_t> grace_period_seconds;
  std::string uid;                 // precondition: the object still has this UID
  std::string resource_version;    // precondition: and this version
  std::string propagation_policy;  // "Background", "Foreground", "Orphan" or ""
};

struct ApplyOptions {
  std::string field_manager = "chamber";
  bool force = false;
};

// A core/v1 Event about `involved` (any object's JSON).
struct EventSpec {
  Json involved;
  std::string reason;
  std::string message;
  std::string type = "Normal";  // or "Warning"
  std::string component = "chamber";
  int32_t count = 1;
};

class Client {
 public:
  static Result<std::unique_ptr<Client>> Create(const RestConfig& config,
                                                TransportOptions options = {});

  Result<Json> Get(const ResourceType& type, const std::string& ns, const std::string& name);
  // Lists every page (limit + continue). When a continue token expires (410) the list starts
  // over, so the result is always one consistent snapshot.
  Result<ObjectList> List(const ResourceType& type, const std::string& ns,
                          const ListOptions& options = {});
  // The same list, handing each object to `on_item` as its page arrives, so that no more than
  // one page is held as JSON at a time; `on_restart` is called when the list starts over and
  // the objects handed so far are to be forgotten. The result's `items` is empty.
  Result<ObjectList> ListEach(const ResourceType& type, const std::string& ns,
                              const ListOptions& options,
                              const std::function<void(Json&&)>& on_item,
                              const std::function<void()>& on_restart);
  // Streams events as they arrive until the server ends the watch (timeoutSeconds) or
  // `options.cancel` is set; returns the last resourceVersion seen (bookmarks included) so the
  // caller can resume. An expired version fails with IsGone (whether the server says so with
  // HTTP 410 or with an ERROR event in the stream); malformed or truncated JSON fails with a
  // kUnavailable error naming the problem.
  Result<std::string> Watch(const ResourceType& type, const std::string& ns,
                            const WatchOptions& options,
                            const std::function<void(WatchEvent&&)>& on_event);

  Result<Json> Create(const ResourceType& type, const std::string& ns, const Json& object);
  // PUT with the object's metadata.resourceVersion: fails with IsConflict when it is stale.
  Result<Json> Update(const ResourceType& type, const std::string& ns, const Json& object);
  Result<Json> UpdateStatus(const ResourceType& type, const std::string& ns, const Json& object);
  // Get, mutate, Update; on 409 Conflict gets the object again and re-applies `mutate`, up to
  // `attempts` times. `mutate` may fail to abort.
  Result<Json> UpdateWithRetry(const ResourceType& type, const std::string& ns,
                               const std::string& name, const std::function<Status(Json&)>& mutate,
                               int attempts = 5);
  // RFC 7386 JSON merge patch.
  Result<Json> MergePatch(const ResourceType& type, const std::string& ns, const std::string& name,
                          const Json& patch, const std::string& subresource = "");
  // RFC 6902 JSON patch; `test` operations make preconditions (a failed test is 422 Invalid).
  Result<Json> JsonPatch(const ResourceType& type, const std::string& ns, const std::string& name,
                         const Json& operations, const std::string& subresource = "");
  // Server-side apply. A field owned by another manager fails with IsConflict unless `force`.
  Result<Json> Apply(const ResourceType& type, const std::string& ns, const std::string& name,
                     const Json& object, const ApplyOptions& options = {},
                     const std::string& subresource = "");
  // An empty `name` deletes every object of the collection in `ns` (deletecollection).
  Status Delete(const ResourceType& type, const std::string& ns, const std::string& name,
                const DeleteOptions& options = {});

  // pods/binding: assigns the pod to `node`; fails if the pod's UID is no longer `pod_uid` or
  // (when given) it changed since `resource_version`, and with IsConflict when it is bound
  // already. The API server copies `annotations` onto the pod.
  Status Bind(const std::string& ns, const std::string& pod, const std::string& pod_uid,
              const std::string& node, const std::map<std::string, std::string>& annotations = {},
              const std::string& resource_version = "");
  // pods/eviction (policy/v1). A PodDisruptionBudget that allows no disruption fails it with
  // IsEvictionBlocked (HTTP 429): back off and try later.
  Status Evict(const std::string& ns, const std::string& pod, const DeleteOptions& options = {});
  Result<Json> CreateEvent(const EventSpec& event);
  // serviceaccounts/token: a token for `service_account`, bound to `bound_object` (a
  // {kind, apiVersion, name, uid} reference, e.g. a Secret, or null) so that deleting that
  // object revokes it.
  Result<std::string> CreateToken(const std::string& ns, const std::string& service_account,
                                  int64_t expiration_seconds = 3600,
                                  const Json& bound_object = nullptr);

  Transport& transport() { return *transport_; }
  const RestConfig& config() const { return transport_->config(); }

 private:
  explicit Client(std::unique_ptr<Transport> transport) : transport_(std::move(transport)) {}
  Result<Json> Call(const std::string& method, const std::string& path, const std::string& body,
                    const std::string& content_type, bool idempotent);

  std::unique_ptr<Transport> transport_;
};

// Parses JSON from the server; `context` names the request in the error.
Result<Json> ParseJson(std::string_view text, std::string_view context);
// Kubernetes writes Time and MicroTime as RFC 3339; common/time.h reads and writes them
// (ParseRfc3339; FormatRfc3339 with TimeFraction::kNone and kMicros).

}  // namespace chamber::kube

namespace chamber::kube {

// Splits a watch response body into events: line-delimited JSON, chunks split anywhere. Feed
// chunks, then Finish() at the end of the stream. An ERROR event becomes an error Status (410
// Gone keeps IsGone).
class WatchStreamDecoder {
 public:
  explicit WatchStreamDecoder(std::string context) : context_(std::move(context)) {}
  // Decodes every complete line in `chunk`; stops at the first error and returns it.
  Status Feed(std::string_view chunk, const std::function<void(WatchEvent&&)>& on_event);
  // Fails when the stream ended inside an event (truncated).
  Status Finish() const;
  const std::string& resource_version() const { return resource_version_; }
  void set_resource_version(std::string rv) { resource_version_ = std::move(rv); }
  int64_t events() const { return events_; }

 private:
  Status Line(std::string_view line, const std::function<void(WatchEvent&&)>& on_event);

  std::string context_;
  std::string pending_;
  std::string resource_version_;
  int64_t events_ = 0;
};

}  // namespace chamber::kube
