#include "cli/api_client.h"

#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "common/tls.h"

namespace chamber::cli {

void AddApiClientFlags(CLI::App* cmd, ApiClientOptions& o) {
  cmd->add_option("--server", o.server, "chamberd's address")->capture_default_str();
  cmd->add_option("--token", o.token, "Bearer token for the API");
  cmd->add_option("--token-file", o.token_file, "File holding the bearer token");
  cmd->add_option("--ca-file", o.ca_file,
                  "PEM CA bundle the server's certificate must chain to, for an https:// --server "
                  "(default: the system's trust store); the host name is checked");
  cmd->add_option("-o,--output", o.output, "Output format")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
}

namespace {

Result<std::string> Token(const ApiClientOptions& o) {
  if (!o.token.empty()) return o.token;
  if (o.token_file.empty()) return std::string();
  std::ifstream in(o.token_file);
  if (!in) return Status::InvalidArgument("--token-file: cannot read " + o.token_file);
  for (std::string line; std::getline(in, line);) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream fields(line);
    std::string token;
    if (fields >> token) return token;
  }
  return Status::InvalidArgument("--token-file: " + o.token_file + " holds no token");
}

}  // namespace

Result<nlohmann::json> ApiGet(const ApiClientOptions& o, const std::string& path) {
  return ApiCall(o, "GET", path);
}

Result<nlohmann::json> ApiPost(const ApiClientOptions& o, const std::string& path) {
  return ApiCall(o, "POST", path);
}

Result<nlohmann::json> ApiCall(const ApiClientOptions& o, const std::string& method,
                               const std::string& path) {
  CHAMBER_ASSIGN_OR_RETURN(std::string token, Token(o));
  httplib::Client client(o.server);
  if (!client.is_valid())
    return Status::InvalidArgument("--server: \"" + o.server +
                                   "\" is not an address like http://127.0.0.1:8080");
  client.enable_server_certificate_verification(true);
  if (!o.ca_file.empty()) {
    CHAMBER_RETURN_IF_ERROR(tls::CheckCaFile({"--ca-file", o.ca_file}));
    client.set_ca_cert_path(o.ca_file);
  }
  client.set_connection_timeout(5);
  client.set_read_timeout(30);
  if (!token.empty()) client.set_bearer_token_auth(token);
  httplib::Result r = method == "POST" ? client.Post(path) : client.Get(path);
  if (!r)
    return Status::Unavailable("cannot reach " + o.server + " (" + httplib::to_string(r.error()) +
                               " error); is `chamber demo` or chamberd running there? (--server)");
  std::string message;
  try {
    const nlohmann::json body = nlohmann::json::parse(r->body);
    if (r->status == 200) return body;
    if (body.is_object() && body.contains("error")) message = body["error"].get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    if (r->status == 200)
      return Status::Internal(o.server + path + ": the answer is not JSON: " + e.what());
  }
  if (r->status == 401)
    return Status::FailedPrecondition(o.server + " wants a valid token (" + message +
                                      "): give --token or --token-file");
  if (r->status == 403)
    return Status::FailedPrecondition(o.server + " refused the token: " + message);
  if (r->status == 404)
    return Status::NotFound(o.server + path + ": " + (message.empty() ? "not found" : message));
  return Status::Unavailable(o.server + path + ": HTTP " + std::to_string(r->status) +
                             (message.empty() ? "" : ": " + message));
}

std::string Percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", fraction * 100);
  return buf;
}

std::string Money(double amount, const std::string& currency) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", amount);
  if (currency == "USD") return std::string("$") + buf;
  return std::string(buf) + " " + currency;
}

std::string Number(double v, int decimals) {
  if (std::fabs(v - std::round(v)) < 1e-9)
    return std::to_string(static_cast<int64_t>(std::round(v)));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string GpuAmount(double v) {
  std::string out = Number(v, 3);
  if (out.find('.') == std::string::npos) return out;
  while (out.back() == '0') out.pop_back();
  if (out.back() == '.') out.pop_back();
  return out;
}

std::string DurationText(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(seconds));
  char buf[64];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  }
  return buf;
}

void PrintTable(std::ostream& out, const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size(), 0);
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  const bool has_header =
      std::any_of(header.begin(), header.end(), [](const std::string& h) { return !h.empty(); });
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size() && c < width.size(); ++c) {
      text += cells[c];
      if (c + 1 < cells.size()) text += std::string(width[c] - cells[c].size() + 2, ' ');
    }
    out << text << "\n";
  };
  if (has_header) line(header);
  for (const auto& row : rows) line(row);
}

}  // namespace chamber::cli
