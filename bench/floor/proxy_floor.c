/*
 * The floor of TokenGate's proxy hop on this stack (TokenGate's one-loop design, done minimally in C):
 * one event loop per thread, each with its own epoll set holding a libmicrohttpd daemon in
 * external mode (MHD_USE_EPOLL, its epoll fd nested in the loop's) and a libcurl multi handle
 * driven by curl_multi_socket_action on the same epoll set; curl's and MHD's deadlines bound
 * epoll_wait. A request is suspended while libcurl fetches UPSTREAM/<path> (keep-alive), and
 * resumed on the loop thread with the upstream's status and body; GET /healthz is answered at once
 * with a static body (the floor of a bare route). The request to the upstream carries the fields
 * TokenGate adds to every proxied call, with the same lengths: `Authorization: Bearer` with a
 * fixed token (PROXY_FLOOR_TOKEN; the bench passes one as long as its provider's), the client's
 * address in `X-Forwarded-For`, `X-Forwarded-Proto`, `X-Forwarded-Host` (PROXY_FLOOR_PUBLIC_HOST)
 * and a fresh 15-character `X-Request-ID`, which every answer echoes, as TokenGate's do. What the
 * design must do with every call besides, it does the plainest way: the app's bearer token is read
 * and compared with the one it accepts (PROXY_FLOOR_APP_TOKEN, when set; else any is taken; a call
 * without one answers 401), the app's end-to-end fields go upstream and the API's come back (both
 * without the hop-by-hop ones and those the proxy sets itself, each name compared with a short
 * list). Connections idle for 15 s are closed (libmicrohttpd's connection timeout, TokenGate's
 * default `server.connection_timeout_seconds`: a server without one is held open by any client
 * that stops talking). No cache, no logging, no other limits: what is left is the cost of the
 * design itself.
 *
 *   proxy_floor PORT UPSTREAM_BASE [LOOPS [CONNECTIONS]]   e.g. proxy_floor 18183 http://127.0.0.1:18181 1
 *   (UPSTREAM_BASE is scheme://host:port; the request's path replaces its path; CONNECTIONS is
 *   each loop's limit of upstream connections, default 256). Each connection gets 14 KiB of
 *   libmicrohttpd memory, as in TokenGate (server.connectionMemoryLimit), and an easy handle made
 *   while COMPACT_ABOVE or more requests are in flight on its loop reads into a 2 KiB buffer
 *   instead of libcurl's 16 KiB and is not kept for reuse, as TokenGate's compact handles
 *   (Sources/TGHTTPClient/EasyHandlePool.swift): so their memory compares.
 *
 * Built and run by bench/proxy.sh (cc -O2 ... -lmicrohttpd -lcurl -lpthread). Not shipped.
 *
 * The one rule that keeps it from stalling: in external mode libmicrohttpd has no inter-thread
 * channel (MHD_start_daemon drops MHD_USE_ITC unless it runs its own thread), so
 * MHD_resume_connection only sets a flag: nothing becomes readable in MHD's epoll fd and
 * MHD_get_timeout does not count pending resumes. A connection resumed after the last MHD_run
 * of a turn waits for the next unrelated event. Here every harvest of finished transfers (the
 * only place that resumes) is followed by MHD_run before the loop sleeps.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <microhttpd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define TAG_MHD UINT64_MAX

static const char *upstream_base;
static unsigned short port;
static long upstream_connections = 256;
/* GET /healthz's body (PROXY_FLOOR_HEALTHZ_BODY, the same bytes as TokenGate's): answered at once. */
static const char *healthz_body = "{\"status\":\"ok\"}";
/* The upstream's bearer token and TokenGate's public host (PROXY_FLOOR_TOKEN, PROXY_FLOOR_PUBLIC_HOST). */
static const char *upstream_token = "upstream-token";
static const char *public_host = "127.0.0.1";
/* The app's bearer token the floor accepts (PROXY_FLOOR_APP_TOKEN; unset, any): a call without it answers 401. */
static const char *app_token;

