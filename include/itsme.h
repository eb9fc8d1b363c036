/*
 * itsme.h - the C interface of libitsme.
 *
 * ItsMe lets two people who exchanged keys once prove to each other, during
 * any later call, that each still holds the secret they exchanged.  This
 * header is the contract: every function the shared library exports is
 * declared and documented here, and nothing else is exported.
 *
 * Conventions (apply to every function unless its comment says otherwise)
 * ----------------------------------------------------------------------
 * - Call itsme_init() once before anything else.  It is idempotent and
 *   thread-safe.  Until it has succeeded, every other fallible function
 *   returns ITSME_E_NOT_INITIALIZED.
 * - Every fallible function returns an itsme_result; ITSME_OK is 0.  New
 *   codes may be added in later versions: treat any unknown non-zero code
 *   as an error.  itsme_result_message() gives a static text per code.
 * - Argument order: handle first, then inputs, then outputs.
 * - Outputs are written only on success.  On failure nothing is written to
 *   any output argument, except *out_len on ITSME_E_BUFFER_TOO_SMALL.
 * - Output buffers are (out, cap, out_len).  If cap is too small the
 *   function returns ITSME_E_BUFFER_TOO_SMALL and sets *out_len to the size
 *   needed; call again with a larger buffer.  out may be NULL only when cap
 *   is 0, to ask for the size; NULL with a non-zero cap, or a NULL out_len,
 *   is ITSME_E_INVALID_ARGUMENT and writes nothing.  Text outputs are
 *   NUL-terminated UTF-8, and their *out_len counts the terminating NUL, so
 *   it is always the buffer size needed.
 * - Text inputs are NUL-terminated UTF-8.  Invalid UTF-8 is rejected with
 *   ITSME_E_INVALID_ARGUMENT.  A text input is at most ITSME_TEXT_MAX bytes
 *   (without the NUL), and a typed code or an export or offer text at most
 *   ITSME_TYPED_CODE_MAX or ITSME_EXPORT_TEXT_MAX: a longer one is refused
 *   with ITSME_E_INVALID_ARGUMENT before any other work (the library reads
 *   no byte past that bound).
 * - A NULL pointer where one is required, or a length out of range, gives
 *   ITSME_E_INVALID_ARGUMENT, never a crash.
 * - Handles are opaque.  Each is created by one function through an
 *   out-parameter and released by its _free function, exactly once.  _free
 *   accepts NULL.
 * - Every failure leaves a human-readable detail, never containing secrets,
 *   in a per-thread slot: itsme_last_error() right after any failing call
 *   reads it, whatever handle was involved.  Every handle also keeps the
 *   detail of the most recent failure of a call made on it, read with the
 *   handle's _last_error function.
 * - Flags are C bool (<stdbool.h>), in arguments, outputs and structs.
 * - A struct the caller passes starts with `size_t size`, which the caller
 *   sets to sizeof the struct before the call (a smaller size is
 *   ITSME_E_INVALID_ARGUMENT); a later version may append fields and write
 *   only as many as the caller's size holds.  A callback table starts with
 *   `uint32_t version`, set to its ITSME_*_CALLBACKS_VERSION; a version the
 *   library does not know is ITSME_E_INVALID_ARGUMENT.
 * - Every size macro ITSME_X has a function itsme_x() returning the value
 *   the library was built with, for hosts that load it dynamically.
 * - Times are unix seconds (int64_t) passed in by the caller: the library
 *   never reads the clock.  Times before 0 or after the year 9999
 *   (253402300799) are rejected with ITSME_E_INVALID_ARGUMENT.
 * - Secrets handed to the library are copied into guarded memory
 *   (sodium_malloc) and wiped when no longer needed.  Secrets never appear
 *   in error messages.
 */
#ifndef ITSME_H
#define ITSME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ITSME_WARN_UNUSED_RESULT marks the functions whose ignored failure is a
 * security bug: every verify, check, open, receive and confirm, the PIN
 * functions and the contact store's writes.  GCC and Clang warn when their
 * result is dropped (a (void) cast does not silence GCC; test the result).
 * ITSME_DEPRECATED(message) marks a name kept for one more minor version. */
/* Annotations for the tool that reads this header (abi/tools/read.py) where
 * a name alone cannot tell a parameter's or a type's role.  They expand to
 * nothing unless ITSME_ABI_READER is defined.
 * ITSME_VALUES(P): on an integer typedef, its values are the constants
 *   named P (or starting with P, when P ends with _).
 * ITSME_OUT: a pointer parameter the function writes.
 * ITSME_ITEM_BYTES(N): a count parameter whose buffer holds items of N bytes.
 * ITSME_TIME: an int64_t parameter that is a unix time.
 * ITSME_OPTIONAL: a pointer parameter that may be NULL (the comment says
 *   what NULL means).  An itsme_random is always optional (NULL: the
 *   operating system), and an input buffer may be NULL when its length is
 *   0 where the comment says so. */
#ifdef ITSME_ABI_READER
#define ITSME_ABI(what) __attribute__((annotate("itsme:" what)))
#else
#define ITSME_ABI(what)
#endif
#define ITSME_VALUES(prefix) ITSME_ABI("values=" #prefix)
#define ITSME_OUT ITSME_ABI("out")
#define ITSME_ITEM_BYTES(n) ITSME_ABI("item_bytes=" #n)
#define ITSME_TIME ITSME_ABI("time")
#define ITSME_OPTIONAL ITSME_ABI("optional")

#if defined(__GNUC__) || defined(__clang__)
#define ITSME_WARN_UNUSED_RESULT __attribute__((warn_unused_result))
#define ITSME_DEPRECATED(message) __attribute__((deprecated(message)))
#else
#define ITSME_WARN_UNUSED_RESULT
#define ITSME_DEPRECATED(message)
#endif

/* ------------------------------------------------------------------------
 * Version
 * ---------------------------------------------------------------------- */

/* Compatibility: while the major version is 0, the minor version names the
 * ABI.  The shared library's SONAME is libitsme.so.0.MINOR; every change
 * that breaks the C ABI (a function removed or changed, a struct or an
 * enum value changed) bumps the minor and is listed in CHANGELOG.md, while
 * a patch release only adds.  A program built against 0.N runs against any
 * 0.N.x; the bindings refuse a library whose MAJOR.MINOR differs from the
 * one they were written for. */
#define ITSME_VERSION_MAJOR 0
#define ITSME_VERSION_MINOR 3
#define ITSME_VERSION_PATCH 0
#define ITSME_VERSION_STRING "0.3.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH */
#define ITSME_VERSION_NUMBER 300

/* The version of the library actually loaded, as "MAJOR.MINOR.PATCH".
 * Static storage; never free it.  Thread-safe; needs no itsme_init(). */
const char *itsme_version_string(void);

/* The version of the library actually loaded, encoded like
 * ITSME_VERSION_NUMBER.  Thread-safe; needs no itsme_init(). */
uint32_t itsme_version_number(void);

/* ------------------------------------------------------------------------
 * Result codes
 * ---------------------------------------------------------------------- */

typedef int32_t itsme_result ITSME_VALUES(ITSME_OK) ITSME_VALUES(ITSME_E_);

#define ITSME_OK 0
/* A required pointer was NULL, a length or value was out of range, or text
 * was not valid UTF-8. */
#define ITSME_E_INVALID_ARGUMENT 1
/* An output buffer was too small; *out_len holds the size needed. */
#define ITSME_E_BUFFER_TOO_SMALL 2
/* itsme_init() has not succeeded yet. */
#define ITSME_E_NOT_INITIALIZED 3
/* This CPU lacks what the library needs (AES-256-GCM in hardware). */
#define ITSME_E_UNSUPPORTED_PLATFORM 4
/* The requested item (identity, secret, PIN) does not exist. */
#define ITSME_E_NOT_FOUND 5
/* The item to create exists already (an identity, a PIN). */
#define ITSME_E_ALREADY_EXISTS 6
/* A PIN that is not exactly six ASCII digits.  Not counted as an attempt. */
#define ITSME_E_INVALID_PIN 7
/* A well-formed PIN that does not match.  Counted as a failed attempt. */
#define ITSME_E_WRONG_PIN 8
/* Too many failed attempts: wait (see itsme_pin_status) and try again.
 * The attempt was refused without being checked or counted. */
#define ITSME_E_LOCKED 9
/* The secret store failed (a host callback returned an error, or the file
 * store hit an I/O error). */
#define ITSME_E_SECRET_STORE 10
/* Stored data is malformed, truncated or of an unknown version. */
#define ITSME_E_CORRUPT_DATA 11
/* Authentication failed: a tag or signature did not verify. */
#define ITSME_E_AUTHENTICATION_FAILED 12
/* A public key was rejected (wrong size, low order, all-zero shared secret). */
#define ITSME_E_INVALID_KEY 13
/* A call was made in a state that does not allow it. */
#define ITSME_E_INVALID_STATE 14
/* A database operation failed; the last-error message carries SQLite's code. */
#define ITSME_E_DATABASE 15
/* Memory could not be allocated. */
#define ITSME_E_OUT_OF_MEMORY 16
/* An internal error: a bug in the library.  Please report it. */
#define ITSME_E_INTERNAL 17
/* The contact store belongs to another identity (its contacts key does not
 * open it).  Nothing was changed. */
#define ITSME_E_WRONG_IDENTITY 18
/* The verification window is not after the last one used for the contact. */
#define ITSME_E_WINDOW_USED 19
/* A message from the peer (a QR payload, a Bluetooth frame) is malformed,
 * of an unknown version, or arrived out of order (replayed, reordered).
 * The exchange has failed. */
#define ITSME_E_MALFORMED_MESSAGE 20
/* Too late: an exchange that began more than 24 hours ago, a session past
 * its lifetime, a service request past its expiry.  It has failed. */
#define ITSME_E_EXPIRED 21
/* A single-use message was presented again: a service approval whose
 * request has been answered already (docs/PROTOCOL.md 19.5). */
#define ITSME_E_REPLAYED 22
/* The contact store is behind the last commit this device saw of the store
 * at its path, or is another store than that one (emptied, deleted or
 * replaced): a rolled-back copy, or a -wal file lost after a crash.  Nothing
 * was changed; itsme_store_accept_loss says what was lost and accepts it. */
#define ITSME_E_ROLLED_BACK 23

/* A static, NUL-terminated English text for a result code ("unknown result
 * code" for codes this version does not know).  Never free it.
 * Thread-safe; needs no itsme_init(). */
const char *itsme_result_message(itsme_result code);

/* The name of a result code as this header spells it ("ITSME_E_WRONG_PIN"),
 * for logs and for hosts that map codes by name; "ITSME_E_UNKNOWN" for a
 * code this version does not know.  Static storage; never free it.
 * Thread-safe; needs no itsme_init(). */
const char *itsme_result_name(itsme_result code);

/* ------------------------------------------------------------------------
 * Initialisation and sizes
 * ---------------------------------------------------------------------- */

/* Initialise the library: libsodium (sodium_init) and the CPU check for
 * AES-256-GCM.  Idempotent and thread-safe: call it as often as you like.
 * Errors: ITSME_E_UNSUPPORTED_PLATFORM where the CPU lacks AES-256-GCM
 * support; ITSME_E_INTERNAL if libsodium cannot initialise. */
itsme_result itsme_init(void);

/* Copies the detail of the most recent failure of any function on the
 * calling thread, whatever handle it was given (or none: constructors, the
 * short-code functions, the export functions that take no handle, a NULL
 * handle).  Per-thread; an empty string if no call failed on this thread.
 * Like every *_last_error function, it needs no itsme_init().
 * Errors: ITSME_E_INVALID_ARGUMENT (out_len NULL, or buf NULL with a
 * non-zero cap), ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_last_error(char *buf, size_t cap, size_t *out_len);

#define ITSME_PUBLIC_KEY_BYTES 32
#define ITSME_FINGERPRINT_CHARS 16
/* Buffer size for a fingerprint: 16 characters and the NUL. */
#define ITSME_FINGERPRINT_SIZE 17
#define ITSME_PIN_LENGTH 6
/* The longest text input, in bytes without the NUL (see the conventions). */
#define ITSME_TEXT_MAX 65536
/* The longest typed code a function takes: a short code or Bluetooth
 * session code, a heard voice code, an invite or encryption code, a
 * degradation code, a PIN (a PIN beyond it is ITSME_E_INVALID_PIN), with any
 * surrounding spaces. */
#define ITSME_TYPED_CODE_MAX 64
/* The longest export text (itsme_export_from_text) or transfer offer text,
 * with any surrounding white space. */
#define ITSME_EXPORT_TEXT_MAX 1024

/* Longest display name, in UTF-8 bytes (without the NUL). */
#define ITSME_NAME_MAX_BYTES 128

/* The fingerprint of an Ed25519 public key: the first 8 bytes of its
 * SHA-256, as 16 uppercase hexadecimal digits (and the NUL).
 * Thread-safe.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL pointer, key_len not 32),
 * ITSME_E_BUFFER_TOO_SMALL (cap < ITSME_FINGERPRINT_SIZE). */
itsme_result itsme_fingerprint_from_public_key(const uint8_t *public_key,
                                               size_t key_len, char *out,
                                               size_t cap, size_t *out_len);

/* ------------------------------------------------------------------------
 * Secret store
 *
 * Every secret the library keeps (identity key, contacts key, PIN hash,
 * attempt counters) lives in a secret store.  The host supplies one through
 * callbacks (an iOS host maps it to its Keychain, a desktop host to its
 * keyring), or uses a built-in store: in memory (tests) or a directory of
 * files (the command-line default).
 *
 * Item names are 1 to 128 characters from [a-z0-9._-], not starting with a
 * dot, so a host may use them as file names or Keychain account names.
 * docs/STORAGE.md lists the items and their formats.
 *
 * Thread safety: an itsme_secret_store may be used from several threads at
 * once, and by several identities.  The library calls a host's callbacks
 * only on threads that called into it; its own stores (file, passphrase,
 * memory) it may also call from a thread of its own (a contact store
 * raising its mark after a burst of commits).
 * ---------------------------------------------------------------------- */

typedef struct itsme_secret_store itsme_secret_store;

/* Accessibility class requested on put: how strictly the host should keep
 * the item.  An iOS host maps these to kSecAttrAccessible... values. */
typedef uint32_t itsme_accessibility ITSME_VALUES(ITSME_ACCESSIBLE_);
/* Only on this device, only while it is unlocked (the default for
 * everything the library stores; iOS: WhenUnlockedThisDeviceOnly). */
#define ITSME_ACCESSIBLE_WHEN_UNLOCKED_THIS_DEVICE_ONLY 0
/* Only on this device, after the first unlock since boot
 * (iOS: AfterFirstUnlockThisDeviceOnly). */
#define ITSME_ACCESSIBLE_AFTER_FIRST_UNLOCK_THIS_DEVICE_ONLY 1
/* While unlocked; may travel in the host's encrypted backups
 * (iOS: WhenUnlocked). */
#define ITSME_ACCESSIBLE_WHEN_UNLOCKED 2

/* A host-implemented secret store.
 *
 * Each callback returns ITSME_OK on success, ITSME_E_NOT_FOUND where the
 * item does not exist (get and remove), ITSME_E_BUFFER_TOO_SMALL from get
 * (with *out_len set to the item's size) when cap is too small, and any
 * other code, conventionally ITSME_E_SECRET_STORE, on failure.
 *
 * Lifetimes: `name` and `value` are borrowed for the duration of the call
 * only; copy what you keep.  `out` may be written only up to `cap` bytes.
 *
 * Threads: the callbacks of one store are never called concurrently (the
 * library serialises them), but they may be called from any thread that
 * calls into the library with a handle using this store.  They must not
 * call back into libitsme.  One that does, on the calling thread, with a
 * handle whose call is running (this store, the identity, a session, a
 * transfer, the contact store), gets ITSME_E_SECRET_STORE or
 * ITSME_E_INVALID_STATE, never a deadlock or a crash; freeing a handle
 * there (a collector may) is safe.  The library's read-modify-writes of an item
 * (attempt counters) are atomic within the process; if several processes
 * share one host store, the host must make them atomic across processes.
 *
 * get:     copy the item's bytes to out and its size to *out_len.
 * put:     create or replace the item with `len` bytes of `value`,
 *          atomically: after a crash the old or the new value is there.
 * remove:  delete the item; ITSME_E_NOT_FOUND if it does not exist.
 * destroy: optional (may be NULL); called once with ctx when the library
 *          drops its last reference to the store.
 */
#define ITSME_SECRET_STORE_CALLBACKS_VERSION 1
typedef struct itsme_secret_store_callbacks {
    /* ITSME_SECRET_STORE_CALLBACKS_VERSION. */
    uint32_t version;
    void *ctx;
    itsme_result (*get)(void *ctx, const char *name, uint8_t *out, size_t cap,
                        size_t *out_len);
    itsme_result (*put)(void *ctx, const char *name, const uint8_t *value,
                        size_t len, itsme_accessibility accessibility);
    itsme_result (*remove)(void *ctx, const char *name);
    void (*destroy)(void *ctx);
} itsme_secret_store_callbacks;

/* A store backed by host callbacks.  The table is copied; get, put and
 * remove must be non-NULL.  On success the store owns ctx and calls destroy
 * (if set) when its last reference goes away (the handle and every identity
 * opened on it freed); on failure the caller keeps ctx.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_secret_store_new_callbacks(
    const itsme_secret_store_callbacks *callbacks, itsme_secret_store **out);

/* A store that keeps items in guarded memory, wiped when it is freed.  For
 * tests and short-lived sessions.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_secret_store_new_memory(itsme_secret_store **out);

/* A store in a directory, one file per item, created 0700 if missing.  Items
 * are written with mode 0600 to a temporary file, fsync'd and renamed, and
 * the directory is fsync'd: a crash leaves the old or the new value.  The
 * files are protected by file permissions only, as ssh keys without a
 * passphrase are.  An item is read only from a regular file: a symbolic
 * link, a FIFO, a directory or a device in its place is not followed nor
 * waited on, and reading it fails with ITSME_E_SECRET_STORE (it is never
 * taken as a missing item).
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT,
 * ITSME_E_SECRET_STORE (cannot create or open the directory, or it is not a
 * directory). */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_secret_store_open_file(const char *directory,
                                          itsme_secret_store **out);

/* The longest passphrase of a wrapped file store, in bytes. */
#define ITSME_PASSPHRASE_MAX_BYTES 4096

/* A store in a directory, as itsme_secret_store_open_file keeps it, whose
 * items are wrapped by a passphrase (what `itsme init --passphrase` makes),
 * as ssh keys are: a copy of the files is useless without the passphrase.
 *
 * Every item is sealed with ChaCha20-Poly1305 under a 32-byte key that
 * Argon2id derives from the passphrase (libsodium's moderate level: 3
 * passes over 256 MiB), with the item's name in the associated data, so
 * an item can be neither read, altered nor moved to another name.  The
 * wrap file sits beside the directory, named after it with ".wrap"
 * appended ("data/secrets" -> "data/secrets.wrap"): it holds the format
 * version, the Argon2id parameters, the salt and a check value that tells
 * a wrong passphrase.  docs/STORAGE.md describes both formats and what a
 * copy of the files gives an attacker.
 *
 * The passphrase is any 1 to ITSME_PASSPHRASE_MAX_BYTES bytes (the library
 * sets no other rule: a host that wants a minimum length checks it
 * first); it is copied into guarded memory, hashed, and wiped, never
 * kept.  Only the derived key stays, in guarded memory, until the store is
 * released.
 *
 * Cost: creating and opening each run Argon2id once: about a second of one
 * core and 256 MiB of memory, for the duration of the call.  Reading and
 * writing items afterwards cost no more than with a plain file store.
 *
 * Thread safety: the functions may be called from any thread; the store
 * they make is used as any itsme_secret_store.  Several processes may
 * open one wrapped directory at once. */

/* Wraps a new, empty store in `directory` (created with mode 0700 if
 * missing, as by itsme_secret_store_open_file) under `passphrase`, writes
 * its wrap file (mode 0600, fsync'd; it never replaces one), and returns
 * the open store.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL; an
 * empty path or one whose last component is not a name, such as "/" or
 * "."; a passphrase of 0 or more than ITSME_PASSPHRASE_MAX_BYTES bytes),
 * ITSME_E_ALREADY_EXISTS (something is at the wrap file's path, or the
 * directory already holds items: only a new store is wrapped),
 * ITSME_E_SECRET_STORE (the directory or the wrap file cannot be created
 * or written), ITSME_E_OUT_OF_MEMORY (Argon2id could not allocate its
 * memory). */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_secret_store_create_file_passphrase(
    const char *directory, const uint8_t *passphrase, size_t passphrase_len,
    itsme_secret_store **out);

/* Opens the wrapped store in `directory` with `passphrase`.  The wrap file
 * is read (a regular file only: a link, FIFO or device in its place is
 * refused without being followed or waited on) and checked, its version,
 * KDF and Argon2id parameters (1 to 10 passes, 8 KiB to 1 GiB) included,
 * before the passphrase is hashed with the parameters it names; the check
 * value then tells a wrong passphrase before any item is read.  An item
 * that does not open later (altered, moved, not sealed) fails that read
 * with ITSME_E_AUTHENTICATION_FAILED or ITSME_E_CORRUPT_DATA.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL; a path
 * as for itsme_secret_store_create_file_passphrase; a passphrase longer
 * than ITSME_PASSPHRASE_MAX_BYTES), ITSME_E_NOT_FOUND (no wrap file: the
 * store is not wrapped; see itsme_secret_store_is_passphrase_wrapped),
 * ITSME_E_SECRET_STORE (the wrap file is not a regular file or cannot be
 * read; the directory cannot be opened), ITSME_E_CORRUPT_DATA (the wrap
 * file is damaged, of an unknown version, or asks for parameters outside
 * the window), ITSME_E_AUTHENTICATION_FAILED (wrong passphrase; there is
 * no attempt counter, the cost of each try is the limit),
 * ITSME_E_OUT_OF_MEMORY. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_secret_store_open_file_passphrase(
    const char *directory, const uint8_t *passphrase, size_t passphrase_len,
    itsme_secret_store **out);

/* Writes true to *out_wrapped if the store in `directory` is wrapped by a
 * passphrase: anything at its wrap file's path (even a link or a FIFO,
 * which opening then refuses) says so, so that a damaged wrap file is
 * never taken for a plain store.  Reads no file and creates nothing; cheap.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL; a path
 * as for itsme_secret_store_create_file_passphrase), ITSME_E_SECRET_STORE
 * (the path cannot be inspected). */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_secret_store_is_passphrase_wrapped(const char *directory,
                                                      bool *out_wrapped);

/* Releases the caller's reference.  Identities opened on the store keep it
 * alive until they are freed.  Accepts NULL. */
