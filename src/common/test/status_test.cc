#include "common/status.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace chamber {
namespace {

TEST(StatusTest, DefaultIsOk) {
  const Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kOk);
  EXPECT_EQ(status.message(), "");
  EXPECT_EQ(status.ToString(), "ok");
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(StatusTest, NamedConstructorsSetCodeAndMessage) {
  EXPECT_EQ(Status::InvalidArgument("m").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Status::NotFound("m").code(), StatusCode::kNotFound);
  EXPECT_EQ(Status::AlreadyExists("m").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Status::FailedPrecondition("m").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Status::Unavailable("m").code(), StatusCode::kUnavailable);
  EXPECT_EQ(Status::Internal("m").code(), StatusCode::kInternal);
  EXPECT_EQ(Status::NotFound("queue \"a\"").message(), "queue \"a\"");
  EXPECT_FALSE(Status::Internal("m").ok());
}

TEST(StatusTest, ToStringPrefixesCodeName) {
  EXPECT_EQ(Status::InvalidArgument("field spec.priority: must be an integer").ToString(),
            "invalid argument: field spec.priority: must be an integer");
  EXPECT_EQ(Status::NotFound("queue \"research\"").ToString(), "not found: queue \"research\"");
  EXPECT_EQ(Status::AlreadyExists("x").ToString(), "already exists: x");
  EXPECT_EQ(Status::FailedPrecondition("x").ToString(), "failed precondition: x");
  EXPECT_EQ(Status::Unavailable("x").ToString(), "unavailable: x");
  EXPECT_EQ(Status::Internal("x").ToString(), "internal error: x");
}

TEST(StatusTest, WithContextPrependsContextAndKeepsCode) {
  const Status status =
      Status::InvalidArgument("field spec.resources.gpu.quota: must not be negative")
          .WithContext("4:9")
          .WithContext("queues.yaml");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "queues.yaml: 4:9: field spec.resources.gpu.quota: must not be negative");
  EXPECT_EQ(
      status.ToString(),
      "invalid argument: queues.yaml: 4:9: field spec.resources.gpu.quota: must not be negative");
}

TEST(StatusTest, HttpDetailSurvivesContext) {
  const Status status = Status::Unavailable("GET /api/v1/pods: HTTP 429 TooManyRequests")
                            .WithHttp(429, "TooManyRequests")
                            .WithContext("listing pods");
  EXPECT_EQ(status.http_code(), 429);
  EXPECT_EQ(status.reason(), "TooManyRequests");
  EXPECT_EQ(status.message(), "listing pods: GET /api/v1/pods: HTTP 429 TooManyRequests");
  // A message that merely mentions HTTP carries no detail.
  const Status plain = Status::Internal("HTTP 404 NotFound in a log line");
  EXPECT_EQ(plain.http_code(), 0);
  EXPECT_EQ(plain.reason(), "");
}

TEST(StatusTest, WithContextLeavesOkUnchanged) {
  const Status status = Status::Ok().WithContext("queues.yaml");
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.message(), "");
}

TEST(ResultTest, HoldsValue) {
  Result<int> result = 42;
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result.status().ok());
  EXPECT_EQ(result.value(), 42);
  EXPECT_EQ(*result, 42);
  *result = 7;
  EXPECT_EQ(result.value(), 7);
}

TEST(ResultTest, HoldsError) {
  const Result<int> result = Status::NotFound("node \"gpu-7\"");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(result.status().message(), "node \"gpu-7\"");
}

TEST(ResultTest, ArrowReachesMembersAndRvalueValueMoves) {
  Result<std::string> result = std::string("bound");
  EXPECT_EQ(result->size(), 5U);
  const std::string moved = std::move(result).value();
  EXPECT_EQ(moved, "bound");

  Result<std::unique_ptr<int>> owner = std::make_unique<int>(3);
  const std::unique_ptr<int> taken = std::move(owner).value();
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(*taken, 3);
}

Status FailIf(bool fail, int* calls) {
  ++*calls;
  if (fail) return Status::Unavailable("apiserver unreachable");
  return Status::Ok();
}

Status TwoSteps(bool fail_first, int* calls) {
  CHAMBER_RETURN_IF_ERROR(FailIf(fail_first, calls));
  CHAMBER_RETURN_IF_ERROR(FailIf(false, calls));
  return Status::Ok();
}

TEST(StatusMacrosTest, ReturnIfErrorPropagatesFirstError) {
  int calls = 0;
  const Status status = TwoSteps(/*fail_first=*/true, &calls);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "apiserver unreachable");
  EXPECT_EQ(calls, 1);
}

TEST(StatusMacrosTest, ReturnIfErrorContinuesOnOk) {
  int calls = 0;
  EXPECT_TRUE(TwoSteps(/*fail_first=*/false, &calls).ok());
  EXPECT_EQ(calls, 2);
}

Result<int> ParsePositive(int n) {
  if (n <= 0) return Status::InvalidArgument("must be positive");
  return n;
}

Result<int> SumOfPositives(int a, int b) {
  CHAMBER_ASSIGN_OR_RETURN(const int x, ParsePositive(a));
  CHAMBER_ASSIGN_OR_RETURN(const int y, ParsePositive(b));
  return x + y;
}

Result<std::unique_ptr<int>> MakeOwned(int n) { return std::make_unique<int>(n); }

Status UseOwned(int n, int* out) {
  CHAMBER_ASSIGN_OR_RETURN(std::unique_ptr<int> owned, MakeOwned(n));
  *out = *owned;
  return Status::Ok();
}

TEST(StatusMacrosTest, AssignOrReturnAssignsValues) {
  const Result<int> sum = SumOfPositives(2, 3);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(*sum, 5);
}

TEST(StatusMacrosTest, AssignOrReturnPropagatesError) {
  const Result<int> sum = SumOfPositives(2, -1);
  ASSERT_FALSE(sum.ok());
  EXPECT_EQ(sum.status().ToString(), "invalid argument: must be positive");
}

TEST(StatusMacrosTest, AssignOrReturnMovesMoveOnlyValues) {
  int out = 0;
  ASSERT_TRUE(UseOwned(9, &out).ok());
  EXPECT_EQ(out, 9);
}

}  // namespace
}  // namespace chamber