/* One of libcurl's sockets in the loop's epoll set: the events it is registered for there and the
   events libcurl wants (EPOLLIN and EPOLLOUT fit in a byte). */
struct upstream_socket {
    uint8_t registered;
    uint8_t wanted;
};

struct loop {
    int epoll_fd;
    struct upstream_socket *sockets; /* by descriptor, RLIMIT_NOFILE of them */
    long long curl_due_ms; /* libcurl's deadline on CLOCK_MONOTONIC in ms: 0 at once, -1 none */
    struct MHD_Daemon *daemon;
    CURLM *multi;
    CURLU *upstream;                /* UPSTREAM_BASE, parsed once */
    struct curl_slist *headers;     /* the fields every call sends: Authorization, X-Forwarded-Proto and -Host */
    char request_id_prefix[9];      /* a random prefix of the loop's request ids; a counter follows */
    unsigned long long request_count;
    struct request *free_requests; /* finished requests, kept for reuse */
    int free_count;
    int in_flight; /* requests taken and not yet recycled */
};

#define COMPACT_ABOVE 256
#define COMPACT_READ_BUFFER 2047L /* libcurl allocates one byte more: 2 KiB */

/* A proxied request. Finished ones are recycled with their easy handle, URL handle and body buffer:
   no per-request setup beyond the path, no allocation of ours per request. */
struct request {
    struct request *next_free;
    struct MHD_Connection *connection;
    CURL *easy;
    CURLU *url;
    char *body;
    size_t length;
    size_t capacity;
    long status;
    int started; /* its transfer (or a refusal): the next call answers */
    int compact; /* its easy handle reads into a compact buffer */
    /* The request's own fields, chained in front of the loop's: the app's end-to-end ones first
       (their nodes and lines in buffers grown as needed and kept with the recycled request), then
       X-Forwarded-For and X-Request-ID. */
    struct curl_slist *app_fields, forwarded_for, request_id;
    int app_field_count, app_field_capacity;
    char *app_lines;
    size_t app_lines_used, app_lines_capacity;
    char forwarded_for_line[64];
    char request_id_line[32]; /* "X-Request-ID: " and the id */
    /* The API's end-to-end fields, each as its name and value ending in NUL, one after the other
       (a buffer grown as needed, kept with the recycled request). */
    char *answer_fields;
    size_t answer_fields_used, answer_fields_capacity;
    int answer_field_count;
};

/* *BUFFER holds at least NEED bytes (grown by doubling; its content kept). */
static void reserve(char **buffer, size_t *capacity, size_t need) {
    if (need <= *capacity) return;
    size_t grown = *capacity ? *capacity * 2 : 128;
    while (grown < need) grown *= 2;
    *buffer = realloc(*buffer, grown);
    *capacity = grown;
}

/* A field name in lowercase with its length. */
struct name {
    const char *text;
    size_t length;
};
#define NAME(text) {text, sizeof text - 1}

/* NAME (LENGTH bytes, any case) is one of NAMES (ended by an empty one). */
static int named(const char *name, size_t length, const struct name *names) {
    for (; names->length; names++)
        if (names->length == length && strncasecmp(name, names->text, length) == 0) return 1;
    return 0;
}

/* Fields that never pass a proxy either way (RFC 9110 §7.6.1), and those the proxy sets itself. */
static const struct name request_dropped[] = {
    NAME("connection"), NAME("keep-alive"), NAME("proxy-connection"), NAME("te"), NAME("trailer"),
    NAME("transfer-encoding"), NAME("upgrade"), NAME("proxy-authorization"), NAME("host"), NAME("authorization"),
    NAME("cookie"), NAME("content-length"), NAME("expect"), NAME("forwarded"), NAME("x-forwarded-for"),
    NAME("x-forwarded-proto"), NAME("x-forwarded-host"), NAME("x-real-ip"), NAME("x-request-id"), {NULL, 0}};
