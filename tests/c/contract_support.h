/*
 * Shared fixtures of the contract suite (tests/c/contract_fixtures.h): each
 * fx_ function builds, once per process, a handle or bytes in a state where
 * calls succeed.  fx_<handle type>() is the default value of a parameter of
 * that type and the handle its _free function releases; fx_<callback table>()
 * a valid table.  A fixture that cannot be built fails its check.
 * Included by the generated tests/c/contract_test.c after
 * contract_runtime.h, with CT_HAS_<function> defined for every function
 * compiled in, CT_SIZED_<struct> for every struct whose first field is the
 * size_t `size` the caller sets and CT_VERSION_<callback table> for every
 * table whose first field is a `version` (its value), CT_NO_OUT_LEN_<function>
 * for a function with an output buffer but no out_len.
 */
#ifndef CONTRACT_SUPPORT_H
#define CONTRACT_SUPPORT_H

/* The 0.2 header's name, for a library installed from it. */
#ifndef ITSME_EXCHANGE_METHOD_QR
#define ITSME_EXCHANGE_METHOD_QR ITSME_EXCHANGE_QR
#endif

#define FX_NOW INT64_C(1800000000)
#define FX_TEXT "x"
#define FX_PIN "123456"
#define FX_PASSWORD "correct horse battery staple"
#define FX_SERVICE "bank.example"
#define FX_MEETING_CODE "WEFH-TGWY"

/* 1 KiB of 0x42: a public key, a seed, a nonce, any valid-looking bytes. */
/* Releasers of the handles fixtures keep (ct_keep). */
static void ct_free_itsme_contact(void *h) { itsme_contact_free(h); }
static void ct_free_itsme_contact_list(void *h) { itsme_contact_list_free(h); }
static void ct_free_itsme_exchange(void *h) { itsme_exchange_free(h); }
static void ct_free_itsme_identity(void *h) { itsme_identity_free(h); }
static void ct_free_itsme_import(void *h) { itsme_import_free(h); }
static void ct_free_itsme_mailbox_session(void *h) { itsme_mailbox_session_free(h); }
static void ct_free_itsme_room_session(void *h) { itsme_room_session_free(h); }
static void ct_free_itsme_online_verify(void *h) { itsme_online_verify_free(h); }
static void ct_free_itsme_online_verify_rendezvous(void *h) { itsme_online_verify_rendezvous_free(h); }
static void ct_free_itsme_pin_update(void *h) { itsme_pin_update_free(h); }
static void ct_free_itsme_profile(void *h) { itsme_profile_free(h); }
static void ct_free_itsme_random(void *h) { itsme_random_free(h); }
static void ct_free_itsme_replay_store(void *h) { itsme_replay_store_free(h); }
static void ct_free_itsme_rollcall(void *h) { itsme_rollcall_free(h); }
static void ct_free_itsme_secret_store(void *h) { itsme_secret_store_free(h); }
static void ct_free_itsme_store(void *h) { itsme_store_free(h); }
static void ct_free_itsme_transfer(void *h) { itsme_transfer_free(h); }
static void ct_free_itsme_voice(void *h) { itsme_voice_free(h); }

static const uint8_t *fx_bytes_of(void) {
    static uint8_t bytes[1024];
    if (!bytes[0]) memset(bytes, 0x42, sizeof bytes);
    return bytes;
}
#define fx_bytes fx_bytes_of()

static const uint8_t fx_zeros[1024];

/* A call made to leave a last-error message: it must fail. */
static void fx_failed(itsme_result r) {
    if (r == ITSME_OK) ct_fail("fixture: a call meant to fail succeeded");
}

/* Bluetooth frames of the right sizes: a HELLO (42 bytes), a KEY (34). */
static const uint8_t *fx_hello(void) {
    static uint8_t hello[42] = {1, 1};
    return hello;
}
static const uint8_t *fx_key_frame(void) {
    static uint8_t frame[34] = {1, 2};
    return frame;
}

/* Bytes kept for the rest of the process. */
struct fx_blob {
    uint8_t *bytes;
    size_t len;
};

/* ---- secret stores and identities ------------------------------------------ */

static itsme_secret_store *fx_new_secret_store(void) {
    static itsme_secret_store *stores[8];
    static int n;
    if (n == 8) exit(1);
    CT_REQUIRE(itsme_secret_store_new_memory(&stores[n]));
    return stores[n++];
}

static itsme_secret_store *fx_itsme_secret_store(void) {
    static itsme_secret_store *s;
    if (!s) s = fx_new_secret_store();
    return ct_keep(s, ct_free_itsme_secret_store);
}

/* The directory of a file store wrapped under 32 bytes of fx_bytes (the
 * fixtures' default passphrase): made once per run (Argon2id at 256 MiB is
 * slow) in a directory of this process, then renamed into the run's
 * directory, so that checks running at once share one finished store. */
static const char *fx_wrapped_dir(void) {
    static char dir[400];
    if (dir[0]) return dir;
    char shared[300], mine[320], secrets[340];
    snprintf(shared, sizeof shared, "%s/wrapped", ct_root);
    snprintf(dir, sizeof dir, "%s/secrets", shared);
    struct stat st;
    if (stat(dir, &st) == 0) return dir;
    snprintf(mine, sizeof mine, "%s/wrapped.%d", ct_root, (int)getpid());
    snprintf(secrets, sizeof secrets, "%s/secrets", mine);
    itsme_secret_store *s = NULL;
    CT_REQUIRE(itsme_secret_store_create_file_passphrase(secrets, fx_bytes, 32, &s));
    itsme_secret_store_free(s);
    if (rename(mine, shared) != 0 && errno != EEXIST && errno != ENOTEMPTY) {
        perror("fx_wrapped_dir: rename");
        exit(1);
    }
    return dir;
}

