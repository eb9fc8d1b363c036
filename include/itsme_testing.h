/*
 * itsme_testing.h - what only a test build of libitsme exports.
 *
 * A deterministic random source, contacts with given device secrets and
 * the pure derivations of docs/PROTOCOL.md, for test vectors and
 * independent implementations.  The release library does not export these
 * functions: link against the test build (`make lib-testing`, which also
 * exports everything of itsme.h).  The conventions of itsme.h apply.
 */
#ifndef ITSME_TESTING_H
#define ITSME_TESTING_H

#include "itsme.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * A deterministic random source (itsme.h, "Random sources")
 * ---------------------------------------------------------------------- */

/* A deterministic stream: libsodium's randombytes_buf_deterministic under
 * a 32-byte seed, which is replaced by its SHA-256 after each draw.
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL, seed_len
 * not 32). */
itsme_result itsme_random_new_deterministic(const uint8_t *seed,
                                            size_t seed_len,
                                            itsme_random **out);

/* itsme_identity_create drawing its keys from `rng` (NULL: the operating
 * system, exactly like itsme_identity_create).  For tests and vectors.
 * Errors: as itsme_identity_create. */
itsme_result itsme_identity_create_with_random(itsme_secret_store *store,
                                               const char *name,
                                               itsme_random *rng,
                                               itsme_identity **out);

/* ------------------------------------------------------------------------
 * Contacts with given device secrets (itsme.h, "Contact store")
 * ---------------------------------------------------------------------- */

/* Stores the device secrets of contact `id` of `store`, as an exchange
 * leaves them: this device's for the contact (`mine`) and the contact's
 * (`theirs`), each 0 to 64 bytes, not both empty (a secret may be NULL when
 * its length is 0).  They replace the contact's secrets, a pending
 * Security PIN Update's included.  For tests and vectors that rebuild a
 * store holding given secrets (docs/PROTOCOL.md 10.1).
 * Errors: ITSME_E_NOT_INITIALIZED, ITSME_E_INVALID_ARGUMENT (NULL, a
 * secret longer than 64 bytes, both empty), ITSME_E_NOT_FOUND (no such
 * contact), ITSME_E_DATABASE.  Details go to the store's last error. */
ITSME_WARN_UNUSED_RESULT
itsme_result itsme_store_set_device_secrets(itsme_store *store, int64_t id,
                                            const uint8_t *mine ITSME_OPTIONAL,
                                            size_t mine_len,
                                            const uint8_t *theirs ITSME_OPTIONAL,
                                            size_t theirs_len);

/* ------------------------------------------------------------------------
 * Pure derivations (docs/PROTOCOL.md), for test vectors and independent
 * implementations.  Thread-safe; errors are read with itsme_last_error().
 * Every output is 32 bytes unless stated.  Errors, for each:
 * ITSME_E_NOT_INITIALIZED; ITSME_E_INVALID_ARGUMENT (a NULL pointer, an
 * input of the wrong size: keys, seeds and hashes 32 bytes, device secret
 * 16, HELLO frames 42, KEY frames 34, contact data 114 to 241, a name or
 * session code that is not valid); ITSME_E_BUFFER_TOO_SMALL; and those
 * stated below.
 * ---------------------------------------------------------------------- */

/* The verification seed (section 3): HKDF over X25519(ephemeral_secret,
 * peer_ephemeral_public), salted with the two fingerprints in order.
 * Errors: ITSME_E_INVALID_ARGUMENT (sizes, a fingerprint not 16 hex
 * digits), ITSME_E_INVALID_KEY (all-zero shared secret), BUFFER_TOO_SMALL. */
itsme_result itsme_derive_seed(const uint8_t *ephemeral_secret,
                               size_t secret_len,
                               const uint8_t *peer_ephemeral_public,
                               size_t public_len, const char *fingerprint_a,
                               const char *fingerprint_b, uint8_t *out,
                               size_t cap, size_t *out_len);

/* The SAS text (section 4.1) of a 32-byte seed and transcript hash
 * (ITSME_SHORT_CODE_SIZE bytes suffice). */
itsme_result itsme_derive_sas(const uint8_t *seed, size_t seed_len,
                              const uint8_t *transcript_hash, size_t th_len,
                              char *out, size_t cap, size_t *out_len);

/* The QR transcript hash (section 5.3) of two payload texts, in either
 * order.  Each must be a valid "ITSME1:" payload (signature checked).
 * Errors: ITSME_E_INVALID_ARGUMENT, ITSME_E_MALFORMED_MESSAGE,
 * ITSME_E_AUTHENTICATION_FAILED, BUFFER_TOO_SMALL. */
itsme_result itsme_qr_transcript_hash(const uint8_t *payload_a, size_t a_len,
                                      const uint8_t *payload_b, size_t b_len,
                                      uint8_t *out, size_t cap,
                                      size_t *out_len);

/* The Bluetooth commitment (section 7.3) to an identity key, an ephemeral
 * key, a name and a 16-byte device secret. */
itsme_result itsme_bluetooth_commitment(const uint8_t *identity_public,
                                        size_t identity_len,
                                        const uint8_t *ephemeral_public,
                                        size_t ephemeral_len,
                                        const char *name,
                                        const uint8_t *device_secret,
                                        size_t device_secret_len,
                                        uint8_t *out, size_t cap,
                                        size_t *out_len);

