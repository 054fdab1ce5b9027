#include "kube/transport.h"

#include <cstdlib>
#include <mutex>
#include <thread>

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include "kube/errors.h"

namespace chamber::kube {
namespace {

CURL* AsCurl(void* h) { return static_cast<CURL*>(h); }

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Headers {
  curl_slist* list = nullptr;
  ~Headers() { curl_slist_free_all(list); }
  void Add(const std::string& h) { list = curl_slist_append(list, h.c_str()); }
};

struct Collector {
  std::string body;
  int retry_after = 0;
};

size_t WriteBody(char* data, size_t size, size_t n, void* user) {
  static_cast<Collector*>(user)->body.append(data, size * n);
  return size * n;
}

size_t ReadHeader(char* data, size_t size, size_t n, void* user) {
  std::string_view line(data, size * n);
  constexpr std::string_view kName = "retry-after:";
  if (line.size() > kName.size()) {
    bool match = true;
    for (size_t i = 0; i < kName.size() && match; ++i)
      match = std::tolower(static_cast<unsigned char>(line[i])) == kName[i];
    if (match) {
      const std::string value(line.substr(kName.size()));
      static_cast<Collector*>(user)->retry_after = std::atoi(value.c_str());
    }
  }
  return size * n;
}

struct StreamState {
  CURL* curl;
  const std::function<bool(std::string_view)>* on_data;
  std::string* error_body;
  bool stopped_by_callback = false;
};

size_t WriteStream(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<StreamState*>(user);
  long code = 0;
  curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &code);
  if (code != 200) {
    if (s->error_body != nullptr) s->error_body->append(data, size * n);
    return size * n;
  }
  if (!(*s->on_data)(std::string_view(data, size * n))) {
    s->stopped_by_callback = true;
    return 0;  // aborts the transfer
  }
  return size * n;
}

int CheckCancel(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* cancel = static_cast<const std::atomic<bool>*>(user);
  return cancel != nullptr && cancel->load() ? 1 : 0;
}

void SetBlob(CURL* c, CURLoption opt, const std::string& pem) {
  curl_blob blob{};
  blob.data = const_cast<char*>(pem.data());
  blob.len = pem.size();
  blob.flags = CURL_BLOB_COPY;
  curl_easy_setopt(c, opt, &blob);
}

// A clear reason for a transfer failure.
Status TransferError(const HttpRequest& req, const RestConfig& cfg, CURLcode rc,
                     const char* detail) {
  std::string what = curl_easy_strerror(rc);
  if (detail != nullptr && *detail != '\0') what += " (" + std::string(detail) + ")";
  std::string hint;
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
      hint = "server unreachable: ";
      break;
    case CURLE_OPERATION_TIMEDOUT:
      hint = "timed out: ";
      break;
    case CURLE_PEER_FAILED_VERIFICATION:
      hint =
          "TLS: the server's certificate is not trusted by the configured CA or does not "
          "name the server (its host, or tls-server-name when set): ";
      break;
    case CURLE_SSL_CACERT_BADFILE:
      hint = "TLS: the configured CA certificate cannot be loaded: ";
      break;
    case CURLE_SSL_CERTPROBLEM:
      hint = "TLS: the client certificate or key cannot be used: ";
      break;
    case CURLE_SSL_CONNECT_ERROR:
      hint = "TLS handshake failed: ";
      break;
    default:
      break;
  }
  return Status::Unavailable(req.method + " " + cfg.server + req.path + ": " + hint + what +
                             " [config: " + cfg.source + "]");
}

}  // namespace

Transport::Transport(RestConfig config, TransportOptions options)
    : config_(std::move(config)),
      options_(options),
      tokens_(config_.token, config_.token_file, options.token_refresh),
      bucket_(config_.qps, config_.burst),
      rng_(options.seed != 0 ? options.seed
                             : static_cast<uint64_t>(Clock::now().time_since_epoch().count())) {
  url_base_ = config_.server;
  while (!url_base_.empty() && url_base_.back() == '/') url_base_.pop_back();
}