void itsme_secret_store_free(itsme_secret_store *store);

/* Copies the detail of the last failure of a call made on this store
 * (including itsme_identity_create/load, which report on the store).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_secret_store_last_error(const itsme_secret_store *store,
                                           char *buf, size_t cap,
                                           size_t *out_len);

/* ------------------------------------------------------------------------
 * Identity
 *
 * An identity is an Ed25519 key pair, a random 32-byte contacts encryption
 * key and a display name, kept in a secret store.  The private key never
 * leaves the library.
 *
 * Thread safety: an itsme_identity may be used from several threads at
 * once; calls on one handle are serialised.  Each handle holds the identity
 * as it was when created or loaded: a new name set through one handle is
 * seen by another handle only once that one is loaded again.  The PIN and
 * its attempt counter are read from the store on every call, so all
 * handles share them.
 * ---------------------------------------------------------------------- */

typedef struct itsme_identity itsme_identity;

/* Creates a new identity with a display name (1 to ITSME_NAME_MAX_BYTES
 * bytes of UTF-8 without the controls, invisible characters and bidi
 * overrides docs/PROTOCOL.md section 1 refuses) and saves it in the store.  The
 * identity keeps its own reference to the store.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT,
 * ITSME_E_ALREADY_EXISTS (the store holds an identity already),
 * ITSME_E_SECRET_STORE.  Details go to the store's last error. */
itsme_result itsme_identity_create(itsme_secret_store *store,
                                   const char *name, itsme_identity **out);

/* Loads the identity kept in the store.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT,
 * ITSME_E_NOT_FOUND (no identity), ITSME_E_CORRUPT_DATA (the stored record
 * is malformed or of an unknown version), ITSME_E_SECRET_STORE.  Details go
 * to the store's last error. */
itsme_result itsme_identity_load(itsme_secret_store *store,
                                 itsme_identity **out);

/* Releases the identity and wipes its secrets from memory (the stored
 * identity is untouched).  Accepts NULL. */
void itsme_identity_free(itsme_identity *identity);

/* Copies the detail of the last failure of a call made on this identity.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_identity_last_error(const itsme_identity *identity,
                                       char *buf, size_t cap,
                                       size_t *out_len);

/* The identity's fingerprint: 16 uppercase hex digits and the NUL.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_identity_fingerprint(const itsme_identity *identity,
                                        char *out, size_t cap,
                                        size_t *out_len);

/* The identity's Ed25519 public key (ITSME_PUBLIC_KEY_BYTES bytes).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_identity_public_key(const itsme_identity *identity,
                                       uint8_t *out, size_t cap,
                                       size_t *out_len);

/* The identity's display name, NUL-terminated.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_identity_name(const itsme_identity *identity, char *out,
                                 size_t cap, size_t *out_len);

/* Changes the display name and saves it.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_SECRET_STORE. */
itsme_result itsme_identity_set_name(itsme_identity *identity,
                                     const char *name);

/* ------------------------------------------------------------------------
 * PIN
 *
 * A 6-digit PIN gates access to the identity's secrets.  It is hashed with
 * Argon2id (parameters stored beside the hash) and checked in constant
 * time.  The PIN is an access gate, not encryption: it is only as strong
 * as the secret store that holds its hash, since anyone who can read that
 * store can try all 10^6 PINs offline.
 *
 * Failed attempts are limited: 5 failures are free; the 5th locks further
 * attempts for 5 minutes, and each further failure doubles the wait, up to
 * 24 hours.  A success clears the count.  The count is saved in the secret
 * store before the PIN is checked, so killing the process mid-check or
 * restarting does not reset it.  A clock set back cannot lengthen a wait
 * beyond its full duration.  Attempts on one store take turns: attempts
 * made at the same time through several handles or threads are each
 * counted and checked one after another (so right PINs entered at once all
 * succeed), and so are attempts from several processes sharing a file store
 * (which takes an flock on a ".lock" file in its directory).  A host store
 * shared between processes is serialised only within each process.
 *
 * A PIN argument that is not exactly six ASCII digits, including one that
 * is not UTF-8, gives ITSME_E_INVALID_PIN, not ITSME_E_INVALID_ARGUMENT.
 * ---------------------------------------------------------------------- */

/* Writes true to *out_is_set if a PIN is set, else false.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_CORRUPT_DATA,
 * ITSME_E_SECRET_STORE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_pin_is_set(itsme_identity *identity, bool *out_is_set);

/* Sets the first PIN (exactly six ASCII digits).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_PIN,
 * ITSME_E_ALREADY_EXISTS (use itsme_pin_change), ITSME_E_SECRET_STORE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_pin_set(itsme_identity *identity, const char *pin);

/* Checks a PIN at time `now`.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, negative now),
 * ITSME_E_INVALID_PIN (not six digits; not counted), ITSME_E_NOT_FOUND (no
 * PIN set), ITSME_E_WRONG_PIN (counted), ITSME_E_LOCKED (refused, not
 * counted; see itsme_pin_status), ITSME_E_CORRUPT_DATA,
 * ITSME_E_SECRET_STORE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_pin_verify(itsme_identity *identity, const char *pin,
                              int64_t now);

/* Replaces the PIN after checking the old one exactly as itsme_pin_verify
 * does (the same limiter; a wrong old PIN counts).
 * Errors: those of itsme_pin_verify, and ITSME_E_INVALID_PIN for a
 * malformed new PIN (checked first, not counted). */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_pin_change(itsme_identity *identity, const char *old_pin,
                              const char *new_pin, int64_t now);

/* The limiter's state at time `now`: the number of consecutive failed
 * attempts, and the seconds to wait before the next attempt is allowed
 * (0 if one is allowed now).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_CORRUPT_DATA,
 * ITSME_E_SECRET_STORE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_pin_status(itsme_identity *identity, int64_t now,
                              uint32_t *out_failures,
                              uint64_t *out_wait_seconds);

/* ------------------------------------------------------------------------
 * Contact store
 *
 * Contacts live in one SQLite file.  Every contact is a row sealed with
 * AES-256-GCM under the identity's contacts key, bound to its row, its
 * format version and this store, so rows cannot be swapped, edited or moved
 * into another store unnoticed.  Lookups by fingerprint or identity key go
 * through keyed index columns: the file holds no name, key, fingerprint or
 * seed in the clear.  Device secrets are sealed under a separate device
 * key that the secret store keeps "this device only", so a store copied to
 * another device with an identity export reads every contact but no device
 * secret.
 *
 * Durability: WAL journal with synchronous=FULL.  A change is durable when
 * the call that made it returns ITSME_OK: it survives the process being
 * killed and a power loss (as far as the disk honours fsync).
 *
 * A contact is identified by its identity public key; its fingerprint (the
 * first 8 bytes of SHA-256 of the key, 16 hex digits) is for display and
 * lookup.  A contact from the source's version-5 format has no key: it is
 * "unauthenticated", never merged with nor replacing a keyed contact.
 *
 * Thread safety: an itsme_store may be used from several threads at once
 * (one serialised connection per handle), and several handles or processes
 * may open one file.  itsme_contact and itsme_contact_list are immutable
 * snapshots: safe to read from several threads.  Their getters fail only
 * with ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL or
 * ITSME_E_NOT_FOUND, and keep no last-error message.
 * ---------------------------------------------------------------------- */

typedef struct itsme_store itsme_store;
typedef struct itsme_contact itsme_contact;
typedef struct itsme_contact_list itsme_contact_list;

typedef uint32_t itsme_verification_state ITSME_VALUES(ITSME_CONTACT_);
#define ITSME_CONTACT_UNVERIFIED 0
#define ITSME_CONTACT_VERIFIED 1
/* Their device changed: verification still works, the change is shown. */
#define ITSME_CONTACT_DEGRADED 2
/* Added by a Bluetooth, invite or real-time exchange whose SAS this side
 * confirmed while the peer's confirmation has not arrived
 * (docs/PROTOCOL.md 8.1).  Not a contact yet: verification refuses it
 * (ITSME_E_INVALID_STATE), and so does itsme_store_set_state, into or out
 * of this state.  Its exchange makes it verified (itsme_exchange_settle) or
 * deletes it (the peer rejected, itsme_exchange_reject); if neither happens,
 * itsme_store_expire_awaiting deletes it 24 hours after its exchange began. */
#define ITSME_CONTACT_AWAITING_PEER 3

typedef uint32_t itsme_exchange_method ITSME_VALUES(ITSME_EXCHANGE_METHOD_);
#define ITSME_EXCHANGE_METHOD_QR 0
#define ITSME_EXCHANGE_METHOD_BLUETOOTH 1
#define ITSME_EXCHANGE_METHOD_INVITE 2
#define ITSME_EXCHANGE_METHOD_REALTIME 3

/* A contact's verification seed, in bytes. */
#define ITSME_SEED_BYTES 32
/* Longest note, in UTF-8 bytes (without the NUL). */
#define ITSME_NOTE_MAX_BYTES 4096

/* Opens the contact store at `path` for `identity`, creating the file if
 * missing.  The store keeps what it needs of the identity: the identity
 * may be freed first.  Creates the device key in the identity's secret
 * store on first use.
 *
 * Every committing change counts one commit in the file and then raises the
 * store's mark in the identity's secret store (item "itsme.store-mark.*",
 * one per identity and resolved path): at once, or, for a commit less than
 * 50 ms after the handle last raised it, when the 50 ms are up (by a thread
 * of the library for the library's secret stores; for a host's store, which
 * is called only on the threads that call the library, at the handle's next
 * commit after that) or at itsme_store_free (docs/STORAGE.md, "Commits and
 * rollback").  Opening compares the two: a file
 * behind the mark (an older copy put back, a -wal file lost), or another
 * store where the mark's was (a file emptied, deleted or swapped), is
 * refused with ITSME_E_ROLLED_BACK, and a file lacking rows its last commit
 * counted with ITSME_E_CORRUPT_DATA.  A refused open changes nothing: every
 * refusal (these, ITSME_E_WRONG_IDENTITY, ITSME_E_DATABASE) is found before
 * anything is written, and no file is created or removed beside the store
 * (docs/STORAGE.md, "A refused open changes nothing").
 * See itsme_store_accept_loss.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT,
 * ITSME_E_WRONG_IDENTITY (the file belongs to another identity; nothing
 * changed), ITSME_E_DATABASE (cannot open or create the file, or it is not
 * an ItsMe store; the detail says why), ITSME_E_CORRUPT_DATA,
 * ITSME_E_ROLLED_BACK, ITSME_E_SECRET_STORE.  Details go to the identity's
 * last error. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_store_open(itsme_identity *identity, const char *path,
                              itsme_store **out);

/* What accepting a store's loss gave up (itsme_store_accept_loss). */
typedef struct itsme_store_loss {
    /* The caller sets it to sizeof(itsme_store_loss) (see the conventions). */
    size_t size;
    /* true: the file is not the store last seen at its path (it was emptied,
     * deleted or swapped); commits_lost is then 0, as it cannot be known. */
    bool replaced;
    /* Commits the file was behind the last one this device saw. */
    uint64_t commits_lost;
    /* Contacts at the last commit seen, and in the file now. */
    uint64_t contacts_before;
    uint64_t contacts_now;
    /* Rows the file's last commit counted that it lacks (a damaged file). */
    uint64_t contacts_missing;
    uint64_t photos_missing;
    uint64_t device_secrets_missing;
    /* Contacts whose photo was lost (kept, without a photo). */
    uint64_t contacts_without_their_photo;
} itsme_store_loss;

/* Accepts the loss that made itsme_store_open fail with ITSME_E_ROLLED_BACK
 * or ITSME_E_CORRUPT_DATA (lost rows or photos): the file at `path` becomes
 * the store as it is (created, empty, if missing), and this device's mark
 * is set to it.  Writes what was lost to *out_loss (all zero: nothing).
 * Call it only when the person chose to, after being shown the error; then
 * open the store.  A store that opens normally gives an all-zero loss.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT,
 * ITSME_E_WRONG_IDENTITY, ITSME_E_DATABASE, ITSME_E_AUTHENTICATION_FAILED (a
 * contact record that does not open: not a loss this accepts),
 * ITSME_E_SECRET_STORE.  Details go to the identity's last error. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_store_accept_loss(itsme_identity *identity, const char *path,
                                     itsme_store_loss *out_loss);

/* Closes the store and frees the handle.  Accepts NULL.  Every committed
 * change is already on disk; nothing is lost by closing.  If a commit's
 * raise of the store's mark waited (see itsme_store_open), the mark is
 * raised now: the identity's secret store may be called (get and put) from
 * this function, on the calling thread; a failure there is not reported.
 *
 * Ownership: every handle made with the store (an itsme_exchange, also a
 * restored one; itsme_voice, itsme_online_verify, itsme_pin_update, an
 * itsme_online_verify_rendezvous and its sessions, itsme_rollcall) keeps a
 * counted reference to it, and an exchange one to its identity too.  This
 * function releases the caller's; the file is closed, as above, when the
 * last of those handles is freed too, and until then they keep working.
 * Threads: the store serialises its own calls, so the store and the
 * handles made with it may be used from different threads at once; each
 * of those handles serialises the calls made on it (an exchange, those on
 * its identity), so one handle shared by threads is safe but its calls run
 * one at a time.
 * LeakSanitizer: a handle still live at exit may be reported as leaked
 * even while the program holds it (the library keeps some references in a
 * form the scanner does not recognise as pointers); free every handle
 * before exit, as tests/c/contract_runtime.h does. */
void itsme_store_free(itsme_store *store);

/* Copies the detail of the last failure of a call made on this store.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_store_last_error(const itsme_store *store, char *buf,
                                    size_t cap, size_t *out_len);

/* Adds a contact with its identity public key (ITSME_PUBLIC_KEY_BYTES), a
 * display name, its verification seed (ITSME_SEED_BYTES) and how the
 * exchange happened, at time `now`; writes the new contact's id (ids only
 * grow and are never reused).
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, name, seed size, method, now),
 * ITSME_E_INVALID_KEY (wrong size, or our own key), ITSME_E_ALREADY_EXISTS
 * (a contact with this key exists), ITSME_E_DATABASE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_store_add(itsme_store *store, const char *name,
                             const uint8_t *public_key, size_t key_len,
                             const uint8_t *seed, size_t seed_len,
                             itsme_exchange_method method, int64_t now,
                             int64_t *out_id);

/* Adds an unauthenticated contact from the source's version-5 format,
 * which carries a fingerprint (16 hex digits) but no key.
 * Errors: as itsme_store_add, with ITSME_E_INVALID_ARGUMENT for a bad
 * fingerprint. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_store_add_unauthenticated(itsme_store *store,
                                             const char *name,
                                             const char *fingerprint,
                                             const uint8_t *seed,
                                             size_t seed_len,
                                             itsme_exchange_method method,
                                             int64_t now, int64_t *out_id);

/* The contact with this id, as a new snapshot the caller frees.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_NOT_FOUND,
 * ITSME_E_AUTHENTICATION_FAILED (the sealed row was altered, swapped or
 * copied from another store: reported, never skipped), ITSME_E_DATABASE. */
itsme_result itsme_store_get(itsme_store *store, int64_t id,
                             itsme_contact **out);

/* The contact with this identity public key.
 * Errors: as itsme_store_get. */
itsme_result itsme_store_get_by_key(itsme_store *store,
                                    const uint8_t *public_key,
                                    size_t key_len, itsme_contact **out);

/* The contacts with this fingerprint (16 hex digits, either case): keyed
 * contacts first, then unauthenticated ones; an empty list if none.
 * Errors: as itsme_store_get, without ITSME_E_NOT_FOUND. */
itsme_result itsme_store_find_fingerprint(itsme_store *store,
                                          const char *fingerprint,
                                          itsme_contact_list **out);

/* Up to `limit` contacts with ids above `after_id`, in id order: pass 0,
 * then the last id of each page.  limit 0 means no limit.  Every record is
 * authenticated; one that fails fails the call (its id in the detail).
 * Errors: as itsme_store_find_fingerprint. */
itsme_result itsme_store_list(itsme_store *store, int64_t after_id,
                              size_t limit, itsme_contact_list **out);

/* The number of contacts.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_DATABASE. */
itsme_result itsme_store_count(itsme_store *store, uint64_t *out_count);

/* Deletes every contact still ITSME_CONTACT_AWAITING_PEER more than 24
 * hours after its exchange began (`now` past its deadline): the peer's
 * confirmation never came.  *out_deleted (may be NULL) receives how many.
 * itsme_exchange_save calls it; a host may call it at any time (at start,
 * say).  Reads every record: linear in the number of contacts.
 * Thread-safe (the store's lock).
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL store, `now` out of range),
 * ITSME_E_AUTHENTICATION_FAILED, ITSME_E_CORRUPT_DATA, ITSME_E_DATABASE. */
itsme_result itsme_store_expire_awaiting(itsme_store *store, int64_t now,
                                         uint64_t *out_deleted ITSME_OPTIONAL);

/* Renames a contact.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_NOT_FOUND,
 * ITSME_E_AUTHENTICATION_FAILED, ITSME_E_DATABASE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_store_set_name(itsme_store *store, int64_t id,
                                  const char *name);

/* Replaces a contact's free-form note (at most ITSME_NOTE_MAX_BYTES).
 * Errors: as itsme_store_set_name. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_store_set_note(itsme_store *store, int64_t id,
                                  const char *note);

/* Sets a contact's state.  ITSME_CONTACT_VERIFIED records `now` as the
 * verification time; `acknowledged` counts only with
 * ITSME_CONTACT_DEGRADED: the person confirmed the device change.
 * Errors: as itsme_store_set_name, and ITSME_E_INVALID_STATE for
 * ITSME_CONTACT_AWAITING_PEER, into or out of (only an exchange moves it). */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_store_set_state(itsme_store *store, int64_t id,
                                   itsme_verification_state state,
                                   bool acknowledged, int64_t now);

/* Uses voice-verification window `window` for the contact: succeeds only
 * if it is greater than the last window used, atomically, so that of two
 * handles or processes racing for one window exactly one wins.  A window
 * is 0 to 8446743359 (the year 9999).
 * Errors: ITSME_E_WINDOW_USED, ITSME_E_INVALID_ARGUMENT (out of range), and
 * those of itsme_store_set_name. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_store_use_window(itsme_store *store, int64_t id,
                                    int64_t window);

/* Deletes a contact, with its photo and device secrets.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_NOT_FOUND, ITSME_E_DATABASE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_store_delete(itsme_store *store, int64_t id);

/* Writes a consistent copy of the whole store, as one new file at `path`:
 * a backup, or the file that moves to a new device with an identity export
 * (docs/PROTOCOL.md section 17.4).  Safe while the store is in use; the
 * copy holds what was committed when it started.  Records stay sealed; its
 * device secrets open only on this device.  Never overwrites a file.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_ALREADY_EXISTS (path exists),
 * ITSME_E_DATABASE (e.g. the directory is not writable). */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_store_backup(itsme_store *store, const char *path);

/* Releases a contact snapshot.  Accepts NULL. */
void itsme_contact_free(itsme_contact *contact);

/* The contact's id. */
itsme_result itsme_contact_id(const itsme_contact *contact, int64_t *out_id);

/* The contact's display name, NUL-terminated. */
itsme_result itsme_contact_name(const itsme_contact *contact, char *out,
                                size_t cap, size_t *out_len);

/* The contact's fingerprint: 16 uppercase hex digits and the NUL. */
itsme_result itsme_contact_fingerprint(const itsme_contact *contact,
                                       char *out, size_t cap,
                                       size_t *out_len);

/* The contact's identity public key; ITSME_E_NOT_FOUND for an
 * unauthenticated contact. */
itsme_result itsme_contact_public_key(const itsme_contact *contact,
                                      uint8_t *out, size_t cap,
                                      size_t *out_len);

/* Writes true if the contact has an identity key, false for an unauthenticated
 * (version-5) contact. */
itsme_result itsme_contact_is_authenticated(const itsme_contact *contact,
                                            bool *out_authenticated);

/* The contact's state, and whether a degradation was acknowledged. */
itsme_result itsme_contact_state(const itsme_contact *contact,
                                 itsme_verification_state *out_state,
                                 bool *out_acknowledged);

/* How the exchange with this contact happened. */
itsme_result itsme_contact_exchange_method(const itsme_contact *contact,
                                           itsme_exchange_method *out_method);

/* When the contact was added (unix seconds). */
itsme_result itsme_contact_created_at(const itsme_contact *contact,
                                      int64_t *out_time);

/* When the contact was last verified; ITSME_E_NOT_FOUND if never. */
itsme_result itsme_contact_verified_at(const itsme_contact *contact,
                                       int64_t *out_time);

/* The last verification window used; ITSME_E_NOT_FOUND if none. */
itsme_result itsme_contact_last_window(const itsme_contact *contact,
                                       int64_t *out_window);

/* The contact's note, NUL-terminated (empty if none). */
itsme_result itsme_contact_note(const itsme_contact *contact, char *out,
                                size_t cap, size_t *out_len);

/* Releases a contact list.  Accepts NULL. */
void itsme_contact_list_free(itsme_contact_list *list);

/* The number of contacts in the list. */
itsme_result itsme_contact_list_count(const itsme_contact_list *list,
                                      size_t *out_count);

/* The contact at `index` (0-based), as a new snapshot the caller frees.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, index out of range). */
itsme_result itsme_contact_list_get(const itsme_contact_list *list,
                                    size_t index, itsme_contact **out);

/* ------------------------------------------------------------------------
 * Deterministic randomness (tests and test vectors only)
 *
 * Functions that draw random bytes take an optional itsme_random; NULL
 * means the operating system's generator, which is what real use needs.  A
 * deterministic source replays the same bytes for the same seed, so tests
 * can reproduce docs/PROTOCOL.md's test vectors through this interface.
 * Never use one for real keys: anyone who knows the seed knows every key.
 *
 * Thread safety: an itsme_random must not be used by two calls at once.
 * ---------------------------------------------------------------------- */

typedef struct itsme_random itsme_random;


/* Releases a random source.  Accepts NULL. */
void itsme_random_free(itsme_random *rng);


/* ------------------------------------------------------------------------
 * Short codes: a NATO word and four digits ("ECHO 0042"), 260,000 values
 * (17.99 bits).  Used for the SAS and the Bluetooth session code.
 * docs/PROTOCOL.md section 4.
 * ---------------------------------------------------------------------- */

/* Buffer size for a short code's text: "NOVEMBER 0000" and the NUL. */
#define ITSME_SHORT_CODE_SIZE 14
/* Number of short code values. */
#define ITSME_SHORT_CODE_VALUES 260000

/* Parses typed input: surrounding spaces ignored, the word in any case,
 * one space or '-', exactly four digits.  Sets *out_value in [0, 260000).
 * Thread-safe.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, longer than ITSME_TYPED_CODE_MAX
 * bytes, or not a short code). */
