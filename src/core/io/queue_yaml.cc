#include "core/io/queue_yaml.h"

#include <initializer_list>

#include "common/file.h"
#include "common/yaml_reader.h"

namespace chamber::core::io {
namespace {

// A bound that keeps GPU amounts in thousandths far from overflowing.
constexpr int64_t kMaxQueueGpus = 1'000'000'000;

// `models`, where not null, takes the GPU models of resources.gpu.models (docs/queues.md); a
// `named` resource is one of them, with its model's name beside its quantities.
Status ParseQueueResource(const YamlReader& y, const YAML::Node& node, const std::string& path,
                          Resource r, QueueResource* out,
                          std::vector<GpuModelQuota>* models = nullptr, bool named = false) {
  if (named) {
    CHAMBER_RETURN_IF_ERROR(
        y.CheckKeys(node, path, {"name", "quota", "limit", "overQuotaWeight", "lendingLimit"}));
  } else if (models != nullptr) {
    CHAMBER_RETURN_IF_ERROR(
        y.CheckKeys(node, path, {"quota", "limit", "overQuotaWeight", "lendingLimit", "models"}));
  } else {
    CHAMBER_RETURN_IF_ERROR(
        y.CheckKeys(node, path, {"quota", "limit", "overQuotaWeight", "lendingLimit"}));
  }
  if (const YAML::Node list = models != nullptr ? node["models"] : YAML::Node();
      models != nullptr && list) {
    // A list, not a map: the order is the order in which waiting work tries the models, and a
    // Kubernetes object keeps the order of a list only.
    const std::string at = path + ".models";
    if (!list.IsSequence() || list.size() == 0)
      return y.Error(
          list, at,
          "expected a list of GPU models with their quotas, e.g. [{name: H100-SXM5-80GB, "
          "quota: 8}]");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string item = at + "[" + std::to_string(i) + "]";
      const YAML::Node e = list[i];
      CHAMBER_RETURN_IF_ERROR(y.ExpectMap(e, item));
      if (!e["name"]) return y.Error(e, item + ".name", "a GPU model needs a name");
      GpuModelQuota m;
      CHAMBER_ASSIGN_OR_RETURN(m.model, y.String(e["name"], item + ".name"));
      if (m.model.empty() || m.model.find('/') != std::string::npos)
        return y.Error(e["name"], item + ".name",
                       "a GPU model is a name without '/', got \"" + m.model + "\"");
      for (const GpuModelQuota& before : *models)
        if (before.model == m.model)
          return y.Error(e["name"], item + ".name", "model " + m.model + " is listed twice");
      CHAMBER_RETURN_IF_ERROR(
          ParseQueueResource(y, e, item, Resource::kGpu, &m.gpu, nullptr, true));
      models->push_back(std::move(m));
    }
  }
  // GPUs are amounts exact to a thousandth (kept in thousandths), CPU and memory Kubernetes
  // quantities; -1 means "none" for limits.
  auto quantity = [&](const YAML::Node& n, const std::string& p,
                      bool allow_unlimited) -> Result<int64_t> {
    if (allow_unlimited && n.IsScalar() && (n.Scalar() == "-1" || n.Scalar() == "-1.0"))
      return kUnlimited;
    // An amount of GPUs has no sign: a negative one is named as such, not as malformed.
    if (r == Resource::kGpu && n.IsScalar() && n.Scalar().starts_with('-'))
      return y.Error(n, p,
                     allow_unlimited ? "must be -1 (none) or at least 0" : "must not be negative");
    Result<int64_t> v = r == Resource::kGpu   ? y.GpuMilli(n, p, kMaxQueueGpus)
                        : r == Resource::kCpu ? y.CpuMilli(n, p)
                                              : y.Bytes(n, p);
    if (v.ok() && *v < 0)
      return y.Error(n, p,
                     allow_unlimited ? "must be -1 (none) or at least 0" : "must not be negative");
    return v;
  };
  if (node["quota"]) {
    CHAMBER_ASSIGN_OR_RETURN(out->quota, quantity(node["quota"], path + ".quota", false));
  }
  if (node["limit"]) {
    CHAMBER_ASSIGN_OR_RETURN(out->limit, quantity(node["limit"], path + ".limit", true));
    if (out->limit != kUnlimited && out->limit < out->quota)
      return y.Error(node["limit"], path + ".limit", "must not be below quota");
  }
  if (node["lendingLimit"]) {
    CHAMBER_ASSIGN_OR_RETURN(out->lending_limit,
                             quantity(node["lendingLimit"], path + ".lendingLimit", true));
  }
  if (node["overQuotaWeight"]) {
    CHAMBER_ASSIGN_OR_RETURN(out->over_quota_weight,
                             y.Double(node["overQuotaWeight"], path + ".overQuotaWeight"));
    if (out->over_quota_weight < 0)
      return y.Error(node["overQuotaWeight"], path + ".overQuotaWeight", "must not be negative");
  }
  return Status::Ok();
}

// One of a field's named values: "expected A, B or C, got \"x\"" otherwise.
template <typename E>
Status ParseChoice(const YamlReader& y, const YAML::Node& node, const std::string& path,
                   std::initializer_list<std::pair<std::string_view, E>> choices, E* out) {
  CHAMBER_ASSIGN_OR_RETURN(std::string s, y.String(node, path));
  std::string names;
  size_t i = 0;
  for (const auto& [name, value] : choices) {
    if (s == name) {
      *out = value;
      return Status::Ok();
    }
    if (i > 0) names += i + 1 == choices.size() ? " or " : ", ";
    names += name;
    ++i;
  }
  return y.Error(node, path, "expected " + names + ", got \"" + s + "\"");
}

}  // namespace

