#include "common/tls.h"

#include <filesystem>
#include <memory>
#include <system_error>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

namespace chamber::tls {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct InfoFree {
  void operator()(STACK_OF(X509_INFO) * s) const { sk_X509_INFO_pop_free(s, X509_INFO_free); }
};

std::string Named(const FlagFile& f) { return f.flag + " " + f.path; }

// The oldest error OpenSSL queued, and the queue cleared.
std::string OpenSslReason() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  const char* reason = e == 0 ? nullptr : ERR_reason_error_string(e);
  return reason ? std::string(" (") + reason + ")" : "";
}

// Opens `f` for reading; the error says whether it is missing or unreadable.
Result<std::unique_ptr<BIO, BioFree>> Open(const FlagFile& f) {
  std::error_code ec;
  if (f.path.empty()) return Status::InvalidArgument(f.flag + ": no file given");
  if (!std::filesystem::exists(f.path, ec)) return Status::NotFound(Named(f) + ": no such file");
  if (std::filesystem::is_directory(f.path, ec))
    return Status::InvalidArgument(Named(f) + ": is a directory, not a PEM file");
  std::unique_ptr<BIO, BioFree> bio(BIO_new_file(f.path.c_str(), "r"));
  if (!bio) return Status::InvalidArgument(Named(f) + ": cannot read it" + OpenSslReason());
  return bio;
}

// Never asks for a passphrase: an encrypted key is refused rather than prompted for.
int NoPassphrase(char*, int, int, void*) { return 0; }

}  // namespace

Status CheckCertificateAndKey(const FlagFile& cert, const FlagFile& key) {
  CHAMBER_ASSIGN_OR_RETURN(auto cert_bio, Open(cert));
  std::unique_ptr<X509, X509Free> x509(
      PEM_read_bio_X509(cert_bio.get(), nullptr, NoPassphrase, nullptr));
  if (!x509)
    return Status::InvalidArgument(Named(cert) + ": not a PEM certificate" + OpenSslReason());
  CHAMBER_ASSIGN_OR_RETURN(auto key_bio, Open(key));
  std::unique_ptr<EVP_PKEY, KeyFree> pkey(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, NoPassphrase, nullptr));
  if (!pkey)
    return Status::InvalidArgument(Named(key) + ": not an unencrypted PEM private key" +
                                   OpenSslReason());
  if (X509_check_private_key(x509.get(), pkey.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument(Named(key) + ": is not the key of the certificate in " +
                                   Named(cert));
  }
  return Status::Ok();
}

Status CheckCaFile(const FlagFile& ca) {
  CHAMBER_ASSIGN_OR_RETURN(auto bio, Open(ca));
  std::unique_ptr<STACK_OF(X509_INFO), InfoFree> infos(
      PEM_X509_INFO_read_bio(bio.get(), nullptr, NoPassphrase, nullptr));
  int certificates = 0;
  for (int i = 0; infos && i < sk_X509_INFO_num(infos.get()); ++i)
    if (sk_X509_INFO_value(infos.get(), i)->x509 != nullptr) ++certificates;
  ERR_clear_error();
  if (certificates == 0) return Status::InvalidArgument(Named(ca) + ": holds no PEM certificate");
  return Status::Ok();
}

}  // namespace chamber::tls