static const struct name answer_dropped[] = {
    NAME("connection"), NAME("keep-alive"), NAME("proxy-connection"), NAME("te"), NAME("trailer"),
    NAME("transfer-encoding"), NAME("upgrade"), NAME("proxy-authenticate"), NAME("set-cookie"), NAME("x-request-id"),
    NAME("server"), NAME("date"), NAME("content-length"), {NULL, 0}};

/* One of the app's fields: an end-to-end one becomes a line of the upstream request. */
static enum MHD_Result on_app_field(void *user, enum MHD_ValueKind kind, const char *name, size_t name_length,
                                    const char *value, size_t value_length) {
    (void)kind;
    struct request *request = user;
    if (named(name, name_length, request_dropped)) return MHD_YES;
    size_t used = request->app_lines_used;
    reserve(&request->app_lines, &request->app_lines_capacity, used + name_length + value_length + 3);
    char *line = request->app_lines + used;
    memcpy(line, name, name_length);
    memcpy(line + name_length, ": ", 2);
    memcpy(line + name_length + 2, value, value_length);
    line[name_length + 2 + value_length] = 0;
    request->app_lines_used = used + name_length + value_length + 3;
    if (request->app_field_count == request->app_field_capacity) {
        request->app_field_capacity = request->app_field_capacity ? request->app_field_capacity * 2 : 4;
        request->app_fields = realloc(request->app_fields, (size_t)request->app_field_capacity * sizeof *request->app_fields);
    }
    /* Where the line starts; made a pointer once all are in (the buffer may move as it grows). */
    request->app_fields[request->app_field_count++].data = (char *)(uintptr_t)used;
    return MHD_YES;
}

/* One line of the API's answer head: an end-to-end field is kept for the app. */
static size_t on_answer_line(char *data, size_t size, size_t count, void *user) {
    struct request *request = user;
    size_t bytes = size * count;
    if (bytes >= 5 && memcmp(data, "HTTP/", 5) == 0) { /* a new head (after a 1xx): its own fields */
        request->answer_fields_used = 0;
        request->answer_field_count = 0;
        return bytes;
    }
    const char *colon = memchr(data, ':', bytes);
    if (colon == NULL || named(data, (size_t)(colon - data), answer_dropped)) return bytes;
    const char *value = colon + 1, *end = data + bytes;
    while (value < end && (*value == ' ' || *value == '\t')) value++;
    while (end > value && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t')) end--;
    size_t name_length = (size_t)(colon - data), value_length = (size_t)(end - value);
    reserve(&request->answer_fields, &request->answer_fields_capacity, request->answer_fields_used + name_length + value_length + 2);
    char *into = request->answer_fields + request->answer_fields_used;
    memcpy(into, data, name_length);
    into[name_length] = 0;
    memcpy(into + name_length + 1, value, value_length);
    into[name_length + 1 + value_length] = 0;
    request->answer_fields_used += name_length + value_length + 2;
    request->answer_field_count++;
    return bytes;
}

#define REQUEST_ID_FIELD "X-Request-ID: "

/* A new request id in LINE ("X-Request-ID: " and 15 characters: the loop's 8-character prefix and a
   counter in 7 base-64 digits, the shape of TokenGate's); returns the id. */
static const char *next_request_id(struct loop *loop, char *line) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    char *id = line + sizeof REQUEST_ID_FIELD - 1;
    memcpy(line, REQUEST_ID_FIELD, sizeof REQUEST_ID_FIELD - 1);
    memcpy(id, loop->request_id_prefix, 8);
    unsigned long long count = ++loop->request_count;
    for (int index = 14; index >= 8; index--, count >>= 6) id[index] = digits[count & 63];
    id[15] = 0;
    return id;
}

/* The state of a /healthz request (it needs no upstream). */
static struct request healthz_request;

/* PROXY_FLOOR_SPIN_NS: user-space work added to every /healthz answer (bench/inflation.sh), to
   measure what extra user time does to the kernel's share when the server shares its cores with
   the load generator. It touches a 64 KiB buffer, as real code touches its data. */
