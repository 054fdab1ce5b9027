#include "backend/sim/demo_cluster.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "sim/synthetic.h"

namespace chamber::backend {

// Synthetic jobs per simulated week at scale 1: enough for queues to form at the daily peaks.
constexpr int64_t kJobsPerWeek = 12000;
// Notebooks on shares of a GPU per simulated week at scale 1: about 10 an hour.
constexpr int64_t kNotebooksPerWeek = 1680;
// Inference servers on MIG devices per simulated week at scale 1: about 3 an hour.
constexpr int64_t kInferencePerWeek = 504;

namespace {

// SplitMix64: the same numbers on every platform, unlike the standard distributions.
uint64_t NextRandom(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kHourMs = 3'600'000;

// Job `i` of a kind of one-pod work the demo adds beside the synthetic jobs: `<kind>-<i>`, of
// queue `a` or `b` (evenly), priority 50, submitted evenly over `span_ms`, running for `hours`
// hours and up to `more_hours` more. Draws from `state` in that order.
sim::TraceJob OnePodJob(const std::string& kind, int64_t i, const char* a, const char* b,
                        uint64_t span_ms, uint64_t hours, uint64_t more_hours, uint64_t& state) {
  sim::TraceJob j;
  j.id = kind + "-" + std::to_string(i);
  j.user = kind;
  j.queue = NextRandom(state) % 2 == 0 ? a : b;
  j.group = j.queue;
  j.priority = 50;
  j.submit = core::Time(static_cast<int64_t>(NextRandom(state) % span_ms));
  j.duration = core::Duration(
      static_cast<int64_t>(hours * kHourMs + NextRandom(state) % (more_hours * kHourMs)));
  return j;
}

// Interactive notebooks of the research and vision teams, each one pod holding a quarter or a
// half of one L40S GPU for one to four hours, submitted evenly over `span`.
void AddNotebooks(int64_t count, core::Duration span, uint64_t seed, sim::Trace& trace) {
  uint64_t state = seed ^ 0x6E6F7465626F6F6BULL;  // "notebook"
  const auto span_ms = static_cast<uint64_t>(std::max<int64_t>(1, span.count()));
  for (int64_t i = 0; i < count; ++i) {
    sim::TraceJob j = OnePodJob("notebook", i, "research", "vision", span_ms, 1, 3, state);
    j.gpu_milli_per_pod = NextRandom(state) % 3 == 0 ? 500 : 250;
    j.cpu_milli_per_pod = 2000;
    j.memory_bytes_per_pod = int64_t{16} << 30;
    j.gpu_models = {"L40S-48GB"};
    trace.jobs.push_back(std::move(j));
  }
}

// Inference servers of the recsys and llm-training teams, each one pod on one MIG device of an
// A100 (a 1g.10gb for half of them, a 2g.20gb for three in ten, a 3g.40gb for the rest) for two
// to eight hours, submitted evenly over `span`.
void AddInference(int64_t count, core::Duration span, uint64_t seed, sim::Trace& trace) {
  uint64_t state = seed ^ 0x696E666572656E63ULL;  // "inferenc"
  const auto span_ms = static_cast<uint64_t>(std::max<int64_t>(1, span.count()));
  for (int64_t i = 0; i < count; ++i) {
    sim::TraceJob j = OnePodJob("inference", i, "recsys", "llm-training", span_ms, 2, 6, state);
    const uint64_t kind = NextRandom(state) % 10;
    j.mig_profile = kind < 5 ? "1g.10gb" : kind < 8 ? "2g.20gb" : "3g.40gb";
    j.mig_devices_per_pod = 1;
    j.cpu_milli_per_pod = 4000;
    j.memory_bytes_per_pod = int64_t{32} << 30;
    trace.jobs.push_back(std::move(j));
  }
}

}  // namespace

SimulatedBackendOptions DemoCluster(const DemoClusterOptions& o) {
  SimulatedBackendOptions b;
  const double k = o.scale > 0 ? o.scale : 1;
  auto scaled = [k](int64_t n) { return std::llround(static_cast<double>(n) * k); };
  auto pool = [&](const char* name, int32_t count, int32_t gpus, const char* model,
                  int64_t memory_gib, double price, sim::PricingType pricing, const char* zone,
                  int64_t cores, int64_t host_memory_gib) {
    sim::NodePool p;
    p.name = name;
    p.count = static_cast<int32_t>(std::max<int64_t>(1, scaled(count)));
    p.gpus_per_node = gpus;
    p.gpu_model = model;
    p.gpu_memory_bytes = memory_gib << 30;
    p.price_per_gpu_hour = price;
    p.pricing = pricing;
    p.zone = zone;
    p.nodes_per_block = 8;
    // Real CPU and memory: jobs ask for 4 cores and 32 GiB per GPU, which every node holds.
    p.cpu_milli = cores * 1000;
    p.memory_bytes = host_memory_gib << 30;
    b.cluster.pools.push_back(p);
  };
  pool("h100", 16, 8, "H100-SXM5-80GB", 80, 3.90, sim::PricingType::kOnDemand, "zone-a", 192, 2048);
  pool("a100", 12, 8, "A100-SXM4-80GB", 80, 1.60, sim::PricingType::kReserved, "zone-a", 128, 1024);
  pool("l40s", 10, 4, "L40S-48GB", 48, 0.75, sim::PricingType::kSpot, "zone-b", 64, 512);
  // The last GPU of each A100 node is in MIG mode, divided for inference servers.
  sim::NodePool& a100 = b.cluster.pools[1];
  a100.mig_gpus = 1;
  a100.mig_devices = {{"1g.10gb", 2}, {"2g.20gb", 1}, {"3g.40gb", 1}};

  const char* names[] = {"llm-training", "vision", "recsys", "research"};
  const int64_t quotas[] = {112, 64, 48, 40};
  const double weights[] = {2, 1, 1, 1};
  for (int q = 0; q < 4; ++q) {
    core::Queue queue;
    queue.name = names[q];
    core::QueueResource& gpu = queue.res(core::Resource::kGpu);
    gpu.quota = core::Gpus(scaled(quotas[q]));
    gpu.over_quota_weight = weights[q];
    b.queues.push_back(queue);
  }

  sim::SyntheticSpec spec;
  spec.profile = sim::SyntheticSpec::Profile::kHelios;
  spec.jobs = static_cast<int64_t>(static_cast<double>(kJobsPerWeek) * k * std::max(0.01, o.load));
  spec.span = std::chrono::hours(24 * 7);
  spec.teams = 4;
  // Jobs of up to 64 GPUs; on a cluster scaled far down, up to a quarter of it, so that every
  // job can run.
  int64_t gpus = 0;
  for (const sim::NodePool& p : b.cluster.pools) gpus += int64_t{p.count} * p.gpus_per_node;
  spec.max_gpus = static_cast<int32_t>(std::clamp<int64_t>(gpus / 4, 1, 64));
  spec.reserved_fraction = 0.1;
  spec.seed = o.seed;
  b.trace = sim::GenerateSyntheticTrace(spec);
  for (sim::TraceJob& j : b.trace.jobs) {
    const int team = j.queue.size() > 5 ? std::atoi(j.queue.c_str() + 5) : 0;
    j.queue = names[team % 4];
  }
  AddNotebooks(
      static_cast<int64_t>(static_cast<double>(kNotebooksPerWeek) * k * std::max(0.01, o.load)),
      spec.span, o.seed, b.trace);
  AddInference(
      static_cast<int64_t>(static_cast<double>(kInferencePerWeek) * k * std::max(0.01, o.load)),
      spec.span, o.seed, b.trace);
  b.step = o.step;
  b.gpu_mtbf_hours = o.gpu_mtbf_hours;
  b.start_unix_ms = o.start_unix_ms;
  b.seed = o.seed;
  return b;
}

}  // namespace chamber::backend