Result<ServerUrl> ParseServerUrl(const std::string& server) {
  ServerUrl u;
  const size_t scheme_end = server.find("://");
  if (scheme_end == std::string::npos) {
    return Status::InvalidArgument("kube config: server \"" + server + "\" is not a URL");
  }
  u.scheme = server.substr(0, scheme_end);
  const size_t authority_start = scheme_end + 3;
  const size_t path_start = server.find('/', authority_start);
  const std::string authority = server.substr(authority_start, path_start == std::string::npos
                                                                   ? std::string::npos
                                                                   : path_start - authority_start);
  u.path = path_start == std::string::npos ? "" : server.substr(path_start);
  while (!u.path.empty() && u.path.back() == '/') u.path.pop_back();
  // "[v6]:port", "[v6]", "host:port" or "host".
  size_t host_end = authority.size();
  if (!authority.empty() && authority.front() == '[') {
    host_end = authority.find(']');
    if (host_end == std::string::npos) {
      return Status::InvalidArgument("kube config: server \"" + server +
                                     "\": unterminated IPv6 address");
    }
    ++host_end;
  } else {
    host_end = std::min(authority.find(':'), authority.size());
  }
  u.host = authority.substr(0, host_end);
  if (host_end < authority.size()) {
    if (authority[host_end] != ':' || host_end + 1 == authority.size()) {
      return Status::InvalidArgument("kube config: server \"" + server + "\": bad port");
    }
    u.port = authority.substr(host_end + 1);
    if (u.port.find_first_not_of("0123456789") != std::string::npos) {
      return Status::InvalidArgument("kube config: server \"" + server + "\": port \"" + u.port +
                                     "\" is not a number");
    }
  }
  if (u.host.empty()) {
    return Status::InvalidArgument("kube config: server \"" + server + "\" names no host");
  }
  u.authority = authority;
  return u;
}

Result<std::unique_ptr<Transport>> Transport::Create(const RestConfig& config,
                                                     TransportOptions options) {
  GlobalInit();
  if (config.server.empty()) return Status::InvalidArgument("kube config: no server URL");
  std::unique_ptr<Transport> t(new Transport(config, options));
  // tls-server-name applies to TLS only, as in client-go.
  if (!config.tls_server_name.empty() && config.server.rfind("https://", 0) == 0) {
    CHAMBER_ASSIGN_OR_RETURN(ServerUrl u, ParseServerUrl(config.server));
    const std::string port = u.port.empty() ? "443" : u.port;
    const std::string& name = config.tls_server_name;
    if (name.find_first_of(":/[]@ ") != std::string::npos) {
      return Status::InvalidArgument("kube config: tls-server-name \"" + name +
                                     "\" is not a host name [config: " + config.source + "]");
    }
    t->url_base_ = "https://" + name + ":" + port + u.path;
    t->connect_to_ =
        curl_slist_append(nullptr, (name + ":" + port + ":" + u.host + ":" + port).c_str());
    t->host_header_ = "Host: " + u.authority;
  }
  return t;
}

Transport::~Transport() {
  for (void* h : idle_) curl_easy_cleanup(AsCurl(h));
  curl_slist_free_all(static_cast<curl_slist*>(connect_to_));
}

void* Transport::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void Transport::Release(void* handle) {
  long opened = 0;
  if (curl_easy_getinfo(AsCurl(handle), CURLINFO_NUM_CONNECTS, &opened) == CURLE_OK)
    connections_opened_ += opened;
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(handle);
}

Status Transport::Configure(void* handle, const HttpRequest& req, void* headers_out) {
  CURL* c = AsCurl(handle);
  auto* headers = static_cast<Headers*>(headers_out);
  curl_easy_reset(c);  // keeps the live connection
  const std::string url = url_base_ + req.path;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());  // copied by curl
  if (connect_to_ != nullptr) curl_easy_setopt(c, CURLOPT_CONNECT_TO, connect_to_);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(config_.connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_USERAGENT, config_.user_agent.c_str());
  if (req.method == "GET") {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.body.c_str());
    if (req.method == "DELETE" && req.body.empty()) curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
  }
  if (!config_.ca_pem.empty()) SetBlob(c, CURLOPT_CAINFO_BLOB, config_.ca_pem);
  if (config_.insecure_skip_tls_verify) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!config_.client_cert_pem.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
    SetBlob(c, CURLOPT_SSLCERT_BLOB, config_.client_cert_pem);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    SetBlob(c, CURLOPT_SSLKEY_BLOB, config_.client_key_pem);
  }
  if (!host_header_.empty()) headers->Add(host_header_);
  headers->Add("Accept: application/json");
  headers->Add("Expect:");
  if (!req.body.empty() || req.method != "GET") headers->Add("Content-Type: " + req.content_type);
  CHAMBER_ASSIGN_OR_RETURN(std::string token, tokens_.Token());
  if (!token.empty()) headers->Add("Authorization: Bearer " + token);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers->list);
  return Status::Ok();
}

