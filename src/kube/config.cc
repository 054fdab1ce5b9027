#include "kube/config.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "common/file.h"
#include "common/yaml_reader.h"

namespace chamber::kube {
namespace {

// One named entry (a cluster, user or context) and the file it came from.
struct Entry {
  YAML::Node body;
  std::shared_ptr<YamlReader> reader;
  std::string base_dir;
  std::string path;  // "users[1].user"
};

struct Merged {
  std::map<std::string, Entry> clusters, users, contexts;
  std::string current_context;
  std::string current_context_source;
};

std::string Resolve(const std::string& base_dir, const std::string& p) {
  if (p.empty() || p.front() == '/') return p;
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

Result<std::string> OptString(const YamlReader& r, const YAML::Node& map, const std::string& key,
                              const std::string& path) {
  const YAML::Node n = map[key];
  if (!n.IsDefined() || n.IsNull()) return std::string();
  return r.String(n, path + "." + key);
}

// Adds the named entries of `list` (clusters, users or contexts) that are not there yet.
Status MergeList(const std::shared_ptr<YamlReader>& r, const YAML::Node& doc,
                 const std::string& list_key, const std::string& body_key,
                 const std::string& base_dir, std::map<std::string, Entry>* out) {
  const YAML::Node list = doc[list_key];
  if (!list.IsDefined() || list.IsNull()) return Status::Ok();
  CHAMBER_RETURN_IF_ERROR(r->ExpectList(list, list_key));
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = list_key + "[" + std::to_string(i) + "]";
    const YAML::Node item = list[i];
    CHAMBER_RETURN_IF_ERROR(r->ExpectMap(item, path));
    if (!item["name"].IsDefined()) return r->Error(item, path + ".name", "missing");
    CHAMBER_ASSIGN_OR_RETURN(std::string name, r->String(item["name"], path + ".name"));
    const YAML::Node body = item[body_key];
    if (!body.IsDefined()) return r->Error(item, path + "." + body_key, "missing");
    CHAMBER_RETURN_IF_ERROR(r->ExpectMap(body, path + "." + body_key));
    out->try_emplace(name, Entry{body, r, base_dir, path + "." + body_key});
  }
  return Status::Ok();
}

Status MergeDocument(const std::string& text, const std::string& source,
                     const std::string& base_dir, Merged* m) {
  auto r = std::make_shared<YamlReader>(source);
  CHAMBER_ASSIGN_OR_RETURN(YAML::Node doc, r->Load(text));
  if (doc.IsNull() || !doc.IsDefined()) return Status::Ok();  // an empty file adds nothing
  CHAMBER_RETURN_IF_ERROR(r->ExpectMap(doc, "(document)"));
  CHAMBER_RETURN_IF_ERROR(MergeList(r, doc, "clusters", "cluster", base_dir, &m->clusters));
  CHAMBER_RETURN_IF_ERROR(MergeList(r, doc, "users", "user", base_dir, &m->users));
  CHAMBER_RETURN_IF_ERROR(MergeList(r, doc, "contexts", "context", base_dir, &m->contexts));
  CHAMBER_ASSIGN_OR_RETURN(std::string current, OptString(*r, doc, "current-context", ""));
  if (m->current_context.empty() && !current.empty()) {
    m->current_context = current;
    m->current_context_source = source;
  }
  return Status::Ok();
}

// Reads PEM from `<key>` (a file) or `<key>-data` (base64).
Result<std::string> PemField(const Entry& e, const std::string& key) {
  const YamlReader& r = *e.reader;
  auto check = [&](Result<std::string> pem, const std::string& field) -> Result<std::string> {
    if (!pem.ok()) return r.Error(e.body[field], e.path + "." + field, pem.status().message());
    if (pem->find("-----BEGIN ") == std::string::npos)
      return r.Error(e.body[field], e.path + "." + field, "not PEM data (no \"-----BEGIN \" line)");
    return pem;
  };
  CHAMBER_ASSIGN_OR_RETURN(std::string data, OptString(r, e.body, key + "-data", e.path));
  if (!data.empty()) return check(Base64Decode(data), key + "-data");
  CHAMBER_ASSIGN_OR_RETURN(std::string file, OptString(r, e.body, key, e.path));
  if (file.empty()) return std::string();
  return check(ReadFile(Resolve(e.base_dir, file)), key);
}

Result<RestConfig> Build(const Merged& m, const std::string& context_override,
                         const std::string& sources) {
  const std::string ctx_name = context_override.empty() ? m.current_context : context_override;
  if (ctx_name.empty())
    return Status::InvalidArgument(sources + ": no current-context is set and none was given");
  auto ctx_it = m.contexts.find(ctx_name);
  if (ctx_it == m.contexts.end())
    return Status::InvalidArgument(sources + ": context \"" + ctx_name + "\" is not defined");
  const Entry& ctx = ctx_it->second;
  const YamlReader& cr = *ctx.reader;
  CHAMBER_ASSIGN_OR_RETURN(std::string cluster_name, OptString(cr, ctx.body, "cluster", ctx.path));
  CHAMBER_ASSIGN_OR_RETURN(std::string user_name, OptString(cr, ctx.body, "user", ctx.path));
  CHAMBER_ASSIGN_OR_RETURN(std::string ns, OptString(cr, ctx.body, "namespace", ctx.path));
  if (cluster_name.empty()) return cr.Error(ctx.body, ctx.path + ".cluster", "missing");
  auto cl_it = m.clusters.find(cluster_name);
  if (cl_it == m.clusters.end())
    return cr.Error(ctx.body["cluster"], ctx.path + ".cluster",
                    "cluster \"" + cluster_name + "\" is not defined");

  RestConfig cfg;
  cfg.source = sources + " (context " + ctx_name + ")";
  if (!ns.empty()) cfg.namespace_name = ns;

  const Entry& cl = cl_it->second;
  const YamlReader& r = *cl.reader;
  CHAMBER_ASSIGN_OR_RETURN(cfg.server, OptString(r, cl.body, "server", cl.path));
  if (cfg.server.empty()) return r.Error(cl.body, cl.path + ".server", "missing");
  if (cfg.server.rfind("https://", 0) != 0 && cfg.server.rfind("http://", 0) != 0)
    return r.Error(cl.body["server"], cl.path + ".server",
                   "\"" + cfg.server + "\" is not an http:// or https:// URL");
  while (!cfg.server.empty() && cfg.server.back() == '/') cfg.server.pop_back();
  CHAMBER_ASSIGN_OR_RETURN(cfg.ca_pem, PemField(cl, "certificate-authority"));
  if (cl.body["insecure-skip-tls-verify"].IsDefined()) {
    CHAMBER_ASSIGN_OR_RETURN(
        cfg.insecure_skip_tls_verify,
        r.Bool(cl.body["insecure-skip-tls-verify"], cl.path + ".insecure-skip-tls-verify"));
  }
  CHAMBER_ASSIGN_OR_RETURN(cfg.tls_server_name, OptString(r, cl.body, "tls-server-name", cl.path));

  if (!user_name.empty()) {
    auto u_it = m.users.find(user_name);
    if (u_it == m.users.end())
      return cr.Error(ctx.body["user"], ctx.path + ".user",
                      "user \"" + user_name + "\" is not defined");
    const Entry& u = u_it->second;
    const YamlReader& ur = *u.reader;
    CHAMBER_ASSIGN_OR_RETURN(cfg.client_cert_pem, PemField(u, "client-certificate"));
    CHAMBER_ASSIGN_OR_RETURN(cfg.client_key_pem, PemField(u, "client-key"));
    if (cfg.client_cert_pem.empty() != cfg.client_key_pem.empty())
      return ur.Error(u.body, u.path, "client-certificate and client-key must be given together");
    CHAMBER_ASSIGN_OR_RETURN(cfg.token, OptString(ur, u.body, "token", u.path));
    CHAMBER_ASSIGN_OR_RETURN(std::string token_file, OptString(ur, u.body, "tokenFile", u.path));
    if (!token_file.empty()) {
      cfg.token_file = Resolve(u.base_dir, token_file);
      Result<std::string> probe = ReadFile(cfg.token_file);
      if (!probe.ok())
        return ur.Error(u.body["tokenFile"], u.path + ".tokenFile", probe.status().message());
    }
  }
  return cfg;
}

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

}  // namespace

Result<RestConfig> ParseKubeconfig(const std::string& text, const std::string& source,
                                   const std::string& base_dir, const std::string& context) {
  Merged m;
  try {
    CHAMBER_RETURN_IF_ERROR(MergeDocument(text, source, base_dir, &m));
    return Build(m, context, source);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source + ": " + e.what());
  }
}