static itsme_identity *fx_itsme_identity(void) {
    static itsme_identity *id;
    if (!id) CT_REQUIRE(itsme_identity_create(fx_itsme_secret_store(), "Alice", &id));
    return ct_keep(id, ct_free_itsme_identity);
}

static itsme_identity *fx_bob(void) {
    static itsme_identity *id;
    if (!id) CT_REQUIRE(itsme_identity_create(fx_new_secret_store(), "Bob", &id));
    return ct_keep(id, ct_free_itsme_identity);
}

static const uint8_t *fx_public_key(itsme_identity *id) {
    static uint8_t keys[2][32];
    static itsme_identity *of[2];
    int i = of[0] == id || of[0] == NULL ? 0 : 1;
    if (of[i] != id) {
        size_t len = 0;
        CT_REQUIRE(itsme_identity_public_key(id, keys[i], 32, &len));
        of[i] = id;
    }
    return keys[i];
}

/* A host secret store over a small table. */
struct fx_host_store {
    char names[16][130];
    uint8_t values[16][1024];
    size_t lens[16];
    int used[16];
};
static struct fx_host_store fx_host, fx_pin_host;

static int fx_host_slot(struct fx_host_store *h, const char *name) {
    for (int i = 0; i < 16; i++)
        if (h->used[i] && strcmp(h->names[i], name) == 0) return i;
    return -1;
}
static itsme_result fx_host_get(void *ctx, const char *name, uint8_t *out, size_t cap, size_t *out_len) {
    struct fx_host_store *h = ctx;
    int i = fx_host_slot(h, name);
    if (i < 0) return ITSME_E_NOT_FOUND;
    *out_len = h->lens[i];
    if (cap < h->lens[i]) return ITSME_E_BUFFER_TOO_SMALL;
    memcpy(out, h->values[i], h->lens[i]);
    return ITSME_OK;
}
static itsme_result fx_host_put(void *ctx, const char *name, const uint8_t *value, size_t len,
                                itsme_accessibility accessibility) {
    struct fx_host_store *h = ctx;
    (void)accessibility;
    if (len > sizeof h->values[0] || strlen(name) >= sizeof h->names[0]) return ITSME_E_SECRET_STORE;
    int i = fx_host_slot(h, name);
    for (int j = 0; i < 0 && j < 16; j++)
        if (!h->used[j]) i = j;
    if (i < 0) return ITSME_E_SECRET_STORE;
    strcpy(h->names[i], name);
    memcpy(h->values[i], value, len);
    h->lens[i] = len;
    h->used[i] = 1;
    return ITSME_OK;
}
static itsme_result fx_host_remove(void *ctx, const char *name) {
    struct fx_host_store *h = ctx;
    int i = fx_host_slot(h, name);
    if (i < 0) return ITSME_E_NOT_FOUND;
    h->used[i] = 0;
    return ITSME_OK;
}
static void fx_host_destroy(void *ctx) { (void)ctx; }

static itsme_secret_store *fx_host_secret_store(struct fx_host_store *h) {
    itsme_secret_store_callbacks table;
    memset(&table, 0, sizeof table);
#ifdef CT_VERSION_itsme_secret_store_callbacks
    table.version = CT_VERSION_itsme_secret_store_callbacks;
#endif
    table.ctx = h;
    table.get = fx_host_get;
    table.put = fx_host_put;
    table.remove = fx_host_remove;
    table.destroy = fx_host_destroy;
    static itsme_secret_store *stores[2];
    int i = h == &fx_host ? 0 : 1;
    if (!stores[i]) CT_REQUIRE(itsme_secret_store_new_callbacks(&table, &stores[i]));
    return stores[i];
}

/* Alice with the PIN FX_PIN.  Setting a PIN costs a key derivation: it is
 * done once per run, the host store kept in the run's directory and loaded
 * by the other checks. */
static itsme_identity *fx_identity_with_pin(void) {
    static itsme_identity *id;
    if (id) return id;
    char path[300];
    snprintf(path, sizeof path, "%s/pin-identity.bin", ct_root);
    itsme_secret_store *store = fx_host_secret_store(&fx_pin_host);
    FILE *f = fopen(path, "rb");
    if (f) {
        size_t n = fread(&fx_pin_host, sizeof fx_pin_host, 1, f);
        fclose(f);
        if (n == 1) {
            CT_REQUIRE(itsme_identity_load(store, &id));
            return ct_keep(id, ct_free_itsme_identity);
        }
    }
    CT_REQUIRE(itsme_identity_create(store, "Alice", &id));
    CT_REQUIRE(itsme_pin_set(id, FX_PIN));
    char part[320];
    snprintf(part, sizeof part, "%s.%d", path, (int)getpid());
    f = fopen(part, "wb");
    if (f) {
        if (fwrite(&fx_pin_host, sizeof fx_pin_host, 1, f) == 1 && fclose(f) == 0) rename(part, path);
        else fclose(f);
    }
    return id;
}

static const itsme_secret_store_callbacks *fx_itsme_secret_store_callbacks(void) {
    static itsme_secret_store_callbacks table;
    memset(&table, 0, sizeof table);
#ifdef CT_VERSION_itsme_secret_store_callbacks
    table.version = CT_VERSION_itsme_secret_store_callbacks;
#endif
    table.ctx = &fx_host;
    table.get = fx_host_get;
    table.put = fx_host_put;
    table.remove = fx_host_remove;
    table.destroy = fx_host_destroy;
    return &table;
}

/* Where the fixtures' contact store lives. */
static const char *fx_store_path(void) { return ct_path("contacts.db"); }

/* ---- the contact store ------------------------------------------------------ */

static itsme_store *fx_itsme_store(void) {
    static itsme_store *s;
    if (!s) CT_REQUIRE(itsme_store_open(fx_itsme_identity(), fx_store_path(), &s));
    return ct_keep(s, ct_free_itsme_store);
}

