#include "kube/client.h"

#include <cctype>

#include <spdlog/spdlog.h>

#include "common/time.h"
#include "kube/errors.h"
#include "kube/types.h"

namespace chamber::kube {

namespace resources {
const ResourceType kPods{"", "v1", "pods", "Pod", true};
const ResourceType kNodes{"", "v1", "nodes", "Node", false};
const ResourceType kNamespaces{"", "v1", "namespaces", "Namespace", false};
const ResourceType kConfigMaps{"", "v1", "configmaps", "ConfigMap", true};
const ResourceType kEvents{"", "v1", "events", "Event", true};
const ResourceType kServiceAccounts{"", "v1", "serviceaccounts", "ServiceAccount", true};
const ResourceType kJobs{"batch", "v1", "jobs", "Job", true};
const ResourceType kLeases{"coordination.k8s.io", "v1", "leases", "Lease", true};
const ResourceType kPriorityClasses{"scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass",
                                    false};
const ResourceType kPodDisruptionBudgets{"policy", "v1", "poddisruptionbudgets",
                                         "PodDisruptionBudget", true};
const ResourceType kClusterRoleBindings{"rbac.authorization.k8s.io", "v1", "clusterrolebindings",
                                        "ClusterRoleBinding", false};
}  // namespace resources

namespace {

constexpr std::string_view kJson = "application/json";

std::string Join(std::initializer_list<std::pair<std::string, std::string>> query) {
  std::string out;
  for (const auto& [k, v] : query) {
    if (v.empty()) continue;
    out += out.empty() ? "?" : "&";
    out += k + "=" + UrlEncode(v);
  }
  return out;
}

std::string NameOf(const Json& obj) {
  if (!obj.is_object()) return "";
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return "";
  auto n = m->find("name");
  return n != m->end() && n->is_string() ? n->get<std::string>() : "";
}

std::string ResourceVersionOf(const Json& obj) {
  if (!obj.is_object()) return "";
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return "";
  auto rv = m->find("resourceVersion");
  return rv != m->end() && rv->is_string() ? rv->get<std::string>() : "";
}

}  // namespace

std::string UrlEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string ResourcePath(const ResourceType& type, const std::string& ns, const std::string& name,
                         const std::string& subresource) {
  std::string p =
      type.group.empty() ? "/api/" + type.version : "/apis/" + type.group + "/" + type.version;
  if (type.namespaced && !ns.empty()) p += "/namespaces/" + UrlEncode(ns);
  p += "/" + type.plural;
  if (!name.empty()) p += "/" + UrlEncode(name);
  if (!subresource.empty()) p += "/" + subresource;
  return p;
}

std::string_view WatchEventTypeName(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
  }
  return "?";
}

Result<Json> ParseJson(std::string_view text, std::string_view context) {
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {  // parse errors and number overflows
    return Status::Unavailable(std::string(context) + ": malformed JSON from the server (" +
                               std::to_string(text.size()) + " bytes): " + e.what());
  }
}

// --- watch stream decoding ---

Status WatchStreamDecoder::Line(std::string_view line,
                                const std::function<void(WatchEvent&&)>& on_event) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  if (line.empty()) return Status::Ok();
  CHAMBER_ASSIGN_OR_RETURN(Json j, ParseJson(line, context_ + ": watch event"));
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string() || !j.contains("object") ||
      !j["object"].is_object())
    return Status::Unavailable(
        context_ + ": watch event without type and object: " + std::string(line.substr(0, 200)));
  const std::string type = j["type"].get<std::string>();
  Json& obj = j["object"];
  if (type == "ERROR") {
    long code = 500;
    if (obj.contains("code") && obj["code"].is_number_integer()) code = obj["code"].get<long>();
    return ApiErrorStatus(context_ + ": ERROR event", code, obj.dump());
  }
  WatchEventType t;
  if (type == "ADDED") {
    t = WatchEventType::kAdded;
  } else if (type == "MODIFIED") {
    t = WatchEventType::kModified;
  } else if (type == "DELETED") {
    t = WatchEventType::kDeleted;
  } else if (type == "BOOKMARK") {
    t = WatchEventType::kBookmark;
  } else {
    return Status::Unavailable(context_ + ": unknown watch event type \"" + type + "\"");
  }
  std::string rv = ResourceVersionOf(obj);
  if (!rv.empty()) resource_version_ = std::move(rv);
  ++events_;
  on_event(WatchEvent{t, std::move(obj)});
  return Status::Ok();
}

