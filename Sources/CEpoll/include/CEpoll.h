// CEpoll: the Linux headers of the event loop (epoll, eventfd), which Glibc's Swift module does
// not import, and one shim.
#ifndef CEPOLL_H
#define CEPOLL_H

#include <sys/epoll.h>
#include <sys/eventfd.h>

// Names the calling thread (shown by `top -H` and in core-less crash reports).
// Why C: pthread_setname_np is a GNU extension that needs _GNU_SOURCE, which would change the
// system headers' definitions for this module only and clash with Glibc's.
void CEpoll_set_thread_name(const char *name);

#endif
