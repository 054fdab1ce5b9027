// An in-process HTTP server that speaks enough of the Kubernetes API for the client's unit
// tests: objects in memory with resourceVersions, get, paginated list, watch streams (chunked,
// line-delimited JSON) with bookmarks, create, update with optimistic concurrency, merge patch
// and delete. Tests script failures through `intercept` and the knobs below.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/config.h"

namespace chamber::kube::testing {

using Json = nlohmann::json;

class FakeApiServer {
 public:
  // Returns true when it answered the request itself.
  using Intercept = std::function<bool(const httplib::Request&, httplib::Response&)>;

  FakeApiServer() {
    server_.set_keep_alive_max_count(1000);
    server_.set_read_timeout(5, 0);
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      Handle(req, res);
    };
    const std::string any = R"(/.*)";
    server_.Get(any, handler);
    server_.Post(any, handler);
    server_.Put(any, handler);
    server_.Patch(any, handler);
    server_.Delete(any, handler);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeApiServer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    server_.stop();
    thread_.join();
  }

  RestConfig Config() const {
    RestConfig c;
    c.server = "http://127.0.0.1:" + std::to_string(port_);
    c.source = "fake apiserver";
    c.qps = 0;  // unlimited
    c.request_timeout = std::chrono::seconds(10);
    return c;
  }

  void set_intercept(Intercept f) {
    std::lock_guard<std::mutex> lock(mu_);
    intercept_ = std::move(f);
  }

  // Puts an object straight into the store (an ADDED or MODIFIED event); returns it with its
  // new resourceVersion.
  Json Upsert(const std::string& collection, Json obj) {
    std::lock_guard<std::mutex> lock(mu_);
    return PutLocked(collection, std::move(obj));
  }
  void Remove(const std::string& collection, const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    RemoveLocked(collection, name);
  }
  Json Object(const std::string& collection, const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& c = store_[collection];
    auto it = c.find(name);
    return it == c.end() ? Json() : it->second;
  }
  // Forgets events up to the current version: watches from older versions get 410.
  void Compact() {
    std::lock_guard<std::mutex> lock(mu_);
    compacted_ = rv_;
    log_.clear();
  }
  // Ends every open watch stream (as a server-side timeout does).
  void CloseWatches() {
    std::lock_guard<std::mutex> lock(mu_);
    ++close_generation_;
    cv_.notify_all();
  }
  int64_t resource_version() {
    std::lock_guard<std::mutex> lock(mu_);
    return rv_;
  }

