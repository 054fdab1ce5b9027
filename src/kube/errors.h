// Errors from the API server as chamber::Status values. The HTTP code and the Kubernetes
// Status reason travel in the Status (Status::http_code, Status::reason, kept by WithContext);
// the message reads "<request>: HTTP 409 Conflict: <the server's message>".
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace chamber::kube {

// Builds the Status for an HTTP error. `body` is the response body: when it is a Kubernetes
// Status object its reason and message are used, otherwise the start of the body is quoted.
// `context` names the request ("GET /api/v1/namespaces/default/pods/x").
Status ApiErrorStatus(std::string_view context, long http_code, std::string_view body);

// The HTTP code an API error carries, or 0 when `status` is not an API error.
int HttpCode(const Status& status);
// The Kubernetes reason ("NotFound", "Conflict", "AlreadyExists", "Expired", ...) or "".
std::string Reason(const Status& status);

bool IsNotFound(const Status& status);         // 404
bool IsConflict(const Status& status);         // 409 with reason Conflict (stale resourceVersion)
bool IsAlreadyExists(const Status& status);    // 409 with reason AlreadyExists
bool IsGone(const Status& status);             // 410 (expired resourceVersion or continue token)
bool IsTooManyRequests(const Status& status);  // 429
bool IsForbidden(const Status& status);        // 403
bool IsUnauthorized(const Status& status);     // 401
bool IsInvalid(const Status& status);          // 422
// An eviction refused because a PodDisruptionBudget allows no disruption now (429 on
// pods/eviction).
bool IsEvictionBlocked(const Status& status);

}  // namespace chamber::kube
