// CShims: the few C entry points Swift cannot import directly.
//
// Swift cannot call C variadic functions nor expand function-like or cast macros. Each
// function here exists for exactly one such reason, stated beside it, and carries the
// `CShims_` prefix so a call site says it is going through a shim. Logic stays in Swift.
#ifndef CSHIMS_H
#define CSHIMS_H

#include "CShims_mhd.h"
#include "CShims_curl.h"
#include "CShims_openssl.h"

#endif