Status WatchStreamDecoder::Feed(std::string_view chunk,
                                const std::function<void(WatchEvent&&)>& on_event) {
  size_t start = 0;
  for (;;) {
    const size_t nl = chunk.find('\n', start);
    if (nl == std::string_view::npos) break;
    Status s;
    if (pending_.empty()) {
      s = Line(chunk.substr(start, nl - start), on_event);
    } else {
      pending_.append(chunk.substr(start, nl - start));
      std::string line = std::move(pending_);
      pending_.clear();
      s = Line(line, on_event);
    }
    if (!s.ok()) return s;
    start = nl + 1;
  }
  pending_.append(chunk.substr(start));
  return Status::Ok();
}

Status WatchStreamDecoder::Finish() const {
  std::string_view rest = pending_;
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.back())))
    rest.remove_suffix(1);
  if (rest.empty()) return Status::Ok();
  // The server may end a stream on a complete event without a newline.
  Json j = Json::parse(rest, nullptr, false);
  if (!j.is_discarded())
    return Status::Unavailable(context_ + ": watch stream ended without a final newline");
  return Status::Unavailable(context_ + ": watch stream truncated inside an event (" +
                             std::to_string(rest.size()) + " bytes left undecoded)");
}

// --- client ---

Result<std::unique_ptr<Client>> Client::Create(const RestConfig& config, TransportOptions options) {
  CHAMBER_ASSIGN_OR_RETURN(std::unique_ptr<Transport> t, Transport::Create(config, options));
  return std::unique_ptr<Client>(new Client(std::move(t)));
}

Result<Json> Client::Call(const std::string& method, const std::string& path,
                          const std::string& body, const std::string& content_type,
                          bool idempotent) {
  HttpRequest req;
  req.method = method;
  req.path = path;
  req.body = body;
  req.content_type = content_type;
  req.idempotent = idempotent;
  const std::string context = method + " " + path;
  CHAMBER_ASSIGN_OR_RETURN(HttpResponse resp, transport_->Do(req));
  if (resp.code < 200 || resp.code >= 300) return ApiErrorStatus(context, resp.code, resp.body);
  if (resp.body.empty()) return Json::object();
  return ParseJson(resp.body, context);
}

Result<Json> Client::Get(const ResourceType& type, const std::string& ns, const std::string& name) {
  return Call("GET", ResourcePath(type, ns, name), "", std::string(kJson), true);
}

Result<ObjectList> Client::List(const ResourceType& type, const std::string& ns,
                                const ListOptions& options) {
  std::vector<Json> items;
  Result<ObjectList> out = ListEach(
      type, ns, options, [&](Json&& item) { items.push_back(std::move(item)); },
      [&] { items.clear(); });
  if (out.ok()) out->items = std::move(items);
  return out;
}

