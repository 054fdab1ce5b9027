#include "daemon/auth.h"

#include <gtest/gtest.h>

namespace chamber::daemon {
namespace {

TEST(TokenFileTest, ParsesRolesNamesAndComments) {
  auto a = TokenFileAuthenticator::Parse(
      "# tokens for the API\n"
      "\n"
      "aaaaaaaaaaaaaaaaaaaa read dashboard\n"
      "bbbbbbbbbbbbbbbbbbbb admin   # the operator\n",
      "tokens");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ((*a)->size(), 2u);
  Result<Principal> p = (*a)->Authenticate("aaaaaaaaaaaaaaaaaaaa");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->name, "dashboard");
  EXPECT_EQ(p->role, Role::kRead);
  p = (*a)->Authenticate("bbbbbbbbbbbbbbbbbbbb");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->role, Role::kAdmin);
  EXPECT_EQ(p->name, "token-line-4");
  EXPECT_EQ((*a)->Authenticate("nope").status().code(), StatusCode::kNotFound);
}

TEST(TokenFileTest, ErrorsNameTheLine) {
  auto bad_role = TokenFileAuthenticator::Parse(
      "aaaaaaaaaaaaaaaaaaaa read\ncccccccccccccccccccc root\n", "tokens");
  ASSERT_FALSE(bad_role.ok());
  EXPECT_EQ(bad_role.status().message(),
            "tokens:2: unknown role \"root\" (expected read, admin, agent or replica)");
  auto no_role = TokenFileAuthenticator::Parse("aaaaaaaaaaaaaaaaaaaa\n", "t");
  EXPECT_EQ(no_role.status().message(),
            "t:1: a token needs a role (read, admin, agent or replica) after it");
  auto short_token = TokenFileAuthenticator::Parse("abc read\n", "t");
  EXPECT_EQ(short_token.status().message(), "t:1: token is shorter than 16 characters");
  auto twice =
      TokenFileAuthenticator::Parse("aaaaaaaaaaaaaaaaaaaa read\naaaaaaaaaaaaaaaaaaaa admin\n", "t");
  EXPECT_EQ(twice.status().message(), "t:2: the same token appears twice");
  EXPECT_EQ(TokenFileAuthenticator::Parse("# nothing\n", "t").status().message(),
            "t: the token file holds no tokens");
  EXPECT_EQ(TokenFileAuthenticator::Load("/nonexistent/tokens").status().code(),
            StatusCode::kNotFound);
}

