// CEpoll: the Linux headers of the event loop (epoll, eventfd), which Glibc's Swift module does
// not import, and the GNU extensions the loops need, behind two shims.
#ifndef CEPOLL_H
#define CEPOLL_H

#include <sys/epoll.h>
#include <sys/eventfd.h>

// Names the calling thread (shown by `top -H` and in core-less crash reports).
// Why C: pthread_setname_np is a GNU extension that needs _GNU_SOURCE, which would change the
// system headers' definitions for this module only and clash with Glibc's.
void CEpoll_set_thread_name(const char *name);

// How many CPUs the calling thread may run on (its affinity mask, as `taskset` sets it), or -1
// when the system does not say. Read before the loops start, it is the process's mask.
// Why C: sched_getaffinity and CPU_COUNT are GNU extensions (_GNU_SOURCE), as above.
int CEpoll_affinity_cpu_count(void);

#endif
