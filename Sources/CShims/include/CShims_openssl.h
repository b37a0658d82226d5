#ifndef CSHIMS_OPENSSL_H
#define CSHIMS_OPENSSL_H

#include <stddef.h>
#include <openssl/evp.h>

// OPENSSL_free is a function-like macro.
void CShims_OPENSSL_free(void *pointer);

#endif