Status ParseQueueSpec(const YamlReader& y, const YAML::Node& node, const std::string& path,
                      Queue* q, std::string_view extra_key) {
  if (extra_key.empty()) {
    CHAMBER_RETURN_IF_ERROR(
        y.CheckKeys(node, path, {"parent", "priority", "queueing", "preemption", "resources"}));
  } else {
    CHAMBER_RETURN_IF_ERROR(y.CheckKeys(
        node, path, {extra_key, "parent", "priority", "queueing", "preemption", "resources"}));
  }
  if (node["parent"]) {
    CHAMBER_ASSIGN_OR_RETURN(q->parent, y.String(node["parent"], path + ".parent"));
  }
  if (node["priority"]) {
    CHAMBER_ASSIGN_OR_RETURN(int64_t p, y.Int(node["priority"], path + ".priority"));
    if (p < -1000000000 || p > 1000000000)
      return y.Error(node["priority"], path + ".priority", "out of range");
    q->priority = static_cast<int32_t>(p);
  }
  if (node["queueing"]) {
    QueueingStrategy strategy{};
    CHAMBER_RETURN_IF_ERROR(ParseChoice(y, node["queueing"], path + ".queueing",
                                        {{"BestEffort", QueueingStrategy::kBestEffort},
                                         {"StrictFIFO", QueueingStrategy::kStrictFifo}},
                                        &strategy));
    q->queueing = strategy;
  }
  if (const YAML::Node pre = node["preemption"]) {
    const std::string where = path + ".preemption";
    CHAMBER_RETURN_IF_ERROR(
        y.CheckKeys(pre, where, {"withinQueue", "reclaim", "whileBorrowing", "delay"}));
    if (pre["withinQueue"])
      CHAMBER_RETURN_IF_ERROR(ParseChoice(
          y, pre["withinQueue"], where + ".withinQueue",
          {{"Never", WithinQueuePreemption::kNever},
           {"LowerPriority", WithinQueuePreemption::kLowerPriority},
           {"LowerOrNewerEqualPriority", WithinQueuePreemption::kLowerOrNewerEqualPriority}},
          &q->preemption.within_queue));
    if (pre["reclaim"])
      CHAMBER_RETURN_IF_ERROR(ParseChoice(y, pre["reclaim"], where + ".reclaim",
                                          {{"Never", ReclaimPreemption::kNever},
                                           {"LowerPriority", ReclaimPreemption::kLowerPriority},
                                           {"Any", ReclaimPreemption::kAny}},
                                          &q->preemption.reclaim));
    if (const YAML::Node wb = pre["whileBorrowing"]) {
      const std::string at = where + ".whileBorrowing";
      CHAMBER_RETURN_IF_ERROR(y.CheckKeys(wb, at, {"policy", "maxPriorityThreshold"}));
      if (wb["policy"])
        CHAMBER_RETURN_IF_ERROR(
            ParseChoice(y, wb["policy"], at + ".policy",
                        {{"Never", WhileBorrowingPreemption::kNever},
                         {"LowerPriority", WhileBorrowingPreemption::kLowerPriority}},
                        &q->preemption.while_borrowing));
      if (wb["maxPriorityThreshold"]) {
        CHAMBER_ASSIGN_OR_RETURN(int64_t t,
                                 y.Int(wb["maxPriorityThreshold"], at + ".maxPriorityThreshold"));
        if (t < -1000000000 || t > 1000000000)
          return y.Error(wb["maxPriorityThreshold"], at + ".maxPriorityThreshold", "out of range");
        q->preemption.max_priority_threshold = static_cast<int32_t>(t);
      }
    }
    if (pre["delay"]) {
      CHAMBER_ASSIGN_OR_RETURN(q->preemption.delay, y.Dur(pre["delay"], where + ".delay"));
      if (q->preemption.delay.count() < 0)
        return y.Error(pre["delay"], where + ".delay", "must not be negative");
    }
  }
  if (const YAML::Node res = node["resources"]) {
    CHAMBER_RETURN_IF_ERROR(y.CheckKeys(res, path + ".resources", {"gpu", "cpu", "memory"}));
    for (Resource r : kAllResources) {
      const std::string key(ResourceName(r));
      if (res[key])
        CHAMBER_RETURN_IF_ERROR(ParseQueueResource(y, res[key], path + ".resources." + key, r,
                                                   &q->res(r),
                                                   r == Resource::kGpu ? &q->gpu_models : nullptr));
    }
  }
  return Status::Ok();
}

