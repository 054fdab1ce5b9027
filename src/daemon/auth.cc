#include "daemon/auth.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace chamber::daemon {

std::string_view RoleName(Role r) {
  switch (r) {
    case Role::kAdmin:
      return "admin";
    case Role::kAgent:
      return "agent";
    case Role::kReplica:
      return "replica";
    case Role::kRead:
      break;
  }
  return "read";
}

Result<std::unique_ptr<TokenFileAuthenticator>> TokenFileAuthenticator::Load(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot read the token file");
  std::stringstream s;
  s << in.rdbuf();
  return Parse(s.str(), path);
}

Result<std::unique_ptr<TokenFileAuthenticator>> TokenFileAuthenticator::Parse(
    std::string_view text, std::string_view source) {
  auto a = std::unique_ptr<TokenFileAuthenticator>(new TokenFileAuthenticator());
  std::istringstream in{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string where = std::string(source) + ":" + std::to_string(number) + ": ";
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream fields(line);
    std::string token, role, name, extra;
    if (!(fields >> token)) continue;  // blank or comment
    if (!(fields >> role))
      return Status::InvalidArgument(
          where + "a token needs a role (read, admin, agent or replica) after it");
    fields >> name;
    if (fields >> extra)
      return Status::InvalidArgument(where + "unexpected \"" + extra +
                                     "\"; the format is <token> <role> [name]");
    Principal p;
    if (role == "read") {
      p.role = Role::kRead;
    } else if (role == "admin") {
      p.role = Role::kAdmin;
    } else if (role == "agent") {
      p.role = Role::kAgent;
    } else if (role == "replica") {
      p.role = Role::kReplica;
    } else {
      return Status::InvalidArgument(where + "unknown role \"" + role +
                                     "\" (expected read, admin, agent or replica)");
    }
    if (token.size() < 16)
      return Status::InvalidArgument(where + "token is shorter than 16 characters");
    p.name = name.empty() ? "token-line-" + std::to_string(number) : name;
    if (!a->tokens_.emplace(token, p).second)
      return Status::InvalidArgument(where + "the same token appears twice");
  }
  if (a->tokens_.empty())
    return Status::InvalidArgument(std::string(source) + ": the token file holds no tokens");
  return a;
}

Result<Principal> TokenFileAuthenticator::Authenticate(std::string_view token) {
  auto it = tokens_.find(token);
  if (it == tokens_.end()) return Status::NotFound("unknown token");
  return it->second;
}

Result<ReviewedUser> ParseTokenReview(const nlohmann::json& review) {
  using nlohmann::json;
  ReviewedUser u;
  if (!review.is_object()) return Status::InvalidArgument("TokenReview: expected an object");
  const json status = review.value("status", json::object());
  if (!status.is_object()) return Status::InvalidArgument("TokenReview.status: expected an object");
  const json authenticated = status.value("authenticated", json(false));
  u.authenticated = authenticated.is_boolean() && authenticated.get<bool>();
  const json user = status.value("user", json::object());
  if (!user.is_object())
    return Status::InvalidArgument("TokenReview.status.user: expected an object");
  if (const json name = user.value("username", json("")); name.is_string())
    u.username = name.get<std::string>();
  if (const json groups = user.value("groups", json::array()); groups.is_array()) {
    for (const json& g : groups)
      if (g.is_string()) u.groups.push_back(g.get<std::string>());
  }
  const json extra = user.value("extra", json::object());
  if (extra.is_object() && extra.contains(kNodeNameExtra)) {
    const json& node = extra[kNodeNameExtra];
    const std::string where =
        std::string("TokenReview.status.user.extra[\"") + kNodeNameExtra + "\"]";
    if (!node.is_array() || node.size() > 1 || (node.size() == 1 && !node[0].is_string()))
      return Status::InvalidArgument(where + ": expected at most one node name");
    if (node.size() == 1) u.node = node[0].get<std::string>();
  }
  return u;
}

TokenReviewAuthenticator::TokenReviewAuthenticator(ReviewFn review, Options options)
    : review_(std::move(review)), options_(std::move(options)) {}

Result<Principal> TokenReviewAuthenticator::Authenticate(std::string_view token) {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    auto it = cache_.find(token);
    if (it != cache_.end() && it->second.expires > now) {
      if (!it->second.principal) return Status::NotFound("token rejected by TokenReview");
      return *it->second.principal;
    }
  }
  Result<ReviewedUser> user = review_(token);
  if (!user.ok()) return Status::Unavailable("TokenReview failed: " + user.status().message());
  std::optional<Principal> p;
  if (user->authenticated) {
    auto in = [&](const std::vector<std::string>& groups) {
      return std::any_of(user->groups.begin(), user->groups.end(), [&](const std::string& g) {
        return std::find(groups.begin(), groups.end(), g) != groups.end();
      });
    };
    const bool agent_user = std::find(options_.agent_users.begin(), options_.agent_users.end(),
                                      user->username) != options_.agent_users.end();
    const bool replica_user =
        std::find(options_.replica_users.begin(), options_.replica_users.end(), user->username) !=
        options_.replica_users.end();
    if (in(options_.admin_groups)) {
      p = Principal{user->username, Role::kAdmin, user->node};
    } else if (replica_user) {
      p = Principal{user->username, Role::kReplica, user->node};
    } else if (agent_user || in(options_.agent_groups)) {
      p = Principal{user->username, Role::kAgent, user->node};
    } else if (in(options_.read_groups)) {
      p = Principal{user->username, Role::kRead, user->node};
    }
  }
  std::lock_guard lock(mu_);
  if (cache_.size() > 10000) cache_.clear();
  cache_[std::string(token)] = {p, now + options_.cache_ttl};
  if (!p) return Status::NotFound("token rejected by TokenReview or in no Chamber group");
  return *p;
}

Result<Principal> ChainAuthenticator::Authenticate(std::string_view token) {
  Status last = Status::NotFound("unknown token");
  for (const auto& a : chain_) {
    Result<Principal> p = a->Authenticate(token);
    if (p.ok()) return p;
    if (p.status().code() != StatusCode::kNotFound) last = p.status();
  }
  return last;
}

}  // namespace chamber::daemon
