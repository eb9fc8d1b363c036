#define _GNU_SOURCE
#include "unlockagent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

extern char **environ;

int unlockagent_send(int socket, const void *bytes, size_t length, const int *fds, int count) {
    if (count < 0 || count > UNLOCKAGENT_MAX_FDS || (count > 0 && fds == NULL) || (length > 0 && bytes == NULL)) {
        errno = EINVAL;
        return -1;
    }
    const char *next = bytes;
    size_t left = length;
    int attach = count;
    while (left > 0 || attach > 0) {
        struct iovec iov = {.iov_base = (void *)next, .iov_len = left};
        union {
            struct cmsghdr header;
            char space[CMSG_SPACE(sizeof(int) * UNLOCKAGENT_MAX_FDS)];
        } control;
        struct msghdr message = {.msg_iov = &iov, .msg_iovlen = 1};
        if (attach > 0) {
            memset(&control, 0, sizeof control);
            message.msg_control = control.space;
            message.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)attach);
            struct cmsghdr *header = CMSG_FIRSTHDR(&message);
            header->cmsg_level = SOL_SOCKET;
            header->cmsg_type = SCM_RIGHTS;
            header->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)attach);
            memcpy(CMSG_DATA(header), fds, sizeof(int) * (size_t)attach);
        }
        ssize_t sent = sendmsg(socket, &message, MSG_NOSIGNAL);
        if (sent < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        attach = 0;
        next += sent;
        left -= (size_t)sent;
    }
    return 0;
}

ssize_t unlockagent_receive(int socket, void *bytes, size_t capacity, int *fds, int *count) {
    if (bytes == NULL || fds == NULL || count == NULL) {
        errno = EINVAL;
        return -1;
    }
    *count = 0;
    struct iovec iov = {.iov_base = bytes, .iov_len = capacity};
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof(int) * UNLOCKAGENT_MAX_FDS)];
    } control;
    struct msghdr message = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.space,
                             .msg_controllen = sizeof control.space};
    ssize_t received;
    do {
        received = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    } while (received < 0 && errno == EINTR);
    if (received < 0) return -1;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        size_t n = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *carried = (int *)(void *)CMSG_DATA(header);
        for (size_t i = 0; i < n; i++) {
            if (*count < UNLOCKAGENT_MAX_FDS) {
                fds[(*count)++] = carried[i];
            } else {
                close(carried[i]);
            }
        }
    }
    return received;
}

int unlockagent_peer(int socket, uid_t *uid, pid_t *pid) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    if (uid != NULL) *uid = credentials.uid;
    if (pid != NULL) *pid = credentials.pid;
    return 0;
}

int unlockagent_pipe(int fds[2], int flags) {
    return pipe2(fds, flags);
}

int unlockagent_accept(int socket) {
    int fd;
    do {
        fd = accept4(socket, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    } while (fd < 0 && errno == EINTR);
    return fd;
}

int unlockagent_die_with(pid_t agent) {
    if (prctl(PR_SET_PDEATHSIG, SIGHUP, 0, 0, 0) != 0) return -1;
    if (getppid() != agent) raise(SIGHUP);
    return 0;
}

int unlockagent_try_lock(int fd) {
    return flock(fd, LOCK_EX | LOCK_NB);
}

int unlockagent_harden(void) {
    struct rlimit none = {0, 0};
    int result = 0;
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) result = -1;
    if (setrlimit(RLIMIT_CORE, &none) != 0) result = -1;
    return result;
}

int unlockagent_lock_memory(void) {
    return mlockall(MCL_CURRENT | MCL_ONFAULT);
}

__attribute__((noinline)) void unlockagent_burn_stack(void) {
    unsigned char area[UNLOCKAGENT_BURN_BYTES];
    explicit_bzero(area, sizeof area);
    /* Keeps the call from becoming a tail call that reuses no stack. */
    __asm__ __volatile__("" : : "r"(area) : "memory");
}

void unlockagent_close_others(int keep) {
    DIR *directory = opendir("/proc/self/fd");
    if (directory == NULL) {
        long limit = sysconf(_SC_OPEN_MAX);
        if (limit < 0 || limit > 65536) limit = 65536;
        for (int fd = 3; fd < limit; fd++) {
            if (fd != keep) close(fd);
        }
        return;
    }
    int own = dirfd(directory);
    int found[256];
    for (;;) {
        /* Collected before closing, since closing changes the listing. */
        int n = 0;
        struct dirent *entry;
        rewinddir(directory);
        while (n < 256 && (entry = readdir(directory)) != NULL) {
            char *end;
            long fd = strtol(entry->d_name, &end, 10);
            if (*end != '\0' || end == entry->d_name) continue;
            if (fd >= 3 && fd != own && fd != keep) found[n++] = (int)fd;
        }
        if (n == 0) break;
        for (int i = 0; i < n; i++) close(found[i]);
    }
    closedir(directory);
}

pid_t unlockagent_spawn(const char *path, char *const argv[], int input) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    pid_t pid = -1;
    int error = posix_spawn_file_actions_init(&actions);
    if (error != 0) {
        errno = error;
        return -1;
    }
    error = posix_spawnattr_init(&attributes);
    if (error != 0) {
        posix_spawn_file_actions_destroy(&actions);
        errno = error;
        return -1;
    }
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    if ((error = posix_spawn_file_actions_adddup2(&actions, input, 0)) == 0
        && (error = posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)) == 0
        && (error = posix_spawn_file_actions_adddup2(&actions, 1, 2)) == 0
        && (error = posix_spawn_file_actions_addclosefrom_np(&actions, 3)) == 0
        && (error = posix_spawn_file_actions_addchdir_np(&actions, "/")) == 0
        && (error = posix_spawnattr_setsigmask(&attributes, &none)) == 0
        && (error = posix_spawnattr_setsigdefault(&attributes, &all)) == 0
        && (error = posix_spawnattr_setflags(
                &attributes, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)) == 0) {
        error = posix_spawn(&pid, path, &actions, &attributes, argv, environ);
    }
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    if (error != 0) {
        errno = error;
        return -1;
    }
    return pid;
}
