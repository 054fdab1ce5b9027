// Runs the chamber-agent binary in tests: one process with the fake NVML driven by a scenario
// file, its output captured to files, and (ServingAgent) reached over HTTP on a free port.
#pragma once

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/test/test_dir.h"

namespace chamber::agent::test {

using Clock = std::chrono::steady_clock;

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = TestPath(name);
  std::ofstream(path) << text;
  return path;
}

// Polls `done` every 10 ms until it holds or `timeout_s` passes; whether it held.
inline bool Eventually(const std::function<bool()>& done, double timeout_s = 10) {
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// One chamber-agent process with the fake NVML driven by `scenario_path`.
class AgentProcess {
 public:
  AgentProcess(std::vector<std::string> args, const std::string& scenario_path,
               const std::string& tag) {
    out_ = TestPath("agent_" + tag + ".out");
    err_ = TestPath("agent_" + tag + ".err");
    args.insert(args.begin(), CHAMBER_AGENT_BINARY);
    pid_ = fork();
    if (pid_ == 0) {
      setenv("CHAMBER_FAKE_NVML_SCENARIO", scenario_path.c_str(), 1);
      int o = open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int e = open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(o, 1);
      dup2(e, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~AgentProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  // Waits for the process to exit (up to `timeout_s`); its exit code, or -1 on timeout.
  int Wait(double timeout_s = 20) {
    auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    while (Clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  int Terminate() {
    kill(pid_, SIGTERM);
    return Wait(10);
  }
  std::string Stdout() const { return ReadFile(out_); }
  std::string Stderr() const { return ReadFile(err_); }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string out_, err_;
};

// A serving agent: --listen on a free port, reached over HTTP.
class ServingAgent {
 public:
  ServingAgent(std::vector<std::string> args, const std::string& scenario_path,
               const std::string& tag)
      : port_file_(TestPath("agent_" + tag + ".port")) {
    std::remove(port_file_.c_str());
    args.insert(args.end(),
                {"--listen", "127.0.0.1:0", "--port-file", port_file_, "--boot-grace", "0"});
    process_ = std::make_unique<AgentProcess>(args, scenario_path, tag);
    auto deadline = Clock::now() + std::chrono::seconds(15);
    while (Clock::now() < deadline && port_ == 0) {
      std::string text = ReadFile(port_file_);
      if (!text.empty() && text.back() == '\n') port_ = std::atoi(text.c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  int port() const { return port_; }
  AgentProcess& process() { return *process_; }

  std::string Get(const std::string& path, int* status = nullptr) {
    httplib::Client client("127.0.0.1", port_);
    auto res = client.Get(path.c_str());
    if (status) *status = res ? res->status : -1;
    return res ? res->body : "";
  }
  nlohmann::json Report() {
    std::string body = Get("/v1/report");
    return body.empty() ? nlohmann::json() : nlohmann::json::parse(body);
  }

 private:
  std::string port_file_;
  int port_ = 0;
  std::unique_ptr<AgentProcess> process_;
};

}  // namespace chamber::agent::test