itsme_result itsme_short_code_parse(const char *text, uint32_t *out_value);

/* The canonical text of a value ("ECHO 0042").  Thread-safe.
 * Errors: ITSME_E_INVALID_ARGUMENT (value >= 260000), BUFFER_TOO_SMALL. */
itsme_result itsme_short_code_format(uint32_t value, char *out, size_t cap,
                                     size_t *out_len);

/* ------------------------------------------------------------------------
 * Contact exchange in person: QR and Bluetooth (docs/PROTOCOL.md 5 to 8)
 *
 * An exchange is a state machine.  The host moves its bytes (shows and
 * scans QR codes, writes and reads Bluetooth frames); the library never
 * touches a camera, a radio or a socket.  The usual flow:
 *
 *   new_qr / new_bluetooth
 *   loop: next_outgoing -> send;  receive the peer's bytes
 *   state becomes ITSME_EXCHANGE_STATE_COMPARE_SAS: show itsme_exchange_sas and
 *     the peer's name; itsme_exchange_save stores the contact unverified
 *   the two people compare the SAS aloud:
 *     confirm or reject (contact deleted)
 *   Bluetooth, invite, real-time: send the decision next_outgoing gives,
 *     and receive the peer's.
 *
 * Both decisions (docs/PROTOCOL.md 8.1).  A contact becomes verified only
 * when its person confirmed and the peer's authenticated confirmation
 * arrived.  QR carries no decision (both people see both screens in
 * person): confirm makes the contact verified.  The other methods carry
 * one each way: if the peer's confirmation came first, confirm makes the
 * contact verified at once (state CONFIRMED); otherwise the state becomes
 * ITSME_EXCHANGE_STATE_AWAITING_DECISION and a new contact is stored as
 * ITSME_CONTACT_AWAITING_PEER (a known contact keeps its old seed).  When
 * the peer's decision arrives (receive sets ITSME_EXCHANGE_FLAG_PEER_CONFIRMED
 * or ITSME_EXCHANGE_FLAG_PEER_REJECTED: the event to watch for), call
 * itsme_exchange_settle.  If it does not come while the room or Bluetooth
 * session lasts (peer-left, a lost connection), call itsme_exchange_reject;
 * after 24 hours the store deletes the contact by itself.
 *
 * A failure is final: once receive has rejected a peer message (any error
 * except ITSME_E_INVALID_ARGUMENT for a text that is not an exchange
 * payload at all, and ITSME_E_INVALID_STATE for a call in the wrong
 * order), the state is ITSME_EXCHANGE_STATE_FAILED and every later call fails
 * with ITSME_E_INVALID_STATE.  A pending exchange expires 24 hours after
 * `now` at creation (ITSME_E_EXPIRED).
 *
 * Exchanging again with a stored contact (same identity key) sets
 * ITSME_EXCHANGE_FLAG_KNOWN_CONTACT on save and changes nothing until
 * confirm, which replaces its seed and device secrets and marks it
 * verified; reject leaves it as it was.
 *
 * Errors are detailed by itsme_exchange_last_error; the constructors
 * (new_qr, new_bluetooth, restore) record theirs on the identity
 * (itsme_identity_last_error).
 *
 * Thread safety: an itsme_exchange must not be used by two threads at once.
 * It keeps its identity alive (the identity handle may be freed first) and
 * takes the identity's lock during each call, so other threads may keep
 * using the identity.
 * ---------------------------------------------------------------------- */

typedef struct itsme_exchange itsme_exchange;

typedef uint32_t itsme_exchange_state ITSME_VALUES(ITSME_EXCHANGE_STATE_);
/* Waiting for the peer's payload (QR) or next frame (Bluetooth). */
#define ITSME_EXCHANGE_STATE_AWAITING_PEER 1
/* The SAS is ready: show it for the two people to compare. */
#define ITSME_EXCHANGE_STATE_COMPARE_SAS 2
/* A source-format (v5) QR payload was read.  It has no SAS and nothing in
 * it is authenticated (ITSME_EXCHANGE_FLAG_UNAUTHENTICATED): save stores
 * it flagged unauthenticated; confirm is not possible. */
#define ITSME_EXCHANGE_STATE_IMPORTED 3
/* Both decisions are in: the contact is verified. */
#define ITSME_EXCHANGE_STATE_CONFIRMED 4
/* This side or the peer rejected, or this side stopped waiting. */
#define ITSME_EXCHANGE_STATE_REJECTED 5
#define ITSME_EXCHANGE_STATE_FAILED 6
/* This side confirmed; the peer's decision has not been settled: wait for
 * ITSME_EXCHANGE_FLAG_PEER_CONFIRMED or _REJECTED, then settle. */
#define ITSME_EXCHANGE_STATE_AWAITING_DECISION 7

/* Flags (events) read with itsme_exchange_status. */
/* The peer sent the source format: its name cannot be verified. */
#define ITSME_EXCHANGE_FLAG_UNAUTHENTICATED 1
/* A contact with the peer's identity key is stored (set by save). */
#define ITSME_EXCHANGE_FLAG_KNOWN_CONTACT 2
/* The peer's authenticated confirmation arrived (Bluetooth, invite,
 * real-time). */
#define ITSME_EXCHANGE_FLAG_PEER_CONFIRMED 4
/* The peer rejected the SAS: confirm is refused; settle (after this side
 * confirmed) or reject deletes the new contact. */
#define ITSME_EXCHANGE_FLAG_PEER_REJECTED 8

/* Longest QR payload text (bytes, no NUL) and longest Bluetooth frame. */
#define ITSME_QR_PAYLOAD_MAX 383
#define ITSME_BLUETOOTH_FRAME_MAX 259

/* Starts a QR exchange for `identity`, drawing its ephemeral key and
 * device secret from `rng` (NULL: the operating system).  `now` is the
 * current unix time.  The exchange saves the new contact in `store`, a
 * contact store of `identity`, and keeps a counted reference to it and to
 * the identity (see itsme_store_free): every exchange function that
 * writes uses that store.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT,
 * ITSME_E_WRONG_IDENTITY (the store belongs to another identity). */
itsme_result itsme_exchange_new_qr(itsme_identity *identity,
                                   itsme_store *store,
                                   itsme_random *rng, int64_t now,
                                   itsme_exchange **out);

/* Starts a Bluetooth exchange.  `session_code` is the code the other
 * device shows (parsed like itsme_short_code_parse), or NULL to draw one
 * for this device to show (read it with itsme_exchange_session_code).
 * `store` as for itsme_exchange_new_qr.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (including a
 * session code that does not parse or is longer than ITSME_TYPED_CODE_MAX
 * bytes), ITSME_E_WRONG_IDENTITY. */
itsme_result itsme_exchange_new_bluetooth(itsme_identity *identity,
                                          itsme_store *store,
                                          const char *session_code ITSME_OPTIONAL,
                                          itsme_random *rng, int64_t now,
                                          itsme_exchange **out);

/* Releases an exchange and wipes its secrets.  Accepts NULL. */
void itsme_exchange_free(itsme_exchange *exchange);

/* Copies the detail of the last failure of a call on this exchange
 * (for a failed exchange: why it failed).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_exchange_last_error(const itsme_exchange *exchange,
                                       char *buf, size_t cap,
                                       size_t *out_len);

/* The state and the flags (ITSME_EXCHANGE_FLAG_*; out_flags may be NULL).
 * Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_exchange_status(const itsme_exchange *exchange,
                                   itsme_exchange_state *out_state,
                                   uint32_t *out_flags ITSME_OPTIONAL);

/* How the exchange was started: ITSME_EXCHANGE_METHOD_QR, ITSME_EXCHANGE_METHOD_BLUETOOTH,
 * ITSME_EXCHANGE_METHOD_INVITE or ITSME_EXCHANGE_METHOD_REALTIME (useful after
 * itsme_exchange_restore).
 * Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_exchange_get_method(const itsme_exchange *exchange,
                                       itsme_exchange_method *out_method);

/* Bluetooth: the session code text ("ECHO 0042" and the NUL).
 * Errors: ITSME_E_INVALID_STATE (a QR exchange), BUFFER_TOO_SMALL. */
itsme_result itsme_exchange_session_code(const itsme_exchange *exchange,
                                         char *out, size_t cap,
                                         size_t *out_len);

/* The next bytes to send.  QR: our payload text (ASCII, no NUL; show it as
 * a QR code for as long as the exchange is awaiting the peer or comparing
 * the SAS); it is not consumed.  Bluetooth: the next frame, removed from
 * the queue on success (not on ITSME_E_BUFFER_TOO_SMALL).  When there is
 * nothing to send, returns ITSME_OK with *out_len = 0.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_exchange_next_outgoing(itsme_exchange *exchange,
                                          uint8_t *out, size_t cap,
                                          size_t *out_len);

/* Feeds the peer's bytes: the scanned QR text (without a NUL), or one
 * Bluetooth frame.  Once this side has confirmed or rejected, only the
 * peer's Bluetooth CONFIRM frame is accepted; anything else is refused
 * with the usual error and the state stays CONFIRMED or REJECTED.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL; for QR, a text that is not a
 * whole exchange payload: another QR code, or a paste or read cut short,
 * run on (longer than 383 bytes, or 327 for a source-format text: refused
 * before any of it is decoded) or damaged in its encoding; read it again,
 * the exchange goes on),
 * ITSME_E_INVALID_STATE (the exchange failed; for QR, a payload was
 * already received or the exchange finished), and, ending the exchange as failed:
 * ITSME_E_MALFORMED_MESSAGE, ITSME_E_AUTHENTICATION_FAILED (bad signature,
 * fingerprint, commitment or frame tag), ITSME_E_INVALID_KEY (our own key,
 * a low-order ephemeral key), ITSME_E_EXPIRED. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_exchange_receive(itsme_exchange *exchange,
                                    const uint8_t *bytes, size_t len,
                                    int64_t now);

/* The SAS text to compare ("ECHO 0042" and the NUL;
 * ITSME_SHORT_CODE_SIZE bytes suffice).
 * Errors: ITSME_E_INVALID_STATE (no SAS yet, a source-format import, or
 * the exchange failed), BUFFER_TOO_SMALL. */
itsme_result itsme_exchange_sas(const itsme_exchange *exchange, char *out,
                                size_t cap, size_t *out_len);

/* The peer's name (as the peer sent it), fingerprint (ITSME_FINGERPRINT_SIZE)
 * and identity public key (ITSME_PUBLIC_KEY_BYTES), once received.
 * Errors: ITSME_E_INVALID_STATE (nothing received yet, or the exchange
 * failed), ITSME_E_NOT_FOUND
 * (public key of a source-format peer, which has none), BUFFER_TOO_SMALL. */
itsme_result itsme_exchange_peer_name(const itsme_exchange *exchange,
                                      char *out, size_t cap,
                                      size_t *out_len);

/* The peer's fingerprint (see itsme_exchange_peer_name for errors). */
itsme_result itsme_exchange_peer_fingerprint(const itsme_exchange *exchange,
                                             char *out, size_t cap,
                                             size_t *out_len);

/* The peer's identity public key (see itsme_exchange_peer_name). */
itsme_result itsme_exchange_peer_public_key(const itsme_exchange *exchange,
                                            uint8_t *out, size_t cap,
                                            size_t *out_len);

/* Stores the new contact in the exchange's store unverified, with its
 * seed and both device secrets, in one transaction, and sets
 * *out_contact_id.  If a contact with the peer's identity key exists,
 * stores nothing, sets ITSME_EXCHANGE_FLAG_KNOWN_CONTACT and gives that
 * contact's id.  Calling it again gives the same id.
 * Errors: ITSME_E_INVALID_STATE (state not COMPARE_SAS or IMPORTED),
 * ITSME_E_INVALID_ARGUMENT (NULL), ITSME_E_EXPIRED, ITSME_E_DATABASE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_exchange_save(itsme_exchange *exchange, int64_t now,
                                 int64_t *out_contact_id);

/* The person said the SAS matches: saves if needed and queues this side's
 * decision for next_outgoing (Bluetooth CONFIRM frame, remote DECISION
 * message; the inviter's through the mailbox waits until the invitee's
 * arrived).  QR, or the peer's confirmation already received: marks the
 * contact verified (for a known contact: replaces its seed and device
 * secrets in one transaction; the old seed is overwritten), state
 * CONFIRMED.  Otherwise: state AWAITING_DECISION, a new contact
 * ITSME_CONTACT_AWAITING_PEER, a known contact unchanged (see "Both
 * decisions" above).  *out_contact_id is the contact's id either way.
 * Errors: ITSME_E_INVALID_STATE (no SAS, an import, or the peer rejected),
 * ITSME_E_NOT_FOUND (the contact save added was deleted since: nothing
 * changes, itsme_exchange_reject still ends the exchange), and those of
 * itsme_exchange_save. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_exchange_confirm(itsme_exchange *exchange, int64_t now,
                                    int64_t *out_contact_id);

/* The peer's decision arrived (FLAG_PEER_CONFIRMED or _REJECTED) after this
 * side confirmed (state AWAITING_DECISION): applies it.  Confirmed: the
 * contact becomes verified (a known contact gets the new seed and device
 * secrets), state CONFIRMED, *out_contact_id its id.  Rejected: a new
 * contact is deleted (a known one keeps its old seed; one already deleted
 * counts as deleted), state REJECTED, *out_contact_id 0.
 * Errors: ITSME_E_INVALID_STATE (not AWAITING_DECISION, or the peer's
 * decision not received yet), ITSME_E_INVALID_ARGUMENT (NULL),
 * ITSME_E_NOT_FOUND (confirmed, but the contact was deleted since: nothing
 * changes, itsme_exchange_reject ends the exchange), ITSME_E_EXPIRED,
 * ITSME_E_DATABASE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_exchange_settle(itsme_exchange *exchange, int64_t now,
                                   int64_t *out_contact_id);

/* The SAS differs, the person gave up, or (AWAITING_DECISION) the peer's
 * decision will not come (the room or the Bluetooth session ended): deletes
 * the contact save added (a known contact is left untouched; one the
 * person or a sweep already deleted counts as deleted), state
 * REJECTED.  This side's rejection is queued for next_outgoing when it had
 * not decided yet and the peer's data was received.  On a FAILED exchange
 * it deletes what save added and the state stays FAILED.
 * Errors: ITSME_E_INVALID_STATE (already finished, or failed with nothing to delete),
 * ITSME_E_INVALID_ARGUMENT (NULL), ITSME_E_DATABASE. */
itsme_result itsme_exchange_reject(itsme_exchange *exchange);

/* Seals a pending exchange (AWAITING_PEER, COMPARE_SAS, IMPORTED or
 * AWAITING_DECISION), or a
 * finished Bluetooth one (which may still have a CONFIRM frame to send or
 * receive), to bytes, encrypted and authenticated under a key derived from this
 * device's device key (kept in the identity's secret store, never
 * exported), so the host can stop and restore it later on this device.
 * The exchange stays usable.  Restore a sealed exchange at most once.
 * Errors: ITSME_E_INVALID_STATE, ITSME_E_SECRET_STORE, BUFFER_TOO_SMALL. */
itsme_result itsme_exchange_seal(itsme_exchange *exchange, uint8_t *out,
                                 size_t cap, size_t *out_len);

/* Restores a sealed exchange for `identity`, given its contact store as
 * at creation (itsme_exchange_new_qr): the sealed bytes hold no store.
 * Once the sealed exchange had saved its contact, `store` must be the
 * store it saved in (the same file: any handle on it).
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL; a store
 * other than the one the contact was saved in),
 * ITSME_E_WRONG_IDENTITY (a store of another identity),
 * ITSME_E_CORRUPT_DATA (not a sealed exchange), ITSME_E_AUTHENTICATION_FAILED
 * (sealed on another device or for another identity, or altered),
 * ITSME_E_EXPIRED (begun more than 24 hours before `now`). */
itsme_result itsme_exchange_restore(itsme_identity *identity,
                                    itsme_store *store,
                                    const uint8_t *sealed, size_t len,
                                    int64_t now, itsme_exchange **out);

/* ------------------------------------------------------------------------
 * Contact exchange at a distance: invite and real-time (docs/PROTOCOL.md 16)
 *
 * The inviter creates the exchange and shows two codes; the other person
 * types them (read aloud, texted, mailed: any channel).  A password-
 * authenticated key exchange (CPace) keyed by the encryption code protects
 * the contact data, so the relay cannot test codes offline: every guess
 * needs a live run and spends the invite.  The exchange is an
 * itsme_exchange like the in-person ones: next_outgoing gives each message
 * to post, receive takes the peer's, then the SAS is compared on a call and
 * confirmed or rejected.  The library does no I/O: the host moves the
 * messages through the relay (docs/PROTOCOL.md 15), either the invite
 * mailbox (each side may go offline between its steps: seal and restore)
 * or, with `realtime`, a relay room while both people are on a call.  The
 * ID of the mailbox or room is itsme_exchange_relay_id.
 *
 * Messages: the inviter's INVITE (at creation), the invitee's ACCEPT
 * (after the INVITE), the inviter's REPLY (after the ACCEPT), then each
 * side's DECISION on the SAS (after confirm or reject).  The inviter's SAS
 * is ready on the ACCEPT, the invitee's on the REPLY.  Through the mailbox
 * the invitee ends the invite (DELETE) once it has the inviter's DECISION,
 * which the inviter sends only after reading the invitee's; in a room both
 * stay until both decisions passed.
 * A failed check (ITSME_E_AUTHENTICATION_FAILED: a wrong encryption code
 * or a relay that changed the messages) ends the exchange for good; the
 * host then ends the invite on the relay, so the other side fails too.
 *
 * Each side keeps its PAKE secret in the identity's secret store, never in
 * a sealed exchange, for at most 24 hours: it is wiped when the exchange
 * ends (confirmed, rejected, failed, expired), after which no sealed copy
 * restores (ITSME_E_INVALID_STATE), and any left by an abandoned exchange
 * is swept when the next remote exchange starts.
 * ---------------------------------------------------------------------- */

/* Buffer size for a code as shown, "K7X2-M9PM", and the NUL. */
#define ITSME_REMOTE_CODE_SIZE 10
/* Longest remote exchange message (bytes): fits every relay limit. */
#define ITSME_REMOTE_MESSAGE_MAX 355
/* Buffer size for a relay ID: 32 lower-case hex characters and the NUL. */
#define ITSME_RELAY_ID_SIZE 33

/* Checks a code a person typed (either case; spaces and '-' ignored) and
 * writes it as shown ("ABCD-EFGH").  A code carries a check character:
 * every single wrong character and every swap of two is caught here,
 * before any network call.
 * Errors: ITSME_E_INVALID_ARGUMENT (with a message saying what is wrong;
 * a text longer than ITSME_TYPED_CODE_MAX bytes), BUFFER_TOO_SMALL. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_remote_code_check(const char *text, char *out, size_t cap,
                                     size_t *out_len);

/* Starts an exchange at a distance as the inviter: draws the invite code,
 * the encryption code (read them with itsme_exchange_invite_code and
 * itsme_exchange_encryption_code), and the keys, from `rng` (NULL: the
 * operating system), and queues the INVITE message.  `realtime` true:
 * carried in a relay room, method ITSME_EXCHANGE_METHOD_REALTIME; zero: through
 * the invite mailbox, ITSME_EXCHANGE_METHOD_INVITE.  `store` as for
 * itsme_exchange_new_qr.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT,
 * ITSME_E_WRONG_IDENTITY, ITSME_E_SECRET_STORE. */
itsme_result itsme_exchange_new_invite(itsme_identity *identity,
                                       itsme_store *store, bool realtime,
                                       itsme_random *rng, int64_t now,
                                       itsme_exchange **out);

/* Joins an exchange at a distance as the invitee, with the two codes the
 * inviter shared.  `realtime` as for itsme_exchange_new_invite (the two
 * sides must agree); `store` as for itsme_exchange_new_qr.
 * Errors: ITSME_E_INVALID_ARGUMENT (a code with a typo, a character codes
 * never use, longer than ITSME_TYPED_CODE_MAX bytes, or the same code
 * twice; nothing is stored),
 * ITSME_E_NOT_INITIALIZED, ITSME_E_WRONG_IDENTITY, ITSME_E_SECRET_STORE. */
itsme_result itsme_exchange_accept_invite(itsme_identity *identity,
                                          itsme_store *store,
                                          const char *invite_code,
                                          const char *encryption_code,
                                          bool realtime, itsme_random *rng,
                                          int64_t now, itsme_exchange **out);

/* The invite code as shown ("ABCD-EFGH").  Not secret from the relay.
 * Errors: ITSME_E_INVALID_STATE (not an invite or real-time exchange),
 * BUFFER_TOO_SMALL. */
itsme_result itsme_exchange_invite_code(const itsme_exchange *exchange,
                                        char *out, size_t cap,
                                        size_t *out_len);

/* The encryption code as shown.  It is the password of the exchange:
 * show it to the person, never log it.  Errors as itsme_exchange_invite_code. */
itsme_result itsme_exchange_encryption_code(const itsme_exchange *exchange,
                                            char *out, size_t cap,
                                            size_t *out_len);

/* The relay ID to use (32 lower-case hex characters): the invite mailbox
 * (docs/PROTOCOL.md 15.2) or, for a real-time exchange, the room (15.3).
 * Errors as itsme_exchange_invite_code. */
itsme_result itsme_exchange_relay_id(const itsme_exchange *exchange,
                                     char *out, size_t cap, size_t *out_len);

/* Sets *out_inviter to true for the side that created the invite, else false.
 * Errors: ITSME_E_INVALID_STATE (not an invite or real-time exchange). */
itsme_result itsme_exchange_is_inviter(const itsme_exchange *exchange,
                                       bool *out_inviter);

/* ------------------------------------------------------------------------
 * The relay's paths (docs/PROTOCOL.md 15)
 *
 * The drivers below give the path of each request and room they need; a
 * host that talks to the relay on its own (profile records, group rooms, a
 * client of its own) takes the path of a route here, from the same place,
 * rather than spelling it.
 * ---------------------------------------------------------------------- */

typedef uint32_t itsme_relay_route ITSME_VALUES(ITSME_RELAY_ROUTE_);
/* /v1/invites/{id}: create (POST) or end (DELETE) an invite. */
#define ITSME_RELAY_ROUTE_INVITE 1
/* /v1/invites/{id}/accept (POST). */
#define ITSME_RELAY_ROUTE_INVITE_ACCEPT 2
/* /v1/invites/{id}/messages: post (POST) or fetch (GET). */
#define ITSME_RELAY_ROUTE_INVITE_MESSAGES 3
/* /v1/rooms/{id}: a room (WebSocket). */
#define ITSME_RELAY_ROUTE_ROOM 4
/* /v1/groups/{id}: a group room (WebSocket). */
#define ITSME_RELAY_ROUTE_GROUP 5
/* /v1/records/{id}: a record (PUT, GET, DELETE). */
#define ITSME_RELAY_ROUTE_RECORD 6