/* A verified contact "Ann" (key 0x42...), its window 100 used, a note. */
static int64_t fx_contact(void) {
    static int64_t id = -1;
    if (id < 0) {
        itsme_store *s = fx_itsme_store();
        CT_REQUIRE(itsme_store_add(s, "Ann", fx_bytes, 32, fx_bytes, 32, ITSME_EXCHANGE_METHOD_QR, FX_NOW, &id));
        CT_REQUIRE(itsme_store_set_state(s, id, ITSME_CONTACT_VERIFIED, 0, FX_NOW + 5));
        CT_REQUIRE(itsme_store_use_window(s, id, 100));
        CT_REQUIRE(itsme_store_set_note(s, id, "met at the bakery"));
    }
    return id;
}

static int64_t fx_contact_with_photo(void) {
    static int done;
    if (!done) CT_REQUIRE(itsme_store_set_photo(fx_itsme_store(), fx_contact(), fx_bytes, 100, "ann.jpg"));
    done = 1;
    return fx_contact();
}

static itsme_contact *fx_itsme_contact(void) {
    static itsme_contact *c;
    if (!c) CT_REQUIRE(itsme_store_get(fx_itsme_store(), fx_contact(), &c));
    return ct_keep(c, ct_free_itsme_contact);
}

static itsme_contact_list *fx_itsme_contact_list(void) {
    static itsme_contact_list *l;
    fx_contact();
    if (!l) CT_REQUIRE(itsme_store_list(fx_itsme_store(), 0, 10, &l));
    return ct_keep(l, ct_free_itsme_contact_list);
}

/* The fingerprint of the contact's key. */
static const char *fx_contact_fingerprint(void) {
    static char fp[ITSME_FINGERPRINT_SIZE];
    size_t len = 0;
    if (!fp[0]) CT_REQUIRE(itsme_fingerprint_from_public_key(fx_bytes, 32, fp, sizeof fp, &len));
    return fp;
}

/* A store that was opened and closed: its loss can be accepted. */
static const char *fx_closed_store_path(void) {
    static int done;
    const char *path = ct_path("closed.db");
    if (!done) {
        itsme_store *s = NULL;
        CT_REQUIRE(itsme_store_open(fx_itsme_identity(), path, &s));
        itsme_store_free(s);
        done = 1;
    }
    return path;
}

/* Alice's and Bob's stores, each holding the other as a contact with the
 * same seed: the two sides of a voice session, an Online Verify, a PIN
 * update. */
static itsme_store *fx_bob_store(void) {
    static itsme_store *s;
    if (!s) CT_REQUIRE(itsme_store_open(fx_bob(), ct_path("bob.db"), &s));
    return ct_keep(s, ct_free_itsme_store);
}
static int64_t fx_alice_knows_bob(void) {
    static int64_t id = -1;
    if (id < 0)
        CT_REQUIRE(itsme_store_add(fx_itsme_store(), "Bob", fx_public_key(fx_bob()), 32, fx_bytes, 32,
                                   ITSME_EXCHANGE_METHOD_QR, FX_NOW, &id));
    return id;
}
static int64_t fx_bob_knows_alice(void) {
    static int64_t id = -1;
    if (id < 0)
        CT_REQUIRE(itsme_store_add(fx_bob_store(), "Alice", fx_public_key(fx_itsme_identity()), 32, fx_bytes, 32,
                                   ITSME_EXCHANGE_METHOD_QR, FX_NOW, &id));
    return id;
}

/* ---- random sources ----------------------------------------------------------- */

static itsme_random *fx_itsme_random(void) {
#ifdef CT_HAS_itsme_random_new_deterministic
    static itsme_random *r;
    if (!r) CT_REQUIRE(itsme_random_new_deterministic(fx_bytes, 32, &r));
    return ct_keep(r, ct_free_itsme_random);
#else
    return NULL; /* only the test build makes one */
#endif
}

/* ---- exchanges ------------------------------------------------------------------ */

static itsme_exchange *fx_itsme_exchange(void) {
    static itsme_exchange *e;
    if (!e) CT_REQUIRE(itsme_exchange_new_qr(fx_itsme_identity(), fx_itsme_store(), NULL, FX_NOW, &e));
    return ct_keep(e, ct_free_itsme_exchange);
}

static struct fx_blob fx_qr_payload(itsme_exchange *e) {
    struct fx_blob b = {malloc(ITSME_QR_PAYLOAD_MAX), 0};
    if (!b.bytes) exit(1);
    CT_REQUIRE(itsme_exchange_next_outgoing(e, b.bytes, ITSME_QR_PAYLOAD_MAX, &b.len));
    return b;
}

static itsme_exchange *fx_bob_exchange(void) {
    static itsme_exchange *e;
    if (!e) CT_REQUIRE(itsme_exchange_new_qr(fx_bob(), fx_bob_store(), NULL, FX_NOW, &e));
    return ct_keep(e, ct_free_itsme_exchange);
}

static struct fx_blob fx_alice_payload(void) {
    static struct fx_blob b;
    if (!b.bytes) b = fx_qr_payload(fx_itsme_exchange());
    return b;
}
static struct fx_blob fx_bob_payload(void) {
    static struct fx_blob b;
    if (!b.bytes) b = fx_qr_payload(fx_bob_exchange());
    return b;
}

/* Alice's QR exchange with Bob at ITSME_EXCHANGE_STATE_COMPARE_SAS. */
static itsme_exchange *fx_exchange_compare_sas(void) {
    static int done;
    if (!done) {
        struct fx_blob a = fx_alice_payload(), b = fx_bob_payload();
        CT_REQUIRE(itsme_exchange_receive(fx_itsme_exchange(), b.bytes, b.len, FX_NOW));
        CT_REQUIRE(itsme_exchange_receive(fx_bob_exchange(), a.bytes, a.len, FX_NOW));
        done = 1;
    }
    return fx_itsme_exchange();
}

