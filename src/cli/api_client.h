// What `chamber status`, `chamber nodes` and `chamber cost` share: the --server, --token and
// --token-file flags, and a GET against chamberd's REST API (docs/openapi.yaml).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/status.h"

namespace chamber::cli {

struct ApiClientOptions {
  std::string server = "http://127.0.0.1:8080";
  std::string token;
  std::string token_file;  // the first field of its first non-comment line is the token
  std::string ca_file;     // PEM CA bundle for an https:// server; empty: the system's
  std::string output = "table";
};

// Adds --server, --token, --token-file and -o/--output to `cmd`.
void AddApiClientFlags(CLI::App* cmd, ApiClientOptions& options);

// GETs `path` (e.g. "/api/v1/fleet") and parses the JSON answer. Errors say what to do:
// an unreachable server, a missing or refused token, an error the server reports (NotFound for
// HTTP 404).
Result<nlohmann::json> ApiGet(const ApiClientOptions& options, const std::string& path);
// The same for a POST without a body (an action such as /api/v1/health/nodes/{node}/clear).
Result<nlohmann::json> ApiPost(const ApiClientOptions& options, const std::string& path);
Result<nlohmann::json> ApiCall(const ApiClientOptions& options, const std::string& method,
                               const std::string& path);

// Table helpers.
std::string Percent(double fraction);                           // "53.9%"
std::string Money(double amount, const std::string& currency);  // "$682.80" or "682.80 EUR"
std::string Number(double v, int decimals = 1);  // "142.3"; whole numbers without decimals
// GPU-equivalents, exact to the thousandth a share is counted in: "8", "0.25", "6.75".
std::string GpuAmount(double v);
std::string DurationText(double seconds);  // "45s", "2m10s", "1h02m"

// Columns padded to their widest cell, two spaces apart; the header in capitals as given.
void PrintTable(std::ostream& out, const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows);

}  // namespace chamber::cli