/* The path of `route` for the ID `id` (32 lower-case hex characters),
 * NUL-terminated, to append to the relay's base URL.
 * Thread-safe.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, a route this version does not
 * know, an ID that is not 32 lower-case hex characters),
 * ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_relay_path(itsme_relay_route route, const char *id,
                              char *out, size_t cap, size_t *out_len);

typedef uint32_t itsme_relay_answer ITSME_VALUES(ITSME_RELAY_ANSWER_);
/* A success status of the route: its body is the route's answer. */
#define ITSME_RELAY_ANSWER_SUCCESS 1
/* 404: nothing there (an invite ended or expired, a record deleted, or
 * never there). */
#define ITSME_RELAY_ANSWER_GONE 2
/* Anything else: a refusal (itsme_relay_refusal_kind and _message read
 * it), or no answer (status 0). */
#define ITSME_RELAY_ANSWER_REFUSED 3

typedef uint32_t itsme_relay_header ITSME_VALUES(ITSME_RELAY_HEADER_);
/* The header that carries a token ("Bearer <token>"). */
#define ITSME_RELAY_HEADER_AUTHORIZATION 1
/* The header of a 429 or 503 that says how many seconds to wait. */
#define ITSME_RELAY_HEADER_RETRY_AFTER 2
/* The header that names a body's type. */
#define ITSME_RELAY_HEADER_CONTENT_TYPE 3
/* The header that names the answer a request takes. */
#define ITSME_RELAY_HEADER_ACCEPT 4
/* The header of a 405 that lists the path's methods. */
#define ITSME_RELAY_HEADER_ALLOW 5

/* What the relay's `status` (0: no answer came) means for `method` ("GET",
 * "POST", "PUT", "DELETE") on `route`: SUCCESS, GONE or REFUSED.
 * Thread-safe.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, a route this version does not
 * know, a method the route does not serve, a status above 999). */
itsme_result itsme_relay_answer_of(itsme_relay_route route, const char *method,
                                   uint32_t status,
                                   itsme_relay_answer *out_answer);

/* The headers of a request with `method` on `route`, NUL-terminated: one a
 * line, "Name: value", lines separated by CRLF ("\r\n"), no CRLF after the
 * last.  They are: the answer taken (JSON); `token`'s Authorization where
 * the route takes a token (`token` NULL: none); the type of the bytes the
 * request carries (a message, a record).
 * Thread-safe.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, a route this version does not
 * know, a method the route does not serve, a token that is not 43
 * base64url characters), ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_relay_request_headers(itsme_relay_route route,
                                         const char *method,
                                         const char *token ITSME_OPTIONAL,
                                         char *out, size_t cap,
                                         size_t *out_len);

/* The error kind the relay's answer `body` names ("not-found",
 * "rate-limited", ...), NUL-terminated; when it names none (a proxy's page),
 * the kind `status` stands for if it stands for one (404 "not-found", 429
 * "rate-limited"), else empty (400, 409, 503, no answer).  `status` is the
 * answer's (0: none came).
 * Thread-safe.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL with len > 0, a status above 999),
 * ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_relay_refusal_kind(uint32_t status, const uint8_t *body,
                                      size_t len, char *out, size_t cap,
                                      size_t *out_len);

/* The relay's refusal as a line for a person, NUL-terminated: the message
 * its answer `body` gives (one line, at most 300 characters and "..."), or
 * one that names the status ("the relay answered 502"; "the relay did not
 * answer" for status 0).
 * Thread-safe.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL with len > 0, a status above 999),
 * ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_relay_refusal_message(uint32_t status, const uint8_t *body,
                                         size_t len, char *out, size_t cap,
                                         size_t *out_len);

/* What the body of a record's successful PUT (docs/PROTOCOL.md 15.4) says:
 * the delete token of a new record (43 base64url characters and the NUL,
 * given this once: keep it), or an empty text (only the NUL, *out_len 1)
 * when these very bytes were stored under the ID already.
 * Thread-safe.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL with len > 0),
 * ITSME_E_MALFORMED_MESSAGE (neither: not the relay's answer),
 * ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_relay_record_stored(const uint8_t *body, size_t len,
                                       char *out, size_t cap, size_t *out_len);

/* The name of `header` as the relay spells it ("Retry-After"),
 * NUL-terminated.
 * Thread-safe.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, a header this version does not
 * know), ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_relay_header_name(itsme_relay_header header, char *out,
                                     size_t cap, size_t *out_len);

/* ------------------------------------------------------------------------
 * The invite-mailbox driver (docs/PROTOCOL.md 16.5)
 *
 * An itsme_mailbox_session carries an invite exchange (not a real-time
 * one) through the relay's invite mailbox (15.2).  It does no I/O: it says
 * which HTTP request to make next and takes the relay's answer, so every
 * host follows the same rule (create or accept, post, fetch and feed in
 * order skipping what was seen, carry the decisions, end the invite).
 *
 * The host runs it in steps:
 *
 *   itsme_mailbox_session_begin(s, wait)
 *   loop: itsme_mailbox_session_next_request(s, &request)
 *         IDLE: the step is over (show the state, step again later);
 *         DONE: nothing more to do on the relay
 *         else: itsme_mailbox_session_request_method / _request_path /
 *               _request_headers / _request_body, make the request, then
 *               itsme_mailbox_session_answer(s, status, body, len, now, &outcome)
 *
 * Requests: CREATE and ACCEPT are POSTs without a token; POST is a POST of
 * the request body; FETCH a GET; DELETE a DELETE; each after the create or
 * accept carries "Authorization: Bearer <token>".  A fetch may be held by
 * the relay for `wait` seconds: give the request that much more time.
 * Once the SAS is ready the host confirms or rejects the exchange as
 * usual; the next steps post the decision and fetch the peer's, after which
 * the host calls itsme_exchange_settle.
 *
 * A message the exchange refuses makes itsme_mailbox_session_answer return
 * the exchange's error (the exchange has failed); the next request is
 * DELETE, so that the other side fails too: make it.  An invite that is
 * gone (404) rejects the pending exchange and sets the outcome
 * INVITE_ENDED; a conflict (409) to a create or an accept sets CONFLICT.
 * Any other failure ends the step and changes nothing (STEP_ENDED).
 *
 * Between steps either side may go offline: save itsme_mailbox_session_save
 * (JSON, the form the Python binding's InviteSession.to_dict and the relay
 * client's InviteSession.SavedState use) with the sealed exchange, after
 * every step, and later itsme_mailbox_session_resume with the restored
 * exchange.  The saved state and itsme_mailbox_session_token hold this
 * side's relay token: keep them as privately as the sealed exchange.
 *
 * Thread safety: an itsme_mailbox_session must not be used by two threads
 * at once, and its exchange is used under the exchange's identity lock.
 * It keeps its exchange alive.
 * ---------------------------------------------------------------------- */

typedef struct itsme_mailbox_session itsme_mailbox_session;

typedef uint32_t itsme_mailbox_request ITSME_VALUES(ITSME_MAILBOX_REQUEST_);
/* POST /v1/invites/{id}: the relay answers 201 with the inviter's token. */
#define ITSME_MAILBOX_REQUEST_CREATE 1
/* POST /v1/invites/{id}/accept: 200 with the invitee's token. */
#define ITSME_MAILBOX_REQUEST_ACCEPT 2
/* POST /v1/invites/{id}/messages with the request body: 201. */
#define ITSME_MAILBOX_REQUEST_POST 3
/* GET /v1/invites/{id}/messages?after=N&wait=W: 200. */
#define ITSME_MAILBOX_REQUEST_FETCH 4
/* DELETE /v1/invites/{id}: 204 (404 is as good). */
#define ITSME_MAILBOX_REQUEST_DELETE 5
/* Nothing more in this step: begin another later. */
#define ITSME_MAILBOX_REQUEST_IDLE 6
/* Nothing more to do on the relay, ever. */
#define ITSME_MAILBOX_REQUEST_DONE 7

typedef uint32_t itsme_mailbox_outcome ITSME_VALUES(ITSME_MAILBOX_OUTCOME_);
/* Go on: ask for the next request. */
#define ITSME_MAILBOX_OUTCOME_PROCEED 1
/* The invite is gone (ended by the other side, or expired); the exchange
 * was rejected if it was still pending: start a new one. */
#define ITSME_MAILBOX_OUTCOME_INVITE_ENDED 2
/* The invite ID is taken (inviter) or someone else accepted the invite
 * (invitee); the exchange was rejected if it was still pending. */
#define ITSME_MAILBOX_OUTCOME_CONFLICT 3
/* The relay refused the request or did not answer (busy, rate-limiting,
 * unreachable): the step ended and nothing changed; begin another later.
 * itsme_relay_refusal_kind and _message read what the relay said. */
#define ITSME_MAILBOX_OUTCOME_STEP_ENDED 4

/* A new session for `exchange`, an invite exchange.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL, or not
 * an invite exchange: a real-time one goes through a room). */
itsme_result itsme_mailbox_session_new(itsme_exchange *exchange,
                                       itsme_mailbox_session **out);

/* A session resumed from `saved` (the JSON of itsme_mailbox_session_save,
 * of the Python binding or of the relay client) with `exchange` restored
 * from the seal saved at the same time.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL, not an
 * invite exchange, a state of another exchange, of an unknown version, or
 * malformed; longer than ITSME_TEXT_MAX bytes). */
itsme_result itsme_mailbox_session_resume(itsme_exchange *exchange,
                                          const char *saved,
                                          itsme_mailbox_session **out);

/* Releases a session (not its exchange, which the caller frees as usual).
 * Accepts NULL. */
void itsme_mailbox_session_free(itsme_mailbox_session *session);

/* Copies the detail of the last failure of a call on this session.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_mailbox_session_last_error(
    const itsme_mailbox_session *session, char *buf, size_t cap,
    size_t *out_len);

/* Starts a step; its fetch may be held `wait` seconds (0 to 30) on the
 * relay.  A step under way goes on with the new wait.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, wait above 30). */
itsme_result itsme_mailbox_session_begin(itsme_mailbox_session *session,
                                         uint32_t wait);

/* The request to make next (ITSME_MAILBOX_REQUEST_*).  Asking again
 * before answering gives the same request.
 * Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_mailbox_session_next_request(
    itsme_mailbox_session *session, itsme_mailbox_request *out_request);

/* The path and query of the pending request, NUL-terminated
 * ("/v1/invites/<id>/messages?after=3&wait=30"), to append to the relay's
 * base URL.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE (no request
 * pending), ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_mailbox_session_request_path(
    const itsme_mailbox_session *session, char *out, size_t cap,
    size_t *out_len);

/* The method of the pending request, NUL-terminated ("POST", "GET",
 * "DELETE").
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE (no request
 * pending), ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_mailbox_session_request_method(
    const itsme_mailbox_session *session, char *out, size_t cap,
    size_t *out_len);

/* The headers of the pending request, NUL-terminated, as
 * itsme_relay_request_headers writes them: this side's token after the
 * create or accept, the type of a POST's message, the answer taken.  They
 * hold the relay token: never log them.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE (no request
 * pending), ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_mailbox_session_request_headers(
    const itsme_mailbox_session *session, char *out, size_t cap,
    size_t *out_len);

/* The body of the pending request: the message of a POST (at most
 * ITSME_REMOTE_MESSAGE_MAX bytes), empty (*out_len 0) for the others.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE (no request
 * pending), ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_mailbox_session_request_body(
    const itsme_mailbox_session *session, uint8_t *out, size_t cap,
    size_t *out_len);

/* This side's relay token (43 characters and the NUL), for the
 * Authorization header of every request after the create or accept.  A
 * secret towards everyone but the relay: never log it.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_NOT_FOUND (none yet),
 * ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_mailbox_session_token(const itsme_mailbox_session *session,
                                         char *out, size_t cap,
                                         size_t *out_len);

/* Takes the relay's answer to the pending request: its HTTP `status` (0
 * when none came: the relay unreachable, a timeout) and `body` (NULL with
 * len 0 when empty); `now` is passed to the exchange for the messages
 * fetched.  404 ends the invite (outcome INVITE_ENDED), 409 to a create or
 * an accept sets CONFLICT, the route's success status is read, anything
 * else ends the step with nothing changed (outcome STEP_ENDED).
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, a time out of range: nothing
 * consumed), ITSME_E_INVALID_STATE (no
 * request pending), ITSME_E_MALFORMED_MESSAGE (a success whose body is not
 * the route's JSON: the step ends, nothing changed), and the exchange's
 * errors for a message it refused (ITSME_E_AUTHENTICATION_FAILED,
 * ITSME_E_MALFORMED_MESSAGE, ...: the exchange has failed, and the next
 * request is DELETE). */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_mailbox_session_answer(itsme_mailbox_session *session,
                                          uint32_t status,
                                          const uint8_t *body, size_t len,
                                          int64_t now,
                                          itsme_mailbox_outcome *out_outcome);

/* Asks to end the invite on the relay (idempotent): the next request is
 * DELETE (none without a token), then DONE.  The inviter may do it once
 * the two people compared the SAS; the invitee's steps do it by themselves.
 * Starts a step if none is under way.  With `give_up` true the messages
 * not yet posted are dropped too, and the session is done after the
 * DELETE whatever the relay answered (an invite it could not end expires
 * there): the host then rejects the exchange (itsme_exchange_reject).
 * Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_mailbox_session_finish(itsme_mailbox_session *session,
                                          bool give_up);

/* The state to save with the sealed exchange after every step: JSON text
 * with the keys version, relay_id, inviter, token, last_seq, unsent, done
 * and, once known, accepted.  Holds the relay token: keep it private.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_mailbox_session_save(itsme_mailbox_session *session,
                                        char *out, size_t cap,
                                        size_t *out_len);


/* ------------------------------------------------------------------------
 * Voice verification (docs/PROTOCOL.md sections 9 and 10)
 *
 * During a call, both people run a session with each other's contact:
 *
 *   itsme_voice_new            plans the session: the next unused window
 *   itsme_voice_timing         countdown until the window begins
 *   itsme_voice_start          at the window: uses it for the contact
 *   itsme_voice_session_id     both read it aloud: same text, same window
 *   itsme_voice_words          this person's five words
 *   itsme_voice_status         whose turn it is to choose a word
 *   itsme_voice_select x 2     the first selector's word, then the other's
 *   itsme_voice_your_code      read aloud, with the tag: "ECHO 512, 47"
 *   itsme_voice_check          what was heard: code and tag
 *
 * A word entered for the other person that is not among their five ends
 * the session (ITSME_E_AUTHENTICATION_FAILED), with no retry; offer all 26
 * words in that picker.  A session lasts until the end of the window after
 * its own (ITSME_E_EXPIRED after that).  A failure is final.  Errors are
 * detailed by itsme_voice_last_error (itsme_voice_new records on the store).
 *
 * Thread safety: an itsme_voice must not be used by two threads at once.
 * It keeps its contact store alive.
 * ---------------------------------------------------------------------- */

typedef struct itsme_voice itsme_voice;

typedef uint32_t itsme_voice_state ITSME_VALUES(ITSME_VOICE_STATE_);
#define ITSME_VOICE_STATE_WAITING 1
#define ITSME_VOICE_STATE_SELECTING 2
#define ITSME_VOICE_STATE_COMPARING 3
#define ITSME_VOICE_STATE_FINISHED 4
#define ITSME_VOICE_STATE_FAILED 5

/* Whose word is next (itsme_voice_status). */
typedef uint32_t itsme_voice_turn ITSME_VALUES(ITSME_VOICE_TURN_);
#define ITSME_VOICE_TURN_NONE 0
#define ITSME_VOICE_TURN_MINE 1
#define ITSME_VOICE_TURN_THEIRS 2

typedef uint32_t itsme_voice_outcome ITSME_VALUES(ITSME_VOICE_OUTCOME_);
/* Code and device tag as expected: the contact is verified (a degraded
 * contact stays degraded until a Security PIN Update). */
#define ITSME_VOICE_OUTCOME_VERIFIED 1
/* The code is right, the tag is not: their device changed.  The contact is
 * now degraded; tell the person. */
#define ITSME_VOICE_OUTCOME_DEVICE_CHANGED 2
/* The code is wrong: not the person, or a mistake.  Nothing changed. */
#define ITSME_VOICE_OUTCOME_MISMATCH 3
/* The code is right; this device holds no device secret for the contact,
 * so the tag was not checked (a new device, or a contact added by
 * itsme_store_add). */
#define ITSME_VOICE_OUTCOME_VERIFIED_TAG_UNCHECKED 4

/* A tag value meaning "unknown" (itsme_voice_their_code when this device
 * holds no device secret for the contact). */
#define ITSME_VOICE_TAG_UNKNOWN 100
/* The words each person has in a session. */
#define ITSME_VOICE_WORD_COUNT 5
/* Buffer size for a code's text: "NOVEMBER 999" and the NUL; and for a
 * session ID: "NOVEMBER 99" and the NUL. */
#define ITSME_VOICE_CODE_SIZE 13
#define ITSME_VOICE_SESSION_ID_SIZE 12

/* The NATO word of index 0 to 25 ("ALFA" ... "ZULU"), static storage; NULL
 * for another index.  Thread-safe; needs no itsme_init(). */
const char *itsme_nato_word(uint32_t index);

/* Seconds in a window (docs/PROTOCOL.md 9.1). */
#define ITSME_WINDOW_SECONDS 30

/* The shortest and the longest call binding, in bytes: a value that both
 * (or all) participants of the host's own call hold, the same for the whole
 * call, that the relay and the call's server never see (docs/PROTOCOL.md
 * 20.1 says which values qualify: for a call of two, the DTLS-SRTP exporter
 * of RFC 5705, label "EXTRACTOR-itsme-call-binding", 32 bytes).
 * itsme_voice_new, itsme_online_verify_new,
 * itsme_online_verify_rendezvous_new and itsme_rollcall_new take one; NULL
 * with length 0 is none.  A verification relayed between two calls then
 * verifies nobody, and a device bound differently is told apart from an
 * impostor.  The library copies the bytes; the caller keeps (and wipes)
 * its own. */
#define ITSME_CALL_BINDING_MIN 16
#define ITSME_CALL_BINDING_MAX 64

/* Sets *out_window to the window of `now`, floor(now / 30): the window
 * itsme_online_verify_new and itsme_pin_update_new take (or the one before,
 * for a host that found no peer in the current one).  The library's one
 * window arithmetic: hosts call this rather than dividing.  Thread-safe.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL, a time
 * before 1970 or after 9999). */
itsme_result itsme_window_of(int64_t now, int64_t *out_window);

/* Plans a session with contact `contact_id` of `store` at `now`.  `binding`
 * (binding_len bytes, ITSME_CALL_BINDING_MIN to _MAX) binds it to the
 * host's own call (docs/PROTOCOL.md 9.7): the session ID and the codes take
 * it, so a device bound differently, or not at all, reads another session
 * ID, and codes repeated from another call fail.  Show beside the session
 * ID that the session is bound.  NULL with 0: not bound.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL, a
 * binding of another length, or empty but not NULL), ITSME_E_NOT_FOUND (no
 * such contact), ITSME_E_DATABASE, and stored-data errors (CORRUPT_DATA,
 * AUTHENTICATION_FAILED). */
itsme_result itsme_voice_new(itsme_store *store, int64_t contact_id,
                             const uint8_t *binding ITSME_OPTIONAL,
                             size_t binding_len, int64_t now,
                             itsme_voice **out);

/* Releases a session and wipes its secrets.  Accepts NULL. */
void itsme_voice_free(itsme_voice *voice);

/* Copies the detail of the last failure of a call on this session.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_voice_last_error(const itsme_voice *voice, char *buf,
                                    size_t cap, size_t *out_len);

/* The state and whose turn it is (ITSME_VOICE_TURN_*; out_turn may be NULL).
 * Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_voice_status(const itsme_voice *voice,
                                itsme_voice_state *out_state,
                                itsme_voice_turn *out_turn ITSME_OPTIONAL);

/* The session's window, the seconds from `now` until it begins (negative
 * once it has) and until the session ends.  Any pointer may be NULL except
 * the handle.
 * Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_voice_timing(const itsme_voice *voice, int64_t now,
                                int64_t *out_window ITSME_OPTIONAL,
                                int64_t *out_starts_in ITSME_OPTIONAL,
                                int64_t *out_ends_in ITSME_OPTIONAL);

/* Starts the session: allowed from 15 s before its window begins (clock
 * skew) and uses the window for the contact in the session's store,
 * atomically.
 * Errors: ITSME_E_INVALID_STATE (too early, or started already),
 * ITSME_E_WINDOW_USED (another session took the window: the session has
 * failed; plan a new one), ITSME_E_EXPIRED, ITSME_E_DATABASE. */
itsme_result itsme_voice_start(itsme_voice *voice, int64_t now);

/* The session ID text to read aloud ("KILO 07"; ITSME_VOICE_SESSION_ID_SIZE).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_voice_session_id(const itsme_voice *voice, char *out,
                                    size_t cap, size_t *out_len);

/* This person's ITSME_VOICE_WORD_COUNT (five) word indices (0-25), sorted,
 * into out[0..4]; *out_len is 5.  Show them as itsme_nato_word() texts.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_voice_words(const itsme_voice *voice, uint8_t *out,
                               size_t cap, size_t *out_len);

/* Enters the next selection (see itsme_voice_status for whose): on my turn,
 * one of my five words; on theirs, the word I heard, from all 26.
 * Errors: ITSME_E_INVALID_STATE (not selecting), ITSME_E_INVALID_ARGUMENT
 * (index above 25, or on my turn a word not among my five: nothing
 * changes), ITSME_E_AUTHENTICATION_FAILED (on their turn, a word not among
 * theirs: the session has failed), ITSME_E_EXPIRED. */
itsme_result itsme_voice_select(itsme_voice *voice, uint32_t word,
                                int64_t now);

/* "Your Code" to read aloud ("ECHO 512") and your device tag (0-99) to say
 * after it.
 * Errors: ITSME_E_INVALID_STATE (no codes yet, or the session failed),
 * BUFFER_TOO_SMALL. */
itsme_result itsme_voice_your_code(const itsme_voice *voice, char *out,
                                   size_t cap, size_t *out_len,
                                   uint32_t *out_tag);

/* "Their Code": what you should hear, and the tag they will say: of their
 * new device secret once this side has committed a Security PIN Update,
 * else of their current one (docs/PROTOCOL.md 10.3); ITSME_VOICE_TAG_UNKNOWN
 * if this device has no device secret of theirs to show.
 * Errors: as itsme_voice_your_code. */