  std::atomic<int> requests{0};
  std::atomic<int> lists{0};
  std::atomic<int> watches{0};
  std::atomic<bool> gone_as_error_event{false};  // 410 inside the stream instead of HTTP 410
  std::atomic<bool> send_bookmarks{true};
  std::atomic<int> expire_continue_once{0};  // 410 on the next N continue requests
  std::string last_authorization() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_authorization_;
  }

 private:
  struct Event {
    int64_t rv;
    std::string collection;
    std::string type;
    Json object;
  };

  static std::string NameOf(const Json& obj) { return obj["metadata"].value("name", ""); }

  Json PutLocked(const std::string& collection, Json obj) {
    const std::string name = NameOf(obj);
    auto& c = store_[collection];
    const bool existed = c.count(name) > 0;
    obj["metadata"]["resourceVersion"] = std::to_string(++rv_);
    if (!obj["metadata"].contains("uid"))
      obj["metadata"]["uid"] =
          existed ? c[name]["metadata"].value("uid", "") : "uid-" + std::to_string(rv_);
    c[name] = obj;
    log_.push_back({rv_, collection, existed ? "MODIFIED" : "ADDED", obj});
    cv_.notify_all();
    return obj;
  }

  void RemoveLocked(const std::string& collection, const std::string& name) {
    auto& c = store_[collection];
    auto it = c.find(name);
    if (it == c.end()) return;
    Json obj = it->second;
    c.erase(it);
    obj["metadata"]["resourceVersion"] = std::to_string(++rv_);
    log_.push_back({rv_, collection, "DELETED", obj});
    cv_.notify_all();
  }

  static Json StatusJson(int code, const std::string& reason, const std::string& message) {
    return {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
            {"code", code},     {"reason", reason},   {"message", message}};
  }
  static void Fail(httplib::Response& res, int code, const std::string& reason,
                   const std::string& message) {
    res.status = code;
    res.set_content(StatusJson(code, reason, message).dump(), "application/json");
  }

  // Splits ".../<plural>/<name>/<sub>" given that collections end in a known plural: the
  // collection is everything up to and including the plural.
  static void SplitPath(const std::string& path, std::string* collection, std::string* name,
                        std::string* sub) {
    std::vector<std::string> parts;
    size_t start = 1;
    while (start <= path.size()) {
      size_t slash = path.find('/', start);
      if (slash == std::string::npos) slash = path.size();
      parts.push_back(path.substr(start, slash - start));
      start = slash + 1;
    }
    // /api/v1/... has 2 prefix parts, /apis/g/v/... 3; then [namespaces/ns/]plural[/name[/sub]]
    size_t i = parts[0] == "api" ? 2 : 3;
    if (parts.size() > i + 2 && parts[i] == "namespaces") i += 2;
    *collection = "";
    for (size_t j = 0; j <= i && j < parts.size(); ++j) *collection += "/" + parts[j];
    *name = parts.size() > i + 1 ? parts[i + 1] : "";
    *sub = parts.size() > i + 2 ? parts[i + 2] : "";
  }

  void Handle(const httplib::Request& req, httplib::Response& res) {
    ++requests;
    Intercept intercept;
    {
      std::lock_guard<std::mutex> lock(mu_);
      intercept = intercept_;
      last_authorization_ = req.get_header_value("Authorization");
    }
    if (intercept && intercept(req, res)) return;
    std::string collection, name, sub;
    SplitPath(req.path, &collection, &name, &sub);
    if (req.method == "GET" && name.empty() && req.get_param_value("watch") == "true")
      return Watch(req, res, collection);
    std::unique_lock<std::mutex> lock(mu_);
    auto& c = store_[collection];
    if (req.method == "GET" && name.empty()) return List(req, res, collection, lock);
    if (req.method == "GET") {
      auto it = c.find(name);
      if (it == c.end()) return Fail(res, 404, "NotFound", name + " not found");
      return res.set_content(it->second.dump(), "application/json");
    }
    if (req.method == "POST" && name.empty()) {
      Json obj = Json::parse(req.body, nullptr, false);
      if (obj.is_discarded()) return Fail(res, 400, "BadRequest", "bad JSON");
      if (c.count(NameOf(obj))) return Fail(res, 409, "AlreadyExists", NameOf(obj) + " exists");
      res.status = 201;
      return res.set_content(PutLocked(collection, obj).dump(), "application/json");
    }
    if (req.method == "PUT") {
      Json obj = Json::parse(req.body, nullptr, false);
      auto it = c.find(name);
      if (it == c.end()) return Fail(res, 404, "NotFound", name + " not found");
      const std::string want = obj["metadata"].value("resourceVersion", "");
      if (!want.empty() && want != it->second["metadata"].value("resourceVersion", ""))
        return Fail(res, 409, "Conflict",
                    "Operation cannot be fulfilled: the object has been modified");
      return res.set_content(PutLocked(collection, obj).dump(), "application/json");
    }
    if (req.method == "PATCH") {
      auto it = c.find(name);
      if (it == c.end()) return Fail(res, 404, "NotFound", name + " not found");
      Json obj = it->second;
      obj.merge_patch(Json::parse(req.body));
      return res.set_content(PutLocked(collection, obj).dump(), "application/json");
    }
    if (req.method == "DELETE") {
      if (!c.count(name)) return Fail(res, 404, "NotFound", name + " not found");
      RemoveLocked(collection, name);
      return res.set_content(StatusJson(200, "", "deleted").dump(), "application/json");
    }
    Fail(res, 405, "MethodNotAllowed", req.method);
  }

  void List(const httplib::Request& req, httplib::Response& res, const std::string& collection,
            std::unique_lock<std::mutex>& lock) {
    ++lists;
    const std::string cont = req.get_param_value("continue");
    if (!cont.empty() && expire_continue_once > 0) {
      --expire_continue_once;
      lock.unlock();
      return Fail(res, 410, "Expired", "The provided continue parameter is too old");
    }
    const int64_t limit = req.has_param("limit") ? std::stoll(req.get_param_value("limit")) : 0;
    Json items = Json::array();
    std::string next;
    for (const auto& [name, obj] : store_[collection]) {
      if (!cont.empty() && name <= cont) continue;
      if (limit > 0 && static_cast<int64_t>(items.size()) == limit) {
        next = items.back()["metadata"]["name"];
        break;
      }
      items.push_back(obj);
    }
    Json list = {{"kind", "List"},
                 {"apiVersion", "v1"},
                 {"metadata", {{"resourceVersion", std::to_string(rv_)}}},
                 {"items", items}};
    if (!next.empty()) list["metadata"]["continue"] = next;
    res.set_content(list.dump(), "application/json");
  }

  void Watch(const httplib::Request& req, httplib::Response& res, const std::string& collection) {
    int64_t from = 0;
    const std::string rv = req.get_param_value("resourceVersion");
    if (!rv.empty()) from = std::stoll(rv);
    int64_t generation = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (from < compacted_ && !gone_as_error_event) {
        return Fail(res, 410, "Expired", "too old resource version: " + rv);
      }
      // Taken before the request counts as a watch, so that a CloseWatches() after a test sees
      // the count ends this stream too.
      generation = close_generation_;
    }
    ++watches;
    const int timeout =
        req.has_param("timeoutSeconds") ? std::stoi(req.get_param_value("timeoutSeconds")) : 300;
    const bool bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
    auto state = std::make_shared<std::pair<int64_t, int64_t>>(from, generation);  // sent rv, gen
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
    res.set_chunked_content_provider(
        "application/json",
        [this, state, collection, deadline, bookmarks](size_t, httplib::DataSink& sink) {
          std::unique_lock<std::mutex> lock(mu_);
          if (state->first < compacted_) {
            Json ev = {{"type", "ERROR"},
                       {"object", StatusJson(410, "Expired", "too old resource version")}};
            const std::string line = ev.dump() + "\n";
            sink.write(line.data(), line.size());
            sink.done();
            return true;
          }
          std::string out;
          for (const Event& e : log_) {
            if (e.rv <= state->first || e.collection != collection) continue;
            out += Json{{"type", e.type}, {"object", e.object}}.dump() + "\n";
          }
          if (!log_.empty()) state->first = std::max(state->first, log_.back().rv);
          if (out.empty() && bookmarks && send_bookmarks && state->first < rv_) {
            state->first = rv_;
            out = Json{{"type", "BOOKMARK"},
                       {"object",
                        {{"kind", "X"}, {"metadata", {{"resourceVersion", std::to_string(rv_)}}}}}}
                      .dump() +
                  "\n";
          }
          if (!out.empty()) {
            lock.unlock();
            // Split every write in two to exercise the client's partial-line buffering.
            const size_t half = out.size() / 2;
            if (!sink.write(out.data(), half)) return false;
            if (!sink.write(out.data() + half, out.size() - half)) return false;
            return true;
          }
          if (stopping_ || close_generation_ != state->second ||
              std::chrono::steady_clock::now() > deadline) {
            sink.done();
            return true;
          }
          cv_.wait_for(lock, std::chrono::milliseconds(50));
          return sink.is_writable();
        });
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  Intercept intercept_;
  std::string last_authorization_;
  std::map<std::string, std::map<std::string, Json>> store_;
  std::vector<Event> log_;
  int64_t rv_ = 100;
  int64_t compacted_ = 0;
  int64_t close_generation_ = 0;
};

}  // namespace chamber::kube::testing
