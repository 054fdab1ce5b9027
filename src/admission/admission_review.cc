#include "admission/admission_review.h"

#include "common/json_reader.h"
#include "kube/config.h"

namespace chamber::admission {
namespace {

constexpr char kWhere[] = "AdmissionReview";

Status Required(const JsonReader& r, const Json& obj, std::string_view key, std::string_view path,
                std::string* out) {
  CHAMBER_RETURN_IF_ERROR(r.String(obj, key, path, out));
  if (out->empty()) return r.Error(JsonReader::Join(path, key), "missing");
  return Status::Ok();
}

}  // namespace

Result<AdmissionRequest> ParseAdmissionReview(std::string_view body) {
  const JsonReader r(kWhere);
  Json review;
  try {
    review = Json::parse(body);
  } catch (const Json::exception& e) {  // parse errors and number overflows
    return Status::InvalidArgument(std::string(kWhere) + ": not JSON (" +
                                   std::to_string(body.size()) + " bytes): " + e.what());
  }
  if (!review.is_object()) return r.Error("(body)", "expected a JSON object");
  std::string api_version, kind;
  CHAMBER_RETURN_IF_ERROR(r.String(review, "apiVersion", "", &api_version));
  CHAMBER_RETURN_IF_ERROR(r.String(review, "kind", "", &kind));
  if (api_version != kAdmissionApiVersion)
    return r.Error("apiVersion", "expected " + std::string(kAdmissionApiVersion) + ", got \"" +
                                     api_version +
                                     "\" (the webhook configuration's admissionReviewVersions "
                                     "must be [v1])");
  if (kind != "AdmissionReview")
    return r.Error("kind", "expected AdmissionReview, got \"" + kind + "\"");
  const Json* request = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Object(review, "request", "", &request));
  if (request == nullptr) return r.Error("request", "missing");

  AdmissionRequest out;
  const std::string p = "request";
  CHAMBER_RETURN_IF_ERROR(Required(r, *request, "uid", p, &out.uid));
  const Json* gvk = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Object(*request, "kind", p, &gvk));
  if (gvk == nullptr) return r.Error("request.kind", "missing");
  CHAMBER_RETURN_IF_ERROR(r.String(*gvk, "group", "request.kind", &out.kind.group));
  CHAMBER_RETURN_IF_ERROR(Required(r, *gvk, "version", "request.kind", &out.kind.version));
  CHAMBER_RETURN_IF_ERROR(Required(r, *gvk, "kind", "request.kind", &out.kind.kind));
  const Json* resource = nullptr;
  CHAMBER_RETURN_IF_ERROR(r.Object(*request, "resource", p, &resource));
  if (resource != nullptr)
    CHAMBER_RETURN_IF_ERROR(r.String(*resource, "resource", "request.resource", &out.resource));
  CHAMBER_RETURN_IF_ERROR(r.String(*request, "subResource", p, &out.sub_resource));
  CHAMBER_RETURN_IF_ERROR(Required(r, *request, "operation", p, &out.operation));
  CHAMBER_RETURN_IF_ERROR(r.String(*request, "namespace", p, &out.namespace_name));
  CHAMBER_RETURN_IF_ERROR(r.String(*request, "name", p, &out.name));
  CHAMBER_RETURN_IF_ERROR(r.Bool(*request, "dryRun", p, &out.dry_run));
  if (const Json* object = JsonReader::Find(*request, "object")) {
    CHAMBER_RETURN_IF_ERROR(r.ObjectValue(*object, "request.object"));
    out.object = *object;
  } else if (out.operation == "CREATE" || out.operation == "UPDATE") {
    return r.Error("request.object", "missing for a " + out.operation);
  }
  return out;
}

std::string WriteAdmissionReview(const AdmissionResponse& response) {
  Json res = {{"uid", response.uid}, {"allowed", response.allowed}};
  if (response.allowed && response.patch.is_array() && !response.patch.empty()) {
    res["patchType"] = "JSONPatch";
    res["patch"] = kube::Base64Encode(response.patch.dump());
  }
  if (!response.allowed)
    res["status"] = {{"code", response.code == 0 ? 403 : response.code},
                     {"message", response.message}};
  if (!response.warnings.empty()) res["warnings"] = response.warnings;
  return Json{{"apiVersion", kAdmissionApiVersion}, {"kind", "AdmissionReview"}, {"response", res}}
      .dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string PointerToken(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

}  // namespace chamber::admission
