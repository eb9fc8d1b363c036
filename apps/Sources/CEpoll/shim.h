// epoll and timerfd (Linux), for the benchmark's open-loop generator.
#ifdef __linux__
#include <sys/epoll.h>
#include <sys/timerfd.h>
#endif