itsme_result itsme_voice_their_code(const itsme_voice *voice, char *out,
                                    size_t cap, size_t *out_len,
                                    uint32_t *out_tag);

/* Checks what was heard (code text, tag 0-99) in constant time, records the
 * outcome on the contact in the session's store, and finishes the session.
 * Errors: ITSME_E_INVALID_STATE (no codes yet), ITSME_E_INVALID_ARGUMENT
 * (a code that does not parse or is longer than ITSME_TYPED_CODE_MAX
 * bytes, a tag above 99: nothing changes), ITSME_E_EXPIRED,
 * ITSME_E_DATABASE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_voice_check(itsme_voice *voice,
                               const char *heard_code, uint32_t heard_tag,
                               int64_t now, itsme_voice_outcome *out_outcome);


/* ------------------------------------------------------------------------
 * The degradation code (docs/PROTOCOL.md section 10.2)
 *
 * After a device change, the person gives each contact a code saying the
 * change is theirs; the contact enters it.  Both functions work on a
 * contact store; errors are detailed by itsme_store_last_error.
 * ---------------------------------------------------------------------- */

/* Buffer size for a degradation code: 24 characters, 5 dashes, the NUL. */
#define ITSME_DEGRADATION_CODE_SIZE 30

/* For the person who changed devices: draws a new interim device secret for
 * contact `contact_id` (rng NULL: the operating system), stores it as this
 * device's secret for the contact, and writes the code to send them
 * ("ABCD-EFGH-IJKL-MNOP-QRST-UVWX").  Each call draws a new secret and only
 * the latest code matches this device's tags: an older code is still
 * accepted by the contact, whose next verification then reports a changed
 * device again.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_NOT_FOUND, ITSME_E_INVALID_STATE
 * (a contact awaiting the peer's confirmation, docs/PROTOCOL.md 8.1),
 * BUFFER_TOO_SMALL (nothing is drawn or stored then), ITSME_E_DATABASE. */
itsme_result itsme_store_degradation_code(itsme_store *store,
                                          int64_t contact_id,
                                          itsme_random *rng, char *out,
                                          size_t cap, size_t *out_len);

/* For the contact: checks the code the other person sent (any case, spaces
 * and '-' ignored) in constant time, as a typed secret under the attempt
 * limiter.  A right code stores their interim device secret and marks the
 * contact degraded with the change acknowledged; it never restores
 * "verified".
 * Errors: ITSME_E_INVALID_ARGUMENT (not a degradation code, or longer than
 * ITSME_TYPED_CODE_MAX bytes: not counted),
 * ITSME_E_AUTHENTICATION_FAILED (wrong code: counted), ITSME_E_LOCKED (too
 * many wrong codes: wait, see the message), ITSME_E_NOT_FOUND,
 * ITSME_E_SECRET_STORE, ITSME_E_DATABASE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_store_accept_degradation_code(itsme_store *store,
                                                 int64_t contact_id,
                                                 const char *code,
                                                 int64_t now);


/* ------------------------------------------------------------------------
 * Online Verify (docs/PROTOCOL.md section 11)
 *
 * Two people who are apart let their devices prove, through a two-party
 * relay room, that each holds the seed; the device tags are checked inside
 * the encrypted session; both read a SAS aloud.  No window is used up.
 * The host joins the room named by itsme_online_verify_room (current
 * window; if no peer comes, a second session for the window before), moves
 * the messages, shows the SAS, and confirms.  A failure is final.  Errors
 * are detailed by itsme_online_verify_last_error (itsme_online_verify_new
 * records on the store).
 *
 * Thread safety: an itsme_online_verify must not be used by two threads at
 * once.  It keeps its contact store alive.
 * ---------------------------------------------------------------------- */

typedef struct itsme_online_verify itsme_online_verify;

typedef uint32_t itsme_online_verify_state ITSME_VALUES(ITSME_ONLINE_VERIFY_STATE_);
#define ITSME_ONLINE_VERIFY_STATE_RUNNING 1
#define ITSME_ONLINE_VERIFY_STATE_COMPARE_SAS 2
#define ITSME_ONLINE_VERIFY_STATE_CONFIRMED 3
#define ITSME_ONLINE_VERIFY_STATE_REJECTED 4
#define ITSME_ONLINE_VERIFY_STATE_FAILED 5
/* The peer's device proved it holds the seed, but one of the two sessions
 * is bound to a call and the other is not (docs/PROTOCOL.md 11.4): final,
 * nothing recorded, no SAS.  Say so: verify with both bound, or neither. */
#define ITSME_ONLINE_VERIFY_STATE_BINDING_DIFFERS 6
/* The peer's device proved it holds the seed, but it is bound to another
 * call than this one (11.4): final, nothing recorded, no SAS.  Warn: the
 * person on this call may not be the contact (someone may be relaying
 * between two calls). */
#define ITSME_ONLINE_VERIFY_STATE_OTHER_CALL 7

/* Buffer size for a room name: 32 hex digits and the NUL. */
#define ITSME_ROOM_NAME_SIZE 33
/* Longest Online Verify message (a PROOF carrying a profile reference). */
#define ITSME_ONLINE_VERIFY_MESSAGE_MAX 114

/* Starts a session with contact `contact_id` in the room of `window`, which
 * is floor(now / 30) or the one before; rng NULL: the operating system.
 * `binding` (binding_len bytes, ITSME_CALL_BINDING_MIN to _MAX) binds it to
 * the host's own call (docs/PROTOCOL.md 11.4): a peer bound differently
 * ends the session in ITSME_ONLINE_VERIFY_STATE_BINDING_DIFFERS or
 * _OTHER_CALL once its PROOF is checked, never as a failure.  NULL with 0:
 * not bound.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL, another
 * window, a negative one: in window 0 there is none before; a binding of
 * another length, or empty but not NULL), ITSME_E_NOT_FOUND,
 * ITSME_E_DATABASE. */
itsme_result itsme_online_verify_new(itsme_store *store, int64_t contact_id,
                                     int64_t window,
                                     const uint8_t *binding ITSME_OPTIONAL,
                                     size_t binding_len, itsme_random *rng,
                                     int64_t now, itsme_online_verify **out);

/* Releases a session and wipes its secrets.  Accepts NULL. */
void itsme_online_verify_free(itsme_online_verify *session);

/* Copies the detail of the last failure of a call on this session.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_online_verify_last_error(const itsme_online_verify *session,
                                            char *buf, size_t cap,
                                            size_t *out_len);

/* The session's state.  Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_online_verify_status(const itsme_online_verify *session,
                                        itsme_online_verify_state *out_state);

/* The relay room's name (32 lowercase hex digits and the NUL).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_online_verify_room(const itsme_online_verify *session,
                                      char *out, size_t cap, size_t *out_len);

/* The next message to send, removed from the queue on success; ITSME_OK
 * with *out_len = 0 when there is none.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL (nothing
 * removed). */
itsme_result itsme_online_verify_next_outgoing(itsme_online_verify *session,
                                               uint8_t *out, size_t cap,
                                               size_t *out_len);

/* Feeds one message from the peer.  Check the state after each: the
 * peer's PROOF moves the session to ITSME_ONLINE_VERIFY_STATE_COMPARE_SAS,
 * or (ITSME_OK too) to _BINDING_DIFFERS or _OTHER_CALL when the two devices
 * are bound differently.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL), ITSME_E_INVALID_STATE (failed,
 * or the messages are complete), and, ending the session as failed:
 * ITSME_E_MALFORMED_MESSAGE (malformed, out of order, received twice),
 * ITSME_E_AUTHENTICATION_FAILED (commitment, tag or proof wrong: not the
 * person, or a tampered or replayed message), ITSME_E_INVALID_KEY (a
 * reflected key or challenge, a low-order key), ITSME_E_EXPIRED (more than
 * 10 minutes). */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_online_verify_receive(itsme_online_verify *session,
                                         const uint8_t *bytes, size_t len,
                                         int64_t now);

/* The SAS to read aloud, once both proofs are checked
 * (ITSME_SHORT_CODE_SIZE).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE,
 * ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_online_verify_sas(const itsme_online_verify *session,
                                     char *out, size_t cap, size_t *out_len);

/* The SAS matched: records the outcome (ITSME_VOICE_OUTCOME_VERIFIED,
 * _DEVICE_CHANGED or _VERIFIED_TAG_UNCHECKED) on the contact in the
 * session's store as voice verification does, and sets *out_outcome.
 * Errors: ITSME_E_INVALID_STATE (no SAS yet), ITSME_E_INVALID_ARGUMENT
 * (NULL), ITSME_E_EXPIRED, ITSME_E_DATABASE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_online_verify_confirm(itsme_online_verify *session,
                                         int64_t now,
                                         itsme_voice_outcome *out_outcome);

/* The SAS differed, or the person gave up: nothing is recorded.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE (already finished
 * or failed). */
itsme_result itsme_online_verify_reject(itsme_online_verify *session);

/* Sends the reference of this person's profile record (docs/PROTOCOL.md
 * 18.3: ITSME_PROFILE_REFERENCE_BYTES, from itsme_profile_reference)
 * inside this session's PROOF, encrypted for the peer.  Call before the
 * PROOF is made, that is before feeding the peer's KEY message: right after
 * itsme_online_verify_new is safe.  Calling again replaces it.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, reference_len not 32),
 * ITSME_E_INVALID_STATE (the PROOF is made already, or the session has
 * failed). */
itsme_result itsme_online_verify_share_profile(itsme_online_verify *session,
                                               const uint8_t *reference,
                                               size_t reference_len);

/* The profile reference the peer sent in its PROOF
 * (ITSME_PROFILE_REFERENCE_BYTES), once the SAS is confirmed
 * (ITSME_ONLINE_VERIFY_STATE_CONFIRMED): fetch the record it names and open it
 * with itsme_profile_open.  A secret: wipe it when done.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL,
 * ITSME_E_INVALID_STATE (not confirmed), ITSME_E_NOT_FOUND (the peer sent
 * none). */
itsme_result itsme_online_verify_peer_profile(
    const itsme_online_verify *session, uint8_t *out, size_t cap,
    size_t *out_len);

/* ------------------------------------------------------------------------
 * The Online Verify room rule (docs/PROTOCOL.md 11.1)
 *
 * An itsme_online_verify_rendezvous makes the two sessions with a contact
 * (the current window's and the previous one's) and says which rooms to
 * be in and which session goes on; the host joins the rooms and reports
 * what it sees:
 *
 *   itsme_online_verify_rendezvous_new        both sessions, from rng
 *   itsme_online_verify_rendezvous_room_count / _room   rooms to be in
 *   join each; its first event: peer-joined ->
 *       itsme_online_verify_rendezvous_peer_joined (the session to run)
 *   else itsme_online_verify_rendezvous_alone (the previous window's room
 *       is to be joined too: ask for the rooms again)
 *   later events in either room: the first peer-joined picks that room
 *
 * The host then runs the chosen session in that room (as any
 * itsme_online_verify) and leaves the other room.
 *
 * Thread safety: an itsme_online_verify_rendezvous must not be used by two
 * threads at once, nor at the same time as the session handles it gave.
 * It keeps its contact store alive.
 * ---------------------------------------------------------------------- */

typedef struct itsme_online_verify_rendezvous itsme_online_verify_rendezvous;

/* Makes the sessions with contact `contact_id` for the window of `now` and
 * the one before, drawn from `rng` (NULL: the operating system) in that
 * order, both bound to `binding` as itsme_online_verify_new says (NULL with
 * 0: not bound).
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL),
 * ITSME_E_NOT_FOUND, ITSME_E_DATABASE, and the errors of
 * itsme_online_verify_new. */
itsme_result itsme_online_verify_rendezvous_new(
    itsme_store *store, int64_t contact_id,
    const uint8_t *binding ITSME_OPTIONAL, size_t binding_len,
    itsme_random *rng, int64_t now, itsme_online_verify_rendezvous **out);

/* Releases a rendezvous; the session handles it gave stay valid until
 * freed themselves.  Accepts NULL. */
void itsme_online_verify_rendezvous_free(
    itsme_online_verify_rendezvous *rendezvous);

/* Copies the detail of the last failure of a call on this rendezvous.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_online_verify_rendezvous_last_error(
    const itsme_online_verify_rendezvous *rendezvous, char *buf, size_t cap,
    size_t *out_len);

/* How many rooms to be in now: 1 at first, 2 once the host reported it was
 * alone in the current one, 1 once a session was chosen.
 * Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_online_verify_rendezvous_room_count(
    const itsme_online_verify_rendezvous *rendezvous, size_t *out_count);

/* The room `index` (from 0, in order of joining) to be in now
 * (ITSME_ROOM_NAME_SIZE).
 * Errors: ITSME_E_INVALID_ARGUMENT (index out of range),
 * ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_online_verify_rendezvous_room(
    const itsme_online_verify_rendezvous *rendezvous, size_t index,
    char *out, size_t cap, size_t *out_len);

/* The session of candidate `index`: 0 the current window's, 1 the
 * previous one's, for what must be done before any message (such as
 * itsme_online_verify_share_profile).  A new reference to the same
 * session: free it with itsme_online_verify_free.
 * Errors: ITSME_E_INVALID_ARGUMENT (index above 1). */
itsme_result itsme_online_verify_rendezvous_session(
    itsme_online_verify_rendezvous *rendezvous, size_t index,
    itsme_online_verify **out_session);

/* The first event of the current window's room was not the peer's arrival:
 * the previous window's room is to be joined too.  No effect for another
 * room or once a session was chosen.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, a text over ITSME_TEXT_MAX). */
itsme_result itsme_online_verify_rendezvous_alone(
    itsme_online_verify_rendezvous *rendezvous, const char *room);

/* The peer joined `room`: the first report chooses that room's session,
 * later ones give the session chosen.  *out_session is a new reference to
 * it: run it in that room, free it with itsme_online_verify_free, and
 * leave the other room.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, not a room to be in). */
itsme_result itsme_online_verify_rendezvous_peer_joined(
    itsme_online_verify_rendezvous *rendezvous, const char *room,
    itsme_online_verify **out_session);


/* ------------------------------------------------------------------------
 * The room driver (docs/PROTOCOL.md 16.5, 11.1, 17.3, 15.3)
 *
 * An itsme_room_session carries a real-time exchange, an Online Verify
 * session or a live device transfer through a relay room.  It does no I/O: the host joins the
 * WebSocket at itsme_room_session_path (below the relay's base URL), moves
 * frames and keeps time; the session says what the host does next and takes
 * what the room sends, as the relay sent it, so every host follows the same
 * rules:
 *
 *   loop: itsme_room_session_next(s, now, &step)
 *     SEND     itsme_room_session_message; send it as one binary message;
 *              then itsme_room_session_sent (or _send_failed when the
 *              connection failed meanwhile)
 *     RECEIVE  wait for the room: a text frame goes to
 *              itsme_room_session_text, a binary one to _binary, the end of
 *              the connection to _closed (with its close code, 0 when none
 *              came), the host's deadline passing to _timed_out
 *     DECIDE   (an exchange) the SAS is ready and the contact saved: the
 *              person compares it; itsme_exchange_confirm or _reject (a
 *              transfer: itsme_transfer_confirm or _reject).  From here on
 *              ping the room every ITSME_ROOM_PING_INTERVAL seconds (a
 *              WebSocket ping), so that it does not close as idle
 *     CHECK_PEER  as RECEIVE, but for at most ITSME_ROOM_PEER_CHECK_WAIT_MS
 *              milliseconds, then itsme_room_session_timed_out: the peer is
 *              still there (a transfer's sender, once its person confirmed:
 *              nothing goes to a room the new device left)
 *     REJOIN   the relay closed the room while this side waited alone (a
 *              quiet room): after ITSME_ROOM_REJOIN_PAUSE_MS milliseconds
 *              join the path again, then itsme_room_session_rejoined; the
 *              host's deadline still runs (a transfer)
 *     LEAVE    close the connection, then itsme_room_session_left
 *     DONE     over: itsme_room_session_failure says whether the room ended
 *              it early, and how; the flow's state says the rest
 *
 * The rules: the inviter sends once the peer is in the room; each frame goes
 * to the flow in order and what it answers is sent; a frame the flow refuses
 * fails it (itsme_room_session_binary returns the flow's error) and the next
 * step is LEAVE, so that the peer fails too.  A room that fails before the
 * SAS (the peer left, a refused frame, the connection closed, the deadline)
 * rejects a pending exchange that was not saved, and a running Online
 * Verify session.  After the SAS both sides stay until both decisions
 * passed: this side's is sent, the peer's awaited (a frame refused then is
 * skipped), and the decision is settled (itsme_exchange_settle is not
 * needed).  The peer leaving, or the room closing, before the peer's
 * decision counts as none: the exchange is rejected; the deadline passing
 * then rejects it too, with the failure TIMEOUT.  An Online Verify session
 * ends at its SAS (its decision needs no room): the room is left.
 *
 * A transfer (itsme_room_session_for_transfer, with the transfers below):
 * the old device sends its key once the new device is in the room; both compare the SAS (DECIDE); the old device, once confirmed,
 * checks that the new one is still there (CHECK_PEER), sends the identity
 * and leaves; the new device takes every frame (those that come while its
 * person decides are kept by the transfer) until the identity is in, then
 * leaves.  The peer leaving, a refused frame, the room closing or the
 * deadline before that ends the transfer (a running one is rejected;
 * nothing is sent or installed) and sets the failure.  A room closed while
 * this side waits alone is joined again (REJOIN).
 *
 * Thread safety: an itsme_room_session must not be used by two threads at
 * once; its calls run under the lock of its flow (the exchange's identity
 * lock, the Online Verify session's lock, the transfer's lock).  It keeps
 * its flow alive.
 * ---------------------------------------------------------------------- */

typedef struct itsme_room_session itsme_room_session;

typedef uint32_t itsme_room_step ITSME_VALUES(ITSME_ROOM_STEP_);
/* Send itsme_room_session_message as one binary message. */
#define ITSME_ROOM_STEP_SEND 1
/* Wait for what the room sends next. */
#define ITSME_ROOM_STEP_RECEIVE 2
/* The person compares the SAS: confirm or reject the exchange. */
#define ITSME_ROOM_STEP_DECIDE 3
/* Close the connection, then itsme_room_session_left. */
#define ITSME_ROOM_STEP_LEAVE 4
/* Nothing more. */
#define ITSME_ROOM_STEP_DONE 5
/* Read the room for at most ITSME_ROOM_PEER_CHECK_WAIT_MS, then
 * itsme_room_session_timed_out. */
#define ITSME_ROOM_STEP_CHECK_PEER 6
/* Join the room again after ITSME_ROOM_REJOIN_PAUSE_MS, then
 * itsme_room_session_rejoined. */
#define ITSME_ROOM_STEP_REJOIN 7

typedef uint32_t itsme_room_failure ITSME_VALUES(ITSME_ROOM_FAILURE_);
/* The room did not end the session early. */
#define ITSME_ROOM_FAILURE_NONE 0
/* The other person left the room ("peer-left"). */
#define ITSME_ROOM_FAILURE_PEER_LEFT 1
/* The relay did not forward a frame ("refused"). */
#define ITSME_ROOM_FAILURE_REFUSED 2
/* The room already held two people (close code 4009, "room-full"). */
#define ITSME_ROOM_FAILURE_ROOM_FULL 3
/* The connection ended ("closed"). */
#define ITSME_ROOM_FAILURE_CLOSED 4
/* The host's deadline passed ("timeout"). */
#define ITSME_ROOM_FAILURE_TIMEOUT 5
/* The relay sent what no relay sends ("bad-response"). */
#define ITSME_ROOM_FAILURE_BAD_RESPONSE 6

/* How often the host pings the room from DECIDE on, in seconds. */
#define ITSME_ROOM_PING_INTERVAL 30
/* How long CHECK_PEER reads the room, in milliseconds. */
#define ITSME_ROOM_PEER_CHECK_WAIT_MS 200
/* How long the host waits before REJOIN, in milliseconds. */
#define ITSME_ROOM_REJOIN_PAUSE_MS 500

/* A session for `exchange`, a real-time exchange.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL, or not a
 * real-time exchange: an invite goes through the mailbox). */
itsme_result itsme_room_session_for_exchange(itsme_exchange *exchange,
                                             itsme_room_session **out);

/* A session for `session` in its room.  `peer_present`: the host already
 * saw the peer join (the rendezvous reads each room's first event).
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL). */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_room_session_for_online_verify(itsme_online_verify *session,
                                                  bool peer_present,
                                                  itsme_room_session **out);

/* Releases a session (not its flow, which the caller frees as usual).
 * Accepts NULL. */
void itsme_room_session_free(itsme_room_session *session);

/* Copies the detail of the last failure of a call on this session.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_room_session_last_error(const itsme_room_session *session,
                                           char *buf, size_t cap,
                                           size_t *out_len);

/* The room's path, NUL-terminated ("/v1/rooms/<32 hex digits>"), to append
 * to the relay's base URL (ws:// or wss://).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_room_session_path(const itsme_room_session *session,
                                     char *out, size_t cap, size_t *out_len);

/* What the host does next (ITSME_ROOM_STEP_*).  Asking again before doing
 * it gives the same step.  `now` is the time of the exchange's writes (the
 * contact at the SAS, the settled decision).
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, a time out of range), and the
 * store's errors when the contact or the decision cannot be written
 * (ITSME_E_DATABASE, ...): the exchange was rejected; the next step is
 * LEAVE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_room_session_next(itsme_room_session *session, int64_t now,
                                     itsme_room_step *out_step);

/* The message of the SEND step (at most ITSME_REMOTE_MESSAGE_MAX bytes; a
 * transfer's, ITSME_TRANSFER_MESSAGE_MAX).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE (the step is not
 * SEND), ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_room_session_message(const itsme_room_session *session,
                                        uint8_t *out, size_t cap,
                                        size_t *out_len);

/* The message of the SEND step went out.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE (the step is not
 * SEND). */
itsme_result itsme_room_session_sent(itsme_room_session *session);

/* The connection failed while sending the message of the SEND step.
 * Before the SAS the room has failed (CLOSED); after it, what the peer sent
 * before leaving is still to be read: the next step is RECEIVE.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE (the step is not
 * SEND). */
itsme_result itsme_room_session_send_failed(itsme_room_session *session);

/* A text frame from the relay, as it came (a room's event, JSON).  One that
 * is not a room's event fails the room (BAD_RESPONSE).
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, longer than ITSME_TEXT_MAX). */
itsme_result itsme_room_session_text(itsme_room_session *session,
                                     const uint8_t *text, size_t len);