/* th1 (section 7.3) from the session code text and the four frames. */
itsme_result itsme_bluetooth_th1(const char *session_code,
                                 const uint8_t *hello_i, size_t hello_i_len,
                                 const uint8_t *hello_r, size_t hello_r_len,
                                 const uint8_t *key_i, size_t key_i_len,
                                 const uint8_t *key_r, size_t key_r_len,
                                 uint8_t *out, size_t cap, size_t *out_len);

/* k_I || k_R (64 bytes, section 7.3) from our ephemeral secret, the peer's
 * ephemeral public key and th1.  ITSME_E_INVALID_KEY for a low-order peer
 * key. */
itsme_result itsme_bluetooth_session_keys(const uint8_t *ephemeral_secret,
                                          size_t secret_len,
                                          const uint8_t *peer_ephemeral_public,
                                          size_t public_len,
                                          const uint8_t *th1, size_t th1_len,
                                          uint8_t *out, size_t cap,
                                          size_t *out_len);

/* The Bluetooth transcript hash (section 7.4) from th1 and the two
 * decrypted contact data plaintexts. */
itsme_result itsme_bluetooth_transcript_hash(const uint8_t *th1,
                                             size_t th1_len,
                                             const uint8_t *plaintext_i,
                                             size_t plaintext_i_len,
                                             const uint8_t *plaintext_r,
                                             size_t plaintext_r_len,
                                             uint8_t *out, size_t cap,
                                             size_t *out_len);

/* Pure derivations of sections 9 and 10 (errors as the other pure
 * derivations, and ITSME_E_INVALID_ARGUMENT for a negative `window`:
 * windows are not negative; `pid` is a party's id: a 32-byte identity key,
 * or the 8 fingerprint bytes of an unauthenticated contact).  The session
 * ID text. */
itsme_result itsme_derive_session_id(const uint8_t *seed, size_t seed_len,
                                     int64_t window, char *out, size_t cap,
                                     size_t *out_len);

/* A selector's five word indices, sorted, into out[0..4]; *out_len is 5. */
itsme_result itsme_derive_words(const uint8_t *seed, size_t seed_len,
                                int64_t window, const uint8_t *pid,
                                size_t pid_len, uint8_t *out, size_t cap,
                                size_t *out_len);

/* true if the party with the lower pid selects first in `window`. */
itsme_result itsme_derive_lower_selects_first(const uint8_t *seed,
                                              size_t seed_len, int64_t window,
                                              bool *out_lower_first);

/* The code text of `speaker` for the selections (first, w1), (second, w2). */
itsme_result itsme_derive_code(const uint8_t *seed, size_t seed_len,
                               int64_t window, const uint8_t *first,
                               size_t first_len, uint32_t first_word,
                               const uint8_t *second, size_t second_len,
                               uint32_t second_word, const uint8_t *speaker,
                               size_t speaker_len, char *out, size_t cap,
                               size_t *out_len);

/* The device tag (0-99) of `speaker` with its device secret (0 to 64
 * bytes; secret may be NULL when secret_len is 0). */
itsme_result itsme_derive_device_tag(const uint8_t *seed, size_t seed_len,
                                     int64_t window, const uint8_t *speaker,
                                     size_t speaker_len,
                                     const uint8_t *secret ITSME_OPTIONAL,
                                     size_t secret_len,
                                     uint32_t *out_tag);

/* What one side derives in a session (docs/PROTOCOL.md 9.2 to 10.1), all
 * at once: for hosts that keep their own state, and for benchmarks. */
typedef struct itsme_voice_derivation {
    size_t size;              /* the caller sets it to sizeof(itsme_voice_derivation) */
    uint32_t session_id;      /* 0-2599: word session_id / 100, digits % 100 */
    uint8_t my_words[ITSME_VOICE_WORD_COUNT]; /* sorted word indices */
    uint8_t their_words[ITSME_VOICE_WORD_COUNT];
    bool i_select_first;      /* true if this side selects first */
    uint32_t my_code;         /* 0-25999: word my_code / 1000, digits % 1000 */
    uint32_t their_code;
    uint32_t my_tag;          /* 0-99 */
    uint32_t their_tag;
} itsme_voice_derivation;

/* Fills *out for one side: its pid and device secret, the other side's,
 * and the two selections in order (the first selector's word first).
 * Thread-safe.  Errors as the other pure derivations (word indices above
 * 25, secrets above 64 bytes; a secret may be NULL when its length is 0). */
itsme_result itsme_derive_voice(const uint8_t *seed, size_t seed_len,
                                int64_t window, const uint8_t *my_pid,
                                size_t my_pid_len, const uint8_t *their_pid,
                                size_t their_pid_len,
                                const uint8_t *my_secret ITSME_OPTIONAL,
                                size_t my_secret_len,
                                const uint8_t *their_secret ITSME_OPTIONAL,
                                size_t their_secret_len, uint32_t first_word,
                                uint32_t second_word,
                                itsme_voice_derivation *out);

/* Pure derivation: the degradation code of the person `pid` for the
 * 10-byte interim device secret `secret`. */
itsme_result itsme_derive_degradation_code(const uint8_t *seed,
                                           size_t seed_len,
                                           const uint8_t *pid, size_t pid_len,
                                           const uint8_t *secret,
                                           size_t secret_len, char *out,
                                           size_t cap, size_t *out_len);

#ifdef __cplusplus
}
#endif

#endif /* ITSME_TESTING_H */
