#define _GNU_SOURCE
#include <pthread.h>
#include "CEpoll.h"

void CEpoll_set_thread_name(const char *name) { pthread_setname_np(pthread_self(), name); }
