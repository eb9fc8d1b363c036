/* The Unix-socket plumbing of the command-line client's unlock agent
 * (docs/CLI.md, "The unlock window"), which Glibc's Swift module leaves
 * out or cannot express: file descriptors passed with SCM_RIGHTS, the
 * peer's credentials (SO_PEERCRED), the process hardening, and a detached
 * spawn.  Every function returns 0 (or a count) on success and -1 with
 * errno set on failure; none keeps state, so any thread may call any. */
#ifndef UNLOCKAGENT_H
#define UNLOCKAGENT_H

#include <stddef.h>
#include <sys/types.h>

/* The most descriptors one message carries (standard input, output, error). */
#define UNLOCKAGENT_MAX_FDS 3

/* Sends `length` bytes of `bytes` on the connected Unix socket `socket`,
 * with `count` (0 to UNLOCKAGENT_MAX_FDS) descriptors of `fds` attached.
 * Returns 0 once all bytes are sent (the descriptors with the first). */
int unlockagent_send(int socket, const void *bytes, size_t length, const int *fds, int count);

/* Receives up to `capacity` bytes into `bytes` and up to
 * UNLOCKAGENT_MAX_FDS descriptors into `fds` (close-on-exec; *count says
 * how many; any beyond are closed).  Returns the bytes received, 0 at the
 * end of the stream. */
ssize_t unlockagent_receive(int socket, void *bytes, size_t capacity, int *fds, int *count);

/* The user and process at the other end of the connected Unix socket
 * `socket`, as the kernel recorded them when the connection was made. */
int unlockagent_peer(int socket, uid_t *uid, pid_t *pid);

/* pipe2(2): a pipe whose two descriptors are in `fds`, with `flags`
 * (O_CLOEXEC, O_NONBLOCK). */
int unlockagent_pipe(int fds[2], int flags);

/* accept4(2) with SOCK_CLOEXEC and SOCK_NONBLOCK: the next connection on
 * `socket`. */
int unlockagent_accept(int socket);

/* In a child the agent forked: SIGHUP when the agent dies (PR_SET_PDEATHSIG),
 * and at once if it already has (its parent is no longer `agent`). */
int unlockagent_die_with(pid_t agent);

/* flock(2) LOCK_EX | LOCK_NB: 0 when `fd` now holds the lock. */
int unlockagent_try_lock(int fd);

/* Makes this process undumpable (no core file, no ptrace by the same
 * user: PR_SET_DUMPABLE 0, RLIMIT_CORE 0).  Returns 0 when both took. */
int unlockagent_harden(void);

/* Locks the pages mapped now into memory (mlockall MCL_CURRENT with
 * MCL_ONFAULT), so that nothing there is swapped out; fails without
 * effect where RLIMIT_MEMLOCK is too small.  Pages mapped later are not
 * locked by this (the secrets themselves are in sodium_malloc memory,
 * locked one allocation at a time). */
int unlockagent_lock_memory(void);

/* Wipes UNLOCKAGENT_BURN_BYTES of the stack below the caller's frame, where
 * the frames of functions that have returned left their locals (a PIN's
 * digits passed by value, a hash state): explicit_bzero on a local
 * buffer, which the compiler may not leave out. */
#define UNLOCKAGENT_BURN_BYTES (512 * 1024)
void unlockagent_burn_stack(void);

/* Closes every descriptor from 3 up, except `keep` (-1 for none). */
void unlockagent_close_others(int keep);

/* Starts `path` with `argv` (NULL-terminated) and this environment, in a
 * session of its own (setsid: no controlling terminal, out of the
 * terminal's process group), in the directory /, standard input from
 * `input`, standard output and error on /dev/null, no other descriptor.  Returns the child's pid;
 * nobody need wait for it (it outlives its parent). */
pid_t unlockagent_spawn(const char *path, char *const argv[], int input);

#endif
