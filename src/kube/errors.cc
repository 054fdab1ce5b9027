#include "kube/errors.h"

#include <nlohmann/json.hpp>

namespace chamber::kube {
namespace {

std::string_view DefaultReason(long code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "Unknown";
  }
}

StatusCode CodeFor(long http, std::string_view reason) {
  if (http == 404) return StatusCode::kNotFound;
  if (http == 409 && reason == "AlreadyExists") return StatusCode::kAlreadyExists;
  if (http == 400 || http == 422 || http == 415) return StatusCode::kInvalidArgument;
  if (http == 429 || http >= 500) return StatusCode::kUnavailable;
  return StatusCode::kFailedPrecondition;
}

}  // namespace

Status ApiErrorStatus(std::string_view context, long http_code, std::string_view body) {
  std::string reason(DefaultReason(http_code));
  std::string message;
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("kind") && j["kind"] == "Status") {
    if (j.contains("reason") && j["reason"].is_string() && !j["reason"].get<std::string>().empty())
      reason = j["reason"].get<std::string>();
    if (j.contains("message") && j["message"].is_string())
      message = j["message"].get<std::string>();
  } else if (!body.empty()) {
    constexpr size_t kQuote = 200;
    message = "response body: \"" + std::string(body.substr(0, kQuote)) +
              (body.size() > kQuote ? "...\"" : "\"");
  }
  std::string text = std::string(context) + ": HTTP " + std::to_string(http_code) + " " + reason;
  if (!message.empty()) text += ": " + message;
  return Status(CodeFor(http_code, reason), std::move(text))
      .WithHttp(static_cast<int>(http_code), std::move(reason));
}

int HttpCode(const Status& status) { return status.http_code(); }

std::string Reason(const Status& status) { return status.reason(); }

bool IsNotFound(const Status& s) { return HttpCode(s) == 404; }
bool IsConflict(const Status& s) { return HttpCode(s) == 409 && Reason(s) != "AlreadyExists"; }
bool IsAlreadyExists(const Status& s) { return HttpCode(s) == 409 && Reason(s) == "AlreadyExists"; }
bool IsGone(const Status& s) { return HttpCode(s) == 410; }
bool IsTooManyRequests(const Status& s) { return HttpCode(s) == 429; }
bool IsForbidden(const Status& s) { return HttpCode(s) == 403; }
bool IsUnauthorized(const Status& s) { return HttpCode(s) == 401; }
bool IsInvalid(const Status& s) { return HttpCode(s) == 422; }
bool IsEvictionBlocked(const Status& s) {
  return HttpCode(s) == 429 && Reason(s) == "DisruptionBudget";
}

}  // namespace chamber::kube