Result<HttpResponse> Transport::Once(const HttpRequest& req, void* handle) {
  CURL* c = AsCurl(handle);
  Headers headers;
  CHAMBER_RETURN_IF_ERROR(Configure(handle, req, &headers));
  Collector col;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(config_.request_timeout.count()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &col);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, ReadHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &col);
  const CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) return TransferError(req, config_, rc, errbuf);
  HttpResponse resp;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp.code);
  resp.body = std::move(col.body);
  resp.retry_after_seconds = col.retry_after;
  return resp;
}

Result<HttpResponse> Transport::Do(const HttpRequest& req) {
  bool reauthenticated = false;
  for (int attempt = 0;; ++attempt) {
    bucket_.Wait();
    void* h = Acquire();
    Result<HttpResponse> r = Once(req, h);
    Release(h);
    const bool can_retry = attempt < options_.backoff.max_retries;
    std::chrono::milliseconds delay{0};
    {
      std::lock_guard<std::mutex> lock(mu_);
      delay =
          options_.backoff.DelayWithRetryAfter(attempt, r.ok() ? r->retry_after_seconds : 0, rng_);
    }
    if (!r.ok()) {
      if (!req.idempotent || !can_retry || r.status().code() != StatusCode::kUnavailable)
        return r.status();
      spdlog::debug("kube: {} (retry {} in {} ms)", r.status().message(), attempt + 1,
                    delay.count());
      std::this_thread::sleep_for(delay);
      continue;
    }
    const long code = r->code;
    if (code == 401 && !reauthenticated && tokens_.Invalidate()) {
      reauthenticated = true;  // the token file may have rotated: read it and try once more
      --attempt;
      continue;
    }
    const bool retryable = (code == 429 && req.retry_too_many_requests) ||
                           (req.idempotent && code >= 500 && code != 501);
    if (retryable && can_retry) {
      spdlog::debug("kube: {} {} -> HTTP {} (retry {} in {} ms)", req.method, req.path, code,
                    attempt + 1, delay.count());
      std::this_thread::sleep_for(delay);
      continue;
    }
    return r;
  }
}

Result<long> Transport::Stream(const HttpRequest& req,
                               const std::function<bool(std::string_view)>& on_data,
                               const std::atomic<bool>* cancel, std::string* error_body) {
  bool reauthenticated = false;
  for (;;) {
    bucket_.Wait();
    void* h = Acquire();
    CURL* c = AsCurl(h);
    Headers headers;
    Status st = Configure(h, req, &headers);
    if (!st.ok()) {
      Release(h);
      return st;
    }
    StreamState state{c, &on_data, error_body};
    char errbuf[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, WriteStream);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &state);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, CheckCancel);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, cancel);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME,
                     static_cast<long>(std::max<int64_t>(options_.stream_idle_timeout.count(), 1)));
    const CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    Release(h);
    if (rc == CURLE_ABORTED_BY_CALLBACK || (rc == CURLE_WRITE_ERROR && state.stopped_by_callback))
      return code;  // stopped on request
    if (rc == CURLE_OPERATION_TIMEDOUT && code != 0)
      return Status::Unavailable(req.method + " " + config_.server + req.path +
                                 ": the stream sent nothing for " +
                                 std::to_string(options_.stream_idle_timeout.count()) +
                                 " s; taken as a dead connection [config: " + config_.source + "]");
    if (rc != CURLE_OK) return TransferError(req, config_, rc, errbuf);
    if (code == 401 && !reauthenticated && tokens_.Invalidate()) {
      reauthenticated = true;
      if (error_body != nullptr) error_body->clear();
      continue;
    }
    return code;
  }
}

}  // namespace chamber::kube
