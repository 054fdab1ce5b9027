// HTTP to the API server over libcurl: a pool of easy handles (each keeps its connection alive,
// so sequential requests reuse connections), TLS from in-memory PEM, bearer tokens re-read as
// they rotate, client-side rate limiting, and retries with backoff.
//
// Thread-safety: one Transport serves any number of threads. Each request borrows an easy handle
// from the pool for its duration (a watch holds its handle until the stream ends) and returns
// it, so concurrent requests use separate connections and sequential ones reuse them.
//
// Retry policy: requests marked idempotent (GET, and writes whose preconditions make a repeat
// harmless) are retried on connection errors, 429 and 5xx, up to BackoffPolicy::max_retries
// times, waiting Retry-After when the server sends it and exponential backoff with jitter
// otherwise. Other writes are retried only on 429 (the server did not act on them). A 401 makes
// the token file be re-read once before the request is repeated.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kube/config.h"
#include "kube/rate_limit.h"

namespace chamber::kube {

struct HttpRequest {
  std::string method = "GET";
  std::string path;  // path and query: "/api/v1/pods?limit=500"
  std::string body;
  std::string content_type = "application/json";
  bool idempotent = true;
  bool retry_too_many_requests = true;  // false where 429 is an answer (pods/eviction)
};

struct HttpResponse {
  long code = 0;
  std::string body;
  int retry_after_seconds = 0;
};

struct TransportOptions {
  BackoffPolicy backoff;
  std::chrono::milliseconds token_refresh{60'000};
  uint64_t seed = 0;  // jitter seed; 0 picks one from the clock
  // A watch stream that delivers no byte for this long is given up, as a connection that died
  // without a word (a half-open TCP connection, a stalled HTTP/2 stream) would otherwise hold
  // an informer stale until the server's own time-out. The API server sends a bookmark about
  // every minute to a watch that allows them, so a live stream is rarely this quiet; giving one
  // up costs a new watch from the last resourceVersion.
  std::chrono::seconds stream_idle_timeout{120};
};

// The parts of a server URL ("https://[::1]:6443/prefix"): scheme "https", host "[::1]",
// port "6443" (empty when the URL gives none), path "/prefix" (no trailing '/'), and the
// authority as written ("[::1]:6443").
struct ServerUrl {
  std::string scheme;
  std::string host;
  std::string port;
  std::string path;
  std::string authority;
};
Result<ServerUrl> ParseServerUrl(const std::string& server);

class Transport {
 public:
  static Result<std::unique_ptr<Transport>> Create(const RestConfig& config,
                                                   TransportOptions options = {});
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Sends a request, retrying as described above. A response of any HTTP code is a success
  // here; transport failures (DNS, refused connection, TLS, timeout) are kUnavailable errors
  // naming the server and curl's reason.
  Result<HttpResponse> Do(const HttpRequest& request);

  // Sends a request whose response body streams: `on_data` gets each chunk as it arrives and
  // returns false to stop. Returns the HTTP code once the server ends the stream; when the code
  // is not 200 the body is in `error_body`. `cancel` (may be null) aborts the stream within
  // about a second. No retries: the caller resumes from what it has seen.
  Result<long> Stream(const HttpRequest& request,
                      const std::function<bool(std::string_view)>& on_data,
                      const std::atomic<bool>* cancel, std::string* error_body);

  const RestConfig& config() const { return config_; }
  // Number of TCP connections curl opened so far (to check keep-alive).
  long connections_opened() const { return connections_opened_.load(); }

 private:
  Transport(RestConfig config, TransportOptions options);
  void* Acquire();
  void Release(void* handle);
  Result<HttpResponse> Once(const HttpRequest& request, void* handle);
  Status Configure(void* handle, const HttpRequest& request, void* headers_out);

  const RestConfig config_;
  const TransportOptions options_;
  // Where requests go. With a tls-server-name the URL names that host (so that TLS sends it
  // as SNI and checks the certificate against it), `connect_to_` sends the connection to the
  // configured server's address, and `host_header_` keeps the HTTP Host of the server URL.
  std::string url_base_;
  void* connect_to_ = nullptr;  // curl_slist*
  std::string host_header_;
  TokenSource tokens_;
  TokenBucket bucket_;
  std::mutex mu_;
  std::vector<void*> idle_;
  std::mt19937_64 rng_;
  std::atomic<long> connections_opened_{0};
};

}  // namespace chamber::kube
