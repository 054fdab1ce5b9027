#include "common/tls.h"

#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <system_error>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
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

struct ServingCertificate::Pair {
  std::unique_ptr<X509, X509Free> leaf;
  std::unique_ptr<EVP_PKEY, KeyFree> key;
  STACK_OF(X509) * chain = nullptr;  // the certificates after the leaf
  ~Pair() {
    if (chain) sk_X509_pop_free(chain, X509_free);
  }
};

namespace {

// "<inode>:<mtime>:<size>" of each file, followed through symlinks: what tells a replaced file
// (a Secret volume swaps a symlink to a new directory; an editor renames a new file over it),
// even within the file system's time granularity.
std::string Stamp(const std::string& a, const std::string& b) {
  std::string out;
  for (const std::string* path : {&a, &b}) {
    struct stat st {};
    if (::stat(path->c_str(), &st) != 0) {
      out += "-;";
      continue;
    }
    out += std::to_string(st.st_ino) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_size) + ";";
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<ServingCertificate>> ServingCertificate::Load(const FlagFile& cert,
                                                                     const FlagFile& key) {
  CHAMBER_RETURN_IF_ERROR(CheckCertificateAndKey(cert, key));
  std::shared_ptr<ServingCertificate> s(new ServingCertificate(cert, key));
  if (!s->Current()) return Status::InvalidArgument(s->last_error_);
  s->reloads_ = 0;
  return s;
}

ServingCertificate::~ServingCertificate() = default;

std::shared_ptr<const ServingCertificate::Pair> ServingCertificate::Current() {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string stamp = Stamp(cert_.path, key_.path);
  if (pair_ && stamp == stamp_) return pair_;
  stamp_ = stamp;  // a bad pair is tried again only once the files change again
  auto fresh = std::make_shared<Pair>();
  Status s = CheckCertificateAndKey(cert_, key_);
  if (s.ok()) {
    auto bio = Open(cert_);
    if (bio.ok()) {
      fresh->leaf.reset(PEM_read_bio_X509(bio->get(), nullptr, NoPassphrase, nullptr));
      fresh->chain = sk_X509_new_null();
      while (X509* next = PEM_read_bio_X509(bio->get(), nullptr, NoPassphrase, nullptr))
        sk_X509_push(fresh->chain, next);
      ERR_clear_error();  // the end of the file reads as an error
    }
    auto key_bio = Open(key_);
    if (key_bio.ok())
      fresh->key.reset(PEM_read_bio_PrivateKey(key_bio->get(), nullptr, NoPassphrase, nullptr));
    if (!fresh->leaf || !fresh->key)
      s = Status::InvalidArgument(Named(cert_) + ", " + Named(key_) + ": changed while read");
  }
  if (!s.ok()) {
    last_error_ = std::string(s.message());
    return pair_;
  }
  if (pair_) ++reloads_;
  pair_ = std::move(fresh);
  return pair_;
}

int ServingCertificate::OnHandshake(SSL* ssl, void* self) {
  std::shared_ptr<const Pair> p = static_cast<ServingCertificate*>(self)->Current();
  if (!p) return 0;
  return SSL_use_cert_and_key(ssl, p->leaf.get(), p->key.get(), p->chain, 1) == 1 ? 1 : 0;
}

void ServingCertificate::Install(SSL_CTX& ctx) {
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_cert_cb(&ctx, &ServingCertificate::OnHandshake, this);
}

int ServingCertificate::reloads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reloads_;
}

std::string ServingCertificate::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

}  // namespace chamber::tls
