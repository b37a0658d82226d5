#ifndef CSHIMS_MHD_H
#define CSHIMS_MHD_H

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

// MHD_get_daemon_info is variadic: the port actually bound (useful with port 0), or 0.
uint16_t CShims_MHD_bound_port(struct MHD_Daemon *daemon);

// MHD_get_daemon_info is variadic: connections currently open.
unsigned int CShims_MHD_current_connections(struct MHD_Daemon *daemon);

#endif