Result<std::vector<Queue>> ParseQueues(std::string_view text, std::string_view source) {
  YamlReader y{std::string(source)};
  CHAMBER_ASSIGN_OR_RETURN(std::vector<YAML::Node> docs, y.LoadAll(text));
  std::vector<Queue> out;
  auto parse_object = [&](const YAML::Node& obj, const std::string& path) -> Status {
    CHAMBER_RETURN_IF_ERROR(
        y.CheckKeys(obj, path, {"apiVersion", "kind", "metadata", "spec", "status"}));
    if (!obj["kind"] || !obj["kind"].IsScalar() || obj["kind"].Scalar() != "Queue")
      return y.Error(obj, path + ".kind", "expected kind: Queue");
    if (obj["apiVersion"] && obj["apiVersion"].IsScalar() &&
        obj["apiVersion"].Scalar() != "chamber.io/v1alpha1")
      return y.Error(obj["apiVersion"], path + ".apiVersion",
                     "expected chamber.io/v1alpha1, got \"" + obj["apiVersion"].Scalar() + "\"");
    Queue q;
    const YAML::Node meta = obj["metadata"];
    if (!meta || !meta.IsMap() || !meta["name"])
      return y.Error(obj, path + ".metadata.name", "a Queue needs a name");
    CHAMBER_ASSIGN_OR_RETURN(q.name, y.String(meta["name"], path + ".metadata.name"));
    if (q.name.empty())
      return y.Error(meta["name"], path + ".metadata.name", "a Queue needs a name");
    if (const YAML::Node spec = obj["spec"])
      CHAMBER_RETURN_IF_ERROR(ParseQueueSpec(y, spec, path + ".spec", &q));
    out.push_back(std::move(q));
    return Status::Ok();
  };
  for (size_t d = 0; d < docs.size(); ++d) {
    const YAML::Node& doc = docs[d];
    if (doc.IsNull()) continue;
    const std::string where = docs.size() > 1 ? "document " + std::to_string(d + 1) + ": " : "";
    CHAMBER_RETURN_IF_ERROR(y.ExpectMap(doc, where + "(top level)"));
    if (doc["queues"]) {
      CHAMBER_RETURN_IF_ERROR(y.CheckKeys(doc, "", {"queues"}));
      CHAMBER_RETURN_IF_ERROR(y.ExpectList(doc["queues"], "queues"));
      for (size_t i = 0; i < doc["queues"].size(); ++i) {
        const YAML::Node e = doc["queues"][i];
        const std::string path = "queues[" + std::to_string(i) + "]";
        Queue q;
        CHAMBER_RETURN_IF_ERROR(y.ExpectMap(e, path));
        if (!e["name"]) return y.Error(e, path + ".name", "a queue needs a name");
        CHAMBER_ASSIGN_OR_RETURN(q.name, y.String(e["name"], path + ".name"));
        if (q.name.empty()) return y.Error(e["name"], path + ".name", "a queue needs a name");
        CHAMBER_RETURN_IF_ERROR(ParseQueueSpec(y, e, path, &q, "name"));
        out.push_back(std::move(q));
      }
    } else if (doc["kind"] && doc["kind"].IsScalar() && doc["kind"].Scalar() == "List") {
      CHAMBER_RETURN_IF_ERROR(y.ExpectList(doc["items"], "items"));
      for (size_t i = 0; i < doc["items"].size(); ++i)
        CHAMBER_RETURN_IF_ERROR(parse_object(doc["items"][i], "items[" + std::to_string(i) + "]"));
    } else {
      CHAMBER_RETURN_IF_ERROR(parse_object(doc, where.empty() ? "(top level)" : where));
    }
  }
  return out;
}

Result<std::vector<Queue>> LoadQueuesFile(const std::string& path) {
  CHAMBER_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseQueues(text, path);
}

}  // namespace chamber::core::io
