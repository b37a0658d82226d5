#include <openssl/crypto.h>
#include "CShims_openssl.h"

void CShims_OPENSSL_free(void *pointer) { OPENSSL_free(pointer); }
