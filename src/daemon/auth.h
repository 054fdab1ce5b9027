// Who may call the API. Requests carry `Authorization: Bearer <token>`; an Authenticator maps a
// token to a principal with a role. Read tokens see everything; admin tokens may also change
// things (cordon, uncordon, clear a health hold); agent tokens (chamber-agent) may only post
// their node's reports; replica tokens (another chamberd replica) may only read the history's
// replication stream.
//
//   TokenFileAuthenticator: a file of `<token> <role> [name]` lines (docs/api.md).
//   TokenReviewAuthenticator: inside a cluster, asks the apiserver (TokenReview) who the token
//   belongs to and maps the user's groups to a role. The review call is injected, so the kube
//   client plugs in without this file depending on it. A service-account token bound to a pod
//   (what the kubelet projects into the agent's pod) names the pod's node in the review's
//   `user.extra` (Kubernetes 1.30 and newer); the principal carries it, and such a principal
//   may post reports for that node only.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace chamber::daemon {

enum class Role { kRead, kAdmin, kAgent, kReplica };
std::string_view RoleName(Role r);

struct Principal {
  std::string name;
  Role role = Role::kRead;
  std::string node;  // the node the token is bound to; empty: not bound to one
};

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  // The principal for `token`; NotFound for a token it does not know (the server answers 401);
  // other errors when it cannot tell now (the server answers 503).
  virtual Result<Principal> Authenticate(std::string_view token) = 0;
};

class TokenFileAuthenticator : public Authenticator {
 public:
  // Reads the file. Errors name the file and line: "tokens:3: unknown role \"root\"".
  static Result<std::unique_ptr<TokenFileAuthenticator>> Load(const std::string& path);
  static Result<std::unique_ptr<TokenFileAuthenticator>> Parse(std::string_view text,
                                                               std::string_view source);
  Result<Principal> Authenticate(std::string_view token) override;
  size_t size() const { return tokens_.size(); }

 private:
  std::map<std::string, Principal, std::less<>> tokens_;
};

// The TokenReview `user.extra` key that names the node of the pod a token is bound to.
inline constexpr char kNodeNameExtra[] = "authentication.kubernetes.io/node-name";

// What a TokenReview says about a token.
struct ReviewedUser {
  bool authenticated = false;
  std::string username;
  std::vector<std::string> groups;
  std::string node;  // user.extra[kNodeNameExtra]; empty when absent
};

// Reads a TokenReview response (authentication.k8s.io/v1): status.authenticated, status.user's
// username, groups and the bound node. Missing fields read as empty; a node-name extra with
// more than one value is an error (a token is bound to one pod).
Result<ReviewedUser> ParseTokenReview(const nlohmann::json& review);

class TokenReviewAuthenticator : public Authenticator {
 public:
  using ReviewFn = std::function<Result<ReviewedUser>(std::string_view token)>;
  struct Options {
    std::vector<std::string> admin_groups{"chamber:admins", "system:masters"};
    std::vector<std::string> read_groups{"chamber:viewers"};
    // Users and groups whose tokens may only post agent reports (the agent's service account).
    std::vector<std::string> agent_users;
    std::vector<std::string> agent_groups;
    // Users whose tokens may only read the history's replication stream (chamberd's own
    // service account: its standby replicas copy the leader's history).
    std::vector<std::string> replica_users;
    std::chrono::seconds cache_ttl{60};
  };
  TokenReviewAuthenticator(ReviewFn review, Options options);
  Result<Principal> Authenticate(std::string_view token) override;

 private:
  ReviewFn review_;
  Options options_;
  std::mutex mu_;
  struct Cached {
    std::optional<Principal> principal;  // empty: rejected
    std::chrono::steady_clock::time_point expires;
  };
  std::map<std::string, Cached, std::less<>> cache_;
};

// Tries each authenticator in turn; the first that knows the token answers.
class ChainAuthenticator : public Authenticator {
 public:
  void Add(std::unique_ptr<Authenticator> a) { chain_.push_back(std::move(a)); }
  Result<Principal> Authenticate(std::string_view token) override;

 private:
  std::vector<std::unique_ptr<Authenticator>> chain_;
};

}  // namespace chamber::daemon
