#include "admission/admission_review.h"

#include <string>

#include <gtest/gtest.h>

#include "kube/config.h"

namespace chamber::admission {
namespace {

// An AdmissionReview as kube-apiserver sends it for `kubectl run` (trimmed).
constexpr char kPodCreate[] = R"({
  "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
  "request": {
    "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
    "kind": {"group": "", "version": "v1", "kind": "Pod"},
    "resource": {"group": "", "version": "v1", "resource": "pods"},
    "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
    "namespace": "ml", "operation": "CREATE",
    "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
    "object": {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"generateName": "train-", "namespace": "ml"},
               "spec": {"containers": [{"name": "main", "image": "x"}],
                        "schedulerName": "default-scheduler"}},
    "oldObject": null, "dryRun": false,
    "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
  }
})";

TEST(ParseAdmissionReview, ReadsWhatTheDecisionsNeed) {
  auto r = ParseAdmissionReview(kPodCreate);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(r->kind.group, "");
  EXPECT_EQ(r->kind.kind, "Pod");
  EXPECT_EQ(r->resource, "pods");
  EXPECT_EQ(r->operation, "CREATE");
  EXPECT_EQ(r->namespace_name, "ml");
  EXPECT_EQ(r->name, "");
  EXPECT_FALSE(r->dry_run);
  EXPECT_EQ(r->object["spec"]["schedulerName"], "default-scheduler");
}

TEST(ParseAdmissionReview, ErrorsNameTheField) {
  auto error = [](const std::string& body) {
    auto r = ParseAdmissionReview(body);
    EXPECT_FALSE(r.ok()) << body;
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  EXPECT_NE(error("{").find("AdmissionReview: not JSON"), std::string::npos);
  EXPECT_NE(error("[]").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(error(R"({"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview"})")
                .find("field apiVersion: expected admission.k8s.io/v1, got \"admission.k8s.io/"
                      "v1beta1\""),
            std::string::npos);
  EXPECT_NE(error(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})")
                .find("field request: missing"),
            std::string::npos);
  Json j = Json::parse(kPodCreate);
  j["request"].erase("uid");
  EXPECT_NE(error(j.dump()).find("field request.uid: missing"), std::string::npos);
  j = Json::parse(kPodCreate);
  j["request"]["kind"]["kind"] = 3;
  EXPECT_NE(error(j.dump()).find("field request.kind.kind: expected a string"), std::string::npos);
  j = Json::parse(kPodCreate);
  j["request"]["object"] = "pod";
  EXPECT_NE(error(j.dump()).find("field request.object: expected an object"), std::string::npos);
  j = Json::parse(kPodCreate);
  j["request"].erase("object");
  EXPECT_NE(error(j.dump()).find("field request.object: missing for a CREATE"), std::string::npos);
  j["request"]["operation"] = "DELETE";  // a DELETE carries no object
  EXPECT_TRUE(ParseAdmissionReview(j.dump()).ok());
}

TEST(WriteAdmissionReview, AllowsWithABase64JsonPatch) {
  const Json patch =
      Json::array({{{"op", "add"}, {"path", "/spec/schedulerName"}, {"value", "chamber"}}});
  const Json out = Json::parse(WriteAdmissionReview(AdmissionResponse::Allow("u1", patch)));
  EXPECT_EQ(out["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(out["kind"], "AdmissionReview");
  EXPECT_EQ(out["response"]["uid"], "u1");
  EXPECT_EQ(out["response"]["allowed"], true);
  EXPECT_EQ(out["response"]["patchType"], "JSONPatch");
  auto decoded = kube::Base64Decode(out["response"]["patch"].get<std::string>());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(Json::parse(*decoded), patch);
  // No patch: neither patch nor patchType.
  const Json plain = Json::parse(WriteAdmissionReview(AdmissionResponse::Allow("u2")));
  EXPECT_FALSE(plain["response"].contains("patch"));
  EXPECT_FALSE(plain["response"].contains("patchType"));
}

TEST(WriteAdmissionReview, RefusesWithCodeAndMessage) {
  AdmissionResponse r = AdmissionResponse::Refuse("u3", 500, "chamber: cannot tell");
  r.warnings.push_back("a warning");
  const Json out = Json::parse(WriteAdmissionReview(r));
  EXPECT_EQ(out["response"]["allowed"], false);
  EXPECT_EQ(out["response"]["status"]["code"], 500);
  EXPECT_EQ(out["response"]["status"]["message"], "chamber: cannot tell");
  EXPECT_EQ(out["response"]["warnings"], Json::array({"a warning"}));
  EXPECT_FALSE(out["response"].contains("patch"));
}

TEST(PointerToken, EscapesSlashAndTilde) {
  EXPECT_EQ(PointerToken("chamber.io/queue"), "chamber.io~1queue");
  EXPECT_EQ(PointerToken("a~b/c"), "a~0b~1c");
}

}  // namespace
}  // namespace chamber::admission