Result<ObjectList> Client::ListEach(const ResourceType& type, const std::string& ns,
                                    const ListOptions& options,
                                    const std::function<void(Json&&)>& on_item,
                                    const std::function<void()>& on_restart) {
  constexpr int kMaxRestarts = 5;
  ObjectList out;
  std::string cont;
  for (;;) {
    const std::string path =
        ResourcePath(type, ns) +
        Join({{"labelSelector", options.label_selector},
              {"fieldSelector", options.field_selector},
              {"limit", options.limit > 0 ? std::to_string(options.limit) : ""},
              {"continue", cont},
              {"resourceVersion", cont.empty() ? options.resource_version : ""}});
    Result<Json> page = Call("GET", path, "", std::string(kJson), true);
    if (!page.ok()) {
      if (IsGone(page.status()) && !cont.empty() && out.restarts < kMaxRestarts) {
        // The continue token expired (compaction): the pages so far are from an old snapshot.
        spdlog::info("kube: list {}: continue token expired, starting over", path);
        ++out.restarts;
        on_restart();
        cont.clear();
        continue;
      }
      return page.status();
    }
    Json& j = *page;
    if (!j.is_object() || !j.contains("items") || !(j["items"].is_array() || j["items"].is_null()))
      return Status::Unavailable("GET " + path + ": response is not a list (no items array)");
    if (j["items"].is_array())
      for (Json& item : j["items"]) on_item(std::move(item));
    std::string next;
    if (j.contains("metadata") && j["metadata"].is_object()) {
      const Json& m = j["metadata"];
      if (m.contains("continue") && m["continue"].is_string()) next = m["continue"];
      if (m.contains("resourceVersion") && m["resourceVersion"].is_string())
        out.resource_version = m["resourceVersion"];
    }
    if (next.empty()) return out;
    cont = std::move(next);
  }
}

Result<std::string> Client::Watch(const ResourceType& type, const std::string& ns,
                                  const WatchOptions& options,
                                  const std::function<void(WatchEvent&&)>& on_event) {
  HttpRequest req;
  req.path = ResourcePath(type, ns) +
             Join({{"watch", "true"},
                   {"labelSelector", options.label_selector},
                   {"fieldSelector", options.field_selector},
                   {"resourceVersion", options.resource_version},
                   {"allowWatchBookmarks", options.allow_bookmarks ? "true" : ""},
                   {"timeoutSeconds",
                    options.timeout_seconds > 0 ? std::to_string(options.timeout_seconds) : ""}});
  const std::string context = "WATCH " + req.path;
  WatchStreamDecoder decoder(context);
  decoder.set_resource_version(options.resource_version);
  Status decode_error;
  std::string error_body;
  Result<long> code = transport_->Stream(
      req,
      [&](std::string_view chunk) {
        decode_error = decoder.Feed(chunk, on_event);
        return decode_error.ok();
      },
      options.cancel, &error_body);
  if (!decode_error.ok()) return decode_error;
  if (!code.ok()) return code.status();
  if (*code != 200) return ApiErrorStatus(context, *code, error_body);
  if (options.cancel == nullptr || !options.cancel->load())
    CHAMBER_RETURN_IF_ERROR(decoder.Finish());
  return decoder.resource_version();
}

Result<Json> Client::Create(const ResourceType& type, const std::string& ns, const Json& object) {
  return Call("POST", ResourcePath(type, ns), object.dump(), std::string(kJson), false);
}

Result<Json> Client::Update(const ResourceType& type, const std::string& ns, const Json& object) {
  const std::string name = NameOf(object);
  if (name.empty()) return Status::InvalidArgument("update: object has no metadata.name");
  // With a resourceVersion the server refuses a stale write, so repeating it is safe.
  return Call("PUT", ResourcePath(type, ns, name), object.dump(), std::string(kJson),
              !ResourceVersionOf(object).empty());
}

Result<Json> Client::UpdateStatus(const ResourceType& type, const std::string& ns,
                                  const Json& object) {
  const std::string name = NameOf(object);
  if (name.empty()) return Status::InvalidArgument("update status: object has no metadata.name");
  return Call("PUT", ResourcePath(type, ns, name, "status"), object.dump(), std::string(kJson),
              !ResourceVersionOf(object).empty());
}

