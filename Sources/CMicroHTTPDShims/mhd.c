#include <stdio.h>
#include "CMicroHTTPDShims.h"

struct MHD_Daemon *CShims_MHD_start_daemon(unsigned int flags, uint16_t port,
                                           MHD_AcceptPolicyCallback apc, void *apc_cls,
                                           MHD_AccessHandlerCallback dh, void *dh_cls,
                                           struct MHD_OptionItem *options) {
    return MHD_start_daemon(flags, port, apc, apc_cls, dh, dh_cls,
                            MHD_OPTION_ARRAY, options, MHD_OPTION_END);
}

const struct sockaddr *CShims_MHD_client_address(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info == NULL ? NULL : info->client_addr;
}

size_t CShims_MHD_request_header_size(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    return info == NULL ? 0 : info->header_size;
}

int CShims_MHD_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

void *CShims_MHD_socket_context(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info == NULL ? NULL : info->socket_context;
}

int CShims_MHD_epoll_fd(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
    return info == NULL ? -1 : info->epoll_fd;
}

void CShims_MHD_log_adapter(void *target, const char *format, va_list arguments) {
    CShims_MHD_LogTarget *log = target;
    if (log == NULL || log->sink == NULL) return;
    char message[512];
    vsnprintf(message, sizeof message, format, arguments);
    log->sink(log->context, message);
}

intptr_t CShims_MHD_log_adapter_address(void) { return (intptr_t)&CShims_MHD_log_adapter; }

enum MHD_Result CShims_MHD_upgrade_close(struct MHD_UpgradeResponseHandle *handle) {
    return MHD_upgrade_action(handle, MHD_UPGRADE_ACTION_CLOSE);
}
