#include "CCurl.h"

CURLcode ccurl_setopt_long(CURL *h, CURLoption opt, long value) { return curl_easy_setopt(h, opt, value); }
CURLcode ccurl_setopt_string(CURL *h, CURLoption opt, const char *value) { return curl_easy_setopt(h, opt, value); }
CURLcode ccurl_setopt_pointer(CURL *h, CURLoption opt, void *value) { return curl_easy_setopt(h, opt, value); }
CURLcode ccurl_setopt_slist(CURL *h, CURLoption opt, struct curl_slist *value) { return curl_easy_setopt(h, opt, value); }
CURLcode ccurl_setopt_write_function(CURL *h, ccurl_write_cb cb) { return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cb); }
CURLcode ccurl_setopt_header_function(CURL *h, ccurl_write_cb cb) { return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, cb); }
CURLcode ccurl_setopt_read_function(CURL *h, ccurl_read_cb cb) { return curl_easy_setopt(h, CURLOPT_READFUNCTION, cb); }
CURLcode ccurl_setopt_postfields(CURL *h, const char *data, long length) {
    CURLcode rc = curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, length);
    if (rc != CURLE_OK) return rc;
    // COPYPOSTFIELDS: libcurl keeps its own copy, so the Swift buffer may go away.
    return curl_easy_setopt(h, CURLOPT_COPYPOSTFIELDS, data);
}
CURLcode ccurl_getinfo_long(CURL *h, CURLINFO info, long *out) { return curl_easy_getinfo(h, info, out); }
CURLcode ccurl_getinfo_double(CURL *h, CURLINFO info, double *out) { return curl_easy_getinfo(h, info, out); }
CURLMcode ccurl_multi_setopt_long(CURLM *m, CURLMoption opt, long value) { return curl_multi_setopt(m, opt, value); }
void *ccurl_getinfo_private(CURL *h) {
    char *p = NULL;
    curl_easy_getinfo(h, CURLINFO_PRIVATE, &p);
    return p;
}
int ccurl_multi_next_done(CURLM *m, CURL **easy, CURLcode *result) {
    int left = 0;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(m, &left)) != NULL) {
        if (msg->msg == CURLMSG_DONE) {
            *easy = msg->easy_handle;
            *result = msg->data.result;
            return 1;
        }
    }
    return 0;
}
