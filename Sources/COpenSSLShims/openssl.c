// SHA256_Init/Update/Final are deprecated since OpenSSL 3.0 (not removed): see CShims_SHA256.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/obj_mac.h>
#include <openssl/param_build.h>
#include <openssl/sha.h>
#include "COpenSSLShims.h"

void CShims_SHA256(const void *data, size_t count, unsigned char *out) {
    SHA256_CTX context;
    SHA256_Init(&context);
    SHA256_Update(&context, data, count);
    SHA256_Final(out, &context);
    OPENSSL_cleanse(&context, sizeof context);
}

// Runs EVP_PKEY_fromdata for a public key of `type` ("RSA" or "EC") from `params`.
static EVP_PKEY *CShims_public_key_fromdata(const char *type, OSSL_PARAM *params) {
    EVP_PKEY *key = NULL;
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (context == NULL) return NULL;
    if (EVP_PKEY_fromdata_init(context) <= 0
        || EVP_PKEY_fromdata(context, &key, EVP_PKEY_PUBLIC_KEY, params) <= 0) {
        key = NULL;
    }
    EVP_PKEY_CTX_free(context);
    return key;
}

EVP_PKEY *CShims_EVP_PKEY_from_rsa_components(const unsigned char *n, size_t n_length,
                                             const unsigned char *e, size_t e_length) {
    if (n == NULL || e == NULL || n_length == 0 || e_length == 0
        || n_length > 2048 || e_length > 2048) {
        return NULL;
    }
    EVP_PKEY *key = NULL;
    BIGNUM *modulus = BN_bin2bn(n, (int)n_length, NULL);
    BIGNUM *exponent = BN_bin2bn(e, (int)e_length, NULL);
    OSSL_PARAM_BLD *builder = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    if (modulus != NULL && exponent != NULL && builder != NULL
        && OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_RSA_N, modulus)
        && OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_RSA_E, exponent)) {
        params = OSSL_PARAM_BLD_to_param(builder);
    }
    if (params != NULL) key = CShims_public_key_fromdata("RSA", params);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(builder);
    BN_free(exponent);
    BN_free(modulus);
    return key;
}

EVP_PKEY *CShims_EVP_PKEY_from_ec_point(int curve_nid,
                                       const unsigned char *x, size_t x_length,
                                       const unsigned char *y, size_t y_length) {
    const char *group;
    size_t field_size;
    switch (curve_nid) {
    case NID_X9_62_prime256v1: group = SN_X9_62_prime256v1; field_size = 32; break;
    case NID_secp384r1: group = SN_secp384r1; field_size = 48; break;
    default: return NULL;
    }
    if (x == NULL || y == NULL || x_length != field_size || y_length != field_size) return NULL;

    // SEC 1 uncompressed point: 0x04 || x || y.
    unsigned char point[1 + 2 * 48];
    size_t point_length = 1 + 2 * field_size;
    point[0] = 0x04;
    memcpy(point + 1, x, field_size);
    memcpy(point + 1 + field_size, y, field_size);

    EVP_PKEY *key = NULL;
    OSSL_PARAM_BLD *builder = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    if (builder != NULL
        && OSSL_PARAM_BLD_push_utf8_string(builder, OSSL_PKEY_PARAM_GROUP_NAME, group, 0)
        && OSSL_PARAM_BLD_push_octet_string(builder, OSSL_PKEY_PARAM_PUB_KEY, point, point_length)) {
        params = OSSL_PARAM_BLD_to_param(builder);
    }
    if (params != NULL) key = CShims_public_key_fromdata("EC", params);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(builder);

    // Refuse a point that is not on the curve (invalid-curve attacks).
    if (key != NULL) {
        EVP_PKEY_CTX *check = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL);
        if (check == NULL || EVP_PKEY_public_check(check) != 1) {
            EVP_PKEY_free(key);
            key = NULL;
        }
        EVP_PKEY_CTX_free(check);
    }
    return key;
}
