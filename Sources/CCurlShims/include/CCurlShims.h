// CCurlShims: the few libcurl entry points Swift cannot import directly (variadic functions,
// function-like or cast macros). Each function exists for exactly one such reason, stated beside
// it, and carries the `CShims_` prefix so a call site says it goes through a shim. Logic stays
// in Swift. One shim target per C library, so each wrapper links only its own library.
#ifndef CSHIMS_CURL_H
#define CSHIMS_CURL_H

#ifndef CURL_STRICTER
#define CURL_STRICTER
#endif
#include <curl/curl.h>

// curl_easy_setopt is variadic and the callee reads the argument with its exact C type, so
// there is one wrapper per argument type (as swift-corelibs-foundation's libcurl layer does).
CURLcode CShims_curl_easy_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode CShims_curl_easy_setopt_ptr(CURL *handle, CURLoption option, const void *value);
CURLcode CShims_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value);
CURLcode CShims_curl_easy_setopt_write_function(CURL *handle, CURLoption option,
                                                curl_write_callback value);
CURLcode CShims_curl_easy_setopt_read_function(CURL *handle, CURLoption option,
                                               curl_read_callback value);
CURLcode CShims_curl_easy_setopt_closesocket_function(CURL *handle, curl_closesocket_callback value);

// curl_easy_getinfo is variadic: one wrapper per result type.
CURLcode CShims_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode CShims_curl_easy_getinfo_ptr(CURL *handle, CURLINFO info, void **value);
CURLcode CShims_curl_easy_getinfo_socket(CURL *handle, CURLINFO info, curl_socket_t *value);

// curl_multi_setopt is variadic: one wrapper per argument type.
CURLMcode CShims_curl_multi_setopt_long(CURLM *handle, CURLMoption option, long value);
CURLMcode CShims_curl_multi_setopt_ptr(CURLM *handle, CURLMoption option, void *value);
CURLMcode CShims_curl_multi_setopt_socket_function(CURLM *handle, curl_socket_callback value);
CURLMcode CShims_curl_multi_setopt_timer_function(CURLM *handle, curl_multi_timer_callback value);

#endif
