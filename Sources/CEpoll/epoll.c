#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include "CEpoll.h"

void CEpoll_set_thread_name(const char *name) { pthread_setname_np(pthread_self(), name); }

int CEpoll_affinity_cpu_count(void) {
    // A mask as large as the kernel's (EINVAL: too small), from cpu_set_t's 1024 CPUs up.
    for (int cpus = CPU_SETSIZE; cpus <= (1 << 20); cpus *= 2) {
        cpu_set_t *set = CPU_ALLOC(cpus);
        if (set == NULL) return -1;
        size_t size = CPU_ALLOC_SIZE(cpus);
        int count = -1;
        int failure = 0;
        if (sched_getaffinity(0, size, set) == 0) {
            count = CPU_COUNT_S(size, set);
        } else {
            failure = errno;
        }
        CPU_FREE(set);
        if (failure != EINVAL) return count;
    }
    return -1;
}