Result<RestConfig> LoadKubeconfig(const std::string& paths, const std::string& context) {
  Merged m;
  std::string sources;
  std::string missing;
  std::stringstream ss(paths);
  std::string path;
  try {
    while (std::getline(ss, path, ':')) {
      if (path.empty()) continue;
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0) {
        missing += (missing.empty() ? "" : ", ") + path;
        continue;  // client-go skips files that do not exist
      }
      CHAMBER_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
      const std::string dir = std::filesystem::path(path).parent_path().string();
      CHAMBER_RETURN_IF_ERROR(MergeDocument(text, path, dir.empty() ? "." : dir, &m));
      sources += (sources.empty() ? "" : ":") + path;
    }
    if (sources.empty())
      return Status::NotFound("kubeconfig: none of the files exists: " +
                              (missing.empty() ? std::string("(no path given)") : missing));
    return Build(m, context, sources);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(paths + ": " + e.what());
  }
}

Result<RestConfig> InClusterConfig(const InClusterPaths& paths) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0')
    return Status::FailedPrecondition(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set "
        "(not running in a pod?)");
  RestConfig cfg;
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6
  cfg.server = "https://" + h + ":" + port;
  cfg.source = "in-cluster config (" + paths.token_file + ")";
  Result<std::string> token = ReadFile(paths.token_file);
  if (!token.ok()) return token.status().WithContext("in-cluster config: token");
  cfg.token_file = paths.token_file;
  Result<std::string> ca = ReadFile(paths.ca_file);
  if (!ca.ok()) return ca.status().WithContext("in-cluster config: CA certificate");
  cfg.ca_pem = *ca;
  Result<std::string> ns = ReadFile(paths.namespace_file);
  if (ns.ok() && !Trim(*ns).empty()) cfg.namespace_name = Trim(*ns);
  return cfg;
}

