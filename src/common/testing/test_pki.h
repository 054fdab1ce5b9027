// A throwaway PKI for tests of TLS, made by the `openssl` command line in a temporary directory:
// two CAs ("ca", "other-ca"), a certificate signed by "ca" for 127.0.0.1 and localhost ("server")
// and one signed by "ca" for elsewhere.example only ("elsewhere"). Each NAME has NAME.crt and
// NAME.key (PEM, the keys unencrypted).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace chamber::testing {

class TestPki {
 public:
  TestPki() {
    dir_ = std::filesystem::temp_directory_path() /
           ("chamber-tls-" + std::to_string(::getpid()) + "-" +
            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    std::filesystem::create_directories(dir_);
    ok_ = Ca("ca") && Ca("other-ca") && Leaf("server", "ca", "IP:127.0.0.1,DNS:localhost") &&
          Leaf("elsewhere", "ca", "DNS:elsewhere.example");
  }
  ~TestPki() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  // False when openssl failed (its output is in openssl.log under the directory).
  bool ok() const { return ok_; }
  // The path of `file` ("ca.crt", "server.key") in the directory.
  std::string operator()(const std::string& file) const { return (dir_ / file).string(); }

 private:
  bool Run(const std::string& command) const {
    return std::system(
               ("cd '" + dir_.string() + "' && " + command + " >>openssl.log 2>&1").c_str()) == 0;
  }
  static std::string NewKey() { return "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"; }
  bool Ca(const std::string& name) const {
    return Run("openssl req -x509 " + NewKey() + " -keyout " + name + ".key -out " + name +
               ".crt -days 2 -subj /CN=" + name);
  }
  bool Leaf(const std::string& name, const std::string& ca, const std::string& san) const {
    std::ofstream(dir_ / (name + ".ext")) << "subjectAltName=" << san << "\n";
    return Run("openssl req " + NewKey() + " -keyout " + name + ".key -out " + name +
               ".csr -subj /CN=" + name) &&
           Run("openssl x509 -req -in " + name + ".csr -CA " + ca + ".crt -CAkey " + ca +
               ".key -CAcreateserial -days 2 -out " + name + ".crt -extfile " + name + ".ext");
  }

  std::filesystem::path dir_;
  bool ok_ = false;
};

}  // namespace chamber::testing