static struct fx_blob fx_sealed_exchange(void) {
    static struct fx_blob b;
    if (!b.bytes) {
        b.bytes = malloc(4096);
        if (!b.bytes) exit(1);
        CT_REQUIRE(itsme_exchange_seal(fx_exchange_compare_sas(), b.bytes, 4096, &b.len));
    }
    return b;
}

static itsme_exchange *fx_exchange_bluetooth(void) {
    static itsme_exchange *e;
    if (!e) CT_REQUIRE(itsme_exchange_new_bluetooth(fx_itsme_identity(), fx_itsme_store(), NULL, NULL, FX_NOW, &e));
    return ct_keep(e, ct_free_itsme_exchange);
}

static itsme_exchange *fx_exchange_invite(void) {
    static itsme_exchange *e;
    if (!e) CT_REQUIRE(itsme_exchange_new_invite(fx_itsme_identity(), fx_itsme_store(), 0, NULL, FX_NOW, &e));
    return ct_keep(e, ct_free_itsme_exchange);
}

static const char *fx_invite_code(void) {
    static char code[ITSME_REMOTE_CODE_SIZE];
    size_t len = 0;
    if (!code[0]) CT_REQUIRE(itsme_exchange_invite_code(fx_exchange_invite(), code, sizeof code, &len));
    return code;
}
static const char *fx_encryption_code(void) {
    static char code[ITSME_REMOTE_CODE_SIZE];
    size_t len = 0;
    if (!code[0]) CT_REQUIRE(itsme_exchange_encryption_code(fx_exchange_invite(), code, sizeof code, &len));
    return code;
}

/* Moves messages both ways between two exchanges until neither sends. */
static void fx_pump(itsme_exchange *a, itsme_exchange *b) {
    uint8_t m[ITSME_REMOTE_MESSAGE_MAX];
    size_t len = 0;
    for (int moved = 1; moved;) {
        moved = 0;
        itsme_exchange *from[2] = {a, b}, *to[2] = {b, a};
        for (int i = 0; i < 2; i++) {
            CT_REQUIRE(itsme_exchange_next_outgoing(from[i], m, sizeof m, &len));
            if (len == 0) continue;
            CT_REQUIRE(itsme_exchange_receive(to[i], m, len, FX_NOW));
            moved = 1;
        }
    }
}

/* Alice's invite exchange with Bob: both confirmed, decisions moved, Alice
 * may settle into her store. */
static itsme_exchange *fx_exchange_settleable(void) {
    static itsme_exchange *b;
    if (!b) {
        itsme_exchange *a = fx_exchange_invite();
        int64_t id = 0;
        CT_REQUIRE(itsme_exchange_accept_invite(fx_bob(), fx_bob_store(), fx_invite_code(), fx_encryption_code(), 0, NULL, FX_NOW, &b));
        ct_keep(b, ct_free_itsme_exchange);
        fx_pump(a, b);
        CT_REQUIRE(itsme_exchange_confirm(a, FX_NOW, &id));
        CT_REQUIRE(itsme_exchange_confirm(b, FX_NOW, &id));
        fx_pump(a, b);
    }
    return fx_exchange_invite();
}

/* ---- voice, Online Verify, PIN update ------------------------------------------ */

#define FX_VOICE_START (FX_NOW + 30)

static itsme_voice *fx_itsme_voice(void) {
    static itsme_voice *v;
    if (!v) CT_REQUIRE(itsme_voice_new(fx_itsme_store(), fx_alice_knows_bob(), NULL, 0, FX_NOW, &v));
    return ct_keep(v, ct_free_itsme_voice);
}
static itsme_voice *fx_bob_voice(void) {
    static itsme_voice *v;
    if (!v) CT_REQUIRE(itsme_voice_new(fx_bob_store(), fx_bob_knows_alice(), NULL, 0, FX_NOW, &v));
    return ct_keep(v, ct_free_itsme_voice);
}

static itsme_voice *fx_voice_started(void) {
    static int done;
    if (!done) {
        CT_REQUIRE(itsme_voice_start(fx_itsme_voice(), FX_VOICE_START));
        CT_REQUIRE(itsme_voice_start(fx_bob_voice(), FX_VOICE_START));
        done = 1;
    }
    return fx_itsme_voice();
}

/* Both sides past their two selections: codes can be read and checked. */
static itsme_voice *fx_voice_selected(void) {
    static int done;
    if (!done) {
        uint8_t words_a[8], words_b[8];
        itsme_voice *a = fx_voice_started(), *b = fx_bob_voice();
#ifdef CT_NO_OUT_LEN_itsme_voice_words
        CT_REQUIRE(itsme_voice_words(a, words_a, 5));
        CT_REQUIRE(itsme_voice_words(b, words_b, 5));
#else
        size_t len = 0;
        CT_REQUIRE(itsme_voice_words(a, words_a, 5, &len));
        CT_REQUIRE(itsme_voice_words(b, words_b, 5, &len));
#endif
        for (int step = 0; step < 2; step++) {
            itsme_voice_state state = 0;
            uint32_t turn = 0;
            CT_REQUIRE(itsme_voice_status(a, &state, &turn));
            uint8_t word = turn == ITSME_VOICE_TURN_MINE ? words_a[0] : words_b[0];
            CT_REQUIRE(itsme_voice_select(a, word, FX_VOICE_START + 1));
            CT_REQUIRE(itsme_voice_select(b, word, FX_VOICE_START + 1));
        }
        done = 1;
    }
    return fx_itsme_voice();
}

