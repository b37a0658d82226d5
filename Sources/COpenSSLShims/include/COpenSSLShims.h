// COpenSSLShims: the few OpenSSL's libcrypto entry points Swift cannot import directly (variadic functions,
// function-like or cast macros). Each function exists for exactly one such reason, stated beside
// it, and carries the `CShims_` prefix so a call site says it goes through a shim. Logic stays
// in Swift. One shim target per C library, so each wrapper links only its own library.
#ifndef CSHIMS_OPENSSL_H
#define CSHIMS_OPENSSL_H

#include <stddef.h>
#include <openssl/evp.h>

// SHA-256 of `count` bytes at `data` into the 32 bytes at `out`, with OpenSSL's low-level
// functions: no allocation and no provider dispatch (63 against 185–261 ns for EVP_Digest with a
// fetched digest, for a 48-byte token; the bearer token of every API call is hashed). Why C: they
// are deprecated since OpenSSL 3.0 (not removed), and Swift would warn on each use.
void CShims_SHA256(const void *data, size_t count, unsigned char *out);

// Builds an RSA public key from big-endian modulus and exponent octets (a JWK's `n` and `e`).
// Why C: OSSL_PARAM_BLD_push_BN keeps the key-NAME pointer until OSSL_PARAM_BLD_to_param, and
// a Swift string's C pointer lives only for one call (heap-use-after-free, see docs/c-libraries.md);
// the names here are C string literals with static storage. EVP_PKEY_PUBLIC_KEY is a
// macro-of-macros Swift cannot see. Returns NULL on failure, the OpenSSL error queue set.
EVP_PKEY *CShims_EVP_PKEY_from_rsa_components(const unsigned char *n, size_t n_length,
                                             const unsigned char *e, size_t e_length);

// Builds an EC public key on a named curve from big-endian affine coordinates (a JWK's `x`
// and `y`), each exactly the field size. `curve_nid` is NID_X9_62_prime256v1 or NID_secp384r1.
// Why C: as above (pointer-stable parameter names, EVP_PKEY_PUBLIC_KEY). The point is checked
// to lie on the curve. Returns NULL on failure, the OpenSSL error queue set.
EVP_PKEY *CShims_EVP_PKEY_from_ec_point(int curve_nid,
                                       const unsigned char *x, size_t x_length,
                                       const unsigned char *y, size_t y_length);

#endif
