// CMicroHTTPDShims: the few libmicrohttpd entry points Swift cannot import directly (variadic functions,
// function-like or cast macros). Each function exists for exactly one such reason, stated beside
// it, and carries the `CShims_` prefix so a call site says it goes through a shim. Logic stays
// in Swift. One shim target per C library, so each wrapper links only its own library.
#ifndef CSHIMS_MHD_H
#define CSHIMS_MHD_H

#include <stdarg.h>
#include <stdint.h>
#include <sys/socket.h>
#include <microhttpd.h>

// MHD_start_daemon is variadic. With MHD_OPTION_ARRAY one fixed-arity wrapper carries every
// option; the array must end with an MHD_OPTION_END item.
struct MHD_Daemon *CShims_MHD_start_daemon(unsigned int flags, uint16_t port,
                                           MHD_AcceptPolicyCallback apc, void *apc_cls,
                                           MHD_AccessHandlerCallback dh, void *dh_cls,
                                           struct MHD_OptionItem *options);

// MHD_get_connection_info is variadic: the client's address, or NULL.
const struct sockaddr *CShims_MHD_client_address(struct MHD_Connection *connection);

// MHD_get_connection_info is variadic: the size of the request's head as read (request line and
// header lines), or 0 before the head has arrived.
size_t CShims_MHD_request_header_size(struct MHD_Connection *connection);

// MHD_get_connection_info is variadic: the connection's socket, or -1.
int CShims_MHD_connection_fd(struct MHD_Connection *connection);

// MHD_get_connection_info is variadic: what the MHD_OPTION_NOTIFY_CONNECTION callback stored in
// the connection's socket context, or NULL.
void *CShims_MHD_socket_context(struct MHD_Connection *connection);

// MHD_get_daemon_info is variadic: the epoll set of a daemon started with MHD_USE_EPOLL (external
// mode), for the caller's own epoll set; -1 if none.
int CShims_MHD_epoll_fd(struct MHD_Daemon *daemon);

// MHD_upgrade_action is variadic: closes an upgraded connection (MHD_UPGRADE_ACTION_CLOSE).
enum MHD_Result CShims_MHD_upgrade_close(struct MHD_UpgradeResponseHandle *handle);

// MHD_LogCallback takes a va_list, which Swift cannot receive in a @convention(c) closure. This
// adapter formats the message and hands it to `sink` (an MHD_OPTION_EXTERNAL_LOGGER callback
// whose closure argument must point to a CShims_MHD_LogTarget that outlives the daemon).
typedef struct CShims_MHD_LogTarget {
    void (*sink)(void *context, const char *message);
    void *context;
} CShims_MHD_LogTarget;

void CShims_MHD_log_adapter(void *target, const char *format, va_list arguments);

// The adapter's address as an MHD_OptionItem value (Swift cannot name a va_list function).
intptr_t CShims_MHD_log_adapter_address(void);

#endif
