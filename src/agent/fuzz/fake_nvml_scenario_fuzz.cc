// The fake NVML's scenario files (agent/fake_nvml/scenario.h): what the agent's tests and `chamber
// demo`-style setups load through CHAMBER_FAKE_NVML_SCENARIO. The parser throws, and nvmlInit
// turns any exception into an error. Properties: every error names the file; a scenario that
// reads has events in time order that name one of its GPUs.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>

#include "agent/fake_nvml/scenario.h"
#include "common/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = chamber::fuzz;
  namespace fake = chamber::fake_nvml;
  std::unique_ptr<fake::Scenario> sc;
  try {
    sc = fake::ParseScenario(fuzz::Text(data, size), "scenario.json");
  } catch (const std::exception& e) {
    const std::string message = e.what();
    fuzz::Check(message.rfind("scenario.json", 0) == 0, "the error does not name the file",
                message);
    return 0;
  }
  double t = -1e300;
  for (const fake::FakeEvent& e : sc->events) {
    fuzz::Check(e.t >= t || e.t != e.t, "events out of time order");
    t = e.t;
    fuzz::Check(e.gpu >= 0 && static_cast<size_t>(e.gpu) < sc->gpus.size(),
                "an event on a GPU the scenario does not have");
  }
  return 0;
}