Result<Json> Client::UpdateWithRetry(const ResourceType& type, const std::string& ns,
                                     const std::string& name,
                                     const std::function<Status(Json&)>& mutate, int attempts) {
  Status last;
  for (int i = 0; i < attempts; ++i) {
    CHAMBER_ASSIGN_OR_RETURN(Json obj, Get(type, ns, name));
    CHAMBER_RETURN_IF_ERROR(mutate(obj));
    Result<Json> r = Update(type, ns, obj);
    if (r.ok() || !IsConflict(r.status())) return r;
    last = r.status();
    spdlog::debug("kube: update {}/{}: conflict, retrying ({}/{})", ns, name, i + 1, attempts);
  }
  return last.WithContext("update gave up after " + std::to_string(attempts) + " conflicts");
}

Result<Json> Client::MergePatch(const ResourceType& type, const std::string& ns,
                                const std::string& name, const Json& patch,
                                const std::string& subresource) {
  return Call("PATCH", ResourcePath(type, ns, name, subresource), patch.dump(),
              "application/merge-patch+json", false);
}

Result<Json> Client::JsonPatch(const ResourceType& type, const std::string& ns,
                               const std::string& name, const Json& operations,
                               const std::string& subresource) {
  if (!operations.is_array())
    return Status::InvalidArgument("JSON patch must be an array of operations");
  return Call("PATCH", ResourcePath(type, ns, name, subresource), operations.dump(),
              "application/json-patch+json", false);
}

Result<Json> Client::Apply(const ResourceType& type, const std::string& ns, const std::string& name,
                           const Json& object, const ApplyOptions& options,
                           const std::string& subresource) {
  if (options.field_manager.empty())
    return Status::InvalidArgument("server-side apply needs a field manager");
  if (!object.is_object() || (object.contains("metadata") && !object["metadata"].is_object()))
    return Status::InvalidArgument("server-side apply: the object must be a JSON object");
  Json body = object;
  body["apiVersion"] = type.ApiVersion();
  body["kind"] = type.kind;
  body["metadata"]["name"] = name;
  if (type.namespaced && !ns.empty()) body["metadata"]["namespace"] = ns;
  const std::string path =
      ResourcePath(type, ns, name, subresource) +
      Join({{"fieldManager", options.field_manager}, {"force", options.force ? "true" : ""}});
  // JSON is YAML, and apply is idempotent by design.
  return Call("PATCH", path, body.dump(), "application/apply-patch+yaml", true);
}

Status Client::Delete(const ResourceType& type, const std::string& ns, const std::string& name,
                      const DeleteOptions& options) {
  Json body = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}};
  if (options.grace_period_seconds) body["gracePeriodSeconds"] = *options.grace_period_seconds;
  if (!options.uid.empty()) body["preconditions"]["uid"] = options.uid;
  if (!options.resource_version.empty())
    body["preconditions"]["resourceVersion"] = options.resource_version;
  if (!options.propagation_policy.empty()) body["propagationPolicy"] = options.propagation_policy;
  Result<Json> r = Call("DELETE", ResourcePath(type, ns, name), body.dump(), std::string(kJson),
                        !options.uid.empty() || !options.resource_version.empty());
  return r.status();
}