/* A binary frame from the peer; `now` is passed to the flow.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, a time out of range: nothing
 * consumed), and, before the SAS, the flow's errors for a frame it refuses
 * (ITSME_E_AUTHENTICATION_FAILED, ITSME_E_MALFORMED_MESSAGE, ...: the flow
 * has failed and the next step is LEAVE). */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_room_session_binary(itsme_room_session *session,
                                       const uint8_t *bytes, size_t len,
                                       int64_t now);

/* The connection ended: the relay's close `code` (4009: the room was full),
 * 0 when it ended without one.  Nothing more will arrive.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, a code above 4999). */
itsme_result itsme_room_session_closed(itsme_room_session *session,
                                       uint32_t code);

/* The host's deadline passed while waiting for the room.
 * Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_room_session_timed_out(itsme_room_session *session);

/* The host joined the room again after REJOIN; the next step is RECEIVE.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE (the step is not
 * REJOIN). */
itsme_result itsme_room_session_rejoined(itsme_room_session *session);

/* The host left the room after LEAVE; the next step is DONE.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE (the step is not
 * LEAVE). */
itsme_result itsme_room_session_left(itsme_room_session *session);

/* The host gives up (its own failure, or the person's): a pending exchange
 * is rejected, an Online Verify session or a running transfer too, and the
 * next step is LEAVE.
 * Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_room_session_abandon(itsme_room_session *session);

/* Sets *out_present to true once the peer has been in the room (the relay
 * said so, or the host did with peer_present), else false.  The rendezvous
 * (itsme_online_verify_rendezvous_*) reads it after each room's first event.
 * Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_room_session_peer_present(const itsme_room_session *session,
                                             bool *out_present);

/* Whether and how the room ended the session early (ITSME_ROOM_FAILURE_*;
 * NONE while it runs, and when it ended as its flow did).
 * Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_room_session_failure(const itsme_room_session *session,
                                        itsme_room_failure *out_failure);

/* The failure's name, NUL-terminated, as the relay and the clients name it
 * ("peer-left", "refused", "room-full", "closed", "timeout",
 * "bad-response"; empty for none).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_room_session_failure_kind(const itsme_room_session *session,
                                             char *out, size_t cap,
                                             size_t *out_len);

/* The failure as a line for a person, NUL-terminated (empty for none).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_room_session_failure_message(
    const itsme_room_session *session, char *out, size_t cap,
    size_t *out_len);

/* ------------------------------------------------------------------------
 * Security PIN Update (docs/PROTOCOL.md section 10.3)
 *
 * Two people together replace the device secrets of their contact; this
 * restores a degraded contact.  Both devices show the session code (the
 * host uses it to find the peer over Bluetooth; if none is found, a second
 * update for the window before); the host moves the frames.  The update
 * writes to the contact store as the protocol requires, so stopping at any
 * point leaves both sides able to verify.  A failure is final.  Errors are
 * detailed by itsme_pin_update_last_error (itsme_pin_update_new records on
 * the store).
 *
 * Thread safety: an itsme_pin_update must not be used by two threads at
 * once.  It keeps its contact store alive.
 * ---------------------------------------------------------------------- */

typedef struct itsme_pin_update itsme_pin_update;

typedef uint32_t itsme_pin_update_state ITSME_VALUES(ITSME_PIN_UPDATE_STATE_);
#define ITSME_PIN_UPDATE_STATE_RUNNING 1
/* This side has committed its new secret (the initiator may still have
 * DONE to send: keep calling next_outgoing until it gives nothing). */
#define ITSME_PIN_UPDATE_STATE_DONE 2
#define ITSME_PIN_UPDATE_STATE_FAILED 3

/* Longest PIN Update frame. */
#define ITSME_PIN_UPDATE_FRAME_MAX 66

/* Starts an update with contact `contact_id` in `window` (floor(now / 30)
 * or the one before, never negative); rng NULL: the operating system.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL, another
 * window, a negative one), ITSME_E_NOT_FOUND, ITSME_E_DATABASE. */
itsme_result itsme_pin_update_new(itsme_store *store, int64_t contact_id,
                                  int64_t window, itsme_random *rng,
                                  int64_t now, itsme_pin_update **out);

/* Releases an update and wipes its secrets.  Accepts NULL. */
void itsme_pin_update_free(itsme_pin_update *update);

/* Copies the detail of the last failure of a call on this update.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_pin_update_last_error(const itsme_pin_update *update,
                                         char *buf, size_t cap,
                                         size_t *out_len);

/* The state.  Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_pin_update_status(const itsme_pin_update *update,
                                     itsme_pin_update_state *out_state);

/* The session code both devices show ("ECHO 0042"; ITSME_SHORT_CODE_SIZE).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_pin_update_session_code(const itsme_pin_update *update,
                                           char *out, size_t cap,
                                           size_t *out_len);

/* The next frame to send, removed on success; ITSME_OK with *out_len = 0
 * when there is none.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_pin_update_next_outgoing(itsme_pin_update *update,
                                            uint8_t *out, size_t cap,
                                            size_t *out_len);

/* Feeds one frame from the peer; stores the new secrets when the protocol
 * says so, before the frame that follows them is queued.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE (failed, or done
 * on this side), ITSME_E_DATABASE (a write failed: nothing changed, and the
 * same frame may be fed again), and, ending the update as failed:
 * ITSME_E_MALFORMED_MESSAGE, ITSME_E_AUTHENTICATION_FAILED (a tampered
 * frame, or a peer without the seed), ITSME_E_INVALID_KEY (a reflected
 * key), ITSME_E_EXPIRED (more than 10 minutes). */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_pin_update_receive(itsme_pin_update *update,
                                      const uint8_t *bytes, size_t len,
                                      int64_t now);

/* ------------------------------------------------------------------------
 * Device transfer (docs/PROTOCOL.md section 17)
 *
 * A person moving to a new device takes the identity key, the contacts key
 * and the name along; the device secrets stay behind on purpose, so every
 * contact sees a changed device at the next verification and the
 * degradation code acknowledges it.  Two ways to carry the identity:
 *
 * - A password export: a blob (the file form, at most ITSME_EXPORT_MAX
 *   bytes; with the contact store, itsme_identity_export_with_contacts,
 *   up to ITSME_EXPORT_CONTACTS_MAX more) or its text (the QR form, of the
 *   identity only, "ITSMEXP1:...", at most
 *   ITSME_EXPORT_TEXT_SIZE with the NUL: one QR code).  AES-256-GCM under an
 *   Argon2id key (256 MiB, 3 passes: about a second) from a password the
 *   library generates (ITSME_EXPORT_PASSWORD_GENERATED, 13 characters,
 *   64 bits) or, only where the host insists, one the person chooses
 *   (ITSME_EXPORT_PASSWORD_CHOSEN, at least 8 characters).
 * - A live transfer (itsme_transfer): the new device shows a one-time key
 *   as a QR code, the old device answers, both show a SAS, and the old
 *   device sends the identity only after its person confirms.  No password.
 *
 * Either way the new device gets an itsme_import, which it installs into
 * its secret store and contact store with itsme_import_install.  The
 * contact store comes inside the import (an export with the contacts, a
 * transfer whose sender included them: itsme_import_write_contacts writes
 * it), or moves as a file (a backup or a copy), in place before the
 * install.
 *
 * Thread safety: itsme_import and itsme_transfer handles must not be used
 * by two threads at once.  The free functions are thread-safe.
 * ---------------------------------------------------------------------- */

#define ITSME_EXPORT_PASSWORD_GENERATED 1
#define ITSME_EXPORT_PASSWORD_CHOSEN 2
/* Buffer size for a generated password, "ABCD-EFGH-JKMNP" and the NUL. */
#define ITSME_EXPORT_PASSWORD_SIZE 16
/* Shortest chosen password, in characters. */
#define ITSME_EXPORT_CHOSEN_PASSWORD_MIN 8
/* A buffer size that holds any export blob.  An export is 144 bytes plus
 * the name's length: 272 bytes at most (a name of ITSME_NAME_MAX_BYTES). */
#define ITSME_EXPORT_MAX 272
/* A buffer size that holds any export text with the NUL (the largest text
 * is 372 characters). */
#define ITSME_EXPORT_TEXT_SIZE 373
/* The largest contact store an export or a transfer carries (64 MiB); a
 * larger one is copied as a file instead. */
#define ITSME_EXPORT_CONTACTS_MAX 67108864

/* A new generated export password, "ABCD-EFGH-JKMNP": 13 characters of
 * the invite alphabet (no 0, 1, I, L, O), 64.4 bits, drawn from `rng`
 * (NULL: the operating system).  Show it to the person to copy; it is
 * typed back in any case, with spaces or dashes or neither.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT,
 * ITSME_E_BUFFER_TOO_SMALL (cap < ITSME_EXPORT_PASSWORD_SIZE). */
itsme_result itsme_export_generate_password(itsme_random *rng, char *out,
                                            size_t cap, size_t *out_len);

/* Exports the identity: checks the PIN at `now` (a counted attempt, as
 * itsme_pin_verify), then seals the identity under `password` of
 * `password_kind`, drawing the salt and nonce from `rng` (NULL: the
 * operating system), and writes the blob.  The password and the buffer
 * size are checked before the PIN, so neither costs an attempt: the blob
 * is 144 bytes plus the name's length (ITSME_EXPORT_MAX always fits).
 * Takes about a second (Argon2id, 256 MiB).
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL, an
 * unknown kind, a generated password that is not 13 characters of the
 * alphabet, a chosen one shorter than 8 characters),
 * ITSME_E_BUFFER_TOO_SMALL, and those of itsme_pin_verify (ITSME_E_NOT_FOUND
 * if no PIN is set, ITSME_E_INVALID_PIN, ITSME_E_WRONG_PIN, ITSME_E_LOCKED),
 * ITSME_E_OUT_OF_MEMORY.  Details go to the identity's last error. */
itsme_result itsme_identity_export(itsme_identity *identity, const char *pin,
                                   int64_t now, const char *password,
                                   uint32_t password_kind, itsme_random *rng,
                                   uint8_t *out, size_t cap, size_t *out_len);

/* Exports the identity and its contact store in one blob (format version
 * 2, docs/PROTOCOL.md 17.1): as itsme_identity_export, with a consistent
 * copy of `contacts` (a store of this identity; SQLite's VACUUM INTO,
 * safe while it is in use) sealed along.  The blob is a file only: it has
 * no text form (itsme_export_to_text refuses it) and is 144 bytes plus the
 * name's length plus the store's; with a small buffer the call returns
 * ITSME_E_BUFFER_TOO_SMALL and the size in *out_len, before the PIN (the
 * copy is made again by the next call).  Open it with itsme_import_open;
 * itsme_import_write_contacts writes the store on the new device.
 * Errors: those of itsme_identity_export, and ITSME_E_INVALID_ARGUMENT
 * (`contacts` NULL, or a store larger than ITSME_EXPORT_CONTACTS_MAX),
 * ITSME_E_WRONG_IDENTITY (a store of another identity),
 * ITSME_E_DATABASE (the copy could not be made).  `contacts` is only
 * read; the call may run alongside other calls on it. */
itsme_result itsme_identity_export_with_contacts(
    itsme_identity *identity, const char *pin, int64_t now,
    const char *password, uint32_t password_kind, itsme_store *contacts,
    itsme_random *rng, uint8_t *out, size_t cap, size_t *out_len);

/* The text form of an export blob ("ITSMEXP1:" and unpadded base64url).
 * The blob's header is checked first.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL, and those of
 * itsme_export_header. */
itsme_result itsme_export_to_text(const uint8_t *blob, size_t len, char *out,
                                  size_t cap, size_t *out_len);

/* The blob from an export's text (white space around it ignored).
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL; longer than ITSME_EXPORT_TEXT_MAX
 * bytes; another text version
 * "ITSMEXPn:"; or text shaped like an export of the source app, which is
 * never accepted: its version 3 used an unsalted SHA-256 of a PIN and its
 * version 5 PBKDF2.  Recognised as base64 or base64url of at least 64
 * bytes, or JSON naming version 3; the last error says why),
 * ITSME_E_MALFORMED_MESSAGE (any other text that is not an export's, or
 * damaged base64url),
 * ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_export_from_text(const char *text, uint8_t *out,
                                    size_t cap, size_t *out_len);

/* Reads and range-checks an export's header without any key derivation:
 * the Argon2id passes and memory (KiB) it asks for and its password kind.
 * Accepted: 3 to 10 passes over 256 MiB to 1 GiB.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL; an unknown format version, key
 * derivation or password kind; parameters outside the accepted window),
 * ITSME_E_MALFORMED_MESSAGE (truncated, or not an export). */
itsme_result itsme_export_header(const uint8_t *blob, size_t len,
                                 uint32_t *out_passes,
                                 uint32_t *out_memory_kib,
                                 uint32_t *out_password_kind);

typedef struct itsme_import itsme_import;

/* Opens an export with `password` on the new device.  The header is
 * checked first (as itsme_export_header: a refused header costs nothing),
 * then the password, as a counted attempt under the export-password
 * limiter kept in `store` (the rule of the PIN: 5 failures lock for 5
 * minutes, then twice as long for each further one, up to 24 hours), then
 * the contents (the fingerprint must match the key).
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL; the
 * header's; a password not of the kind the header names),
 * ITSME_E_MALFORMED_MESSAGE, ITSME_E_AUTHENTICATION_FAILED (a wrong
 * password, or an altered export: counted), ITSME_E_LOCKED (not checked,
 * not counted; see itsme_import_status), ITSME_E_CORRUPT_DATA,
 * ITSME_E_SECRET_STORE, ITSME_E_OUT_OF_MEMORY.  Details go to the store's
 * last error. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_import_open(itsme_secret_store *store,
                               const uint8_t *blob, size_t len,
                               const char *password, int64_t now,
                               itsme_import **out);

/* The export-password limiter's state in `store` at `now`, as
 * itsme_pin_status.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_CORRUPT_DATA,
 * ITSME_E_SECRET_STORE. */
itsme_result itsme_import_status(itsme_secret_store *store, int64_t now,
                                 uint32_t *out_failures,
                                 uint64_t *out_wait_seconds);

/* Releases an opened import and wipes its keys.  Accepts NULL. */
void itsme_import_free(itsme_import *import);

/* Copies the detail of the last failure of a call on this import.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_import_last_error(const itsme_import *import, char *buf,
                                     size_t cap, size_t *out_len);

/* The imported identity's fingerprint (ITSME_FINGERPRINT_SIZE).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_import_fingerprint(const itsme_import *import, char *out,
                                      size_t cap, size_t *out_len);

/* The imported identity's display name, NUL-terminated.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_import_name(const itsme_import *import, char *out,
                               size_t cap, size_t *out_len);

/* The size in bytes of the contact store the import carries (an export
 * of format version 2, or a transfer whose sender included it), 0 if none.
 * Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_import_contacts_size(const itsme_import *import,
                                        uint64_t *out_size);

/* Writes the contact store the import carries as a new file at `path`
 * (mode 0600, synced), to pass as `store_path` to itsme_import_check and
 * itsme_import_install, as a copied store file would be.  Nothing is ever
 * overwritten.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL or empty path), ITSME_E_NOT_FOUND
 * (the import carries no store), ITSME_E_ALREADY_EXISTS (something is at
 * `path`), ITSME_E_DATABASE (it could not be written; nothing is left). */
itsme_result itsme_import_write_contacts(itsme_import *import,
                                         const char *path);

/* What installing an import would do on this device. */
typedef struct itsme_import_report {
    /* The caller sets it to sizeof(itsme_import_report). */
    size_t size;
    /* true: installing needs ITSME_IMPORT_REPLACE (another identity is in
     * the secret store, or contacts_unreadable > 0). */
    bool wrong_identity;
    /* The other identity's fingerprint, "unreadable" if its record cannot
     * be read, or "" if there is none (or it is the same identity). */
    char other_fingerprint[ITSME_FINGERPRINT_SIZE];
    /* true if the contact store file exists. */
    bool store_exists;
    /* Contacts the imported contacts key opens, and contacts it cannot
     * (sealed under another key: cleared by a replacing install). */
    uint64_t contacts_readable;
    uint64_t contacts_unreadable;
    /* Contacts with device secrets: every install forgets them all. */
    uint64_t device_secrets;
} itsme_import_report;

/* Looks at `store` and the contact store file at `store_path` (NULL: none;
 * a missing file is fine) as installing would, changing nothing.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_DATABASE (the file is not a
 * contact store), ITSME_E_CORRUPT_DATA, ITSME_E_SECRET_STORE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_import_check(itsme_import *import,
                                itsme_secret_store *store,
                                const char *store_path ITSME_OPTIONAL,
                                itsme_import_report *out_report);

/* Install flag: proceed over a wrong identity (replace the other identity,
 * delete the contacts the imported key cannot read). */
#define ITSME_IMPORT_REPLACE 1

/* Installs the import: saves the identity in `store` (keeping its PIN, if
 * one is set) and makes the contact store at `store_path` (NULL: none) its
 * store, in one transaction: every device secret is forgotten (so every
 * contact sees a changed device at the next verification), and with
 * ITSME_IMPORT_REPLACE the contacts the imported key cannot read are
 * deleted; every other row is kept.  Writes the installed identity to
 * *out_identity (NULL: not wanted).
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, unknown flags),
 * ITSME_E_WRONG_IDENTITY (itsme_import_check reports wrong_identity and
 * flags lack ITSME_IMPORT_REPLACE: nothing was changed), ITSME_E_DATABASE,
 * ITSME_E_CORRUPT_DATA, ITSME_E_SECRET_STORE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_import_install(itsme_import *import,
                                  itsme_secret_store *store,
                                  const char *store_path ITSME_OPTIONAL, uint32_t flags,
                                  itsme_identity **out_identity ITSME_OPTIONAL);

typedef struct itsme_transfer itsme_transfer;

typedef uint32_t itsme_transfer_state ITSME_VALUES(ITSME_TRANSFER_STATE_);
/* Receiver: waiting for the old device's key. */
#define ITSME_TRANSFER_STATE_AWAITING_PEER 1
/* Both keys known: show the SAS for the person to compare. */
#define ITSME_TRANSFER_STATE_COMPARE_SAS 2
/* Receiver: confirmed; the identity (or all of the contact store that
 * comes with it) has not arrived yet. */
#define ITSME_TRANSFER_STATE_AWAITING_IDENTITY 3
/* Sender: the identity is queued.  Receiver: itsme_transfer_take_import. */
#define ITSME_TRANSFER_STATE_DONE 4
#define ITSME_TRANSFER_STATE_REJECTED 5
#define ITSME_TRANSFER_STATE_FAILED 6

/* Buffer size for the offer text ("ITSMETR2:..."), with the NUL. */
#define ITSME_TRANSFER_OFFER_SIZE 76
/* Longest transfer message: a store message of a whole 32 KiB chunk. */
#define ITSME_TRANSFER_MESSAGE_MAX 32786

/* The new device's side: draws a one-time X25519 key and a transfer id
 * from `rng` (NULL: the operating system).  Show itsme_transfer_offer as a
 * QR code, join itsme_transfer_room, and feed what arrives to
 * itsme_transfer_receive.  A transfer lasts at most 10 minutes.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_transfer_new_receiver(itsme_random *rng, int64_t now,
                                         itsme_transfer **out);

/* The old device's side: reads the offer the new device shows, checks the
 * PIN at `now` (a counted attempt, as itsme_pin_verify), and queues its key
 * (itsme_transfer_next_outgoing).  The SAS is known at once.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (an offer
 * longer than ITSME_EXPORT_TEXT_MAX bytes),
 * ITSME_E_MALFORMED_MESSAGE (not an offer; checked before the PIN), those
 * of itsme_pin_verify, ITSME_E_INVALID_KEY (a low-order key).  Details go
 * to the identity's last error. */
itsme_result itsme_transfer_new_sender(itsme_identity *identity,
                                       const char *pin, const char *offer,
                                       itsme_random *rng, int64_t now,
                                       itsme_transfer **out);

/* Releases a transfer and wipes its secrets.  Accepts NULL. */
void itsme_transfer_free(itsme_transfer *transfer);

/* Copies the detail of the last failure of a call on this transfer.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_transfer_last_error(const itsme_transfer *transfer,
                                       char *buf, size_t cap,
                                       size_t *out_len);

/* The transfer's state.  Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_transfer_status(const itsme_transfer *transfer,
                                   itsme_transfer_state *out_state);

/* The offer text (ITSME_TRANSFER_OFFER_SIZE) the receiver shows as a QR
 * code; on the sender, the offer it read.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_transfer_offer(const itsme_transfer *transfer, char *out,
                                  size_t cap, size_t *out_len);

/* The relay room both devices join (ITSME_ROOM_NAME_SIZE).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_transfer_room(const itsme_transfer *transfer, char *out,
                                 size_t cap, size_t *out_len);

/* A room session (the room driver above) that carries `transfer` through
 * its room, on either device: it says when to send, to let the person
 * decide, to check that the new device is still there and to leave, and
 * takes what the room sends as the relay sent it.  Release it with
 * itsme_room_session_free; it keeps the transfer alive.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL). */
itsme_result itsme_room_session_for_transfer(itsme_transfer *transfer,
                                             itsme_room_session **out);

/* The next message to send (sender only), removed on success; ITSME_OK
 * with *out_len = 0 when there is none.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL (nothing
 * removed). */
itsme_result itsme_transfer_next_outgoing(itsme_transfer *transfer,
                                          uint8_t *out, size_t cap,
                                          size_t *out_len);

/* Feeds one message from the old device (receiver only).
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL), ITSME_E_INVALID_STATE (a sender,
 * or the transfer is over), and, ending the transfer as failed:
 * ITSME_E_MALFORMED_MESSAGE (malformed, out of order, twice),
 * ITSME_E_AUTHENTICATION_FAILED (the identity message does not open:
 * tampered, or from another sender), ITSME_E_INVALID_KEY (a low-order or
 * reflected key), ITSME_E_CORRUPT_DATA (the contents are malformed),
 * ITSME_E_EXPIRED (more than 10 minutes). */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_transfer_receive(itsme_transfer *transfer,
                                    const uint8_t *bytes, size_t len,
                                    int64_t now);

/* The SAS both devices show (ITSME_SHORT_CODE_SIZE).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE (not known yet,
 * or the transfer failed), ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_transfer_sas(const itsme_transfer *transfer, char *out,
                                size_t cap, size_t *out_len);

/* Sender, before confirming: sends the contact store too.  A consistent
 * copy of `contacts` (a store of the sender's identity) is made now and,
 * at the confirmation, sealed after the identity in chunks of 32 KiB
 * (docs/PROTOCOL.md 17.3); the receiver's import then carries it
 * (itsme_import_contacts_size, itsme_import_write_contacts).
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, a store larger than
 * ITSME_EXPORT_CONTACTS_MAX), ITSME_E_INVALID_STATE (a receiver, or no longer
 * comparing the SAS), ITSME_E_WRONG_IDENTITY (a store of another identity
 * than the sender's), ITSME_E_DATABASE (the copy could not be made). */
