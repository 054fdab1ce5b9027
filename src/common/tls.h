// The PEM files chamberd's API and its clients use for TLS, checked when a process starts: a
// missing file, a file that holds no certificate or key, or a key that is not the certificate's
// stops the process with the flag and the file named, instead of failing at the first handshake.
// ServingCertificate serves a certificate that is renewed in place (the admission webhook's).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace chamber::tls {

// A file given on the command line, and the flag that named it (for errors).
struct FlagFile {
  std::string flag;  // "--tls-cert-file"
  std::string path;
};

// `cert` holds a PEM certificate (a chain: the server's first), `key` a PEM private key that is
// not encrypted, and the key is the certificate's.
Status CheckCertificateAndKey(const FlagFile& cert, const FlagFile& key);

// `ca` holds at least one PEM certificate: the bundle a client trusts.
Status CheckCaFile(const FlagFile& ca);

// A server's certificate and key (PEM files) that follow the files as they are replaced, as a
// Secret volume's are when cert-manager or Helm renews them: each TLS handshake checks whether
// either file changed (its modification time or size) and, when both read back as a certificate
// and its key, serves the new pair. A pair that does not read (half written, a key of another
// certificate) leaves the last good one in service, and is tried again at the next handshake.
class ServingCertificate {
 public:
  // Reads the pair once; an error (named by the flags) when it does not hold.
  static Result<std::shared_ptr<ServingCertificate>> Load(const FlagFile& cert,
                                                          const FlagFile& key);
  ~ServingCertificate();
  ServingCertificate(const ServingCertificate&) = delete;
  ServingCertificate& operator=(const ServingCertificate&) = delete;

  // Makes `ctx` take its certificate from this object at every handshake (and TLS 1.2 at
  // least). `this` must outlive `ctx`.
  void Install(SSL_CTX& ctx);
  // How often the files were read anew and served (the first read not counted).
  int reloads() const;
  // The last reason a changed pair was not taken ("" when none).
  std::string last_error() const;

 private:
  struct Pair;
  ServingCertificate(FlagFile cert, FlagFile key) : cert_(std::move(cert)), key_(std::move(key)) {}
  // The pair to serve now, read anew when the files changed.
  std::shared_ptr<const Pair> Current();
  static int OnHandshake(SSL* ssl, void* self);

  FlagFile cert_, key_;
  mutable std::mutex mu_;
  std::shared_ptr<const Pair> pair_;
  std::string stamp_;  // the files' times and sizes when `pair_` was read (or last tried)
  int reloads_ = 0;
  std::string last_error_;
};

}  // namespace chamber::tls
