// What the API server sends back: a watch stream (kube/client.h, WatchStreamDecoder), split
// into two chunks where the first byte says, and each event's object decoded as every typed
// view Chamber reads (kube/types.h). Properties: a stream error names the watch; an object
// error names the kind; a Pod or Node that decodes, written back (ToJson), decodes again.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/fuzz/fuzz_check.h"
#include "kube/client.h"
#include "kube/types.h"

namespace {

namespace fuzz = chamber::fuzz;
namespace kube = chamber::kube;

template <typename T>
void Decode(const kube::Json& object, std::string_view kind) {
  chamber::Result<T> v = T::FromJson(object);
  if (!v.ok()) {
    fuzz::CheckError(v.status(), kind);
    return;
  }
  if constexpr (std::is_same_v<T, kube::Pod> || std::is_same_v<T, kube::Node>) {
    chamber::Result<T> again = T::FromJson(v->ToJson());
    fuzz::Check(again.ok(), "a decoded object does not decode again after ToJson",
                again.ok() ? std::string() : again.status().message());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text = fuzz::Text(data + 1, size - 1);
  const size_t split = data[0] % (text.size() + 1);
  std::vector<kube::Json> objects;
  kube::WatchStreamDecoder decoder("watch pods");
  auto on_event = [&](kube::WatchEvent&& e) { objects.push_back(std::move(e.object)); };
  chamber::Status s = decoder.Feed(text.substr(0, split), on_event);
  if (s.ok()) s = decoder.Feed(text.substr(split), on_event);
  if (s.ok()) s = decoder.Finish();
  if (!s.ok()) fuzz::CheckError(s, "watch pods");
  for (const kube::Json& object : objects) {
    Decode<kube::Pod>(object, "Pod");
    Decode<kube::Node>(object, "Node");
    Decode<kube::Namespace>(object, "Namespace");
    Decode<kube::Job>(object, "Job");
    Decode<kube::Lease>(object, "Lease");
    Decode<kube::Event>(object, "Event");
    Decode<kube::PriorityClass>(object, "PriorityClass");
    Decode<kube::PodDisruptionBudget>(object, "PodDisruptionBudget");
  }
  return 0;
}