Status Client::Bind(const std::string& ns, const std::string& pod, const std::string& pod_uid,
                    const std::string& node, const std::map<std::string, std::string>& annotations,
                    const std::string& resource_version) {
  Json binding = {{"apiVersion", "v1"},
                  {"kind", "Binding"},
                  {"metadata", {{"name", pod}, {"namespace", ns}}},
                  {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  if (!pod_uid.empty()) binding["metadata"]["uid"] = pod_uid;
  if (!resource_version.empty()) binding["metadata"]["resourceVersion"] = resource_version;
  if (!annotations.empty()) binding["metadata"]["annotations"] = annotations;
  Result<Json> r = Call("POST", ResourcePath(resources::kPods, ns, pod, "binding"), binding.dump(),
                        std::string(kJson), false);
  return r.status();
}

Status Client::Evict(const std::string& ns, const std::string& pod, const DeleteOptions& options) {
  Json eviction = {{"apiVersion", "policy/v1"},
                   {"kind", "Eviction"},
                   {"metadata", {{"name", pod}, {"namespace", ns}}}};
  Json del = Json::object();
  if (options.grace_period_seconds) del["gracePeriodSeconds"] = *options.grace_period_seconds;
  if (!options.uid.empty()) del["preconditions"]["uid"] = options.uid;
  if (!options.resource_version.empty())
    del["preconditions"]["resourceVersion"] = options.resource_version;
  if (!del.empty()) eviction["deleteOptions"] = del;
  const std::string path = ResourcePath(resources::kPods, ns, pod, "eviction");
  HttpRequest req;
  req.method = "POST";
  req.path = path;
  req.body = eviction.dump();
  req.idempotent = false;
  // A 429 here is a disruption budget's answer, not overload: the caller decides when to try
  // again.
  req.retry_too_many_requests = false;
  CHAMBER_ASSIGN_OR_RETURN(HttpResponse resp, transport_->Do(req));
  if (resp.code >= 200 && resp.code < 300) return Status::Ok();
  if (resp.code == 429) {
    std::string message = "the pod's disruption budget allows no disruption now";
    Json j = Json::parse(resp.body, nullptr, false);
    if (j.is_object() && j.contains("message") && j["message"].is_string())
      message = j["message"].get<std::string>();
    Json status = {{"kind", "Status"}, {"reason", "DisruptionBudget"}, {"message", message}};
    return ApiErrorStatus("POST " + path, 429, status.dump());
  }
  return ApiErrorStatus("POST " + path, resp.code, resp.body);
}

Result<Json> Client::CreateEvent(const EventSpec& e) {
  Result<ObjectMeta> meta = DecodeMeta(e.involved, "event: involved object");
  if (!meta.ok()) return meta.status();
  auto str = [&](const char* key) {
    auto it = e.involved.find(key);
    return it != e.involved.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const std::string ns = meta->namespace_name.empty() ? "default" : meta->namespace_name;
  const std::string& name = meta->name;
  const std::string now = FormatRfc3339(std::chrono::system_clock::now());
  Json ref = {
      {"kind", str("kind")}, {"apiVersion", str("apiVersion")}, {"name", name}, {"namespace", ns}};
  if (!meta->uid.empty()) ref["uid"] = meta->uid;
  if (!meta->resource_version.empty()) ref["resourceVersion"] = meta->resource_version;
  Json event = {{"apiVersion", "v1"},
                {"kind", "Event"},
                {"metadata", {{"generateName", name + "."}, {"namespace", ns}}},
                {"involvedObject", ref},
                {"reason", e.reason},
                {"message", e.message},
                {"type", e.type},
                {"count", e.count},
                {"firstTimestamp", now},
                {"lastTimestamp", now},
                {"source", {{"component", e.component}}},
                {"reportingComponent", e.component}};
  return Create(resources::kEvents, ns, event);
}

Result<std::string> Client::CreateToken(const std::string& ns, const std::string& sa,
                                        int64_t expiration_seconds, const Json& bound_object) {
  Json req = {{"apiVersion", "authentication.k8s.io/v1"},
              {"kind", "TokenRequest"},
              {"spec", {{"expirationSeconds", expiration_seconds}}}};
  if (bound_object.is_object()) req["spec"]["boundObjectRef"] = bound_object;
  CHAMBER_ASSIGN_OR_RETURN(Json resp,
                           Call("POST", ResourcePath(resources::kServiceAccounts, ns, sa, "token"),
                                req.dump(), std::string(kJson), false));
  if (!resp.contains("status") || !resp["status"].contains("token") ||
      !resp["status"]["token"].is_string())
    return Status::Unavailable("token request for " + ns + "/" + sa + ": no token in response");
  return resp["status"]["token"].get<std::string>();
}

}  // namespace chamber::kube
