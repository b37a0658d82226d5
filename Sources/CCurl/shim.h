#ifndef CURL_STRICTER
#define CURL_STRICTER
#endif
#include <curl/curl.h>