Result<RestConfig> LoadDefaultConfig() {
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0')
    return LoadKubeconfig(env);
  if (const char* home = std::getenv("HOME"); home != nullptr) {
    const std::string path = std::string(home) + "/.kube/config";
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) return LoadKubeconfig(path);
  }
  return InClusterConfig();
}

TokenSource::TokenSource(std::string static_token, std::string token_file,
                         std::chrono::milliseconds refresh)
    : static_token_(std::move(static_token)), file_(std::move(token_file)), refresh_(refresh) {}

Result<std::string> TokenSource::Token() {
  if (file_.empty()) return static_token_;
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (read_at_ && now - *read_at_ < refresh_) return cached_;
  Result<std::string> text = ReadFile(file_);
  if (!text.ok()) {
    // A rotation in progress can leave the file briefly missing: keep the last good token.
    if (have_token_) return cached_;
    return text.status().WithContext("token file");
  }
  cached_ = Trim(*text);
  have_token_ = true;
  read_at_ = now;
  return cached_;
}

bool TokenSource::Invalidate() {
  if (file_.empty()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  read_at_.reset();
  return true;
}

Result<std::string> Base64Decode(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  bool padding = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    if (c == '=') {
      padding = true;
      continue;
    }
    const int v = value(c);
    if (v < 0 || padding)
      return Status::InvalidArgument("not base64: unexpected character at offset " +
                                     std::to_string(i));
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (bits >= 6) return Status::InvalidArgument("not base64: truncated");
  return out;
}

std::string Base64Encode(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (static_cast<uint8_t>(bytes[i]) << 16) |
                       (static_cast<uint8_t>(bytes[i + 1]) << 8) |
                       static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const uint32_t v =
        (static_cast<uint8_t>(bytes[i]) << 16) | (static_cast<uint8_t>(bytes[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

}  // namespace chamber::kube