itsme_result itsme_transfer_include_contacts(itsme_transfer *transfer,
                                             itsme_store *contacts);

/* The SAS matched.  Sender: seals and queues the identity (and the
 * contact store, if included: up to 2,049 messages in all).  Receiver:
 * opens what has arrived, else waits for it.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE (no SAS to
 * confirm), ITSME_E_EXPIRED, and, ending the transfer as failed, those of
 * itsme_transfer_receive for an identity that arrived early. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_transfer_confirm(itsme_transfer *transfer, int64_t now);

/* The SAS differed, or the person gave up: nothing is sent or kept.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE (already over). */
itsme_result itsme_transfer_reject(itsme_transfer *transfer);

/* The received identity as an import (receiver, ITSME_TRANSFER_STATE_DONE), to
 * check and install like an opened export.  Once only.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE. */
itsme_result itsme_transfer_take_import(itsme_transfer *transfer,
                                        itsme_import **out);

/* ------------------------------------------------------------------------
 * Profile records (docs/PROTOCOL.md section 18)
 *
 * A person's name and photo, sealed field by field under a random record
 * key and authenticated together with the owner's identity key.  The owner
 * publishes the record bytes on the relay (PUT /v1/records/{id}, id the
 * lowercase hex of the record ID) and gives contacts the reference (record
 * ID and record key) inside an encrypted, authenticated channel
 * (itsme_online_verify_share_profile), never in a QR code.  A contact
 * fetches the bytes, opens them with itsme_profile_open, which checks every
 * MAC and the ID before decrypting, shows the result, and applies it with
 * itsme_store_apply_profile if the person agrees.
 *
 * Thread safety: an itsme_profile is immutable; several threads may read
 * it at once.
 * ---------------------------------------------------------------------- */

typedef struct itsme_profile itsme_profile;

/* Largest profile record, in bytes (the relay's default record limit). */
#define ITSME_PROFILE_RECORD_MAX 262144
/* Bytes of the record format around the three values. */
#define ITSME_PROFILE_RECORD_OVERHEAD 177
/* Sizes of a record ID, and of a reference: record ID || record key. */
#define ITSME_RECORD_ID_BYTES 16
#define ITSME_PROFILE_REFERENCE_BYTES 32
/* Buffer size for a record ID as text: 32 lowercase hex digits and NUL. */
#define ITSME_RECORD_NAME_SIZE 33
/* Longest photo filename, in bytes (without the NUL). */
#define ITSME_PHOTO_FILENAME_MAX_BYTES 255

/* Makes a new profile record for `identity`: a fresh record key and
 * nonces (rng NULL: the operating system).  `name`: NULL or "" for none,
 * else 1 to ITSME_NAME_MAX_BYTES bytes of UTF-8 without control
 * characters.  `photo`: photo_len bytes (NULL when photo_len is 0).
 * `photo_filename`: NULL or "" for none; needs a photo.  A name or a photo
 * is required, and the record must fit in ITSME_PROFILE_RECORD_MAX.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (with a detail
 * in itsme_last_error), ITSME_E_OUT_OF_MEMORY. */
itsme_result itsme_profile_create(const itsme_identity *identity,
                                  const char *name ITSME_OPTIONAL,
                                  const uint8_t *photo ITSME_OPTIONAL,
                                  size_t photo_len,
                                  const char *photo_filename ITSME_OPTIONAL,
                                  itsme_random *rng, itsme_profile **out);

/* Opens record bytes fetched from the relay with the reference the owner
 * sent (ITSME_PROFILE_REFERENCE_BYTES): the size (at most
 * ITSME_PROFILE_RECORD_MAX) and shape first, then every field MAC, the
 * record MAC (over the owner's key `owner_key`, ITSME_PUBLIC_KEY_BYTES: the
 * contact's public key) and the record ID, in constant time, before
 * anything is decrypted; then the values.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL, a
 * reference or key of the wrong size),
 * ITSME_E_MALFORMED_MESSAGE (too large, truncated, another version, values
 * that break the rules), ITSME_E_AUTHENTICATION_FAILED (a tampered byte, a
 * wrong record ID or key, another owner).  Details in itsme_last_error. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_profile_open(const uint8_t *record, size_t record_len,
                                const uint8_t *reference,
                                size_t reference_len,
                                const uint8_t *owner_key, size_t key_len,
                                itsme_profile **out);

/* Releases a profile and wipes its record key.  Accepts NULL. */
void itsme_profile_free(itsme_profile *profile);

/* The name, NUL-terminated ("" if the profile has none).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_profile_name(const itsme_profile *profile, char *out,
                                size_t cap, size_t *out_len);

/* The photo's bytes (*out_len 0 if none).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_profile_photo(const itsme_profile *profile, uint8_t *out,
                                 size_t cap, size_t *out_len);

/* The photo's filename, NUL-terminated ("" if none).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_profile_photo_filename(const itsme_profile *profile,
                                          char *out, size_t cap,
                                          size_t *out_len);

/* The sealed record, as stored on the relay.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_profile_record(const itsme_profile *profile, uint8_t *out,
                                  size_t cap, size_t *out_len);

/* The record ID (ITSME_RECORD_ID_BYTES) and, as text, the relay's name
 * for it (ITSME_RECORD_NAME_SIZE: 32 lowercase hex digits and the NUL).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_profile_record_id(const itsme_profile *profile,
                                     uint8_t *out, size_t cap,
                                     size_t *out_len);
/* The record ID as the relay names it (see itsme_profile_record_id). */
itsme_result itsme_profile_record_name(const itsme_profile *profile,
                                       char *out, size_t cap,
                                       size_t *out_len);

/* The reference (ITSME_PROFILE_REFERENCE_BYTES: record ID || record key),
 * a secret: whoever holds it can read the profile.  Give it only through
 * an encrypted, authenticated channel (itsme_online_verify_share_profile);
 * wipe your copy when done.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_profile_reference(const itsme_profile *profile,
                                     uint8_t *out, size_t cap,
                                     size_t *out_len);

/* Applies an opened profile to contact `id`, in one transaction: its name
 * (if the profile has one) and its photo and filename (if it has a photo).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_NOT_FOUND (no such contact),
 * ITSME_E_DATABASE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_store_apply_profile(itsme_store *store, int64_t id,
                                       const itsme_profile *profile);

/* Sets contact `id`'s photo (at most 524,288 bytes; NULL when photo_len is
 * 0) and its filename (NULL or "" for none; else 1 to 255 bytes of UTF-8
 * without control characters, '/' or '\\', and not "." or "..": the rule of
 * profile records, docs/PROTOCOL.md 18.1), sealed like
 * the contact.  An empty photo and filename remove the photo.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_NOT_FOUND, ITSME_E_DATABASE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_store_set_photo(itsme_store *store, int64_t id,
                                   const uint8_t *photo ITSME_OPTIONAL,
                                   size_t photo_len,
                                   const char *filename ITSME_OPTIONAL);

/* Contact `id`'s photo, and its filename (NUL-terminated, "" if none).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL,
 * ITSME_E_NOT_FOUND (no such contact, or it has no photo),
 * ITSME_E_CORRUPT_DATA, ITSME_E_DATABASE. */
itsme_result itsme_store_photo(itsme_store *store, int64_t id, uint8_t *out,
                               size_t cap, size_t *out_len);
/* Contact `id`'s photo filename (see itsme_store_photo). */
itsme_result itsme_store_photo_filename(itsme_store *store, int64_t id,
                                        char *out, size_t cap,
                                        size_t *out_len);

/* ------------------------------------------------------------------------
 * Service approvals (docs/PROTOCOL.md section 19)
 *
 * A service (a web site) lets a person approve a login on their device.
 * Device side: itsme_credential_enroll makes a fresh Ed25519 key for one
 * service, kept in the secret store, and the enrollment message the
 * service stores; later itsme_approval_request_parse shows a request and
 * itsme_approval_sign answers it (approve with some scopes, or deny).
 * Service side: itsme_enrollment_verify checks an enrollment against the
 * nonce the service issued; itsme_approval_request_create makes a request
 * (keep its bytes: they are the service's record); itsme_approval_verify
 * checks an answer against that record, the user's enrolled keys, the
 * service's clock and a replay store.
 *
 * Scope lists cross this interface as text: scopes separated by single
 * spaces ("email profile"), each 1 to 64 bytes of printable ASCII
 * (0x21-0x7E), at most 32.  Inputs may come in any order but must not
 * repeat a scope; outputs are in increasing byte order.
 *
 * Comparing the OTP ties the screen the person sees to the request on the
 * device; it does not stop a phishing site that relays a real request in
 * real time (PROTOCOL.md 19.6).
 *
 * Thread safety: the functions without a handle are thread-safe; calls
 * on one secret store are serialised; an itsme_replay_store may be used by
 * several threads at once (the in-memory one locks; a callback store must
 * make its insert atomic).
 * ---------------------------------------------------------------------- */

/* Sizes. */
#define ITSME_CREDENTIAL_ID_BYTES 16
#define ITSME_SERVICE_ID_MAX_BYTES 255
#define ITSME_SESSION_ID_MAX_BYTES 128
#define ITSME_OTP_SIZE 7            /* six digits and the NUL */
#define ITSME_SCOPES_MAX 32
#define ITSME_SCOPE_MAX_BYTES 64
/* A scope list as text: 32 scopes of 64 bytes, separators, the NUL. */
#define ITSME_SCOPES_TEXT_SIZE 2080
#define ITSME_ENROLLMENT_MAX 226
#define ITSME_APPROVAL_REQUEST_MAX 2650
#define ITSME_APPROVAL_MAX 2177
/* A request lives at most this long, in seconds. */
#define ITSME_APPROVAL_LIFETIME_MAX 600

typedef uint32_t itsme_approval_decision ITSME_VALUES(ITSME_APPROVAL_APPROVE)
    ITSME_VALUES(ITSME_APPROVAL_DENY);
#define ITSME_APPROVAL_APPROVE 1
#define ITSME_APPROVAL_DENY 2

/* Device side.  Makes a new Ed25519 key pair for `service_id` (1 to 255
 * bytes of printable ASCII), replacing the one this device had for that
 * service, saves it in `store` (item itsme.credential.<hash>, see
 * docs/STORAGE.md), and writes the enrollment message (98 + length of
 * `label` bytes) for the service, signed over `nonce` (16 to 64 bytes, the
 * service's).  `label` names the device for the service (a name: 1 to 128
 * bytes of UTF-8).  rng NULL: the operating system.  Nothing is saved
 * unless the message fits in `out`.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT,
 * ITSME_E_BUFFER_TOO_SMALL (nothing saved), ITSME_E_SECRET_STORE.  Details
 * in the store's last error. */
itsme_result itsme_credential_enroll(itsme_secret_store *store,
                                     const char *service_id,
                                     const char *label, const uint8_t *nonce,
                                     size_t nonce_len, itsme_random *rng,
                                     uint8_t *out, size_t cap,
                                     size_t *out_len);

/* Device side.  The credential ID this device holds for `service_id`
 * (ITSME_CREDENTIAL_ID_BYTES).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL,
 * ITSME_E_NOT_FOUND (not enrolled), ITSME_E_CORRUPT_DATA,
 * ITSME_E_SECRET_STORE. */
itsme_result itsme_credential_id(itsme_secret_store *store,
                                 const char *service_id, uint8_t *out,
                                 size_t cap, size_t *out_len);

/* Device side.  Deletes this device's key for `service_id` (the service
 * should remove the credential too).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_NOT_FOUND, ITSME_E_SECRET_STORE. */
itsme_result itsme_credential_remove(itsme_secret_store *store,
                                     const char *service_id);

/* A request, as read from its bytes. */
typedef struct itsme_approval_request_info {
    /* The caller sets it to sizeof(itsme_approval_request_info). */
    size_t size;
    char service_id[ITSME_SERVICE_ID_MAX_BYTES + 1];
    char service_name[ITSME_NAME_MAX_BYTES + 1];
    char session_id[ITSME_SESSION_ID_MAX_BYTES + 1];
    char otp[ITSME_OTP_SIZE];
    int64_t issued_at;
    int64_t expires_at;
    /* The requested scopes, space-separated, in increasing byte order. */
    char scopes[ITSME_SCOPES_TEXT_SIZE];
} itsme_approval_request_info;

/* Device side.  Reads a request to show it: strictly parsed, and refused
 * once `now` is past its expiry.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL), ITSME_E_MALFORMED_MESSAGE,
 * ITSME_E_EXPIRED.  Details in itsme_last_error. */
itsme_result itsme_approval_request_parse(const uint8_t *request, size_t len,
                                          int64_t now,
                                          itsme_approval_request_info *out);

/* Device side.  Answers a request with the key enrolled for its service:
 * ITSME_APPROVAL_APPROVE with `granted_scopes` (a subset of the requested
 * ones; NULL or "" for none), or ITSME_APPROVAL_DENY (granted_scopes must
 * be NULL or "").  Signs at time `now`.  The host should have the person
 * compare the OTP first, and unlock the device (biometrics, a PIN).
 * Errors: ITSME_E_INVALID_ARGUMENT (a scope not requested, a repeated one,
 * an unknown decision), ITSME_E_MALFORMED_MESSAGE, ITSME_E_EXPIRED,
 * ITSME_E_NOT_FOUND (no key for the service), ITSME_E_BUFFER_TOO_SMALL,
 * ITSME_E_CORRUPT_DATA, ITSME_E_SECRET_STORE.  Details in the store's last
 * error. */
itsme_result itsme_approval_sign(itsme_secret_store *store,
                                 const uint8_t *request, size_t request_len,
                                 itsme_approval_decision decision,
                                 const char *granted_scopes ITSME_OPTIONAL, int64_t now,
                                 uint8_t *out, size_t cap, size_t *out_len);

/* What a service learns from a valid enrollment. */
typedef struct itsme_credential_info {
    /* The caller sets it to sizeof(itsme_credential_info). */
    size_t size;
    uint8_t credential_id[ITSME_CREDENTIAL_ID_BYTES];
    uint8_t public_key[ITSME_PUBLIC_KEY_BYTES];
    /* The device's label, NUL-terminated. */
    char label[ITSME_NAME_MAX_BYTES + 1];
} itsme_credential_info;

/* Service side.  Checks an enrollment against the service's own
 * `service_id` and the `nonce` it issued (which the service must then
 * spend: a nonce is good for one enrollment).
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL, a bad
 * service ID or nonce), ITSME_E_MALFORMED_MESSAGE,
 * ITSME_E_AUTHENTICATION_FAILED (bad signature, another nonce or service,
 * a non-canonical or small-order key).  Details in itsme_last_error. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_enrollment_verify(const char *service_id,
                                     const uint8_t *nonce, size_t nonce_len,
                                     const uint8_t *enrollment, size_t len,
                                     itsme_credential_info *out);

/* Service side.  Makes a request: a fresh 32-byte nonce and a uniform
 * six-digit OTP (rng NULL: the operating system), issued at `now`,
 * expiring `lifetime` seconds later (1 to ITSME_APPROVAL_LIFETIME_MAX).
 * `service_name` is a name (1 to 128 bytes of UTF-8); `session_id` 1 to
 * 128 bytes of printable ASCII; `scopes` as above (NULL or "": none).
 * Keep the bytes: they are the record itsme_approval_verify checks
 * against.  Show the OTP (itsme_approval_request_parse gives it).
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT,
 * ITSME_E_BUFFER_TOO_SMALL.  Details in itsme_last_error. */
itsme_result itsme_approval_request_create(
    const char *service_id, const char *service_name, const char *session_id,
    const char *scopes ITSME_OPTIONAL, int64_t lifetime, itsme_random *rng, int64_t now,
    uint8_t *out, size_t cap, size_t *out_len);

/* A service's record of single-use values: spent approval requests. */
typedef struct itsme_replay_store itsme_replay_store;

/* A host-implemented replay store (a database table, a shared cache).
 * insert: record `key` (32 bytes, borrowed for the call) until
 *   `expires_at` (the host may forget it after that); set *out_seen to true
 *   if it was recorded already (and leave it), else false.  Must be atomic across
 *   every verifier sharing the store.  Return ITSME_OK, or any other code
 *   on failure (the approval is then refused with that code).  `now` is the
 *   verifier's clock.  Must not call back into libitsme.
 * destroy: optional (may be NULL); called once with ctx when the store is
 *   freed. */
#define ITSME_REPLAY_STORE_CALLBACKS_VERSION 1
typedef struct itsme_replay_store_callbacks {
    /* ITSME_REPLAY_STORE_CALLBACKS_VERSION. */
    uint32_t version;
    void *ctx;
    itsme_result (*insert)(void *ctx, const uint8_t *key, int64_t expires_at,
                           int64_t now, bool *out_seen);
    void (*destroy)(void *ctx);
} itsme_replay_store_callbacks;

/* An in-memory replay store: entries are dropped once expired; at most
 * `capacity` live entries (0: 1,000,000); an insert into a full store is
 * refused with ITSME_E_LOCKED rather than forgetting a live entry.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_replay_store_new_memory(size_t capacity,
                                           itsme_replay_store **out);

/* A replay store backed by host callbacks.  The table is copied; insert
 * must be non-NULL.  On success the store owns ctx (destroy is called
 * when it is freed); on failure the caller keeps it.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_replay_store_new_callbacks(
    const itsme_replay_store_callbacks *callbacks, itsme_replay_store **out);

/* Releases a replay store.  Accepts NULL. */
void itsme_replay_store_free(itsme_replay_store *store);

/* What a verified approval says. */
typedef struct itsme_approval_result {
    /* The caller sets it to sizeof(itsme_approval_result). */
    size_t size;
    itsme_approval_decision decision;
    /* Which enrolled key signed. */
    uint8_t credential_id[ITSME_CREDENTIAL_ID_BYTES];
    /* The device's clock when it signed (informational). */
    int64_t timestamp;
    /* The granted scopes, space-separated, in increasing byte order ("" for
     * none, and always "" for a denial). */
    char granted_scopes[ITSME_SCOPES_TEXT_SIZE];
} itsme_approval_result;

/* Service side.  Verifies `approval` against the service's own record of
 * the request (`request`: the bytes itsme_approval_request_create gave),
 * the user's enrolled public keys (`public_keys`: key_count keys of 32
 * bytes each, concatenated), the service's clock `now` and `replay`, in
 * the order of docs/PROTOCOL.md 19.5.  Only a valid answer is recorded in
 * `replay`, so a forged one cannot spend the request.  A verified denial
 * is ITSME_OK with decision ITSME_APPROVAL_DENY.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL, a
 * request that does not parse), ITSME_E_MALFORMED_MESSAGE (the approval
 * does not parse, or grants a scope not requested), ITSME_E_EXPIRED,
 * ITSME_E_NOT_FOUND (signed by no enrolled key), ITSME_E_AUTHENTICATION_FAILED
 * (wrong OTP, bad signature), ITSME_E_REPLAYED, ITSME_E_LOCKED (in-memory
 * store full), or a callback's code (ITSME_E_INTERNAL for a code this
 * library does not know).  Details in itsme_last_error. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_approval_verify(const uint8_t *request, size_t request_len,
                                   const uint8_t *approval,
                                   size_t approval_len,
                                   const uint8_t *public_keys,
                                   size_t key_count ITSME_ITEM_BYTES(ITSME_PUBLIC_KEY_BYTES),
                                   itsme_replay_store *replay, int64_t now,
                                   itsme_approval_result *out);

/* ------------------------------------------------------------------------
 * Roll call (docs/PROTOCOL.md section 20)
 *
 * Everyone on a conference call checks, in one round, which participants
 * are contacts whose devices hold the seed exchanged with them, by codes
 * read aloud and sealed per contact.  One participant draws a meeting code
 * (itsme_meeting_code_new) and shares it on the call; everyone enters it
 * (a meeting code has the form of an invite code: itsme_remote_code_check
 * checks what a person typed) and makes an itsme_rollcall with it, which
 * takes every contact of the store (but those awaiting the peer).  Each
 * device signs what it sends with a key drawn for the roll call and never
 * stored.  The library does no I/O and decides every message; the host:
 *
 *   joins the relay's group room itsme_rollcall_room (its path:
 *       itsme_relay_path with ITSME_RELAY_ROUTE_GROUP) and hands over what
 *       the room sends as it came: text frames to itsme_rollcall_room_text,
 *       binary ones to itsme_rollcall_room_binary (after every
 *       reconnection too: the relay's "joined" gives the new slot); a host
 *       that parses the relay's events itself reports them instead with
 *       itsme_rollcall_joined, itsme_rollcall_peer_joined,
 *       itsme_rollcall_peer_left, and each message with the relay slot it
 *       came from with itsme_rollcall_receive
 *   calls itsme_rollcall_tick about once a second (what was lost is sent
 *       again)
 *   after each call, sends what itsme_rollcall_next_outgoing gives, until
 *       it gives nothing
 *   shows the participants (itsme_rollcall_participant_count and
 *       itsme_rollcall_participant, itsme_rollcall_head_count, and a split
 *       when itsme_rollcall_split says so) to its owner, who confirms that
 *       the contacts listed are on the call: itsme_rollcall_confirm_roster
 *       with the itsme_rollcall_roster read when the list was shown
 *   shows itsme_rollcall_code; the owner reads it aloud and says so:
 *       itsme_rollcall_confirm_said (the sealed codes go out)
 *   takes the code each contact read aloud: itsme_rollcall_enter_heard
 *
 * A participant is present once it has signed, from a slot in the room, a
 * message naming this device: a copied, extended or replayed HELLO never
 * makes anyone present.  A new roster starts a new round
 * (ITSME_ROLLCALL_PHASE_GATHERING again): the owner confirms it and reads a
 * new code; checks already made stay, and a roster that comes back (a
 * participant's connection dropped and came back) brings its round back.
 * Each outcome is recorded on its contact as Online Verify records one.  A
 * message that does not fit is refused with an error and changes nothing
 * (but a sealed code that does not open, which makes its participant
 * ITSME_ROLLCALL_STATE_REFUSED for the round): one participant's bad
 * message never ends the roll call for the others.  A roll call lasts 10
 * minutes from its creation; after that every call that takes a time
 * fails with ITSME_E_EXPIRED (and so does a time more than 30 seconds
 * before the creation: a clock set back), and the phase is then
 * ITSME_ROLLCALL_PHASE_EXPIRED, for good.  Errors are detailed by
 * itsme_rollcall_last_error (itsme_rollcall_new records on the store).
 *
 * Relay slots are those of the relay's group room: 1 to 65535 (the 2-byte
 * prefix of each message, which the host removes); 0 is no slot.
 *
 * Thread safety: an itsme_rollcall must not be used by two threads at
 * once.  It keeps its contact store alive.
 * ---------------------------------------------------------------------- */