TEST(TokenReviewTest, MapsGroupsToRolesAndCaches) {
  int calls = 0;
  TokenReviewAuthenticator a(
      [&](std::string_view token) -> Result<ReviewedUser> {
        ++calls;
        if (token == "admin-token") return ReviewedUser{true, "ops", {"system:masters"}, ""};
        if (token == "viewer-token") return ReviewedUser{true, "ann", {"chamber:viewers"}, ""};
        if (token == "other-token") return ReviewedUser{true, "bob", {"dev"}, ""};
        if (token == "broken") return Status::Unavailable("apiserver down");
        return ReviewedUser{false, "", {}, ""};
      },
      TokenReviewAuthenticator::Options{});
  EXPECT_EQ(a.Authenticate("admin-token")->role, Role::kAdmin);
  EXPECT_EQ(a.Authenticate("viewer-token")->name, "ann");
  EXPECT_EQ(a.Authenticate("viewer-token")->role, Role::kRead);
  EXPECT_EQ(calls, 2);  // the second viewer lookup came from the cache
  EXPECT_EQ(a.Authenticate("other-token").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(a.Authenticate("forged").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(a.Authenticate("broken").status().code(), StatusCode::kUnavailable);
}

TEST(TokenFileTest, AgentRole) {
  auto a = TokenFileAuthenticator::Parse("aaaaaaaaaaaaaaaaaaaa agent node-agents\n", "t");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ((*a)->Authenticate("aaaaaaaaaaaaaaaaaaaa")->role, Role::kAgent);
  EXPECT_EQ(RoleName(Role::kAgent), "agent");
}

TEST(TokenReviewTest, AgentUsersAndGroupsGetTheAgentRole) {
  TokenReviewAuthenticator::Options o;
  o.agent_users = {"system:serviceaccount:chamber:chamber-agent"};
  o.agent_groups = {"chamber:agents"};
  TokenReviewAuthenticator a(
      [](std::string_view token) -> Result<ReviewedUser> {
        if (token == "sa")
          return ReviewedUser{
              true, "system:serviceaccount:chamber:chamber-agent", {"system:serviceaccounts"}, ""};
        if (token == "grp") return ReviewedUser{true, "x", {"chamber:agents"}, ""};
        if (token == "adm")
          return ReviewedUser{true, "y", {"chamber:agents", "chamber:admins"}, ""};
        return ReviewedUser{true, "z", {"system:serviceaccounts"}, ""};
      },
      o);
  EXPECT_EQ(a.Authenticate("sa")->role, Role::kAgent);
  EXPECT_EQ(a.Authenticate("grp")->role, Role::kAgent);
  EXPECT_EQ(a.Authenticate("adm")->role, Role::kAdmin);  // admin wins
  EXPECT_EQ(a.Authenticate("other").status().code(), StatusCode::kNotFound);
}

// chamberd's own service account, named by --replica-user, may only copy the history; it is
// a replica even when its namespace's accounts are readers.
TEST(TokenReviewTest, ReplicaUsersGetTheReplicaRole) {
  TokenReviewAuthenticator::Options o;
  o.read_groups = {"system:serviceaccounts:chamber"};
  o.replica_users = {"system:serviceaccount:chamber:chamber"};
  TokenReviewAuthenticator a(
      [](std::string_view token) -> Result<ReviewedUser> {
        if (token == "chamberd")
          return ReviewedUser{true,
                              "system:serviceaccount:chamber:chamber",
                              {"system:serviceaccounts", "system:serviceaccounts:chamber"},
                              ""};
        return ReviewedUser{true,
                            "system:serviceaccount:chamber:chamber-dashboard",
                            {"system:serviceaccounts", "system:serviceaccounts:chamber"},
                            ""};
      },
      o);
  EXPECT_EQ(a.Authenticate("chamberd")->role, Role::kReplica);
  EXPECT_EQ(a.Authenticate("dashboard")->role, Role::kRead);
  auto file = TokenFileAuthenticator::Parse("aaaaaaaaaaaaaaaaaaaa replica standby\n", "t");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->Authenticate("aaaaaaaaaaaaaaaaaaaa")->role, Role::kReplica);
  EXPECT_EQ(RoleName(Role::kReplica), "replica");
}

// A TokenReview of a service-account token the kubelet projected into a pod (Kubernetes 1.30+).
TEST(TokenReviewTest, ParsesTheBoundNodeFromExtra) {
  const nlohmann::json bound = nlohmann::json::parse(R"({
    "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
    "status": {"authenticated": true,
               "audiences": ["https://kubernetes.default.svc.cluster.local"],
               "user": {"username": "system:serviceaccount:chamber:chamber-agent",
                        "uid": "5b1e", "groups": ["system:serviceaccounts",
                                                  "system:serviceaccounts:chamber",
                                                  "system:authenticated"],
                        "extra": {"authentication.kubernetes.io/credential-id": ["JTI=7f"],
                                  "authentication.kubernetes.io/node-name": ["gpu-node-3"],
                                  "authentication.kubernetes.io/node-uid": ["a1"],
                                  "authentication.kubernetes.io/pod-name": ["agent-x"],
                                  "authentication.kubernetes.io/pod-uid": ["b2"]}}}})");
  Result<ReviewedUser> u = ParseTokenReview(bound);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_TRUE(u->authenticated);
  EXPECT_EQ(u->username, "system:serviceaccount:chamber:chamber-agent");
  EXPECT_EQ(u->groups.size(), 3u);
  EXPECT_EQ(u->node, "gpu-node-3");

  // A token from a Secret or an older cluster: no extra, no node.
  Result<ReviewedUser> plain = ParseTokenReview(nlohmann::json::parse(
      R"({"status": {"authenticated": true, "user": {"username": "u", "groups": ["g"]}}})"));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->username, "u");
  EXPECT_EQ(plain->node, "");
  Result<ReviewedUser> rejected =
      ParseTokenReview(nlohmann::json::parse(R"({"status": {"authenticated": false}})"));
  ASSERT_TRUE(rejected.ok());
  EXPECT_FALSE(rejected->authenticated);

  Result<ReviewedUser> two = ParseTokenReview(nlohmann::json::parse(
      R"({"status": {"authenticated": true, "user": {"username": "u",
          "extra": {"authentication.kubernetes.io/node-name": ["a", "b"]}}}})"));
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().message(),
            "TokenReview.status.user.extra[\"authentication.kubernetes.io/node-name\"]: expected "
            "at most one node name");
}

TEST(TokenReviewTest, PrincipalCarriesTheBoundNode) {
  TokenReviewAuthenticator::Options o;
  o.agent_groups = {"system:serviceaccounts:chamber"};
  TokenReviewAuthenticator a(
      [](std::string_view token) -> Result<ReviewedUser> {
        if (token == "pod-bound")
          return ReviewedUser{true, "sa", {"system:serviceaccounts:chamber"}, "gpu-node-3"};
        return ReviewedUser{true, "sa", {"system:serviceaccounts:chamber"}, ""};
      },
      o);
  Result<Principal> bound = a.Authenticate("pod-bound");
  ASSERT_TRUE(bound.ok());
  EXPECT_EQ(bound->role, Role::kAgent);
  EXPECT_EQ(bound->node, "gpu-node-3");
  EXPECT_EQ(a.Authenticate("pod-bound")->node, "gpu-node-3");  // from the cache, too
  Result<Principal> unbound = a.Authenticate("legacy");
  ASSERT_TRUE(unbound.ok());
  EXPECT_EQ(unbound->role, Role::kAgent);
  EXPECT_EQ(unbound->node, "");
}

TEST(ChainTest, FirstKnowerAnswers) {
  ChainAuthenticator chain;
  chain.Add(std::move(TokenFileAuthenticator::Parse("aaaaaaaaaaaaaaaaaaaa read\n", "t")).value());
  chain.Add(std::make_unique<TokenReviewAuthenticator>(
      [](std::string_view) -> Result<ReviewedUser> {
        return ReviewedUser{true, "ops", {"chamber:admins"}, ""};
      },
      TokenReviewAuthenticator::Options{}));
  EXPECT_EQ(chain.Authenticate("aaaaaaaaaaaaaaaaaaaa")->role, Role::kRead);
  EXPECT_EQ(chain.Authenticate("anything-else")->role, Role::kAdmin);
}

}  // namespace
}  // namespace chamber::daemon