/* What Bob hears Alice say, for Bob's check. */
static const char *fx_heard_code(uint32_t *tag) {
    static char code[ITSME_VOICE_CODE_SIZE];
    static uint32_t heard_tag;
    size_t len = 0;
    if (!code[0]) CT_REQUIRE(itsme_voice_your_code(fx_voice_selected(), code, sizeof code, &len, &heard_tag));
    *tag = heard_tag;
    return code;
}

static itsme_online_verify *fx_itsme_online_verify(void) {
    static itsme_online_verify *s;
    if (!s)
        CT_REQUIRE(itsme_online_verify_new(fx_itsme_store(), fx_alice_knows_bob(), FX_NOW / 30, NULL, 0, NULL, FX_NOW, &s));
    return ct_keep(s, ct_free_itsme_online_verify);
}
static itsme_online_verify *fx_bob_online_verify(void) {
    static itsme_online_verify *s;
    if (!s)
        CT_REQUIRE(itsme_online_verify_new(fx_bob_store(), fx_bob_knows_alice(), FX_NOW / 30, NULL, 0, NULL, FX_NOW, &s));
    return ct_keep(s, ct_free_itsme_online_verify);
}

/* The side of the pair with a message to send first (it depends on the
 * keys). */
static itsme_online_verify *fx_online_verify_sending(void) {
    size_t len = 0;
    itsme_result r = itsme_online_verify_next_outgoing(fx_itsme_online_verify(), NULL, 0, &len);
    if (r == ITSME_E_BUFFER_TOO_SMALL) return fx_itsme_online_verify();
    return fx_bob_online_verify();
}

static void fx_online_pump(void) {
    itsme_online_verify *from[2] = {fx_itsme_online_verify(), fx_bob_online_verify()};
    for (int moved = 1; moved;) {
        moved = 0;
        for (int i = 0; i < 2; i++) {
            uint8_t m[ITSME_ONLINE_VERIFY_MESSAGE_MAX];
            size_t len = 0;
            CT_REQUIRE(itsme_online_verify_next_outgoing(from[i], m, sizeof m, &len));
            if (len == 0) continue;
            CT_REQUIRE(itsme_online_verify_receive(from[1 - i], m, len, FX_NOW + 1));
            moved = 1;
        }
    }
}

/* Alice's session at ITSME_ONLINE_VERIFY_STATE_COMPARE_SAS; Bob shares a
 * profile reference. */
static itsme_online_verify *fx_online_verify_compare_sas(void) {
    static int done;
    if (!done) {
        CT_REQUIRE(itsme_online_verify_share_profile(fx_bob_online_verify(), fx_bytes, ITSME_PROFILE_REFERENCE_BYTES));
        fx_online_pump();
        done = 1;
    }
    return fx_itsme_online_verify();
}

/* Both confirmed: Alice has Bob's profile reference. */
static itsme_online_verify *fx_online_verify_confirmed(void) {
    static int done;
    if (!done) {
        itsme_voice_outcome outcome = 0;
        fx_online_verify_compare_sas();
        CT_REQUIRE(itsme_online_verify_confirm(fx_itsme_online_verify(), FX_NOW + 2, &outcome));
        CT_REQUIRE(itsme_online_verify_confirm(fx_bob_online_verify(), FX_NOW + 2, &outcome));
        fx_online_pump();
        done = 1;
    }
    return fx_itsme_online_verify();
}

static itsme_pin_update *fx_itsme_pin_update(void) {
    static itsme_pin_update *u;
    if (!u) CT_REQUIRE(itsme_pin_update_new(fx_itsme_store(), fx_alice_knows_bob(), FX_NOW / 30, NULL, FX_NOW, &u));
    return ct_keep(u, ct_free_itsme_pin_update);
}

/* ---- the invite-mailbox driver, the Online Verify room rule -------------------- */

/* An invite exchange of its own: a session takes its messages. */
static itsme_exchange *fx_mailbox_exchange(void) {
    static itsme_exchange *e;
    if (!e) CT_REQUIRE(itsme_exchange_new_invite(fx_itsme_identity(), fx_itsme_store(), 0, NULL, FX_NOW, &e));
    return ct_keep(e, ct_free_itsme_exchange);
}

static itsme_mailbox_session *fx_itsme_mailbox_session(void) {
    static itsme_mailbox_session *s;
    if (!s) CT_REQUIRE(itsme_mailbox_session_new(fx_mailbox_exchange(), &s));
    return ct_keep(s, ct_free_itsme_mailbox_session);
}

/* A session of its own with a request pending (a create, which each
 * answer of the suite ends: the next call begins a step again). */
static itsme_mailbox_session *fx_mailbox_pending(void) {
    static itsme_mailbox_session *s;
    itsme_mailbox_request request = 0;
    if (!s) {
        itsme_exchange *e = NULL;
        CT_REQUIRE(itsme_exchange_new_invite(fx_itsme_identity(), fx_itsme_store(), 0, NULL, FX_NOW, &e));
        CT_REQUIRE(itsme_mailbox_session_new(e, &s));
        itsme_exchange_free(e);
    }
    CT_REQUIRE(itsme_mailbox_session_begin(s, 0));
    CT_REQUIRE(itsme_mailbox_session_next_request(s, &request));
    return ct_keep(s, ct_free_itsme_mailbox_session);
}

/* A session that holds a token, its INVITE pending as a POST. */
static itsme_mailbox_session *fx_mailbox_posting(void) {
    static itsme_mailbox_session *s;
    if (!s) {
        static const char created[] = "{\"token\": \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\", \"expires\": 1800086400}";
        itsme_exchange *e = NULL;
        itsme_mailbox_request request = 0;
        itsme_mailbox_outcome outcome = 0;
        CT_REQUIRE(itsme_exchange_new_invite(fx_itsme_identity(), fx_itsme_store(), 0, NULL, FX_NOW, &e));
        CT_REQUIRE(itsme_mailbox_session_new(e, &s));
        itsme_exchange_free(e);
        CT_REQUIRE(itsme_mailbox_session_begin(s, 30));
        CT_REQUIRE(itsme_mailbox_session_next_request(s, &request));
        CT_REQUIRE(itsme_mailbox_session_answer(s, 201, (const uint8_t *)created, sizeof created - 1, FX_NOW, &outcome));
        CT_REQUIRE(itsme_mailbox_session_next_request(s, &request));
    }
    return ct_keep(s, ct_free_itsme_mailbox_session);
}