static long spin_ns;
static void spin(long nanoseconds) {
    static __thread unsigned char scratch[65536];
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    unsigned step = 1;
    do {
        for (int index = 0; index < 4096; index += 64) scratch[(step * 2654435761u + index) & 65535] += (unsigned char)index;
        step++;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < nanoseconds);
}

static size_t on_body(char *data, size_t size, size_t count, void *user) {
    struct request *request = user;
    size_t bytes = size * count;
    if (request->length + bytes > request->capacity) {
        request->capacity = (request->length + bytes) * 2;
        request->body = realloc(request->body, request->capacity);
    }
    memcpy(request->body + request->length, data, bytes);
    request->length += bytes;
    return bytes;
}

/* libcurl tells which sockets to watch: they go into the loop's epoll set, with an epoll_ctl only
   when the events change. A socket libcurl stops watching (its connection goes back to libcurl's
   pool) stays registered, so the next transfer on it costs none; if it reports an event while
   parked (the upstream closed it), it leaves the set then. */
static int on_socket(CURL *easy, curl_socket_t fd, int what, void *user, void *socket_data) {
    (void)easy, (void)socket_data;
    struct loop *loop = user;
    struct upstream_socket *socket = &loop->sockets[fd];
    socket->wanted = what == CURL_POLL_REMOVE ? 0 : (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
    if (socket->wanted == 0 || socket->wanted == socket->registered) return 0;
    struct epoll_event event = {.events = socket->wanted, .data.u64 = (uint64_t)fd};
    epoll_ctl(loop->epoll_fd, socket->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &event);
    socket->registered = socket->wanted;
    return 0;
}

/* A socket libcurl closes leaves the epoll set by itself: forget it (its number will be reused). */
static int on_close(void *user, curl_socket_t fd) {
    struct loop *loop = user;
    loop->sockets[fd] = (struct upstream_socket){0};
    return close(fd);
}

static long long now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec * 1000LL + now.tv_nsec / 1000000;
}

/* libcurl's next deadline, kept in the loop: it bounds epoll_wait (no timerfd to set per request).
   0 ("at once", what every new transfer asks for) is run before the loop sleeps. A later deadline
   gets 1 ms of margin: libcurl rounds up on its own clock, and a timer fired before libcurl sees it
   expired would not be asked for again (it only calls back when its deadline changes). */
static int on_timer(CURLM *multi, long timeout_ms, void *user) {
    (void)multi;
    struct loop *loop = user;
    loop->curl_due_ms = timeout_ms < 0 ? -1 : timeout_ms == 0 ? 0 : now_ms() + timeout_ms + 1;
    return 0;
}

/* Runs libcurl's timer if it is due. */
static void run_curl_timer(struct loop *loop) {
    if (loop->curl_due_ms < 0 || (loop->curl_due_ms > 0 && now_ms() < loop->curl_due_ms)) return;
    loop->curl_due_ms = -1;
    int running;
    curl_multi_socket_action(loop->multi, CURL_SOCKET_TIMEOUT, 0, &running);
}

/* How long epoll_wait may sleep: until libcurl's or libmicrohttpd's next deadline (MHD says 0 while
   connections are left on its ready list). */
static int wait_timeout(struct loop *loop) {
    MHD_UNSIGNED_LONG_LONG mhd_ms;
    long long timeout = MHD_get_timeout(loop->daemon, &mhd_ms) == MHD_YES ? (long long)mhd_ms : -1;
    if (loop->curl_due_ms >= 0) {
        long long left = loop->curl_due_ms == 0 ? 0 : loop->curl_due_ms - now_ms();
        if (left < 0) left = 0;
        if (timeout < 0 || left < timeout) timeout = left;
    }
    return timeout > 1000 ? 1000 : (int)timeout;
}

