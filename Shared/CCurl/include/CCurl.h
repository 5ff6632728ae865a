#ifndef CCURL_H
#define CCURL_H
// Non-variadic wrappers over libcurl: Swift cannot call C variadic functions such as
// curl_easy_setopt/curl_easy_getinfo/curl_multi_setopt directly.
#include <curl/curl.h>
#include <stddef.h>
#ifdef __GLIBC__
// Also glibc's malloc tuning (mallopt, M_ARENA_MAX), which Swift's Glibc module leaves out.
#include <malloc.h>
#endif

typedef size_t (*ccurl_write_cb)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef size_t (*ccurl_read_cb)(char *buffer, size_t size, size_t nitems, void *userdata);

CURLcode ccurl_setopt_long(CURL *h, CURLoption opt, long value);
CURLcode ccurl_setopt_string(CURL *h, CURLoption opt, const char *value);
CURLcode ccurl_setopt_pointer(CURL *h, CURLoption opt, void *value);
CURLcode ccurl_setopt_slist(CURL *h, CURLoption opt, struct curl_slist *value);
CURLcode ccurl_setopt_write_function(CURL *h, ccurl_write_cb cb);
CURLcode ccurl_setopt_header_function(CURL *h, ccurl_write_cb cb);
CURLcode ccurl_setopt_read_function(CURL *h, ccurl_read_cb cb);
CURLcode ccurl_setopt_postfields(CURL *h, const char *data, long length);

CURLcode ccurl_getinfo_long(CURL *h, CURLINFO info, long *out);
CURLcode ccurl_getinfo_double(CURL *h, CURLINFO info, double *out);

CURLMcode ccurl_multi_setopt_long(CURLM *m, CURLMoption opt, long value);

/// The easy handle's private pointer (set with CURLOPT_PRIVATE), read back after completion.
void *ccurl_getinfo_private(CURL *h);

/// Reads the next completed transfer from the multi handle; returns 1 and fills out the
/// easy handle and result when one is there, 0 otherwise.
int ccurl_multi_next_done(CURLM *m, CURL **easy, CURLcode *result);

#endif