/* The saved state of fx_itsme_mailbox_session, for its exchange. */
static const char *fx_mailbox_saved(void) {
    static char saved[4096];
    size_t len = 0;
    if (!saved[0]) CT_REQUIRE(itsme_mailbox_session_save(fx_itsme_mailbox_session(), saved, sizeof saved, &len));
    return saved;
}

/* ---- the room driver ------------------------------------------------------------- */

/* A real-time exchange of its own: a room session takes its messages. */
static itsme_exchange *fx_room_exchange(void) {
    static itsme_exchange *e;
    if (!e) CT_REQUIRE(itsme_exchange_new_invite(fx_itsme_identity(), fx_itsme_store(), 1, NULL, FX_NOW, &e));
    return ct_keep(e, ct_free_itsme_exchange);
}

static itsme_room_session *fx_itsme_room_session(void) {
    static itsme_room_session *s;
    if (!s) CT_REQUIRE(itsme_room_session_for_exchange(fx_room_exchange(), &s));
    return ct_keep(s, ct_free_itsme_room_session);
}

/* A session of its own whose step is SEND: the peer joined, the INVITE is
 * to be sent. */
static itsme_room_session *fx_room_sending(void) {
    static itsme_room_session *s;
    if (!s) {
        static const char joined[] = "{\"type\":\"peer-joined\"}";
        itsme_exchange *e = NULL;
        itsme_room_step step = 0;
        CT_REQUIRE(itsme_exchange_new_invite(fx_itsme_identity(), fx_itsme_store(), 1, NULL, FX_NOW, &e));
        CT_REQUIRE(itsme_room_session_for_exchange(e, &s));
        itsme_exchange_free(e);
        CT_REQUIRE(itsme_room_session_text(s, (const uint8_t *)joined, sizeof joined - 1));
        CT_REQUIRE(itsme_room_session_next(s, FX_NOW, &step));
    }
    return ct_keep(s, ct_free_itsme_room_session);
}

/* A session of its own that the room ended early: the deadline passed. */
static itsme_room_session *fx_room_failed(void) {
    static itsme_room_session *s;
    if (!s) {
        itsme_exchange *e = NULL;
        CT_REQUIRE(itsme_exchange_new_invite(fx_itsme_identity(), fx_itsme_store(), 1, NULL, FX_NOW, &e));
        CT_REQUIRE(itsme_room_session_for_exchange(e, &s));
        itsme_exchange_free(e);
        CT_REQUIRE(itsme_room_session_timed_out(s));
    }
    return ct_keep(s, ct_free_itsme_room_session);
}

static itsme_online_verify_rendezvous *fx_itsme_online_verify_rendezvous(void) {
    static itsme_online_verify_rendezvous *r;
    if (!r) CT_REQUIRE(itsme_online_verify_rendezvous_new(fx_itsme_store(), fx_alice_knows_bob(), NULL, 0, NULL, FX_NOW, &r));
    return ct_keep(r, ct_free_itsme_online_verify_rendezvous);
}

/* The current window's room of fx_itsme_online_verify_rendezvous. */
static const char *fx_rendezvous_room(void) {
    static char room[ITSME_ROOM_NAME_SIZE];
    size_t len = 0;
    if (!room[0]) CT_REQUIRE(itsme_online_verify_rendezvous_room(fx_itsme_online_verify_rendezvous(), 0, room, sizeof room, &len));
    return room;
}

/* ---- the roll call ----------------------------------------------------------------- */

/* Alice's roll call (she knows Bob), joined alone in slot 1: its HELLO and
 * VIEW queued. */
static itsme_rollcall *fx_itsme_rollcall(void) {
    static itsme_rollcall *r;
    if (!r) {
        fx_alice_knows_bob();
        CT_REQUIRE(itsme_rollcall_new(fx_itsme_store(), FX_MEETING_CODE, NULL, 0, NULL, FX_NOW, &r));
        CT_REQUIRE(itsme_rollcall_joined(r, 1, NULL, 0, FX_NOW));
    }
    return ct_keep(r, ct_free_itsme_rollcall);
}

/* A list of relay slots for itsme_rollcall_joined: slot 2, big-endian. */
static const uint8_t *fx_rollcall_peers(void) {
    static const uint8_t peers[ITSME_ROLLCALL_SLOT_BYTES] = {0, 2};
    return peers;
}

/* Bob's roll call (he knows Alice), joined in slot 2 beside Alice's slot 1. */
static itsme_rollcall *fx_bob_rollcall(void) {
    static itsme_rollcall *r;
    static const uint8_t alice_slot[ITSME_ROLLCALL_SLOT_BYTES] = {0, 1};
    if (!r) {
        fx_bob_knows_alice();
        CT_REQUIRE(itsme_rollcall_new(fx_bob_store(), FX_MEETING_CODE, NULL, 0, NULL, FX_NOW, &r));
        CT_REQUIRE(itsme_rollcall_joined(r, 2, alice_slot, 1, FX_NOW));
    }
    return ct_keep(r, ct_free_itsme_rollcall);
}

/* Bob's HELLO (the first message his roll call queued). */
static struct fx_blob fx_rollcall_bob_hello(void) {
    static struct fx_blob b;
    static uint8_t hello[ITSME_ROLLCALL_MESSAGE_MAX];
    if (!b.bytes) {
        CT_REQUIRE(itsme_rollcall_next_outgoing(fx_bob_rollcall(), hello, sizeof hello, &b.len));
        if (b.len == 0) ct_fail("fixture: Bob's roll call queued no HELLO");
        b.bytes = hello;
    }
    return b;
}