typedef struct itsme_rollcall itsme_rollcall;

typedef uint32_t itsme_rollcall_phase ITSME_VALUES(ITSME_ROLLCALL_PHASE_);
/* Participants arrive; this round's roster is not confirmed. */
#define ITSME_ROLLCALL_PHASE_GATHERING 1
/* The roster is confirmed: read itsme_rollcall_code aloud, then
 * itsme_rollcall_confirm_said. */
#define ITSME_ROLLCALL_PHASE_CONFIRMED 2
/* This device's sealed codes went out for this round. */
#define ITSME_ROLLCALL_PHASE_SAID 3
/* The lifetime (10 minutes) passed: final. */
#define ITSME_ROLLCALL_PHASE_EXPIRED 4

/* A participant's state as shown beside it (docs/PROTOCOL.md 20.5). */
typedef uint32_t itsme_rollcall_state ITSME_VALUES(ITSME_ROLLCALL_STATE_);
/* A contact whose code is not checked yet. */
#define ITSME_ROLLCALL_STATE_NOT_YET 1
/* The code heard is the one their device sealed, from the device known. */
#define ITSME_ROLLCALL_STATE_VERIFIED 2
/* The code heard is not the one their device sealed (type it again: three
 * times in a round at most). */
#define ITSME_ROLLCALL_STATE_WRONG 3
/* The code matched, from another device than the one known: their device
 * changed. */
#define ITSME_ROLLCALL_STATE_DEVICE_CHANGED 4
/* The code matched; this device holds no device secret of theirs to check
 * the device with. */
#define ITSME_ROLLCALL_STATE_VERIFIED_TAG_UNCHECKED 5
/* Their sealed code of this round did not open (their own device signed a
 * code not sealed for this one: a faulty or malicious device; a code
 * changed on the way fails its signature and changes nothing): neither
 * verified nor wrong. */
#define ITSME_ROLLCALL_STATE_REFUSED 6
/* This device, or a device that holds no seed with this one: not a
 * contact. */
#define ITSME_ROLLCALL_STATE_UNKNOWN 7
/* One of the two devices binds the roll call to its call and the other
 * does not: nothing can be checked between them (say so, and have the
 * other start the roll call from the call). */
#define ITSME_ROLLCALL_STATE_BINDING_DIFFERS 8
/* Both devices bind the roll call to a call, and the calls differ: a
 * device in another call, as when one relays between two calls. */
#define ITSME_ROLLCALL_STATE_OTHER_CALL 9

/* Longest roll-call message: a HELLO of 2048 presence tags, 133 + 16 * 2048
 * bytes (a VIEW is at most 138 + 32 * 100 + 13 = 3351, a SAID
 * 131 + 50 * 49 = 2581). */
#define ITSME_ROLLCALL_MESSAGE_MAX 32901
/* A roster hash (itsme_rollcall_roster), in bytes. */
#define ITSME_ROLLCALL_ROSTER_BYTES 32
/* A relay slot in itsme_rollcall_joined's list, in bytes. */
#define ITSME_ROLLCALL_SLOT_BYTES 2

/* One device of the roll call as this device sees it
 * (itsme_rollcall_participant). */
typedef struct itsme_rollcall_participant_info {
    /* The caller sets it to sizeof(itsme_rollcall_participant_info) (see
     * the conventions). */
    size_t size;
    /* 0 for this device; the others in the order they became present. */
    size_t index;
    /* The relay slot it speaks from; 0 for this device. */
    uint32_t slot;
    /* The contact it is; 0 for this device and for a device that is not a
     * contact. */
    int64_t contact_id;
    itsme_rollcall_state state;
    /* true while it is not present (its connection left; it may come back
     * under the same place). */
    bool left;
    /* true when its device holds the same roster as this one (always for
     * this device): show the others as "not agreeing yet". */
    bool agrees;
} itsme_rollcall_participant_info;

/* Draws a new meeting code from `rng` (NULL: the operating system) and
 * writes it as shown, "ABCD-EFGH" (ITSME_REMOTE_CODE_SIZE): 7 random
 * characters of the invite alphabet and a check character
 * (docs/PROTOCOL.md 16.1).  It is not secret from the call.  Thread-safe.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT,
 * ITSME_E_BUFFER_TOO_SMALL (cap < ITSME_REMOTE_CODE_SIZE: nothing is
 * drawn). */
itsme_result itsme_meeting_code_new(itsme_random *rng, char *out, size_t cap,
                                    size_t *out_len);

/* Starts a roll call named by `meeting_code` (as typed: either case, spaces
 * and '-' ignored) at `now`, with every contact of `store` but those
 * awaiting the peer.  `binding` (binding_len bytes, ITSME_CALL_BINDING_MIN
 * to _MAX) binds it to the host's own call: a value every participant of
 * that call holds, the same for the whole call, that the relay never sees
 * (docs/PROTOCOL.md 20.1 says which values qualify); NULL with 0: not
 * bound.  A device bound to another call checks nobody of this one.  The
 * roll-call key and the HELLO's padding are drawn from `rng` (NULL: the
 * operating system).  Nothing is queued before itsme_rollcall_joined.
 * Free the roll call with itsme_rollcall_free; it keeps a counted
 * reference to the store.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL, a
 * meeting code with a typo or longer than ITSME_TYPED_CODE_MAX bytes, a
 * binding of another length, a store of more than 2048 contacts, a time
 * out of range), ITSME_E_DATABASE, and stored-data errors
 * (ITSME_E_CORRUPT_DATA, ITSME_E_AUTHENTICATION_FAILED).  Details go to
 * the store's last error. */
itsme_result itsme_rollcall_new(itsme_store *store, const char *meeting_code,
                                const uint8_t *binding ITSME_OPTIONAL,
                                size_t binding_len, itsme_random *rng,
                                int64_t now, itsme_rollcall **out);

/* Releases a roll call and wipes its secrets, and its reference to the
 * store.  Accepts NULL. */
void itsme_rollcall_free(itsme_rollcall *rollcall);

/* Copies the detail of the last failure of a call on this roll call.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_rollcall_last_error(const itsme_rollcall *rollcall,
                                       char *buf, size_t cap,
                                       size_t *out_len);

/* Where the roll call stands (ITSME_ROLLCALL_PHASE_*).  It becomes
 * ITSME_ROLLCALL_PHASE_EXPIRED at the first call with a time past the
 * lifetime, not by itself.
 * Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_rollcall_status(const itsme_rollcall *rollcall,
                                   itsme_rollcall_phase *out_phase);

/* The relay group room's name (ITSME_ROOM_NAME_SIZE: 32 lowercase hex
 * digits and the NUL), the same on every device for the same meeting code.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_rollcall_room(const itsme_rollcall *rollcall, char *out,
                                 size_t cap, size_t *out_len);

/* The next message to send to the group room (at most
 * ITSME_ROLLCALL_MESSAGE_MAX bytes), removed from the queue on success;
 * ITSME_OK with *out_len = 0 when there is none.  A VIEW is made when it
 * is taken, from the state at that moment.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL (nothing
 * removed). */
itsme_result itsme_rollcall_next_outgoing(itsme_rollcall *rollcall,
                                          uint8_t *out, size_t cap,
                                          size_t *out_len);

/* The relay's "joined" event: this device's slot, and the `peer_count`
 * slots present before it in `peers`, each in 2 bytes
 * (ITSME_ROLLCALL_SLOT_BYTES), big-endian as in the relay's message prefix
 * (NULL with 0 when alone).  Called at the first join and again after
 * every reconnection (a new slot): the HELLO and a VIEW are queued, and
 * the roll call goes on in its place.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, a slot 0, a time out of range),
 * ITSME_E_EXPIRED. */
itsme_result itsme_rollcall_joined(itsme_rollcall *rollcall, uint32_t slot,
                                   const uint8_t *peers ITSME_OPTIONAL,
                                   size_t peer_count ITSME_ITEM_BYTES(ITSME_ROLLCALL_SLOT_BYTES),
                                   int64_t now);

/* Feeds one message of the group room carried by relay slot `slot` (the
 * relay's 2-byte prefix removed).  A HELLO already held, an older VIEW or
 * a SAID already taken is ignored.  A refused message changes nothing,
 * and the roll call goes on.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, slot 0 or above 65535, a time
 * out of range, a HELLO beyond the 100 held or a 51st participant),
 * ITSME_E_MALFORMED_MESSAGE (not a roll-call message of this version, a
 * second HELLO for one key or from one slot, a second SAID from one
 * participant in one round, a SAID of the wrong size for the roster),
 * ITSME_E_AUTHENTICATION_FAILED (a signature that does not verify; or a
 * contact's sealed code that does not open, checked against the code
 * already typed: the participant is now ITSME_ROLLCALL_STATE_REFUSED for
 * the round), ITSME_E_INVALID_STATE (a VIEW or SAID from a participant
 * this device does not hold or see present, a VIEW carried by another
 * slot than its sender's, a SAID of another roster), ITSME_E_INVALID_KEY
 * (this device's own key: a reflected message), ITSME_E_EXPIRED,
 * ITSME_E_DATABASE (recording an outcome failed). */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_rollcall_receive(itsme_rollcall *rollcall,
                                    const uint8_t *bytes, size_t len,
                                    uint32_t slot, int64_t now);

/* A text frame of the group room, as the relay sent it (one of its events,
 * docs/PROTOCOL.md 15.3): "joined", "peer-joined" and "peer-left" are
 * applied as itsme_rollcall_joined, _peer_joined and _peer_left apply them,
 * with their errors; "refused" and an event this version does not know
 * change nothing.  A host that reads the room's frames hands them over as
 * they came (this function and itsme_rollcall_room_binary) and parses
 * nothing.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, a time out of range),
 * ITSME_E_MALFORMED_MESSAGE (not a group room's event: nothing changes),
 * then those of the event's function. */
itsme_result itsme_rollcall_room_text(itsme_rollcall *rollcall,
                                      const uint8_t *text, size_t len,
                                      int64_t now);

/* A binary frame of the group room, as the relay sent it: the sender's
 * relay slot (2 bytes, big-endian), then its message, which is fed as
 * itsme_rollcall_receive feeds it.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, a time out of range),
 * ITSME_E_MALFORMED_MESSAGE (shorter than a slot: nothing changes), then
 * those of itsme_rollcall_receive. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_rollcall_room_binary(itsme_rollcall *rollcall,
                                        const uint8_t *frame, size_t len,
                                        int64_t now);

/* The relay announced a new peer in slot `slot`: this device's HELLO is
 * queued, since the newcomer has not seen it.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, slot 0 or above 65535, a time out
 * of range), ITSME_E_EXPIRED. */
itsme_result itsme_rollcall_peer_joined(itsme_rollcall *rollcall,
                                        uint32_t slot, int64_t now);

/* The peer of relay slot `slot` left the room: its participant is no
 * longer present (a new round), and comes back if it rejoins.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, slot 0 or above 65535, a time out
 * of range), ITSME_E_EXPIRED. */
itsme_result itsme_rollcall_peer_left(itsme_rollcall *rollcall,
                                      uint32_t slot, int64_t now);

/* Called about once a second: a VIEW that is due, and what may have been
 * lost (docs/PROTOCOL.md 20.6), are queued; send them.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, a time out of range),
 * ITSME_E_EXPIRED. */
itsme_result itsme_rollcall_tick(itsme_rollcall *rollcall, int64_t now);

/* How many devices are present now, this one included (1 to 50): the
 * head count to compare with the faces on the call.
 * Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_rollcall_head_count(const itsme_rollcall *rollcall,
                                       size_t *out_count);

/* Writes true when the roster has not changed for 5 seconds and a present
 * participant holds another one: someone (the relay) shows different
 * participants to different devices.  Show it: a split that stays is not
 * a slow network.
 * Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_rollcall_split(const itsme_rollcall *rollcall,
                                  bool *out_split);

/* The hash of the roster as this device holds it now
 * (ITSME_ROLLCALL_ROSTER_BYTES): read it when showing the participants,
 * and pass it to itsme_rollcall_confirm_roster.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_rollcall_roster(const itsme_rollcall *rollcall,
                                   uint8_t *out, size_t cap, size_t *out_len);

/* The owner confirmed that the contacts listed are on their call: `roster`
 * is the itsme_rollcall_roster read when the list was shown.  Draws this
 * round's code from `rng` (NULL: the operating system).
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, roster_len not
 * ITSME_ROLLCALL_ROSTER_BYTES, a time out of range), ITSME_E_INVALID_STATE
 * (no one else has joined yet; the roster changed since it was read: show
 * the participants again and confirm that one; or this round's roster is
 * confirmed already), ITSME_E_EXPIRED. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_rollcall_confirm_roster(itsme_rollcall *rollcall,
                                           const uint8_t *roster,
                                           size_t roster_len,
                                           itsme_random *rng, int64_t now);

/* This device's code for this round, to read aloud ("ECHO 042": a NATO word
 * and three digits, ITSME_VOICE_CODE_SIZE), once the roster is confirmed.
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_INVALID_STATE (the roster of
 * this round is not confirmed, or the roll call expired),
 * ITSME_E_BUFFER_TOO_SMALL. */
itsme_result itsme_rollcall_code(const itsme_rollcall *rollcall, char *out,
                                 size_t cap, size_t *out_len);

/* The owner read the code aloud: queues the SAID, one sealed entry for
 * every other participant (drawn from `rng`, NULL: the operating system,
 * for those that are not contacts).  Nothing derived from the code leaves
 * the device before this call.
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, a time out of range),
 * ITSME_E_INVALID_STATE (the roster of this round is not confirmed, or its
 * SAID went out already), ITSME_E_EXPIRED. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_rollcall_confirm_said(itsme_rollcall *rollcall,
                                         itsme_random *rng, int64_t now);

/* How many devices have been present in the roll call, this one included
 * (those that left among them: itsme_rollcall_participant says which).
 * Errors: ITSME_E_INVALID_ARGUMENT. */
itsme_result itsme_rollcall_participant_count(const itsme_rollcall *rollcall,
                                              size_t *out_count);

/* Participant `index` (0, this device, to count - 1).
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, index out of range,
 * out_participant->size too small). */
itsme_result itsme_rollcall_participant(
    const itsme_rollcall *rollcall, size_t index,
    itsme_rollcall_participant_info *out_participant);

/* The owner typed `code` ("ECHO 042", the word in any case), the code
 * participant `index` read aloud.  Compared at once if their sealed code is
 * in, else when it arrives (itsme_rollcall_receive); the outcome is
 * recorded on the contact.  Writes the participant's state:
 * ITSME_ROLLCALL_STATE_NOT_YET (their sealed code is still to come),
 * _VERIFIED, _WRONG (type again), _DEVICE_CHANGED,
 * _VERIFIED_TAG_UNCHECKED, or _REFUSED (their sealed code of this round
 * did not open: nothing to check against until a new round).
 * Errors: ITSME_E_INVALID_ARGUMENT (NULL, a code that is not a NATO word
 * and three digits or is longer than ITSME_TYPED_CODE_MAX bytes, index 0
 * or out of range, a time out of range: nothing changes),
 * ITSME_E_INVALID_STATE (the roster of this round is not confirmed; the
 * participant is not a contact, or not present now; or it is checked
 * already),
 * ITSME_E_LOCKED (three wrong codes for it in this round: wait for a new
 * round), ITSME_E_AUTHENTICATION_FAILED (their sealed code does not open:
 * the participant is now ITSME_ROLLCALL_STATE_REFUSED), ITSME_E_EXPIRED,
 * ITSME_E_DATABASE. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_rollcall_enter_heard(itsme_rollcall *rollcall,
                                        size_t index, const char *code,
                                        int64_t now,
                                        itsme_rollcall_state *out_state);

/* ------------------------------------------------------------------------
 * Sizes as functions
 *
 * Each size macro's value as the library was built, for hosts that load it
 * at run time and cannot read macros (ctypes, JNA, FFI generators), as
 * libsodium pairs crypto_kx_PUBLICKEYBYTES with crypto_kx_publickeybytes().
 * ---------------------------------------------------------------------- */

/* The value of the macro of the same name in capitals.  Thread-safe; need
 * no itsme_init(). */
size_t itsme_public_key_bytes(void);
size_t itsme_fingerprint_chars(void);
size_t itsme_fingerprint_size(void);
size_t itsme_pin_length(void);
size_t itsme_text_max(void);
size_t itsme_typed_code_max(void);
size_t itsme_export_text_max(void);
size_t itsme_name_max_bytes(void);
size_t itsme_passphrase_max_bytes(void);
size_t itsme_seed_bytes(void);
size_t itsme_note_max_bytes(void);
size_t itsme_short_code_size(void);
size_t itsme_short_code_values(void);
size_t itsme_qr_payload_max(void);
size_t itsme_bluetooth_frame_max(void);
size_t itsme_remote_code_size(void);
size_t itsme_remote_message_max(void);
size_t itsme_relay_id_size(void);
size_t itsme_voice_word_count(void);
size_t itsme_voice_code_size(void);
size_t itsme_voice_session_id_size(void);
size_t itsme_degradation_code_size(void);
size_t itsme_room_name_size(void);
size_t itsme_online_verify_message_max(void);
size_t itsme_pin_update_frame_max(void);
size_t itsme_export_password_size(void);
size_t itsme_export_chosen_password_min(void);
size_t itsme_export_max(void);
size_t itsme_export_text_size(void);
size_t itsme_export_contacts_max(void);
size_t itsme_transfer_offer_size(void);
size_t itsme_transfer_message_max(void);
size_t itsme_profile_record_max(void);
size_t itsme_profile_record_overhead(void);
size_t itsme_record_id_bytes(void);
size_t itsme_profile_reference_bytes(void);
size_t itsme_record_name_size(void);
size_t itsme_photo_filename_max_bytes(void);
size_t itsme_credential_id_bytes(void);
size_t itsme_service_id_max_bytes(void);
size_t itsme_session_id_max_bytes(void);
size_t itsme_otp_size(void);
size_t itsme_scopes_max(void);
size_t itsme_scope_max_bytes(void);
size_t itsme_scopes_text_size(void);
size_t itsme_enrollment_max(void);
size_t itsme_approval_request_max(void);
size_t itsme_approval_max(void);
size_t itsme_approval_lifetime_max(void);
size_t itsme_rollcall_message_max(void);
size_t itsme_rollcall_roster_bytes(void);
size_t itsme_rollcall_slot_bytes(void);
size_t itsme_call_binding_min(void);
size_t itsme_call_binding_max(void);

/* ------------------------------------------------------------------------
 * Names of version 0.2, kept until 0.4
 *
 * Version 0.3 gave methods and states prefixes of their own
 * (ITSME_EXCHANGE_METHOD_*, ITSME_EXCHANGE_STATE_*, ITSME_VOICE_STATE_*,
 * ITSME_VOICE_OUTCOME_*, ...).  The old names remain as aliases.
 * ---------------------------------------------------------------------- */

#define ITSME_EXCHANGE_QR ITSME_EXCHANGE_METHOD_QR
#define ITSME_EXCHANGE_BLUETOOTH ITSME_EXCHANGE_METHOD_BLUETOOTH
#define ITSME_EXCHANGE_INVITE ITSME_EXCHANGE_METHOD_INVITE
#define ITSME_EXCHANGE_REALTIME ITSME_EXCHANGE_METHOD_REALTIME
#define ITSME_EXCHANGE_AWAITING_PEER ITSME_EXCHANGE_STATE_AWAITING_PEER
#define ITSME_EXCHANGE_COMPARE_SAS ITSME_EXCHANGE_STATE_COMPARE_SAS
#define ITSME_EXCHANGE_IMPORTED ITSME_EXCHANGE_STATE_IMPORTED
#define ITSME_EXCHANGE_CONFIRMED ITSME_EXCHANGE_STATE_CONFIRMED
#define ITSME_EXCHANGE_REJECTED ITSME_EXCHANGE_STATE_REJECTED
#define ITSME_EXCHANGE_FAILED ITSME_EXCHANGE_STATE_FAILED
#define ITSME_EXCHANGE_AWAITING_DECISION ITSME_EXCHANGE_STATE_AWAITING_DECISION
#define ITSME_VOICE_WAITING ITSME_VOICE_STATE_WAITING
#define ITSME_VOICE_SELECTING ITSME_VOICE_STATE_SELECTING
#define ITSME_VOICE_COMPARING ITSME_VOICE_STATE_COMPARING
#define ITSME_VOICE_FINISHED ITSME_VOICE_STATE_FINISHED
#define ITSME_VOICE_FAILED ITSME_VOICE_STATE_FAILED
#define ITSME_VOICE_VERIFIED ITSME_VOICE_OUTCOME_VERIFIED
#define ITSME_VOICE_DEVICE_CHANGED ITSME_VOICE_OUTCOME_DEVICE_CHANGED
#define ITSME_VOICE_MISMATCH ITSME_VOICE_OUTCOME_MISMATCH
#define ITSME_VOICE_VERIFIED_TAG_UNCHECKED ITSME_VOICE_OUTCOME_VERIFIED_TAG_UNCHECKED
#define ITSME_ONLINE_VERIFY_RUNNING ITSME_ONLINE_VERIFY_STATE_RUNNING
#define ITSME_ONLINE_VERIFY_COMPARE_SAS ITSME_ONLINE_VERIFY_STATE_COMPARE_SAS
#define ITSME_ONLINE_VERIFY_CONFIRMED ITSME_ONLINE_VERIFY_STATE_CONFIRMED
#define ITSME_ONLINE_VERIFY_REJECTED ITSME_ONLINE_VERIFY_STATE_REJECTED
#define ITSME_ONLINE_VERIFY_FAILED ITSME_ONLINE_VERIFY_STATE_FAILED
#define ITSME_PIN_UPDATE_RUNNING ITSME_PIN_UPDATE_STATE_RUNNING
#define ITSME_PIN_UPDATE_DONE ITSME_PIN_UPDATE_STATE_DONE
#define ITSME_PIN_UPDATE_FAILED ITSME_PIN_UPDATE_STATE_FAILED
#define ITSME_TRANSFER_AWAITING_PEER ITSME_TRANSFER_STATE_AWAITING_PEER
#define ITSME_TRANSFER_COMPARE_SAS ITSME_TRANSFER_STATE_COMPARE_SAS
#define ITSME_TRANSFER_AWAITING_IDENTITY ITSME_TRANSFER_STATE_AWAITING_IDENTITY
#define ITSME_TRANSFER_DONE ITSME_TRANSFER_STATE_DONE
#define ITSME_TRANSFER_REJECTED ITSME_TRANSFER_STATE_REJECTED
#define ITSME_TRANSFER_FAILED ITSME_TRANSFER_STATE_FAILED

#ifdef __cplusplus
}
#endif

#endif /* ITSME_H */
