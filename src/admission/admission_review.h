// AdmissionReview v1 (admission.k8s.io/v1), the body the API server posts to a webhook and the
// body it wants back. Reading: the fields a mutating webhook decides on, checked with errors
// that name the field ("AdmissionReview: field request.uid: missing"). Writing: the response
// for the same uid, allowed with a JSONPatch (base64 in `patch`, as the API wants) or refused
// with an HTTP-style code and a message the API server shows to whoever made the request.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace chamber::admission {

using Json = nlohmann::json;

inline constexpr char kAdmissionApiVersion[] = "admission.k8s.io/v1";

struct GroupVersionKind {
  std::string group, version, kind;
};

struct AdmissionRequest {
  std::string uid;             // copied into the response
  GroupVersionKind kind;       // of `object`: {"", "v1", "Pod"}, {"batch", "v1", "Job"}
  std::string resource;        // "pods", "jobs"
  std::string sub_resource;    // "" for the object itself
  std::string operation;       // CREATE, UPDATE, DELETE, CONNECT
  std::string namespace_name;  // the request's namespace (a new pod's metadata may lack it)
  std::string name;            // "" for a CREATE with generateName
  bool dry_run = false;
  Json object;  // the object as it would be stored; null for DELETE
};

// Reads an AdmissionReview v1 request body. Errors start "AdmissionReview: " and name the field.
Result<AdmissionRequest> ParseAdmissionReview(std::string_view body);

struct AdmissionResponse {
  std::string uid;
  bool allowed = true;
  Json patch;  // a JSON Patch (an array of operations); null or empty: no patch
  // A refusal's code (400, 403, 500, ...) and message.
  int code = 0;
  std::string message;
  std::vector<std::string> warnings;  // shown by kubectl; each one line

  static AdmissionResponse Allow(std::string uid, Json patch = nullptr) {
    AdmissionResponse r;
    r.uid = std::move(uid);
    r.patch = std::move(patch);
    return r;
  }
  static AdmissionResponse Refuse(std::string uid, int code, std::string message) {
    AdmissionResponse r;
    r.uid = std::move(uid);
    r.allowed = false;
    r.code = code;
    r.message = std::move(message);
    return r;
  }
};

// The AdmissionReview v1 response body.
std::string WriteAdmissionReview(const AdmissionResponse& response);

// A JSON Pointer token: "chamber.io/queue" is "chamber.io~1queue" (RFC 6901).
std::string PointerToken(std::string_view key);

}  // namespace chamber::admission