/* Moves every queued message of each roll call to the other (the relay's
 * group room, slot `sa` and `sb`), until neither has one. */
static void fx_rollcall_pump(itsme_rollcall *a, uint32_t sa, itsme_rollcall *b, uint32_t sb) {
    static uint8_t m[ITSME_ROLLCALL_MESSAGE_MAX];
    int moved = 1;
    while (moved) {
        moved = 0;
        for (int side = 0; side < 2; side++) {
            itsme_rollcall *from = side ? b : a, *to = side ? a : b;
            uint32_t slot = side ? sb : sa;
            size_t len = 0;
            for (;;) {
                CT_REQUIRE(itsme_rollcall_next_outgoing(from, m, sizeof m, &len));
                if (len == 0) break;
                CT_REQUIRE(itsme_rollcall_receive(to, m, len, slot, FX_NOW));
                moved = 1;
            }
        }
    }
}

/* Alice's roll call with Bob (slot 2) present: their HELLOs and VIEWs
 * exchanged, a roster of two to confirm (one of her alone is refused). */
static itsme_rollcall *fx_rollcall_with_bob(void) {
    static int done;
    if (!done) {
        struct fx_blob hello = fx_rollcall_bob_hello();
        CT_REQUIRE(itsme_rollcall_peer_joined(fx_itsme_rollcall(), 2, FX_NOW));
        CT_REQUIRE(itsme_rollcall_receive(fx_itsme_rollcall(), hello.bytes, hello.len, 2, FX_NOW));
        fx_rollcall_pump(fx_itsme_rollcall(), 1, fx_bob_rollcall(), 2);
        size_t count = 0;
        CT_REQUIRE(itsme_rollcall_head_count(fx_itsme_rollcall(), &count));
        if (count != 2) ct_fail("fixture: Bob is not present in Alice's roll call (head count %zu)", count);
        done = 1;
    }
    return fx_itsme_rollcall();
}

/* The roster of fx_rollcall_with_bob. */
static const uint8_t *fx_rollcall_roster(void) {
    static uint8_t roster[ITSME_ROLLCALL_ROSTER_BYTES];
    size_t len = 0;
    CT_REQUIRE(itsme_rollcall_roster(fx_rollcall_with_bob(), roster, sizeof roster, &len));
    return roster;
}

/* fx_rollcall_with_bob, its roster confirmed. */
static itsme_rollcall *fx_rollcall_confirmed(void) {
    static int done;
    if (!done) {
        CT_REQUIRE(itsme_rollcall_confirm_roster(fx_rollcall_with_bob(), fx_rollcall_roster(), ITSME_ROLLCALL_ROSTER_BYTES, NULL, FX_NOW));
        done = 1;
    }
    return fx_itsme_rollcall();
}

/* ---- export, import, transfer -------------------------------------------------- */

/* Alice's export under FX_PASSWORD: made once per run (Argon2id at 256 MiB
 * is slow) and kept in the run's directory for the other checks. */
static struct fx_blob fx_export(void) {
    static struct fx_blob b;
    if (b.bytes) return b;
    char path[300];
    snprintf(path, sizeof path, "%s/export.bin", ct_root);
    b.bytes = malloc(ITSME_EXPORT_MAX);
    if (!b.bytes) exit(1);
    FILE *f = fopen(path, "rb");
    if (f) {
        b.len = fread(b.bytes, 1, ITSME_EXPORT_MAX, f);
        fclose(f);
        if (b.len > 0) return b;
    }
    CT_REQUIRE(itsme_identity_export(fx_identity_with_pin(), FX_PIN, FX_NOW, FX_PASSWORD,
                                     ITSME_EXPORT_PASSWORD_CHOSEN, NULL, b.bytes, ITSME_EXPORT_MAX, &b.len));
    char part[320];
    snprintf(part, sizeof part, "%s.%d", path, (int)getpid());
    f = fopen(part, "wb");
    if (f) {
        if (fwrite(b.bytes, 1, b.len, f) == b.len && fclose(f) == 0) rename(part, path);
        else fclose(f);
    }
    return b;
}

/* The contact store of fx_identity_with_pin (an export with the contacts
 * carries a store of its own identity). */
static itsme_store *fx_pin_store(void) {
    static itsme_store *s;
    if (!s) CT_REQUIRE(itsme_store_open(fx_identity_with_pin(), ct_path("pin-contacts.db"), &s));
    return ct_keep(s, ct_free_itsme_store);
}

static const char *fx_export_text(void) {
    static char text[ITSME_EXPORT_TEXT_SIZE];
    size_t len = 0;
    if (!text[0]) CT_REQUIRE(itsme_export_to_text(fx_export().bytes, fx_export().len, text, sizeof text, &len));
    return text;
}

static const char *fx_export_password(void) {
    static char password[ITSME_EXPORT_PASSWORD_SIZE];
    size_t len = 0;
    if (!password[0]) CT_REQUIRE(itsme_export_generate_password(NULL, password, sizeof password, &len));
    return password;
}

static itsme_transfer *fx_itsme_transfer(void) {
    static itsme_transfer *t;
    if (!t) CT_REQUIRE(itsme_transfer_new_receiver(NULL, FX_NOW, &t));
    return ct_keep(t, ct_free_itsme_transfer);
}

static const char *fx_transfer_offer(void) {
    static char offer[ITSME_TRANSFER_OFFER_SIZE];
    size_t len = 0;
    if (!offer[0]) CT_REQUIRE(itsme_transfer_offer(fx_itsme_transfer(), offer, sizeof offer, &len));
    return offer;
}

