#include "tests/testing/test_certs.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>

namespace parity::testing {
namespace {

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);  // NOLINT(runtime/int)
  return std::string(data, static_cast<size_t>(n));
}

EVP_PKEY* NewKey() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (key == nullptr) throw std::runtime_error("EVP_EC_gen failed");
  return key;
}

std::string KeyPem(EVP_PKEY* key) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::string out = BioText(bio);
  BIO_free(bio);
  return out;
}

std::string CertPem(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  std::string out = BioText(bio);
  BIO_free(bio);
  return out;
}

void AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) throw std::runtime_error("bad extension");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

X509* NewCert(EVP_PKEY* key, const std::string& cn, int from_days, int to_days) {
  static std::mt19937_64 rng(std::random_device{}());
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set_int64(X509_get_serialNumber(cert), static_cast<int64_t>(rng() >> 2));
  X509_gmtime_adj(X509_getm_notBefore(cert), static_cast<long>(from_days) * 86400);  // NOLINT
  X509_gmtime_adj(X509_getm_notAfter(cert), static_cast<long>(to_days) * 86400);     // NOLINT
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  return cert;
}

EVP_PKEY* ReadKey(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return key;
}

X509* ReadCert(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return cert;
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace

KeyPair MakeCa(const std::string& common_name) {
  EVP_PKEY* key = NewKey();
  X509* cert = NewCert(key, common_name, -1, 365);
  X509_set_issuer_name(cert, X509_get_subject_name(cert));
  AddExt(cert, cert, NID_basic_constraints, "critical,CA:TRUE");
  AddExt(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign");
  AddExt(cert, cert, NID_subject_key_identifier, "hash");
  X509_sign(cert, key, EVP_sha256());
  KeyPair out{CertPem(cert), KeyPem(key)};
  X509_free(cert);
  EVP_PKEY_free(key);
  return out;
}

KeyPair MakeLeaf(const KeyPair& ca, const CertOptions& options) {
  EVP_PKEY* ca_key = ReadKey(ca.key_pem);
  X509* ca_cert = ReadCert(ca.cert_pem);
  EVP_PKEY* key = NewKey();
  X509* cert = NewCert(key, options.common_name, options.valid_from_days, options.valid_to_days);
  X509_set_issuer_name(cert, X509_get_subject_name(ca_cert));
  AddExt(cert, ca_cert, NID_basic_constraints, "CA:FALSE");
  AddExt(cert, ca_cert, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1");
  AddExt(cert, ca_cert, NID_ext_key_usage, options.extended_key_usage.c_str());
  X509_sign(cert, ca_key, EVP_sha256());
  KeyPair out{CertPem(cert), KeyPem(key)};
  X509_free(cert);
  X509_free(ca_cert);
  EVP_PKEY_free(key);
  EVP_PKEY_free(ca_key);
  return out;
}

std::string WriteTlsDir(const std::string& dir, const std::string& ca_cert, const KeyPair& server,
                        const KeyPair& client) {
  std::filesystem::create_directories(dir);
  if (!ca_cert.empty()) Write(dir + "/ca.crt", ca_cert);
  if (!server.cert_pem.empty()) {
    Write(dir + "/server.crt", server.cert_pem);
    Write(dir + "/server.key", server.key_pem);
  }
  if (!client.cert_pem.empty()) {
    Write(dir + "/client.crt", client.cert_pem);
    Write(dir + "/client.key", client.key_pem);
  }
  return dir;
}

std::string EncryptKey(const std::string& key_pem, const std::string& passphrase) {
  EVP_PKEY* key = ReadKey(key_pem);
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PKCS8PrivateKey(bio, key, EVP_aes_256_cbc(), passphrase.data(),
                                static_cast<int>(passphrase.size()), nullptr, nullptr);
  std::string out = BioText(bio);
  BIO_free(bio);
  EVP_PKEY_free(key);
  return out;
}

std::string MakeCrl(const KeyPair& ca, const std::vector<std::string>& revoked,
                    int next_update_days) {
  EVP_PKEY* ca_key = ReadKey(ca.key_pem);
  X509* ca_cert = ReadCert(ca.cert_pem);
  X509_CRL* crl = X509_CRL_new();
  X509_CRL_set_version(crl, 1);
  X509_CRL_set_issuer_name(crl, X509_get_subject_name(ca_cert));
  ASN1_TIME* last = X509_gmtime_adj(nullptr, -86400);
  ASN1_TIME* next =
      X509_gmtime_adj(nullptr, static_cast<long>(next_update_days) * 86400);  // NOLINT
  X509_CRL_set1_lastUpdate(crl, last);
  X509_CRL_set1_nextUpdate(crl, next);
  for (const std::string& pem : revoked) {
    X509* cert = ReadCert(pem);
    X509_REVOKED* entry = X509_REVOKED_new();
    X509_REVOKED_set_serialNumber(entry, X509_get_serialNumber(cert));
    X509_REVOKED_set_revocationDate(entry, last);
    X509_CRL_add0_revoked(crl, entry);
    X509_free(cert);
  }
  X509_CRL_sort(crl);
  X509_CRL_sign(crl, ca_key, EVP_sha256());
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509_CRL(bio, crl);
  std::string out = BioText(bio);
  BIO_free(bio);
  ASN1_TIME_free(last);
  ASN1_TIME_free(next);
  X509_CRL_free(crl);
  X509_free(ca_cert);
  EVP_PKEY_free(ca_key);
  return out;
}

std::string MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/" + prefix + "XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

}  // namespace parity::testing
