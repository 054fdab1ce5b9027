// The PEM files chamberd's API and its clients use for TLS, checked when a process starts: a
// missing file, a file that holds no certificate or key, or a key that is not the certificate's
// stops the process with the flag and the file named, instead of failing at the first handshake.
#pragma once

#include <string>

#include "common/status.h"

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

}  // namespace chamber::tls