static struct request *take_request(struct loop *loop, struct MHD_Connection *connection) {
    struct request *request = loop->free_requests;
    if (request != NULL) {
        loop->free_requests = request->next_free;
        loop->free_count--;
    } else {
        request = calloc(1, sizeof *request);
        request->url = curl_url_dup(loop->upstream);
        request->easy = curl_easy_init();
        curl_easy_setopt(request->easy, CURLOPT_CURLU, request->url);
        curl_easy_setopt(request->easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(request->easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
        /* As TokenGate's client: no proxy from the environment, so libcurl reads no http_proxy,
         * all_proxy or no_proxy variable on every transfer (about 1.5k instructions each). */
        curl_easy_setopt(request->easy, CURLOPT_PROXY, "");
        curl_easy_setopt(request->easy, CURLOPT_NOPROXY, "");
        request->compact = loop->in_flight >= COMPACT_ABOVE;
        if (request->compact) curl_easy_setopt(request->easy, CURLOPT_BUFFERSIZE, COMPACT_READ_BUFFER);
        request->forwarded_for.data = request->forwarded_for_line;
        request->forwarded_for.next = &request->request_id;
        request->request_id.data = request->request_id_line;
        request->request_id.next = loop->headers;
        curl_easy_setopt(request->easy, CURLOPT_HEADERFUNCTION, on_answer_line);
        curl_easy_setopt(request->easy, CURLOPT_HEADERDATA, request);
        curl_easy_setopt(request->easy, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(request->easy, CURLOPT_WRITEDATA, request);
        curl_easy_setopt(request->easy, CURLOPT_PRIVATE, request);
        curl_easy_setopt(request->easy, CURLOPT_CLOSESOCKETFUNCTION, on_close);
        curl_easy_setopt(request->easy, CURLOPT_CLOSESOCKETDATA, loop);
    }
    request->connection = connection;
    loop->in_flight++;
    const union MHD_ConnectionInfo *client = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    memcpy(request->forwarded_for_line, "X-Forwarded-For: ", 17);
    if (inet_ntop(AF_INET, &((const struct sockaddr_in *)client->client_addr)->sin_addr, request->forwarded_for_line + 17,
                  sizeof request->forwarded_for_line - 17) == NULL)
        strcpy(request->forwarded_for_line + 17, "unknown");
    next_request_id(loop, request->request_id_line);
    request->app_lines_used = 0;
    request->app_field_count = 0;
    MHD_get_connection_values_n(connection, MHD_HEADER_KIND, on_app_field, request);
    for (int index = 0; index < request->app_field_count; index++) {
        struct curl_slist *node = &request->app_fields[index];
        node->data = request->app_lines + (uintptr_t)node->data;
        node->next = index + 1 < request->app_field_count ? node + 1 : &request->forwarded_for;
    }
    curl_easy_setopt(request->easy, CURLOPT_HTTPHEADER, request->app_field_count ? &request->app_fields[0] : &request->forwarded_for);
    request->answer_fields_used = 0;
    request->answer_field_count = 0;
    request->length = 0;
    request->status = 0;
    request->started = 0;
    /* The app's bearer token (the one the floor accepts, when it was told one), or 401 at once. */
    const char *authorization = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (authorization == NULL || strncmp(authorization, "Bearer ", 7) != 0 || authorization[7] == 0 ||
        (app_token != NULL && strcmp(authorization + 7, app_token) != 0)) {
        request->started = 1;
        request->status = 401;
    }
    return request;
}

/* Its transfer is over (removed from the multi handle) and its response sent. */
static void recycle_request(struct loop *loop, struct request *request) {
    loop->in_flight--;
    if (loop->free_count >= 256 || request->compact) {
        curl_easy_cleanup(request->easy);
        curl_url_cleanup(request->url);
        free(request->body);
        free(request->app_fields);
        free(request->app_lines);
        free(request->answer_fields);
        free(request);
        return;
    }
    request->next_free = loop->free_requests;
    loop->free_requests = request;
    loop->free_count++;
}

/* Finished transfers: their requests are resumed, on this thread. In external mode a resume is only
   a flag: MHD_run must follow before the loop sleeps (see the top). Returns how many. */
static int harvest(struct loop *loop) {
    CURLMsg *message;
    int left, resumed = 0;
    while ((message = curl_multi_info_read(loop->multi, &left))) {
        if (message->msg != CURLMSG_DONE) continue;
        CURL *easy = message->easy_handle;
        struct request *request;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&request);
        if (message->data.result == CURLE_OK) {
            curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &request->status);
        } else {
            request->status = 502;
            request->answer_field_count = 0;
        }
        curl_multi_remove_handle(loop->multi, easy);
        MHD_resume_connection(request->connection);
        resumed++;
    }
    return resumed;
}

static enum MHD_Result on_request(void *user, struct MHD_Connection *connection, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **state) {
    (void)method, (void)version, (void)upload;
    struct loop *loop = user;
    struct request *request = *state;
    if (request == NULL && strcmp(url, "/healthz") == 0) {
        *state = &healthz_request; /* answered when the (empty) body has been read, as any request */
        return MHD_YES;
    }
    if (request == &healthz_request) {
        *upload_size = 0;
        if (spin_ns > 0) spin(spin_ns);
        /* The bare route: a static answer, no upstream (the floor of /healthz). */
        char line[32];
        struct MHD_Response *response = MHD_create_response_from_buffer(strlen(healthz_body), (void *)healthz_body, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(response, "Cache-Control", "no-store");
        MHD_add_response_header(response, "Content-Type", "application/json");
        MHD_add_response_header(response, "X-Request-ID", next_request_id(loop, line));
        enum MHD_Result queued = MHD_queue_response(connection, 200, response);
        MHD_destroy_response(response);
        return queued;
    }
    if (request == NULL) {
        *state = take_request(loop, connection);
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    if (!request->started) {
        request->started = 1;
        if (curl_url_set(request->url, CURLUPART_PATH, url, 0) == CURLUE_OK) {
            MHD_suspend_connection(connection);
            curl_multi_add_handle(loop->multi, request->easy);
            return MHD_YES;
        }
        request->status = 400; /* a path libcurl refuses: answered at once */
    }
    struct MHD_Response *response = MHD_create_response_from_buffer(request->length, request->body, MHD_RESPMEM_PERSISTENT);
    const char *field = request->answer_fields;
    for (int index = 0; index < request->answer_field_count; index++) {
        const char *value = field + strlen(field) + 1;
        MHD_add_response_header(response, field, value);
        field = value + strlen(value) + 1;
    }
    MHD_add_response_header(response, "X-Request-ID", request->request_id_line + sizeof REQUEST_ID_FIELD - 1);
    enum MHD_Result queued = MHD_queue_response(connection, (unsigned int)request->status, response);
    MHD_destroy_response(response);
    return queued;
}

static void on_completed(void *user, struct MHD_Connection *connection, void **state, enum MHD_RequestTerminationCode code) {
    (void)connection, (void)code;
    struct request *request = *state;
    if (request == NULL || request == &healthz_request) return;
    recycle_request(user, request);
    *state = NULL;
}

static void *run_loop(void *unused) {
    (void)unused;
    struct loop *loop = calloc(1, sizeof *loop);
    loop->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    loop->curl_due_ms = -1;
    struct rlimit files;
    getrlimit(RLIMIT_NOFILE, &files);
    loop->sockets = calloc(files.rlim_cur, sizeof *loop->sockets);
    loop->upstream = curl_url();
    if (curl_url_set(loop->upstream, CURLUPART_URL, upstream_base, 0) != CURLUE_OK) {
        fprintf(stderr, "proxy_floor: bad upstream URL %s\n", upstream_base);
        exit(2);
    }
    char line[1024];
    snprintf(line, sizeof line, "Authorization: Bearer %s", upstream_token);
    loop->headers = curl_slist_append(NULL, line);
    loop->headers = curl_slist_append(loop->headers, "X-Forwarded-Proto: http");
    snprintf(line, sizeof line, "X-Forwarded-Host: %s", public_host);
    loop->headers = curl_slist_append(loop->headers, line);
    static const char letters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned char random_bytes[8];
    arc4random_buf(random_bytes, sizeof random_bytes);
    for (int index = 0; index < 8; index++) loop->request_id_prefix[index] = letters[random_bytes[index] & 63];
    loop->multi = curl_multi_init();
    curl_multi_setopt(loop->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(loop->multi, CURLMOPT_SOCKETDATA, loop);
    curl_multi_setopt(loop->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(loop->multi, CURLMOPT_TIMERDATA, loop);
    curl_multi_setopt(loop->multi, CURLMOPT_MAX_HOST_CONNECTIONS, upstream_connections);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7F000001)};
    loop->daemon = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, port, NULL, NULL, on_request, loop,
                                    MHD_OPTION_SOCK_ADDR, &address, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,
                                    MHD_OPTION_CONNECTION_LIMIT, 20000u, MHD_OPTION_CONNECTION_TIMEOUT, 15u,
                                    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)14336,
                                    MHD_OPTION_NOTIFY_COMPLETED, on_completed, loop,
                                    MHD_OPTION_END);
    if (loop->daemon == NULL) {
        fprintf(stderr, "proxy_floor: cannot listen on 127.0.0.1:%u\n", port);
        exit(1);
    }
    int mhd_epoll = MHD_get_daemon_info(loop->daemon, MHD_DAEMON_INFO_EPOLL_FD)->epoll_fd;
    struct epoll_event event = {.events = EPOLLIN, .data.u64 = TAG_MHD};
    epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, mhd_epoll, &event);
    struct epoll_event events[128];
    for (;;) {
        int count = epoll_wait(loop->epoll_fd, events, 128, wait_timeout(loop));
        int running;
        for (int index = 0; index < count; index++) {
            uint64_t tag = events[index].data.u64;
            if (tag == TAG_MHD) continue; /* MHD_run below, every turn */
            if (loop->sockets[tag].wanted == 0) { /* parked in libcurl's pool, and closed or readable */
                epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, (int)tag, NULL);
                loop->sockets[tag].registered = 0;
                continue;
            }
            int flags = (events[index].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                        (events[index].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                        (events[index].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(loop->multi, (curl_socket_t)tag, flags, &running);
        }
        /* MHD_run after every harvest that resumed (and once a turn, for MHD's own events and
           deadlines). New requests add transfers, which ask for curl's timer at once: run it and
           harvest again (a reused connection may answer within that call) until nothing is due. */
        int mhd_needed = 1;
        do {
            run_curl_timer(loop);
            if (harvest(loop) > 0) mhd_needed = 1;
            if (mhd_needed) MHD_run(loop->daemon);
            mhd_needed = 0;
        } while (loop->curl_due_ms == 0);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: proxy_floor PORT UPSTREAM_BASE [LOOPS [CONNECTIONS]]\n");
        return 2;
    }
    port = (unsigned short)atoi(argv[1]);
    upstream_base = argv[2];
    if (getenv("PROXY_FLOOR_HEALTHZ_BODY")) healthz_body = getenv("PROXY_FLOOR_HEALTHZ_BODY");
    if (getenv("PROXY_FLOOR_TOKEN")) upstream_token = getenv("PROXY_FLOOR_TOKEN");
    if (getenv("PROXY_FLOOR_PUBLIC_HOST")) public_host = getenv("PROXY_FLOOR_PUBLIC_HOST");
    app_token = getenv("PROXY_FLOOR_APP_TOKEN");
    if (getenv("PROXY_FLOOR_SPIN_NS")) spin_ns = atol(getenv("PROXY_FLOOR_SPIN_NS"));
    int loops = argc > 3 ? atoi(argv[3]) : 1;
    if (argc > 4) upstream_connections = atol(argv[4]);
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    pthread_t threads[64];
    for (int index = 1; index < loops && index < 64; index++) pthread_create(&threads[index], NULL, run_loop, NULL);
    run_loop(NULL);
    return 0;
}
