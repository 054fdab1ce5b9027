#include "common/log.h"

#include <array>
#include <chrono>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "common/time.h"

namespace chamber::logging {
namespace {

constexpr std::string_view kLoggerName = "chamber";
constexpr std::string_view kTextPattern = "%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ [%n] %v";

struct LevelName {
  std::string_view name;
  spdlog::level::level_enum level;
};

constexpr std::array<LevelName, 7> kLevels = {{
    {"trace", spdlog::level::trace},
    {"debug", spdlog::level::debug},
    {"info", spdlog::level::info},
    {"warn", spdlog::level::warn},
    {"error", spdlog::level::err},
    {"critical", spdlog::level::critical},
    {"off", spdlog::level::off},
}};

Result<spdlog::level::level_enum> ParseLevel(std::string_view name) {
  for (const auto& entry : kLevels) {
    if (entry.name == name) return entry.level;
  }
  return Status::InvalidArgument(
      fmt::format("unknown log level \"{}\" (expected trace, debug, info, warn, error, critical "
                  "or off)",
                  name));
}

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto level = spdlog::level::to_string_view(msg.level);
    const nlohmann::json line = {
        {"time", FormatRfc3339(msg.time, TimeFraction::kMillis)},
        {"level", std::string_view(level.data(), level.size())},
        {"logger", std::string_view(msg.logger_name.data(), msg.logger_name.size())},
        {"msg", std::string_view(msg.payload.data(), msg.payload.size())},
    };
    // Replace invalid UTF-8 instead of throwing: a log line must never fail.
    const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(text.data(), text.data() + text.size());
    dest.push_back('\n');
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

std::unique_ptr<spdlog::formatter> MakeFormatter(bool json) {
  if (json) return std::make_unique<JsonFormatter>();
  return std::make_unique<spdlog::pattern_formatter>(std::string(kTextPattern));
}

Status Setup(const LogOptions& options) {
  CHAMBER_ASSIGN_OR_RETURN(const spdlog::level::level_enum level, ParseLevel(options.level));
  spdlog::sink_ptr sink;
  if (options.json) {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  } else {
    sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  }
  sink->set_formatter(MakeFormatter(options.json));
  auto logger = std::make_shared<spdlog::logger>(std::string(kLoggerName), std::move(sink));
  logger->set_level(level);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
  return Status::Ok();
}

}  // namespace chamber::logging
