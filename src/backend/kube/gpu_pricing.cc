#include "backend/kube/gpu_pricing.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "common/config_file.h"
#include "common/kube_labels.h"

namespace chamber::backend {
namespace {

const std::string* Label(const NodeLabels& labels, std::string_view key) {
  for (const auto& [k, v] : labels)
    if (k == key) return &v;
  return nullptr;
}

bool EqualFold(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool Matches(const PriceRule& r, std::string_view model, const NodeLabels& labels) {
  if (!r.gpu_model.empty() && r.gpu_model != model) return false;
  for (const auto& [k, v] : r.node_selector) {
    const std::string* have = Label(labels, k);
    if (have == nullptr || *have != v) return false;
  }
  return true;
}

// True when every GPU `later` matches, `earlier` matches too.
bool Covers(const PriceRule& earlier, const PriceRule& later) {
  if (!earlier.gpu_model.empty() && earlier.gpu_model != later.gpu_model) return false;
  for (const auto& [k, v] : earlier.node_selector) {
    const std::string* have = Label(later.node_selector, k);
    if (have == nullptr || *have != v) return false;
  }
  return true;
}

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

}  // namespace

std::optional<fleet::Pricing> ParsePricing(std::string_view text) {
  if (text == "on-demand") return fleet::Pricing::kOnDemand;
  if (text == "spot") return fleet::Pricing::kSpot;
  if (text == "reserved") return fleet::Pricing::kReserved;
  return std::nullopt;
}

std::optional<fleet::Pricing> DetectPricing(const NodeLabels& labels) {
  using fleet::Pricing;
  if (const std::string* v = Label(labels, "karpenter.sh/capacity-type")) {
    if (EqualFold(*v, "spot")) return Pricing::kSpot;
    if (EqualFold(*v, "on-demand")) return Pricing::kOnDemand;
    if (EqualFold(*v, "reserved")) return Pricing::kReserved;
  }
  if (const std::string* v = Label(labels, "eks.amazonaws.com/capacityType")) {
    if (EqualFold(*v, "SPOT")) return Pricing::kSpot;
    if (EqualFold(*v, "ON_DEMAND")) return Pricing::kOnDemand;
    if (EqualFold(*v, "CAPACITY_BLOCK")) return Pricing::kReserved;
  }
  for (std::string_view key : {"cloud.google.com/gke-spot", "cloud.google.com/gke-preemptible"})
    if (const std::string* v = Label(labels, key); v != nullptr && EqualFold(*v, "true"))
      return Pricing::kSpot;
  if (const std::string* v = Label(labels, "kubernetes.azure.com/scalesetpriority")) {
    if (EqualFold(*v, "spot")) return Pricing::kSpot;
    if (EqualFold(*v, "regular")) return Pricing::kOnDemand;
  }
  return std::nullopt;
}

NodePrice PriceNode(const PricingConfig& config, std::string_view gpu_model,
                    const NodeLabels& labels) {
  NodePrice p;
  p.price_per_gpu_hour = config.default_price_per_gpu_hour;
  std::optional<fleet::Pricing> pricing;
  for (size_t i = 0; i < config.rules.size(); ++i) {
    const PriceRule& r = config.rules[i];
    if (!Matches(r, gpu_model, labels)) continue;
    p.rule = static_cast<int32_t>(i);
    p.price_per_gpu_hour = r.price_per_gpu_hour;
    pricing = r.pricing ? r.pricing : DetectPricing(r.node_selector);
    break;
  }
  if (!pricing) pricing = DetectPricing(labels);
  p.pricing = pricing.value_or(fleet::Pricing::kOnDemand);
  return p;
}

namespace {

// A price source: rule `i`, or the default for i == rules.size().
struct Source {
  std::string_view name;
  std::string_view gpu_model;             // "": any
  std::optional<fleet::Pricing> pricing;  // empty: any
  double price = 0;
};

Source SourceOf(const PricingConfig& c, size_t i) {
  if (i == c.rules.size()) return {"", "", std::nullopt, c.default_price_per_gpu_hour};
  const PriceRule& r = c.rules[i];
  return {r.name, r.gpu_model, r.pricing ? r.pricing : DetectPricing(r.node_selector),
          r.price_per_gpu_hour};
}

// The pool name of GPUs of `model` priced `pricing` by source `t`: "@<price>" is added when an
// earlier source of the same name could price such GPUs differently.
std::string PoolName(const PricingConfig& c, std::string_view model, fleet::Pricing pricing,
                     size_t t) {
  const Source own = SourceOf(c, t);
  std::string name = fmt::format("{}/{}", model, fleet::PricingName(pricing));
  if (!own.name.empty()) name += "/" + std::string(own.name);
  for (size_t s = 0; s < t; ++s) {
    const Source other = SourceOf(c, s);
    if (other.name == own.name && other.price != own.price &&
        (other.gpu_model.empty() || other.gpu_model == model) &&
        (!other.pricing || *other.pricing == pricing))
      return name + fmt::format("@{}", own.price);
  }
  return name;
}

}  // namespace

PoolAssignment AssignPools(const PricingConfig& config, const std::vector<core::Node>& nodes,
                           const std::vector<fleet::PoolInput>& known) {
  static const std::string kUnknownModel = "gpu";
  PoolAssignment out;
  out.pools = known;
  std::map<std::string, int32_t, std::less<>> pool_of_name;
  for (size_t p = 0; p < out.pools.size(); ++p)
    pool_of_name.emplace(out.pools[p].name, static_cast<int32_t>(p));
  // (model, pricing, source) -> pool; the model lives in `nodes`. New pools get their index once
  // every node is seen, in name order.
  using Key = std::tuple<std::string_view, fleet::Pricing, int32_t>;
  std::map<Key, int32_t> pool_of_key;
  std::vector<fleet::PoolInput> fresh;  // new pools, with provisional indices -2 - i
  out.node_pool.reserve(nodes.size());
  for (const core::Node& node : nodes) {
    if (node.gpus.empty()) {
      out.node_pool.push_back(-1);
      continue;
    }
    const std::string& model =
        node.gpus.front().model.empty() ? kUnknownModel : node.gpus.front().model.str();
    const NodePrice price = PriceNode(config, model, *node.labels);
    const int32_t source = price.rule >= 0 ? price.rule : static_cast<int32_t>(config.rules.size());
    auto [it, inserted] = pool_of_key.try_emplace(Key(model, price.pricing, source), 0);
    if (inserted) {
      std::string name = PoolName(config, model, price.pricing, static_cast<size_t>(source));
      auto [at, added] = pool_of_name.try_emplace(name, -2 - static_cast<int32_t>(fresh.size()));
      if (added) fresh.push_back({name, model, price.pricing, price.price_per_gpu_hour});
      it->second = at->second;
    }
    out.node_pool.push_back(it->second);
  }
  // Fresh pools in name order after the known ones.
  std::vector<int32_t> order(fresh.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return fresh[a].name < fresh[b].name; });
  std::vector<int32_t> index_of_fresh(fresh.size());
  for (int32_t i : order) {
    index_of_fresh[i] = static_cast<int32_t>(out.pools.size());
    out.pools.push_back(std::move(fresh[i]));
  }
  for (int32_t& p : out.node_pool)
    if (p <= -2) p = index_of_fresh[-2 - p];
  return out;
}

Result<PricingConfig> ReadPricingConfig(const ConfigFile& file, bool* found) {
  const YamlReader& y = file.reader();
  const YAML::Node p = file.Section("pricing", found);
  PricingConfig c;
  if (p.IsNull()) return c;
  CHAMBER_RETURN_IF_ERROR(
      y.CheckKeys(p, "pricing", {"currency", "defaultPricePerGpuHour", "rules"}));
  auto price = [&](const YAML::Node& n, const std::string& path) -> Result<double> {
    CHAMBER_ASSIGN_OR_RETURN(double v, y.Double(n, path));
    if (v < 0) return y.Error(n, path, "must not be negative");
    return v;
  };
  if (const YAML::Node n = p["currency"]) {
    CHAMBER_ASSIGN_OR_RETURN(c.currency, y.String(n, "pricing.currency"));
    const bool code =
        c.currency.size() == 3 && std::all_of(c.currency.begin(), c.currency.end(),
                                              [](char ch) { return ch >= 'A' && ch <= 'Z'; });
    if (!code)
      return y.Error(n, "pricing.currency",
                     Quoted(c.currency) + " is not a three-letter currency code such as USD");
  }
  if (const YAML::Node n = p["defaultPricePerGpuHour"]) {
    CHAMBER_ASSIGN_OR_RETURN(c.default_price_per_gpu_hour,
                             price(n, "pricing.defaultPricePerGpuHour"));
  }
  if (const YAML::Node rules = p["rules"]; rules && !rules.IsNull()) {
    CHAMBER_RETURN_IF_ERROR(y.ExpectList(rules, "pricing.rules"));
    for (size_t i = 0; i < rules.size(); ++i) {
      const YAML::Node r = rules[i];
      const std::string at = fmt::format("pricing.rules[{}]", i);
      CHAMBER_RETURN_IF_ERROR(
          y.CheckKeys(r, at, {"name", "gpuModel", "nodeSelector", "pricing", "pricePerGpuHour"}));
      PriceRule rule;
      if (const YAML::Node n = r["name"]) {
        CHAMBER_ASSIGN_OR_RETURN(rule.name, y.String(n, at + ".name"));
        if (rule.name.empty() || rule.name.find_first_of("/@ \t") != std::string::npos)
          return y.Error(n, at + ".name",
                         "must be a non-empty word without '/', '@' or spaces (it is part of the "
                         "pool's name)");
        if (!std::all_of(rule.name.begin(), rule.name.end(),
                         [](char c) { return c > ' ' && c < 0x7f; }))
          return y.Error(n, at + ".name",
                         "must be printable ASCII (it is part of the pool's name)");
      }
      if (const YAML::Node n = r["gpuModel"]) {
        CHAMBER_ASSIGN_OR_RETURN(rule.gpu_model, y.String(n, at + ".gpuModel"));
        if (rule.gpu_model.empty())
          return y.Error(n, at + ".gpuModel",
                         "must not be empty (leave it out to match any model)");
        if (!IsLabelValue(rule.gpu_model))
          return y.Error(n, at + ".gpuModel",
                         Quoted(rule.gpu_model) +
                             " is not a GPU model as nodes are labelled with it (a label value: "
                             "at most 63 of A-Z, a-z, 0-9, '-', '_', '.')");
      }
      if (const YAML::Node n = r["nodeSelector"]) {
        CHAMBER_ASSIGN_OR_RETURN(rule.node_selector, y.StringMap(n, at + ".nodeSelector"));
        for (const auto& [k, v] : rule.node_selector) {
          if (k.empty()) return y.Error(n, at + ".nodeSelector", "a label key must not be empty");
          if (!IsLabelKey(k))
            return y.Error(n, at + ".nodeSelector",
                           Quoted(k) +
                               " is not a label key (an optional DNS-subdomain prefix "
                               "and '/', then at most 63 of A-Z, a-z, 0-9, '-', '_', '.')");
          if (!IsLabelValue(v))
            return y.Error(n[k], at + ".nodeSelector." + k,
                           Quoted(v) +
                               " is not a label value (at most 63 of A-Z, a-z, 0-9, "
                               "'-', '_', '.', beginning and ending with a letter or "
                               "digit)");
        }
      }
      if (const YAML::Node n = r["pricing"]) {
        CHAMBER_ASSIGN_OR_RETURN(std::string s, y.String(n, at + ".pricing"));
        rule.pricing = ParsePricing(s);
        if (!rule.pricing)
          return y.Error(n, at + ".pricing",
                         Quoted(s) + " is not a pricing type (use on-demand, spot or reserved)");
      }
      if (!r["pricePerGpuHour"])
        return y.Error(r, at, "pricePerGpuHour is required (the price of one GPU for an hour)");
      CHAMBER_ASSIGN_OR_RETURN(rule.price_per_gpu_hour,
                               price(r["pricePerGpuHour"], at + ".pricePerGpuHour"));
      for (size_t e = 0; e < c.rules.size(); ++e)
        if (Covers(c.rules[e], rule))
          return y.Error(r, at,
                         fmt::format("never matches: pricing.rules[{}] before it matches every GPU "
                                     "this rule would (the first match wins; put the more "
                                     "specific rule first)",
                                     e));
      c.rules.push_back(std::move(rule));
    }
  }
  return c;
}

Result<PricingConfig> ParsePricingConfig(std::string_view text, std::string_view source,
                                         bool* found) {
  CHAMBER_ASSIGN_OR_RETURN(ConfigFile file, ConfigFile::Parse(text, std::string(source)));
  return ReadPricingConfig(file, found);
}

std::string PricingConfigToYaml(const PricingConfig& c) {
  // Strings go out double-quoted (JSON escaping is valid YAML), so a label value such as "true"
  // stays a string.
  auto q = [](const std::string& s) {
    std::string out = "\"";
    for (char ch : s) {
      if (ch == '"' || ch == '\\') out += '\\';
      out += ch;
    }
    return out + "\"";
  };
  std::string out = fmt::format("pricing:\n  currency: {}\n  defaultPricePerGpuHour: {}\n",
                                c.currency, c.default_price_per_gpu_hour);
  if (c.rules.empty()) return out + "  rules: []\n";
  out += "  rules:\n";
  for (const PriceRule& r : c.rules) {
    std::string item;
    if (!r.name.empty()) item += fmt::format("    name: {}\n", q(r.name));
    if (!r.gpu_model.empty()) item += fmt::format("    gpuModel: {}\n", q(r.gpu_model));
    if (!r.node_selector.empty()) {
      item += "    nodeSelector:\n";
      for (const auto& [k, v] : r.node_selector) item += fmt::format("      {}: {}\n", q(k), q(v));
    }
    if (r.pricing) item += fmt::format("    pricing: {}\n", fleet::PricingName(*r.pricing));
    item += fmt::format("    pricePerGpuHour: {}{}\n", r.price_per_gpu_hour,
                        r.pricing ? "" : "  # pricing: from the node's capacity-type labels");
    item[2] = '-';
    out += item;
  }
  return out;
}

}  // namespace chamber::backend
