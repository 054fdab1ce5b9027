#include "common/log.h"

#include <memory>
#include <regex>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

namespace chamber::logging {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = spdlog::default_logger(); }
  void TearDown() override { spdlog::set_default_logger(saved_); }

 private:
  std::shared_ptr<spdlog::logger> saved_;
};

TEST_F(LogTest, RejectsUnknownLevelAndNamesIt) {
  const Status status = logging::Setup({.level = "loud", .json = false});
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("\"loud\""), std::string::npos) << status.message();
}

TEST_F(LogTest, UnknownLevelLeavesDefaultLoggerUnchanged) {
  const auto before = spdlog::default_logger();
  EXPECT_FALSE(logging::Setup({.level = "loud", .json = false}).ok());
  EXPECT_EQ(spdlog::default_logger(), before);
}

TEST_F(LogTest, SetsRequestedLevelOnDefaultLogger) {
  ASSERT_TRUE(logging::Setup({.level = "debug", .json = false}).ok());
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::debug);
  EXPECT_EQ(spdlog::default_logger()->name(), "chamber");
  EXPECT_TRUE(spdlog::default_logger()->should_log(spdlog::level::debug));
  EXPECT_FALSE(spdlog::default_logger()->should_log(spdlog::level::trace));

  ASSERT_TRUE(logging::Setup({.level = "error", .json = true}).ok());
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::err);
}

TEST_F(LogTest, AcceptsEveryDocumentedLevel) {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    EXPECT_TRUE(logging::Setup({.level = level, .json = false}).ok()) << level;
  }
}

// Logs one message through a logger using MakeFormatter(json) and returns the output.
std::string LogOnce(bool json, const std::string& message) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
  sink->set_formatter(MakeFormatter(json));
  spdlog::logger logger("chamber", sink);
  logger.warn(message);
  return out.str();
}

TEST(LogFormatTest, TextLineHasIsoTimeLevelLoggerAndMessage) {
  const std::string line = LogOnce(/*json=*/false, "node gpu-7 fenced");
  const std::regex pattern(
      R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}[+-]\d{2}:\d{2} warning \[chamber\] node gpu-7 fenced\r?\n$)");
  EXPECT_TRUE(std::regex_match(line, pattern)) << line;
}

TEST(LogFormatTest, JsonLineIsOneEscapedObject) {
  const std::string line = LogOnce(/*json=*/true, "queue \"research\"\nover quota");
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line per record";

  const nlohmann::json record = nlohmann::json::parse(line);
  EXPECT_EQ(record.at("level"), "warning");
  EXPECT_EQ(record.at("logger"), "chamber");
  EXPECT_EQ(record.at("msg"), "queue \"research\"\nover quota");
  const std::regex time(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$)");
  EXPECT_TRUE(std::regex_match(record.at("time").get<std::string>(), time)) << record.dump();
}

}  // namespace
}  // namespace chamber::logging