/* The sender, at ITSME_TRANSFER_STATE_COMPARE_SAS at once. */
static itsme_transfer *fx_transfer_sender(void) {
    static itsme_transfer *t;
    if (!t) CT_REQUIRE(itsme_transfer_new_sender(fx_identity_with_pin(), FX_PIN, fx_transfer_offer(), NULL, FX_NOW, &t));
    return ct_keep(t, ct_free_itsme_transfer);
}

static void fx_transfer_pump(void) {
    uint8_t m[ITSME_TRANSFER_MESSAGE_MAX];
    size_t len = 0;
    for (;;) {
        CT_REQUIRE(itsme_transfer_next_outgoing(fx_transfer_sender(), m, sizeof m, &len));
        if (len == 0) return;
        CT_REQUIRE(itsme_transfer_receive(fx_itsme_transfer(), m, len, FX_NOW + 1));
    }
}

/* The receiver, done: it holds Alice's identity. */
static itsme_transfer *fx_transfer_done(void) {
    static int done;
    if (!done) {
        fx_transfer_pump();
        CT_REQUIRE(itsme_transfer_confirm(fx_transfer_sender(), FX_NOW + 2));
        CT_REQUIRE(itsme_transfer_confirm(fx_itsme_transfer(), FX_NOW + 2));
        fx_transfer_pump();
        done = 1;
    }
    return fx_itsme_transfer();
}

static itsme_import *fx_itsme_import(void) {
    static itsme_import *i;
    if (!i) CT_REQUIRE(itsme_transfer_take_import(fx_transfer_done(), &i));
    return ct_keep(i, ct_free_itsme_import);
}

/* ---- profiles, credentials, approvals ------------------------------------------- */

static itsme_profile *fx_itsme_profile(void) {
    static itsme_profile *p;
    if (!p)
        CT_REQUIRE(itsme_profile_create(fx_itsme_identity(), "Alice Smith", fx_bytes, 100, "alice.jpg", NULL, &p));
    return ct_keep(p, ct_free_itsme_profile);
}

static struct fx_blob fx_profile_part(itsme_result (*get)(const itsme_profile *, uint8_t *, size_t, size_t *),
                                      struct fx_blob *b) {
    if (!b->bytes) {
        b->bytes = malloc(4096);
        if (!b->bytes) exit(1);
        CT_REQUIRE(get(fx_itsme_profile(), b->bytes, 4096, &b->len));
    }
    return *b;
}
static struct fx_blob fx_profile_record(void) {
    static struct fx_blob b;
    return fx_profile_part(itsme_profile_record, &b);
}
static struct fx_blob fx_profile_reference(void) {
    static struct fx_blob b;
    return fx_profile_part(itsme_profile_reference, &b);
}

/* A secret store enrolled with FX_SERVICE, and its enrollment. */
static struct fx_blob fx_enrollment(void) {
    static struct fx_blob b;
    if (!b.bytes) {
        b.bytes = malloc(ITSME_ENROLLMENT_MAX);
        if (!b.bytes) exit(1);
        CT_REQUIRE(itsme_credential_enroll(fx_itsme_secret_store(), FX_SERVICE, "Phone", fx_bytes, 32, NULL, b.bytes,
                                           ITSME_ENROLLMENT_MAX, &b.len));
    }
    return b;
}
static itsme_secret_store *fx_enrolled_store(void) {
    fx_enrollment();
    return fx_itsme_secret_store();
}
static const uint8_t *fx_credential_key(void) {
    static itsme_credential_info info;
    static int done;
    if (!done) {
        struct fx_blob e = fx_enrollment();
#ifdef CT_SIZED_itsme_credential_info
        info.size = sizeof info;
#endif
        CT_REQUIRE(itsme_enrollment_verify(FX_SERVICE, fx_bytes, 32, e.bytes, e.len, &info));
        done = 1;
    }
    return info.public_key;
}

static struct fx_blob fx_request(void) {
    static struct fx_blob b;
    if (!b.bytes) {
        b.bytes = malloc(ITSME_APPROVAL_REQUEST_MAX);
        if (!b.bytes) exit(1);
        CT_REQUIRE(itsme_approval_request_create(FX_SERVICE, "Bank", "s1", "email profile", 120, NULL, FX_NOW, b.bytes,
                                                 ITSME_APPROVAL_REQUEST_MAX, &b.len));
    }
    return b;
}

static struct fx_blob fx_approval(void) {
    static struct fx_blob b;
    if (!b.bytes) {
        b.bytes = malloc(ITSME_APPROVAL_MAX);
        if (!b.bytes) exit(1);
        CT_REQUIRE(itsme_approval_sign(fx_enrolled_store(), fx_request().bytes, fx_request().len, ITSME_APPROVAL_APPROVE,
                                       "email", FX_NOW + 2, b.bytes, ITSME_APPROVAL_MAX, &b.len));
    }
    return b;
}

static itsme_result fx_replay_insert(void *ctx, const uint8_t *key, int64_t expires_at, int64_t now, bool *out_seen) {
    (void)ctx;
    (void)key;
    (void)expires_at;
    (void)now;
    *out_seen = false;
    return ITSME_OK;
}
static void fx_replay_destroy(void *ctx) { (void)ctx; }

static const itsme_replay_store_callbacks *fx_itsme_replay_store_callbacks(void) {
    static itsme_replay_store_callbacks table;
#ifdef CT_VERSION_itsme_replay_store_callbacks
    table.version = CT_VERSION_itsme_replay_store_callbacks;
#endif
    table.ctx = NULL;
    table.insert = fx_replay_insert;
    table.destroy = fx_replay_destroy;
    return &table;
}

static itsme_replay_store *fx_itsme_replay_store(void) {
    static itsme_replay_store *r;
    if (!r) CT_REQUIRE(itsme_replay_store_new_memory(16, &r));
    return ct_keep(r, ct_free_itsme_replay_store);
}

#endif
