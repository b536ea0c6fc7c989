#ifndef RECEIPT_WORKER_CMICROHTTPD_SHIM_H
#define RECEIPT_WORKER_CMICROHTTPD_SHIM_H
#include <microhttpd.h>

/* MHD_start_daemon and MHD_get_daemon_info are variadic; Swift cannot call them. These typed wrappers are
   the only way in. Every option except the two callbacks goes through one MHD_OPTION_ARRAY
   (terminated by MHD_OPTION_END), so the wrapper does not grow with the options. */
static inline struct MHD_Daemon *cmhd_start_daemon(unsigned int flags, MHD_AccessHandlerCallback handler,
                                                   void *handler_cls, MHD_RequestCompletedCallback completed,
                                                   void *completed_cls, MHD_NotifyConnectionCallback notify,
                                                   void *notify_cls, struct MHD_OptionItem *options) {
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_cls, MHD_OPTION_NOTIFY_COMPLETED, completed,
                            completed_cls, MHD_OPTION_NOTIFY_CONNECTION, notify, notify_cls, MHD_OPTION_ARRAY,
                            options, MHD_OPTION_END);
}

/* A connection's socket; -1 if MHD cannot say. MHD_get_connection_info is variadic. */
static inline int cmhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

/* The bound port (the kernel's pick when 0 was asked for); 0 when MHD cannot say. */
static inline uint16_t cmhd_daemon_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

/* The epoll descriptor an external loop waits on (MHD_USE_EPOLL without an internal thread); -1 if none. */
static inline int cmhd_daemon_epoll_fd(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
    return info == NULL ? -1 : info->epoll_fd;
}
#endif
