/*
 * Misuse of the C interface from C beyond the conventions every function
 * follows (those are checked for every function by the generated contract
 * suite, tests/c/contract_test.c: before itsme_init, NULL pointers, output
 * buffers, text and time bounds, outputs untouched on failure): out-of-order
 * protocol calls, wrong PINs and passwords, misbehaving host callbacks,
 * lengths and values out of range, and what each call does.  They must all
 * give result codes, never a crash.  Prints "N passed, N failed".
 */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <itsme.h>
#include <itsme_testing.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

#define EXPECT(what, actual, expected)                                                   \
    do {                                                                                 \
        long long a_ = (long long)(actual), e_ = (long long)(expected);                  \
        if (a_ == e_) {                                                                  \
            passed++;                                                                    \
        } else {                                                                         \
            failed++;                                                                    \
            fprintf(stderr, "FAIL %s:%d %s: got %lld, expected %lld\n", __FILE__,       \
                    __LINE__, what, a_, e_);                                             \
        }                                                                                \
    } while (0)

static const int64_t T0 = 1800000000;

/* A host store over a tiny fixed table, with switches to misbehave. */
enum { SLOTS = 8 };
struct host_store {
    char names[SLOTS][130];
    uint8_t values[SLOTS][512];
    size_t lens[SLOTS];
    int used[SLOTS];
    int fail_get, lie_about_length, destroyed;
};

static int slot(struct host_store *s, const char *name) {
    for (int i = 0; i < SLOTS; i++)
        if (s->used[i] && strcmp(s->names[i], name) == 0) return i;
    return -1;
}

static itsme_result host_get(void *ctx, const char *name, uint8_t *out, size_t cap, size_t *out_len) {
    struct host_store *s = ctx;
    if (s->fail_get) return ITSME_E_SECRET_STORE;
    int i = slot(s, name);
    if (i < 0) return ITSME_E_NOT_FOUND;
    if (s->lie_about_length) { *out_len = cap + 1; return ITSME_OK; }
    *out_len = s->lens[i];
    if (cap < s->lens[i]) return ITSME_E_BUFFER_TOO_SMALL;
    memcpy(out, s->values[i], s->lens[i]);
    return ITSME_OK;
}

static itsme_result host_put(void *ctx, const char *name, const uint8_t *value, size_t len, itsme_accessibility a) {
    struct host_store *s = ctx;
    (void)a;
    if (len > sizeof s->values[0] || strlen(name) >= sizeof s->names[0]) return ITSME_E_SECRET_STORE;
    int i = slot(s, name);
    for (int j = 0; i < 0 && j < SLOTS; j++) if (!s->used[j]) i = j;
    if (i < 0) return ITSME_E_SECRET_STORE;
    strcpy(s->names[i], name);
    memcpy(s->values[i], value, len);
    s->lens[i] = len;
    s->used[i] = 1;
    return ITSME_OK;
}

static itsme_result host_remove(void *ctx, const char *name) {
    struct host_store *s = ctx;
    int i = slot(s, name);
    if (i < 0) return ITSME_E_NOT_FOUND;
    s->used[i] = 0;
    return ITSME_OK;
}

static void host_destroy(void *ctx) { ((struct host_store *)ctx)->destroyed++; }

static void no_handles(void) {
    EXPECT("version string", strcmp(itsme_version_string(), ITSME_VERSION_STRING), 0);
    EXPECT("unknown code", strcmp(itsme_result_message(9999), "unknown result code"), 0);
    EXPECT("negative code", strcmp(itsme_result_message(-1), "unknown result code"), 0);
    EXPECT("name of OK", strcmp(itsme_result_name(ITSME_OK), "ITSME_OK"), 0);
    EXPECT("name of a code", strcmp(itsme_result_name(ITSME_E_WRONG_PIN), "ITSME_E_WRONG_PIN"), 0);
    EXPECT("name of the last code", strcmp(itsme_result_name(ITSME_E_ROLLED_BACK), "ITSME_E_ROLLED_BACK"), 0);
    EXPECT("name of an unknown code", strcmp(itsme_result_name(9999), "ITSME_E_UNKNOWN"), 0);

    uint8_t key[32] = {1};
    char fp[ITSME_FINGERPRINT_SIZE];
    size_t len = 0;
    EXPECT("fp zero length", itsme_fingerprint_from_public_key(key, 0, fp, sizeof fp, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("fp short key", itsme_fingerprint_from_public_key(key, 31, fp, sizeof fp, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("fp ok", itsme_fingerprint_from_public_key(key, 32, fp, sizeof fp, &len), ITSME_OK);
    EXPECT("fp length", len, 17);
    EXPECT("fp terminated", strlen(fp), 16);

    itsme_secret_store *store = NULL;
    EXPECT("file empty dir", itsme_secret_store_open_file("", &store), ITSME_E_INVALID_ARGUMENT);
    EXPECT("file not a directory", itsme_secret_store_open_file("/dev/null", &store), ITSME_E_SECRET_STORE);
    char msg[256];
    EXPECT("thread last error", itsme_last_error(msg, sizeof msg, &len), ITSME_OK);
    EXPECT("thread last error says why", strstr(msg, "not a directory") != NULL, 1);
    itsme_secret_store_callbacks partial = {ITSME_SECRET_STORE_CALLBACKS_VERSION, NULL, host_get, NULL, NULL, NULL};
    EXPECT("callbacks missing put", itsme_secret_store_new_callbacks(&partial, &store), ITSME_E_INVALID_ARGUMENT);
    itsme_secret_store_callbacks unknown = {ITSME_SECRET_STORE_CALLBACKS_VERSION + 1, NULL, host_get, host_put, host_remove, NULL};
    EXPECT("callbacks of an unknown version", itsme_secret_store_new_callbacks(&unknown, &store), ITSME_E_INVALID_ARGUMENT);
    EXPECT("the version is told", itsme_last_error(msg, sizeof msg, &len) == ITSME_OK && strstr(msg, "version") != NULL, 1);
}

static void identity_and_pin(void) {
    itsme_secret_store *store = NULL;
    EXPECT("memory store", itsme_secret_store_new_memory(&store), ITSME_OK);
    itsme_identity *id = NULL;
    EXPECT("load empty", itsme_identity_load(store, &id), ITSME_E_NOT_FOUND);
    EXPECT("create empty name", itsme_identity_create(store, "", &id), ITSME_E_INVALID_ARGUMENT);
    char long_name[200];
    memset(long_name, 'x', 129);
    long_name[129] = 0;
    EXPECT("create long name", itsme_identity_create(store, long_name, &id), ITSME_E_INVALID_ARGUMENT);
    long_name[128] = 0;
    EXPECT("create 128-byte name", itsme_identity_create(store, long_name, &id), ITSME_OK);
    itsme_identity *second = NULL;
    EXPECT("create twice", itsme_identity_create(store, "B", &second), ITSME_E_ALREADY_EXISTS);
    char msg[256];
    size_t len = 0;
    EXPECT("store last error", itsme_secret_store_last_error(store, msg, sizeof msg, &len), ITSME_OK);
    EXPECT("store last error text", strstr(msg, "already") != NULL, 1);

    uint8_t pk[ITSME_PUBLIC_KEY_BYTES];
    EXPECT("public key", itsme_identity_public_key(id, pk, sizeof pk, &len), ITSME_OK);
    char fp1[ITSME_FINGERPRINT_SIZE], fp2[ITSME_FINGERPRINT_SIZE];
    EXPECT("fingerprint", itsme_identity_fingerprint(id, fp1, sizeof fp1, &len), ITSME_OK);
    EXPECT("fingerprint of key", itsme_fingerprint_from_public_key(pk, sizeof pk, fp2, sizeof fp2, &len), ITSME_OK);
    EXPECT("fingerprints agree", strcmp(fp1, fp2), 0);
    char name[200];
    EXPECT("name", itsme_identity_name(id, name, sizeof name, &len), ITSME_OK);
    EXPECT("name length", len, 129);
    EXPECT("set name", itsme_identity_set_name(id, "Zo\xc3\xab"), ITSME_OK);

    bool is_set = true;
    EXPECT("pin is set", itsme_pin_is_set(id, &is_set), ITSME_OK);
    EXPECT("pin not set yet", is_set, 0);
    EXPECT("verify before set", itsme_pin_verify(id, "123456", T0), ITSME_E_NOT_FOUND);
    EXPECT("set short pin", itsme_pin_set(id, "12345"), ITSME_E_INVALID_PIN);
    EXPECT("set letters", itsme_pin_set(id, "12345a"), ITSME_E_INVALID_PIN);
    EXPECT("set pin", itsme_pin_set(id, "123456"), ITSME_OK);
    EXPECT("set pin twice", itsme_pin_set(id, "654321"), ITSME_E_ALREADY_EXISTS);
    EXPECT("verify", itsme_pin_verify(id, "123456", T0), ITSME_OK);
    uint32_t failures = 99;
    uint64_t wait = 99;
    for (int i = 0; i < 5; i++) EXPECT("wrong pin", itsme_pin_verify(id, "000000", T0), ITSME_E_WRONG_PIN);
    EXPECT("malformed during lock", itsme_pin_verify(id, "1", T0), ITSME_E_INVALID_PIN);
    EXPECT("locked", itsme_pin_verify(id, "123456", T0 + 10), ITSME_E_LOCKED);
    EXPECT("change while locked", itsme_pin_change(id, "123456", "111111", T0 + 10), ITSME_E_LOCKED);
    EXPECT("status", itsme_pin_status(id, T0 + 10, &failures, &wait), ITSME_OK);
    EXPECT("failures", failures, 5);
    EXPECT("wait", wait, 290);
    EXPECT("identity last error", itsme_identity_last_error(id, msg, sizeof msg, &len), ITSME_OK);
    EXPECT("last error has no PIN", strstr(msg, "123456") == NULL && strstr(msg, "111111") == NULL, 1);
    EXPECT("change bad new", itsme_pin_change(id, "123456", "12", T0 + 300), ITSME_E_INVALID_PIN);
    EXPECT("change", itsme_pin_change(id, "123456", "111111", T0 + 300), ITSME_OK);
    EXPECT("new pin", itsme_pin_verify(id, "111111", T0 + 300), ITSME_OK);

    /* The identity keeps the store alive after the store handle is freed. */
    itsme_secret_store_free(store);
    EXPECT("identity outlives store handle", itsme_pin_verify(id, "111111", T0 + 301), ITSME_OK);
    itsme_identity_free(id);
}

static void host_callbacks(void) {
    struct host_store *hs = calloc(1, sizeof *hs);
    itsme_secret_store_callbacks cb = {ITSME_SECRET_STORE_CALLBACKS_VERSION, hs, host_get, host_put, host_remove, host_destroy};
    itsme_secret_store *store = NULL;
    EXPECT("callback store", itsme_secret_store_new_callbacks(&cb, &store), ITSME_OK);
    itsme_identity *id = NULL, *again = NULL;
    EXPECT("create via callbacks", itsme_identity_create(store, "Host", &id), ITSME_OK);
    EXPECT("item written", slot(hs, "itsme.identity") >= 0, 1);
    hs->fail_get = 1;
    EXPECT("failing get", itsme_identity_load(store, &again), ITSME_E_SECRET_STORE);
    hs->fail_get = 0;
    hs->lie_about_length = 1;
    EXPECT("lying get", itsme_identity_load(store, &again), ITSME_E_SECRET_STORE);
    hs->lie_about_length = 0;
    int i = slot(hs, "itsme.identity");
    hs->values[i][0] = 0x7f;
    EXPECT("unknown record version", itsme_identity_load(store, &again), ITSME_E_CORRUPT_DATA);
    hs->values[i][0] = 1;
    hs->lens[i] = 10;
    EXPECT("truncated record", itsme_identity_load(store, &again), ITSME_E_CORRUPT_DATA);
    itsme_secret_store_free(store);
    EXPECT("not destroyed while an identity holds it", hs->destroyed, 0);
    itsme_identity_free(id);
    EXPECT("destroyed once", hs->destroyed, 1);
    free(hs);
}

static void contact_store(void) {
    char dir[] = "/tmp/itsme-misuse-XXXXXX";
    if (!mkdtemp(dir)) { failed++; return; }
    char path[64], other_path[64];
    snprintf(path, sizeof path, "%s/contacts.db", dir);
    snprintf(other_path, sizeof other_path, "%s/not-a-db", dir);

    itsme_secret_store *secrets = NULL, *other_secrets = NULL;
    itsme_identity *me = NULL, *other = NULL;
    itsme_secret_store_new_memory(&secrets);
    itsme_secret_store_new_memory(&other_secrets);
    itsme_identity_create(secrets, "Me", &me);
    itsme_identity_create(other_secrets, "Other", &other);

    itsme_store *store = NULL;
    EXPECT("open", itsme_store_open(me, path, &store), ITSME_OK);
    itsme_store *wrong = NULL;
    EXPECT("open with another identity", itsme_store_open(other, path, &wrong), ITSME_E_WRONG_IDENTITY);
    FILE *f = fopen(other_path, "w");
    if (f) { fputs("this is not a database, just some text that is long enough\n", f); fclose(f); }
    EXPECT("open a text file", itsme_store_open(me, other_path, &wrong), ITSME_E_DATABASE);

    uint8_t key[ITSME_PUBLIC_KEY_BYTES], own[ITSME_PUBLIC_KEY_BYTES], seed[ITSME_SEED_BYTES];
    memset(key, 0x42, sizeof key);
    memset(seed, 7, sizeof seed);
    size_t len = 0;
    itsme_identity_public_key(me, own, sizeof own, &len);
    int64_t id = -1;
    EXPECT("add short key", itsme_store_add(store, "A", key, 31, seed, 32, ITSME_EXCHANGE_QR, T0, &id), ITSME_E_INVALID_KEY);
    EXPECT("add own key", itsme_store_add(store, "A", own, 32, seed, 32, ITSME_EXCHANGE_QR, T0, &id), ITSME_E_INVALID_KEY);
    EXPECT("add short seed", itsme_store_add(store, "A", key, 32, seed, 31, ITSME_EXCHANGE_QR, T0, &id), ITSME_E_INVALID_ARGUMENT);
    EXPECT("add bad method", itsme_store_add(store, "A", key, 32, seed, 32, 99, T0, &id), ITSME_E_INVALID_ARGUMENT);
    EXPECT("add", itsme_store_add(store, "Alice", key, 32, seed, 32, ITSME_EXCHANGE_BLUETOOTH, T0, &id), ITSME_OK);
    int64_t dup = -1;
    EXPECT("add twice", itsme_store_add(store, "Alice 2", key, 32, seed, 32, ITSME_EXCHANGE_QR, T0, &dup), ITSME_E_ALREADY_EXISTS);
    char msg[256];
    EXPECT("store last error", itsme_store_last_error(store, msg, sizeof msg, &len), ITSME_OK);
    EXPECT("store last error text", strstr(msg, "exists") != NULL, 1);
    int64_t v5 = -1;
    char fp[ITSME_FINGERPRINT_SIZE];
    itsme_fingerprint_from_public_key(key, 32, fp, sizeof fp, &len);
    EXPECT("add v5 bad fingerprint", itsme_store_add_unauthenticated(store, "Old", "XYZ", seed, 32, ITSME_EXCHANGE_QR, T0, &v5), ITSME_E_INVALID_ARGUMENT);
    EXPECT("add v5", itsme_store_add_unauthenticated(store, "Old", fp, seed, 32, ITSME_EXCHANGE_QR, T0, &v5), ITSME_OK);
    uint64_t count = 0;
    EXPECT("count", itsme_store_count(store, &count), ITSME_OK);
    EXPECT("count is 2", count, 2);

    itsme_contact *c = NULL;
    EXPECT("get missing", itsme_store_get(store, 999, &c), ITSME_E_NOT_FOUND);
    EXPECT("get by key", itsme_store_get_by_key(store, key, 32, &c), ITSME_OK);
    int64_t got = 0;
    EXPECT("contact id", itsme_contact_id(c, &got), ITSME_OK);
    EXPECT("same id", got, id);
    char name[8];
    EXPECT("name", itsme_contact_name(c, name, sizeof name, &len), ITSME_OK);
    EXPECT("name value", strcmp(name, "Alice"), 0);
    itsme_verification_state state = 99;
    bool ack = true;
    EXPECT("state", itsme_contact_state(c, &state, &ack), ITSME_OK);
    EXPECT("unverified", state, ITSME_CONTACT_UNVERIFIED);
    itsme_exchange_method method = 99;
    EXPECT("method", itsme_contact_exchange_method(c, &method), ITSME_OK);
    EXPECT("bluetooth", method, ITSME_EXCHANGE_BLUETOOTH);
    int64_t t = 0;
    EXPECT("never verified", itsme_contact_verified_at(c, &t), ITSME_E_NOT_FOUND);
    EXPECT("no window yet", itsme_contact_last_window(c, &t), ITSME_E_NOT_FOUND);
    itsme_contact_free(c);

    itsme_contact_list *list = NULL;
    EXPECT("find bad fingerprint", itsme_store_find_fingerprint(store, "nothex!!nothex!!", &list), ITSME_E_INVALID_ARGUMENT);
    EXPECT("find", itsme_store_find_fingerprint(store, fp, &list), ITSME_OK);
    size_t n = 0;
    EXPECT("list count", itsme_contact_list_count(list, &n), ITSME_OK);
    EXPECT("both found", n, 2);
    EXPECT("list index out of range", itsme_contact_list_get(list, 2, &c), ITSME_E_INVALID_ARGUMENT);
    EXPECT("keyed first", itsme_contact_list_get(list, 1, &c), ITSME_OK);
    bool authenticated = true;
    EXPECT("second is v5", itsme_contact_is_authenticated(c, &authenticated) == ITSME_OK && authenticated == 0, 1);
    uint8_t pk[32];
    EXPECT("v5 has no key", itsme_contact_public_key(c, pk, sizeof pk, &len), ITSME_E_NOT_FOUND);
    itsme_contact_free(c);
    itsme_contact_list_free(list);

    EXPECT("set name missing", itsme_store_set_name(store, 999, "X"), ITSME_E_NOT_FOUND);
    EXPECT("set note", itsme_store_set_note(store, id, "met at the bakery"), ITSME_OK);
    EXPECT("set bad state", itsme_store_set_state(store, id, 7, 0, T0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("verify", itsme_store_set_state(store, id, ITSME_CONTACT_VERIFIED, 0, T0 + 5), ITSME_OK);
    EXPECT("use window", itsme_store_use_window(store, id, 100), ITSME_OK);
    EXPECT("same window", itsme_store_use_window(store, id, 100), ITSME_E_WINDOW_USED);
    EXPECT("older window", itsme_store_use_window(store, id, 99), ITSME_E_WINDOW_USED);
    EXPECT("negative window", itsme_store_use_window(store, id, -1), ITSME_E_INVALID_ARGUMENT);
    EXPECT("get", itsme_store_get(store, id, &c), ITSME_OK);
    EXPECT("verified at", itsme_contact_verified_at(c, &t) == ITSME_OK && t == T0 + 5, 1);
    EXPECT("last window", itsme_contact_last_window(c, &t) == ITSME_OK && t == 100, 1);
    itsme_contact_free(c);
    EXPECT("list page", itsme_store_list(store, 0, 1, &list), ITSME_OK);
    EXPECT("one per page", itsme_contact_list_count(list, &n) == ITSME_OK && n == 1, 1);
    itsme_contact_list_free(list);
    EXPECT("delete", itsme_store_delete(store, id), ITSME_OK);
    EXPECT("delete again", itsme_store_delete(store, id), ITSME_E_NOT_FOUND);
    char backup_path[80];
    snprintf(backup_path, sizeof backup_path, "%s/backup.db", dir);
    EXPECT("backup over a file", itsme_store_backup(store, other_path), ITSME_E_ALREADY_EXISTS);
    EXPECT("backup", itsme_store_backup(store, backup_path), ITSME_OK);
    EXPECT("backup never overwrites", itsme_store_backup(store, backup_path), ITSME_E_ALREADY_EXISTS);
    itsme_store *copy = NULL;
    uint64_t copied = 0, kept = 0;
    EXPECT("backup opens for the same identity", itsme_store_open(me, backup_path, &copy), ITSME_OK);
    EXPECT("backup holds the same contacts",
           itsme_store_count(copy, &copied) == ITSME_OK && itsme_store_count(store, &kept) == ITSME_OK && copied == kept, 1);
    itsme_store_free(copy);
    itsme_store_free(store);
    itsme_store *again = NULL;
    EXPECT("backup opens again", itsme_store_open(me, backup_path, &again), ITSME_OK);
    itsme_store_free(again);

    /* A store emptied in place is refused, not taken for a new one; accepting
     * the loss says what it was. */
    itsme_store_loss loss = {.size = sizeof(itsme_store_loss)};
    memset(&loss, 0xff, sizeof loss);
    EXPECT("accept loss empty path", itsme_store_accept_loss(me, "", &loss), ITSME_E_INVALID_ARGUMENT);
    EXPECT("accept loss of another identity's store", itsme_store_accept_loss(other, path, &loss), ITSME_E_WRONG_IDENTITY);
    EXPECT("accept loss of a whole store", itsme_store_accept_loss(me, path, &loss), ITSME_OK);
    EXPECT("a whole store lost nothing",
           loss.replaced == 0 && loss.commits_lost == 0 && loss.contacts_before == 1 && loss.contacts_now == 1
               && loss.contacts_missing == 0 && loss.photos_missing == 0 && loss.device_secrets_missing == 0
               && loss.contacts_without_their_photo == 0, 1);
    char log_path[96];
    snprintf(log_path, sizeof log_path, "%s-wal", path);
    remove(log_path);
    snprintf(log_path, sizeof log_path, "%s-shm", path);
    remove(log_path);
    FILE *emptied_file = fopen(path, "w");
    if (emptied_file) fclose(emptied_file);
    itsme_store *emptied = NULL;
    EXPECT("open an emptied store", itsme_store_open(me, path, &emptied), ITSME_E_ROLLED_BACK);
    EXPECT("no handle when rolled back", emptied == NULL, 1);
    EXPECT("rolled back has a message", strcmp(itsme_result_message(ITSME_E_ROLLED_BACK), "unknown result code") != 0, 1);
    EXPECT("accept the loss", itsme_store_accept_loss(me, path, &loss), ITSME_OK);
    EXPECT("the loss is told", loss.replaced == 1 && loss.commits_lost == 0 && loss.contacts_before == 1 && loss.contacts_now == 0, 1);
    EXPECT("opens once accepted", itsme_store_open(me, path, &emptied), ITSME_OK);
    itsme_store_free(emptied);

    itsme_identity_free(me);
    itsme_identity_free(other);
    itsme_secret_store_free(secrets);
    itsme_secret_store_free(other_secrets);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) failed++;
}

/* Moves Bluetooth frames both ways until neither side has one to send. */
static int pump(itsme_exchange *a, itsme_exchange *b) {
    uint8_t frame[ITSME_REMOTE_MESSAGE_MAX];
    size_t len = 0;
    int moved = 1, count = 0;
    while (moved) {
        moved = 0;
        itsme_exchange *from[2] = {a, b}, *to[2] = {b, a};
        for (int i = 0; i < 2; i++) {
            if (itsme_exchange_next_outgoing(from[i], frame, sizeof frame, &len) != ITSME_OK) return -1;
            if (len == 0) continue;
            if (itsme_exchange_receive(to[i], frame, len, T0) != ITSME_OK) return -1;
            moved = 1;
            count++;
        }
    }
    return count;
}

/* Moves Online Verify messages between two sessions until both are quiet,
 * each taken with ITSME_OK; returns how many moved. */
static int ov_pump(itsme_online_verify *a, itsme_online_verify *b, int64_t now) {
    int moves = 0;
    for (int moved = 1; moved;) {
        moved = 0;
        itsme_online_verify *from[2] = {a, b}, *to[2] = {b, a};
        for (int i = 0; i < 2; i++) {
            uint8_t m[ITSME_ONLINE_VERIFY_MESSAGE_MAX];
            size_t len = 0;
            if (itsme_online_verify_next_outgoing(from[i], m, sizeof m, &len) != ITSME_OK) { failed++; break; }
            if (len == 0) continue;
            EXPECT("ov receive", itsme_online_verify_receive(to[i], m, len, now), ITSME_OK);
            moved = 1;
            moves++;
        }
    }
    return moves;
}

static void exchanges(void) {
    char dir[] = "/tmp/itsme-c-exchange-XXXXXX";
    if (!mkdtemp(dir)) { failed++; return; }
    itsme_secret_store *sa = NULL, *sb = NULL;
    itsme_identity *alice = NULL, *bob = NULL;
    itsme_store *store_a = NULL, *store_b = NULL;
    uint8_t seed_a[32] = {1}, seed_b[32] = {2};
    itsme_random *rng_a = NULL, *rng_b = NULL;
    char path[128], sas_a[ITSME_SHORT_CODE_SIZE], sas_b[ITSME_SHORT_CODE_SIZE], text[64];
    size_t len = 0;

    EXPECT("random short seed", itsme_random_new_deterministic(seed_a, 31, &rng_a), ITSME_E_INVALID_ARGUMENT);
    EXPECT("random", itsme_random_new_deterministic(seed_a, 32, &rng_a), ITSME_OK);
    EXPECT("random", itsme_random_new_deterministic(seed_b, 32, &rng_b), ITSME_OK);
    EXPECT("memory store", itsme_secret_store_new_memory(&sa), ITSME_OK);
    EXPECT("memory store", itsme_secret_store_new_memory(&sb), ITSME_OK);
    EXPECT("create with random", itsme_identity_create_with_random(sa, "Alice", rng_a, &alice), ITSME_OK);
    EXPECT("create with system random", itsme_identity_create_with_random(sb, "Bob", NULL, &bob), ITSME_OK);
    snprintf(path, sizeof path, "%s/a.db", dir);
    EXPECT("open a", itsme_store_open(alice, path, &store_a), ITSME_OK);
    snprintf(path, sizeof path, "%s/b.db", dir);
    EXPECT("open b", itsme_store_open(bob, path, &store_b), ITSME_OK);

    /* Short codes. */
    uint32_t value = 0;
    EXPECT("parse junk", itsme_short_code_parse("ECHO 42", &value), ITSME_E_INVALID_ARGUMENT);
    EXPECT("parse", itsme_short_code_parse(" echo-0042 ", &value), ITSME_OK);
    EXPECT("parse value", value, 40042);
    /* Overlong input is refused before any other work: a valid code padded
     * with spaces parses up to ITSME_TYPED_CODE_MAX bytes, and not beyond,
     * however long (the library reads no byte past the bound). */
    {
        size_t big = (size_t)1 << 20;
        char *padded = malloc(big + 1);
        char detail[128];
        if (!padded) { failed++; return; }
        memset(padded, ' ', big);
        memcpy(padded, "ECHO 0042", 9);
        padded[ITSME_TYPED_CODE_MAX] = 0;
        EXPECT("parse at the bound", itsme_short_code_parse(padded, &value), ITSME_OK);
        padded[ITSME_TYPED_CODE_MAX] = ' ';
        padded[ITSME_TYPED_CODE_MAX + 1] = 0;
        EXPECT("parse past the bound", itsme_short_code_parse(padded, &value), ITSME_E_INVALID_ARGUMENT);
        padded[ITSME_TYPED_CODE_MAX + 1] = ' ';
        padded[big] = 0;
        EXPECT("parse a megabyte", itsme_short_code_parse(padded, &value), ITSME_E_INVALID_ARGUMENT);
        EXPECT("says why", itsme_last_error(detail, sizeof detail, &len), ITSME_OK);
        EXPECT("names the bound", strstr(detail, "longer than 64 bytes") != NULL, 1);
        EXPECT("remote code a megabyte", itsme_remote_code_check(padded, text, sizeof text, &len), ITSME_E_INVALID_ARGUMENT);
        uint8_t blob[512];
        EXPECT("export text a megabyte", itsme_export_from_text(padded, blob, sizeof blob, &len), ITSME_E_INVALID_ARGUMENT);
        EXPECT("export text says why", itsme_last_error(detail, sizeof detail, &len), ITSME_OK);
        EXPECT("export text names the bound", strstr(detail, "longer than 1024 bytes") != NULL, 1);
        free(padded);
    }
    EXPECT("format too big", itsme_short_code_format(ITSME_SHORT_CODE_VALUES, text, sizeof text, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("format", itsme_short_code_format(130000, text, sizeof text, &len), ITSME_OK);
    EXPECT("format text", strcmp(text, "NOVEMBER 0000"), 0);

    /* QR, end to end. */
    itsme_exchange *qa = NULL, *qb = NULL;
    EXPECT("qr with another identity's store", itsme_exchange_new_qr(alice, store_b, rng_a, T0, &qa), ITSME_E_WRONG_IDENTITY);
    EXPECT("qr without a store", itsme_exchange_new_qr(alice, NULL, rng_a, T0, &qa), ITSME_E_INVALID_ARGUMENT);
    EXPECT("qr a", itsme_exchange_new_qr(alice, store_a, rng_a, T0, &qa), ITSME_OK);
    EXPECT("qr b", itsme_exchange_new_qr(bob, store_b, rng_b, T0, &qb), ITSME_OK);
    uint8_t pa[ITSME_QR_PAYLOAD_MAX], pb[ITSME_QR_PAYLOAD_MAX];
    size_t la = 0, lb = 0;
    EXPECT("payload a", itsme_exchange_next_outgoing(qa, pa, sizeof pa, &la), ITSME_OK);
    EXPECT("payload a again (not consumed)", itsme_exchange_next_outgoing(qa, pa, sizeof pa, &la), ITSME_OK);
    EXPECT("payload b", itsme_exchange_next_outgoing(qb, pb, sizeof pb, &lb), ITSME_OK);
    EXPECT("payload prefix", memcmp(pa, "ITSME1:", 7), 0);
    itsme_exchange_state state = 0;
    uint32_t flags = 99;
    EXPECT("status", itsme_exchange_status(qa, &state, NULL), ITSME_OK);
    EXPECT("awaiting", state, ITSME_EXCHANGE_AWAITING_PEER);
    EXPECT("sas too early", itsme_exchange_sas(qa, sas_a, sizeof sas_a, &len), ITSME_E_INVALID_STATE);
    EXPECT("peer too early", itsme_exchange_peer_name(qa, text, sizeof text, &len), ITSME_E_INVALID_STATE);
    int64_t id_a = 0, id_b = 0;
    EXPECT("confirm too early", itsme_exchange_confirm(qa, T0, &id_a), ITSME_E_INVALID_STATE);
    EXPECT("session code of QR", itsme_exchange_session_code(qa, text, sizeof text, &len), ITSME_E_INVALID_STATE);
    EXPECT("receive not a payload", itsme_exchange_receive(qa, (const uint8_t *)"hello", 5, T0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("receive own", itsme_exchange_receive(qa, pa, la, T0), ITSME_E_INVALID_KEY);
    EXPECT("status after reflection", itsme_exchange_status(qa, &state, &flags), ITSME_OK);
    EXPECT("failed", state, ITSME_EXCHANGE_FAILED);
    EXPECT("failure is final", itsme_exchange_receive(qa, pb, lb, T0), ITSME_E_INVALID_STATE);
    char msg[256];
    EXPECT("exchange last error", itsme_exchange_last_error(qa, msg, sizeof msg, &len), ITSME_OK);
    EXPECT("last error says why", strstr(msg, "failed") != NULL, 1);
    itsme_exchange_free(qa);
    EXPECT("qr a again", itsme_exchange_new_qr(alice, store_a, NULL, T0, &qa), ITSME_OK);
    EXPECT("payload a", itsme_exchange_next_outgoing(qa, pa, sizeof pa, &la), ITSME_OK);
    EXPECT("a scans b", itsme_exchange_receive(qa, pb, lb, T0), ITSME_OK);
    EXPECT("b scans a", itsme_exchange_receive(qb, pa, la, T0 + 1), ITSME_OK);
    EXPECT("sas a", itsme_exchange_sas(qa, sas_a, sizeof sas_a, &len), ITSME_OK);
    EXPECT("sas b", itsme_exchange_sas(qb, sas_b, sizeof sas_b, &len), ITSME_OK);
    EXPECT("same sas", strcmp(sas_a, sas_b), 0);
    EXPECT("peer name", itsme_exchange_peer_name(qa, text, sizeof text, &len), ITSME_OK);
    EXPECT("peer is Bob", strcmp(text, "Bob"), 0);
    uint8_t key[32];
    EXPECT("peer key", itsme_exchange_peer_public_key(qa, key, sizeof key, &len), ITSME_OK);
    char fp[ITSME_FINGERPRINT_SIZE], fp2[ITSME_FINGERPRINT_SIZE];
    EXPECT("peer fp", itsme_exchange_peer_fingerprint(qa, fp, sizeof fp, &len), ITSME_OK);
    EXPECT("bob fp", itsme_identity_fingerprint(bob, fp2, sizeof fp2, &len), ITSME_OK);
    EXPECT("fingerprints agree", strcmp(fp, fp2), 0);
    EXPECT("save", itsme_exchange_save(qa, T0, &id_a), ITSME_OK);
    uint8_t sealed[1024];
    size_t sealed_len = 0;
    EXPECT("seal", itsme_exchange_seal(qa, sealed, sizeof sealed, &sealed_len), ITSME_OK);
    itsme_exchange *restored = NULL;
    EXPECT("restore for Bob", itsme_exchange_restore(bob, store_b, sealed, sealed_len, T0, &restored), ITSME_E_AUTHENTICATION_FAILED);
    EXPECT("restore expired", itsme_exchange_restore(alice, store_a, sealed, sealed_len, T0 + 86401, &restored), ITSME_E_EXPIRED);
    EXPECT("restore", itsme_exchange_restore(alice, store_a, sealed, sealed_len, T0 + 60, &restored), ITSME_OK);
    EXPECT("restored sas", itsme_exchange_sas(restored, text, sizeof text, &len), ITSME_OK);
    EXPECT("restored same sas", strcmp(text, sas_a), 0);
    EXPECT("confirm restored", itsme_exchange_confirm(restored, T0 + 60, &id_a), ITSME_OK);
    EXPECT("confirm b", itsme_exchange_confirm(qb, T0, &id_b), ITSME_OK);
    itsme_contact *c = NULL;
    itsme_verification_state cs = 0;
    bool ack = false;
    EXPECT("get a's contact", itsme_store_get(store_a, id_a, &c), ITSME_OK);
    EXPECT("contact state", itsme_contact_state(c, &cs, &ack), ITSME_OK);
    EXPECT("verified", cs, ITSME_CONTACT_VERIFIED);
    itsme_contact_free(c);
    EXPECT("reject after confirm", itsme_exchange_reject(qb), ITSME_E_INVALID_STATE);
    itsme_exchange_free(restored);
    itsme_exchange_free(qa);
    itsme_exchange_free(qb);

    /* Bluetooth, end to end. */
    itsme_exchange *ba = NULL, *bb = NULL;
    EXPECT("bt bad code", itsme_exchange_new_bluetooth(bob, store_b, "ECHO", NULL, T0, &bb), ITSME_E_INVALID_ARGUMENT);
    EXPECT("bt a", itsme_exchange_new_bluetooth(alice, store_a, NULL, NULL, T0, &ba), ITSME_OK);
    EXPECT("bt code", itsme_exchange_session_code(ba, text, sizeof text, &len), ITSME_OK);
    EXPECT("bt b", itsme_exchange_new_bluetooth(bob, store_b, text, NULL, T0, &bb), ITSME_OK);
    EXPECT("bt frames", pump(ba, bb), 6);
    EXPECT("bt sas a", itsme_exchange_sas(ba, sas_a, sizeof sas_a, &len), ITSME_OK);
    EXPECT("bt sas b", itsme_exchange_sas(bb, sas_b, sizeof sas_b, &len), ITSME_OK);
    EXPECT("bt same sas", strcmp(sas_a, sas_b), 0);
    EXPECT("bt known contact", itsme_exchange_save(ba, T0, &id_b), ITSME_OK);
    EXPECT("bt same id", id_b, id_a);
    EXPECT("bt flags", itsme_exchange_status(ba, &state, &flags), ITSME_OK);
    EXPECT("bt known flag", flags & ITSME_EXCHANGE_FLAG_KNOWN_CONTACT, ITSME_EXCHANGE_FLAG_KNOWN_CONTACT);
    EXPECT("bt reject", itsme_exchange_reject(ba), ITSME_OK);
    EXPECT("bt confirm frame", pump(ba, bb), 1);
    EXPECT("bt b flags", itsme_exchange_status(bb, &state, &flags), ITSME_OK);
    EXPECT("bt peer rejected", flags & ITSME_EXCHANGE_FLAG_PEER_REJECTED, ITSME_EXCHANGE_FLAG_PEER_REJECTED);
    EXPECT("bt confirm after peer rejected", itsme_exchange_confirm(bb, T0, &id_b), ITSME_E_INVALID_STATE);
    itsme_exchange_free(ba);
    itsme_exchange_free(bb);

    /* At a distance: invite and real-time, messages moved by hand. */
    uint8_t frame_buf[ITSME_REMOTE_MESSAGE_MAX];
    char code[ITSME_REMOTE_CODE_SIZE], code2[ITSME_REMOTE_CODE_SIZE], rid[ITSME_RELAY_ID_SIZE];
    EXPECT("code check", itsme_remote_code_check(" k7x2 m9pm", code, sizeof code, &len), ITSME_OK);
    EXPECT("code shown", strcmp(code, "K7X2-M9PM"), 0);
    EXPECT("code typo", itsme_remote_code_check("K7X2-M9PN", code2, sizeof code2, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("code swap", itsme_remote_code_check("K7X2-9MPM", code2, sizeof code2, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("code look-alike", itsme_remote_code_check("K7X2-M9P0", code2, sizeof code2, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("codes of a QR exchange", itsme_exchange_new_qr(alice, store_a, NULL, T0, &qa), ITSME_OK);
    EXPECT("invite code of QR", itsme_exchange_invite_code(qa, code, sizeof code, &len), ITSME_E_INVALID_STATE);
    EXPECT("relay id of QR", itsme_exchange_relay_id(qa, rid, sizeof rid, &len), ITSME_E_INVALID_STATE);
    bool inviter = true;
    EXPECT("inviter of QR", itsme_exchange_is_inviter(qa, &inviter), ITSME_E_INVALID_STATE);
    itsme_exchange_free(qa);
    itsme_exchange *ia = NULL, *ib = NULL;
    EXPECT("invite", itsme_exchange_new_invite(alice, store_a, 0, rng_a, T0, &ia), ITSME_OK);
    EXPECT("invite code", itsme_exchange_invite_code(ia, code, sizeof code, &len), ITSME_OK);
    EXPECT("invite code length", len, ITSME_REMOTE_CODE_SIZE);
    EXPECT("encryption code", itsme_exchange_encryption_code(ia, code2, sizeof code2, &len), ITSME_OK);
    EXPECT("relay id", itsme_exchange_relay_id(ia, rid, sizeof rid, &len), ITSME_OK);
    EXPECT("relay id length", len, ITSME_RELAY_ID_SIZE);
    EXPECT("is inviter", itsme_exchange_is_inviter(ia, &inviter), ITSME_OK);
    EXPECT("inviter", inviter, 1);
    EXPECT("accept same code twice", itsme_exchange_accept_invite(bob, store_b, code, code, 0, NULL, T0, &ib), ITSME_E_INVALID_ARGUMENT);
    EXPECT("accept typo", itsme_exchange_accept_invite(bob, store_b, code, "K7X2-M9PN", 0, NULL, T0, &ib), ITSME_E_INVALID_ARGUMENT);
    EXPECT("accept", itsme_exchange_accept_invite(bob, store_b, code, code2, 0, rng_b, T0, &ib), ITSME_OK);
    EXPECT("invitee", itsme_exchange_is_inviter(ib, &inviter), ITSME_OK);
    EXPECT("not inviter", inviter, 0);
    EXPECT("invitee relay id", itsme_exchange_relay_id(ib, text, sizeof text, &len), ITSME_OK);
    EXPECT("same relay id", strcmp(text, rid), 0);
    EXPECT("invite messages", pump(ia, ib), 3);
    EXPECT("invite sas a", itsme_exchange_sas(ia, sas_a, sizeof sas_a, &len), ITSME_OK);
    EXPECT("invite sas b", itsme_exchange_sas(ib, sas_b, sizeof sas_b, &len), ITSME_OK);
    EXPECT("invite same sas", strcmp(sas_a, sas_b), 0);
    itsme_exchange_method method = 99;
    EXPECT("invite method", itsme_exchange_get_method(ia, &method), ITSME_OK);
    EXPECT("method is invite", method, ITSME_EXCHANGE_INVITE);
    /* Both decisions (docs/PROTOCOL.md 8.1): a re-exchange with a stored
     * contact, whose seed changes only once both confirmed. */
    int64_t id_c = 0;
    uint64_t expired = 99;
    EXPECT("invite settle too early", itsme_exchange_settle(ia, T0, &id_b), ITSME_E_INVALID_STATE);
    EXPECT("invite confirm a", itsme_exchange_confirm(ia, T0, &id_b), ITSME_OK);
    EXPECT("invite known contact", id_b, id_a);
    EXPECT("invite a status", itsme_exchange_status(ia, &state, &flags), ITSME_OK);
    EXPECT("invite a awaits b", state, ITSME_EXCHANGE_AWAITING_DECISION);
    EXPECT("invite a holds its decision", itsme_exchange_next_outgoing(ia, frame_buf, sizeof frame_buf, &len), ITSME_OK);
    EXPECT("invite a sends nothing yet", len, 0);
    EXPECT("invite settle before b", itsme_exchange_settle(ia, T0, &id_b), ITSME_E_INVALID_STATE);
    EXPECT("invite confirm b", itsme_exchange_confirm(ib, T0, &id_c), ITSME_OK);
    EXPECT("invite decisions", pump(ia, ib), 2);
    EXPECT("invite a flags", itsme_exchange_status(ia, &state, &flags), ITSME_OK);
    EXPECT("invite a heard b", flags & ITSME_EXCHANGE_FLAG_PEER_CONFIRMED, ITSME_EXCHANGE_FLAG_PEER_CONFIRMED);
    EXPECT("invite settle a", itsme_exchange_settle(ia, T0, &id_b), ITSME_OK);
    EXPECT("invite settled id", id_b, id_a);
    EXPECT("invite settle b", itsme_exchange_settle(ib, T0, &id_c), ITSME_OK);
    EXPECT("invite b status", itsme_exchange_status(ib, &state, &flags), ITSME_OK);
    EXPECT("invite b confirmed", state, ITSME_EXCHANGE_CONFIRMED);
    EXPECT("invite settle twice", itsme_exchange_settle(ia, T0, &id_b), ITSME_E_INVALID_STATE);
    EXPECT("invite reject after the end", itsme_exchange_reject(ia), ITSME_E_INVALID_STATE);
    EXPECT("expire none", itsme_store_expire_awaiting(store_a, T0, &expired), ITSME_OK);
    EXPECT("expired none", expired, 0);
    EXPECT("awaiting by hand", itsme_store_set_state(store_a, id_a, ITSME_CONTACT_AWAITING_PEER, 0, T0), ITSME_E_INVALID_STATE);
    itsme_exchange_free(ia);
    itsme_exchange_free(ib);
    /* A wrong encryption code: the inviter fails on the ACCEPT, sends nothing. */
    EXPECT("realtime", itsme_exchange_new_invite(alice, store_a, 1, NULL, T0, &ia), ITSME_OK);
    EXPECT("realtime code", itsme_exchange_invite_code(ia, code, sizeof code, &len), ITSME_OK);
    EXPECT("realtime method", itsme_exchange_get_method(ia, &method), ITSME_OK);
    EXPECT("method is realtime", method, ITSME_EXCHANGE_REALTIME);
    EXPECT("realtime wrong code", itsme_exchange_accept_invite(bob, store_b, code, "K7X2-M9PM", 1, NULL, T0, &ib), ITSME_OK);
    EXPECT("wrong code fails", pump(ia, ib), -1);
    EXPECT("inviter status", itsme_exchange_status(ia, &state, &flags), ITSME_OK);
    EXPECT("inviter failed", state, ITSME_EXCHANGE_FAILED);
    EXPECT("inviter says why", itsme_exchange_last_error(ia, msg, sizeof msg, &len), ITSME_OK);
    EXPECT("wrong encryption code named", strstr(msg, "wrong encryption code") != NULL, 1);
    EXPECT("inviter sends nothing", itsme_exchange_next_outgoing(ia, frame_buf, sizeof frame_buf, &len), ITSME_OK);
    EXPECT("nothing", len, 0);
    itsme_exchange_free(ia);
    itsme_exchange_free(ib);

    /* Pure derivations. */
    uint8_t out[64], zero[32] = {0};
    EXPECT("seed bad fp", itsme_derive_seed(seed_a, 32, key, 32, "xyz", fp2, out, sizeof out, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("seed low order", itsme_derive_seed(seed_a, 32, zero, 32, fp, fp2, out, sizeof out, &len), ITSME_E_INVALID_KEY);
    EXPECT("seed", itsme_derive_seed(seed_a, 32, key, 32, fp, fp2, out, sizeof out, &len), ITSME_OK);
    EXPECT("seed length", len, 32);
    EXPECT("sas short th", itsme_derive_sas(out, 32, out, 31, text, sizeof text, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("sas", itsme_derive_sas(out, 32, out, 32, text, sizeof text, &len), ITSME_OK);
    EXPECT("qr th", itsme_qr_transcript_hash(pa, la, pb, lb, out, sizeof out, &len), ITSME_OK);
    EXPECT("commitment short secret", itsme_bluetooth_commitment(key, 32, key, 32, "Bob", key, 6, out, sizeof out, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("commitment", itsme_bluetooth_commitment(key, 32, key, 32, "Bob", key, 16, out, sizeof out, &len), ITSME_OK);
    EXPECT("qr th NULL out_len wins over a bad payload", itsme_qr_transcript_hash((const uint8_t *)"ITSME1:x", 8, pb, lb, out, sizeof out, NULL), ITSME_E_INVALID_ARGUMENT);
    EXPECT("th1 bad code", itsme_bluetooth_th1("x", key, 1, key, 1, key, 1, key, 1, out, sizeof out, &len), ITSME_E_INVALID_ARGUMENT);
    uint8_t hello[42] = {1, 1}, keyframe[34] = {1, 2}, plain[114] = {0};
    EXPECT("th1 short frame", itsme_bluetooth_th1("ALFA 0000", hello, 41, hello, 42, keyframe, 34, keyframe, 34, out, sizeof out, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("th1", itsme_bluetooth_th1("ALFA 0000", hello, 42, hello, 42, keyframe, 34, keyframe, 34, out, sizeof out, &len), ITSME_OK);
    EXPECT("keys", itsme_bluetooth_session_keys(seed_a, 32, key, 32, out, 32, out, sizeof out, &len), ITSME_OK);
    EXPECT("keys length", len, 64);
    EXPECT("transcript short plaintext", itsme_bluetooth_transcript_hash(out, 32, plain, 113, plain, 114, out, sizeof out, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("transcript", itsme_bluetooth_transcript_hash(out, 32, plain, 114, plain, 114, out, sizeof out, &len), ITSME_OK);

    /* Voice verification between the two stored contacts. */
    EXPECT("nato 0", strcmp(itsme_nato_word(0), "ALFA"), 0);
    EXPECT("nato 25", strcmp(itsme_nato_word(25), "ZULU"), 0);
    EXPECT("nato 26", itsme_nato_word(26) == NULL, 1);
    itsme_voice *va = NULL, *vb = NULL;
    int64_t contact_of_bob = id_a, contact_of_alice = 0;
    itsme_contact_list *list = NULL;
    EXPECT("bob's contacts", itsme_store_list(store_b, 0, 10, &list), ITSME_OK);
    itsme_contact *first = NULL;
    EXPECT("bob's first contact", itsme_contact_list_get(list, 0, &first), ITSME_OK);
    EXPECT("its id", itsme_contact_id(first, &contact_of_alice), ITSME_OK);
    itsme_contact_free(first);
    itsme_contact_list_free(list);
    const int64_t V0 = T0 + 3000;
    EXPECT("voice missing contact", itsme_voice_new(store_a, 999, NULL, 0, V0, &va), ITSME_E_NOT_FOUND);
    EXPECT("voice a", itsme_voice_new(store_a, contact_of_bob, NULL, 0, V0, &va), ITSME_OK);
    EXPECT("voice b", itsme_voice_new(store_b, contact_of_alice, NULL, 0, V0, &vb), ITSME_OK);
    int64_t window = 0, starts_in = 0, ends_in = 0;
    EXPECT("timing", itsme_voice_timing(va, V0, &window, &starts_in, &ends_in), ITSME_OK);
    EXPECT("timing NULLs", itsme_voice_timing(va, V0, NULL, NULL, NULL), ITSME_OK);
    EXPECT("starts in", starts_in, 30);
    EXPECT("ends in", ends_in, 90);
    EXPECT("too early", itsme_voice_start(va, V0), ITSME_E_INVALID_STATE);
    EXPECT("start a", itsme_voice_start(va, V0 + 30), ITSME_OK);
    EXPECT("start b", itsme_voice_start(vb, V0 + 30), ITSME_OK);
    char id_text_a[ITSME_VOICE_SESSION_ID_SIZE], id_text_b[ITSME_VOICE_SESSION_ID_SIZE];
    EXPECT("session id a", itsme_voice_session_id(va, id_text_a, sizeof id_text_a, &len), ITSME_OK);
    EXPECT("session id b", itsme_voice_session_id(vb, id_text_b, sizeof id_text_b, &len), ITSME_OK);
    EXPECT("same session id", strcmp(id_text_a, id_text_b), 0);
    uint8_t words_a[5], words_b[5];
    EXPECT("words short", itsme_voice_words(va, words_a, 4, &len), ITSME_E_BUFFER_TOO_SMALL);
    EXPECT("words a", itsme_voice_words(va, words_a, 5, &len), ITSME_OK);
    EXPECT("words b", itsme_voice_words(vb, words_b, 5, &len), ITSME_OK);
    EXPECT("code too early", itsme_voice_your_code(va, text, sizeof text, &len, &value), ITSME_E_INVALID_STATE);
    for (int step = 0; step < 2; step++) {
        itsme_voice_state vs = 0;
        uint32_t turn = 0;
        EXPECT("status", itsme_voice_status(va, &vs, &turn), ITSME_OK);
        EXPECT("selecting", vs, ITSME_VOICE_SELECTING);
        uint8_t word = turn == ITSME_VOICE_TURN_MINE ? words_a[0] : words_b[0];
        EXPECT("select bad index", itsme_voice_select(va, 26, V0 + 31), ITSME_E_INVALID_ARGUMENT);
        EXPECT("select a", itsme_voice_select(va, word, V0 + 31), ITSME_OK);
        EXPECT("select b", itsme_voice_select(vb, word, V0 + 31), ITSME_OK);
    }
    char code_a[ITSME_VOICE_CODE_SIZE], heard[ITSME_VOICE_CODE_SIZE];
    uint32_t tag_a = 0, expected_tag = 0;
    EXPECT("your code", itsme_voice_your_code(va, code_a, sizeof code_a, &len, &tag_a), ITSME_OK);
    EXPECT("their code (b)", itsme_voice_their_code(vb, heard, sizeof heard, &len, &expected_tag), ITSME_OK);
    EXPECT("codes agree", strcmp(code_a, heard), 0);
    EXPECT("tags agree", tag_a, expected_tag);
    itsme_voice_outcome outcome = 0;
    EXPECT("check junk", itsme_voice_check(vb, "hello", tag_a, V0 + 40, &outcome), ITSME_E_INVALID_ARGUMENT);
    EXPECT("check", itsme_voice_check(vb, code_a, tag_a, V0 + 40, &outcome), ITSME_OK);
    EXPECT("verified", outcome, ITSME_VOICE_VERIFIED);
    EXPECT("check again", itsme_voice_check(vb, code_a, tag_a, V0 + 40, &outcome), ITSME_E_INVALID_STATE);
    itsme_voice_free(va);
    itsme_voice_free(vb);

    /* The degradation code. */
    char dcode[ITSME_DEGRADATION_CODE_SIZE];
    EXPECT("degradation missing contact", itsme_store_degradation_code(store_a, 999, NULL, dcode, sizeof dcode, &len), ITSME_E_NOT_FOUND);
    EXPECT("degradation code", itsme_store_degradation_code(store_a, contact_of_bob, rng_a, dcode, sizeof dcode, &len), ITSME_OK);
    EXPECT("degradation length", strlen(dcode), 29);
    EXPECT("accept junk", itsme_store_accept_degradation_code(store_b, contact_of_alice, "junk", V0), ITSME_E_INVALID_ARGUMENT);
    char wrong_code[ITSME_DEGRADATION_CODE_SIZE];
    memcpy(wrong_code, dcode, sizeof wrong_code);
    wrong_code[0] = wrong_code[0] == 'A' ? 'B' : 'A';
    EXPECT("accept wrong", itsme_store_accept_degradation_code(store_b, contact_of_alice, wrong_code, V0), ITSME_E_AUTHENTICATION_FAILED);
    EXPECT("accept", itsme_store_accept_degradation_code(store_b, contact_of_alice, dcode, V0), ITSME_OK);
    itsme_contact *acknowledged = NULL;
    itsme_verification_state ack_state = 0;
    bool ack_flag = false;
    EXPECT("get acknowledged", itsme_store_get(store_b, contact_of_alice, &acknowledged), ITSME_OK);
    EXPECT("state", itsme_contact_state(acknowledged, &ack_state, &ack_flag), ITSME_OK);
    EXPECT("degraded", ack_state, ITSME_CONTACT_DEGRADED);
    EXPECT("acknowledged", ack_flag, 1);
    itsme_contact_free(acknowledged);
    uint8_t ten[10] = {0};
    EXPECT("derive degradation", itsme_derive_degradation_code(seed_a, 32, key, 32, ten, 10, text, sizeof text, &len), ITSME_OK);
    EXPECT("derive degradation short secret", itsme_derive_degradation_code(seed_a, 32, key, 32, ten, 9, text, sizeof text, &len), ITSME_E_INVALID_ARGUMENT);

    /* Online Verify between the two stored contacts, through an in-memory pipe. */
    itsme_online_verify *oa = NULL, *ob = NULL;
    const int64_t O0 = V0 + 600, W = O0 / 30;
    EXPECT("ov bad window", itsme_online_verify_new(store_a, contact_of_bob, W + 1, NULL, 0, NULL, O0, &oa), ITSME_E_INVALID_ARGUMENT);
    EXPECT("ov a", itsme_online_verify_new(store_a, contact_of_bob, W, NULL, 0, NULL, O0, &oa), ITSME_OK);
    EXPECT("ov b (previous window is allowed)", itsme_online_verify_new(store_b, contact_of_alice, W - 1, NULL, 0, NULL, O0, &ob), ITSME_OK);
    itsme_online_verify_free(ob);
    EXPECT("ov b", itsme_online_verify_new(store_b, contact_of_alice, W, NULL, 0, NULL, O0, &ob), ITSME_OK);
    char room_a[ITSME_ROOM_NAME_SIZE], room_b[ITSME_ROOM_NAME_SIZE];
    EXPECT("room a", itsme_online_verify_room(oa, room_a, sizeof room_a, &len), ITSME_OK);
    EXPECT("room b", itsme_online_verify_room(ob, room_b, sizeof room_b, &len), ITSME_OK);
    EXPECT("same room", strcmp(room_a, room_b), 0);
    EXPECT("sas too early", itsme_online_verify_sas(oa, text, sizeof text, &len), ITSME_E_INVALID_STATE);
    EXPECT("ov messages", ov_pump(oa, ob, O0 + 1), 5);
    char sas_oa[ITSME_SHORT_CODE_SIZE], sas_ob[ITSME_SHORT_CODE_SIZE];
    EXPECT("ov sas a", itsme_online_verify_sas(oa, sas_oa, sizeof sas_oa, &len), ITSME_OK);
    EXPECT("ov sas b", itsme_online_verify_sas(ob, sas_ob, sizeof sas_ob, &len), ITSME_OK);
    EXPECT("ov same sas", strcmp(sas_oa, sas_ob), 0);
    itsme_online_verify_state os = 0;
    EXPECT("ov status", itsme_online_verify_status(oa, &os), ITSME_OK);
    EXPECT("ov comparing", os, ITSME_ONLINE_VERIFY_COMPARE_SAS);
    EXPECT("ov receive after", itsme_online_verify_receive(oa, (const uint8_t *)"\x01\x03", 2, O0 + 2), ITSME_E_INVALID_STATE);
    EXPECT("ov confirm no outcome", itsme_online_verify_confirm(oa, O0 + 2, NULL), ITSME_E_INVALID_ARGUMENT);
    EXPECT("ov confirm", itsme_online_verify_confirm(oa, O0 + 2, &outcome), ITSME_OK);
    EXPECT("ov verified", outcome == ITSME_VOICE_VERIFIED || outcome == ITSME_VOICE_VERIFIED_TAG_UNCHECKED, 1);
    EXPECT("ov reject b", itsme_online_verify_reject(ob), ITSME_OK);
    EXPECT("ov reject again", itsme_online_verify_reject(ob), ITSME_E_INVALID_STATE);
    itsme_online_verify_free(oa);
    itsme_online_verify_free(ob);

    /* A call binding (docs/PROTOCOL.md 9.7, 11.4): 16 to 64 bytes, or NULL
     * with 0.  Alice bound to a call, Bob not: both sessions end in
     * BINDING_DIFFERS (ITSME_OK: the peer proved it holds the seed), with no
     * SAS; Alice's voice session ID differs from her unbound one. */
    oa = ob = NULL;
    uint8_t call[ITSME_CALL_BINDING_MAX + 1];
    memset(call, 0x3C, sizeof call);
    const size_t bad_lengths[3] = {ITSME_CALL_BINDING_MIN - 1, ITSME_CALL_BINDING_MAX + 1, 0};
    itsme_voice *vx = NULL;
    for (int i = 0; i < 3; i++) {
        EXPECT("voice binding length", itsme_voice_new(store_a, contact_of_bob, call, bad_lengths[i], O0, &vx), ITSME_E_INVALID_ARGUMENT);
        EXPECT("ov binding length", itsme_online_verify_new(store_a, contact_of_bob, W, call, bad_lengths[i], NULL, O0, &oa), ITSME_E_INVALID_ARGUMENT);
    }
    EXPECT("voice binding NULL with a length", itsme_voice_new(store_a, contact_of_bob, NULL, 32, O0, &vx), ITSME_E_INVALID_ARGUMENT);
    EXPECT("nothing written", vx == NULL && oa == NULL, 1);
    char sid_bound[ITSME_VOICE_SESSION_ID_SIZE], sid_unbound[ITSME_VOICE_SESSION_ID_SIZE];
    EXPECT("voice bound", itsme_voice_new(store_a, contact_of_bob, call, ITSME_CALL_BINDING_MAX, O0, &vx), ITSME_OK);
    EXPECT("bound session id", itsme_voice_session_id(vx, sid_bound, sizeof sid_bound, &len), ITSME_OK);
    itsme_voice_free(vx);
    EXPECT("voice unbound", itsme_voice_new(store_a, contact_of_bob, NULL, 0, O0, &vx), ITSME_OK);
    EXPECT("unbound session id", itsme_voice_session_id(vx, sid_unbound, sizeof sid_unbound, &len), ITSME_OK);
    itsme_voice_free(vx);
    EXPECT("the binding changes the session id", strcmp(sid_bound, sid_unbound) != 0, 1);
    EXPECT("ov a bound", itsme_online_verify_new(store_a, contact_of_bob, W, call, ITSME_CALL_BINDING_MIN, NULL, O0, &oa), ITSME_OK);
    EXPECT("ov b unbound", itsme_online_verify_new(store_b, contact_of_alice, W, NULL, 0, NULL, O0, &ob), ITSME_OK);
    EXPECT("ov bound messages", ov_pump(oa, ob, O0 + 1), 5);
    EXPECT("ov status a", itsme_online_verify_status(oa, &os), ITSME_OK);
    EXPECT("a: binding differs", os, ITSME_ONLINE_VERIFY_STATE_BINDING_DIFFERS);
    EXPECT("ov status b", itsme_online_verify_status(ob, &os), ITSME_OK);
    EXPECT("b: binding differs", os, ITSME_ONLINE_VERIFY_STATE_BINDING_DIFFERS);
    EXPECT("no sas", itsme_online_verify_sas(oa, sas_oa, sizeof sas_oa, &len), ITSME_E_INVALID_STATE);
    EXPECT("no confirm", itsme_online_verify_confirm(oa, O0 + 2, &outcome), ITSME_E_INVALID_STATE);
    itsme_online_verify_free(oa);
    itsme_online_verify_free(ob);

    /* Security PIN Update between the two stored contacts. */
    itsme_pin_update *pua = NULL, *pub = NULL;
    const int64_t P0 = O0 + 900, PW = P0 / 30;
    EXPECT("pin update bad window", itsme_pin_update_new(store_a, contact_of_bob, PW - 2, NULL, P0, &pua), ITSME_E_INVALID_ARGUMENT);
    EXPECT("pin update a", itsme_pin_update_new(store_a, contact_of_bob, PW, NULL, P0, &pua), ITSME_OK);
    EXPECT("pin update b", itsme_pin_update_new(store_b, contact_of_alice, PW, NULL, P0, &pub), ITSME_OK);
    char code_pa[ITSME_SHORT_CODE_SIZE], code_pb[ITSME_SHORT_CODE_SIZE];
    EXPECT("pin code a", itsme_pin_update_session_code(pua, code_pa, sizeof code_pa, &len), ITSME_OK);
    EXPECT("pin code b", itsme_pin_update_session_code(pub, code_pb, sizeof code_pb, &len), ITSME_OK);
    EXPECT("same pin code", strcmp(code_pa, code_pb), 0);
    int frames = 0;
    for (int moved = 1; moved;) {
        moved = 0;
        itsme_pin_update *from[2] = {pua, pub}, *to[2] = {pub, pua};
        for (int i = 0; i < 2; i++) {
            uint8_t f[ITSME_PIN_UPDATE_FRAME_MAX];
            if (itsme_pin_update_next_outgoing(from[i], f, sizeof f, &len) != ITSME_OK) { failed++; break; }
            if (len == 0) continue;
            EXPECT("pin receive", itsme_pin_update_receive(to[i], f, len, P0 + 1), ITSME_OK);
            moved = 1;
            frames++;
        }
    }
    EXPECT("pin frames", frames, 5);
    itsme_pin_update_state ps = 0;
    EXPECT("pin status a", itsme_pin_update_status(pua, &ps), ITSME_OK);
    EXPECT("pin done a", ps, ITSME_PIN_UPDATE_DONE);
    EXPECT("pin status b", itsme_pin_update_status(pub, &ps), ITSME_OK);
    EXPECT("pin done b", ps, ITSME_PIN_UPDATE_DONE);
    EXPECT("pin receive after done", itsme_pin_update_receive(pua, (const uint8_t *)"\x01\x01", 2, P0 + 2), ITSME_E_INVALID_STATE);
    itsme_pin_update_free(pua);
    itsme_pin_update_free(pub);

    /* Voice pure derivations. */
    uint8_t pid8[8] = {1, 2, 3, 4, 5, 6, 7, 8}, five[5];
    bool lower_first = false;
    EXPECT("derive id", itsme_derive_session_id(seed_a, 32, 60000000, text, sizeof text, &len), ITSME_OK);
    EXPECT("derive id short seed", itsme_derive_session_id(seed_a, 31, 60000000, text, sizeof text, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("derive words", itsme_derive_words(seed_a, 32, 60000000, key, 32, five, 5, &len), ITSME_OK);
    EXPECT("derive words 8-byte pid", itsme_derive_words(seed_a, 32, 60000000, pid8, 8, five, 5, &len), ITSME_OK);
    EXPECT("derive words bad pid", itsme_derive_words(seed_a, 32, 60000000, pid8, 7, five, 5, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("derive first", itsme_derive_lower_selects_first(seed_a, 32, 60000000, &lower_first), ITSME_OK);
    EXPECT("derive first is 0 or 1", lower_first == 0 || lower_first == 1, 1);
    EXPECT("derive code", itsme_derive_code(seed_a, 32, 1, key, 32, 3, pid8, 8, 4, key, 32, text, sizeof text, &len), ITSME_OK);
    EXPECT("derive code bad word", itsme_derive_code(seed_a, 32, 1, key, 32, 26, pid8, 8, 4, key, 32, text, sizeof text, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("derive tag empty secret", itsme_derive_device_tag(seed_a, 32, 1, key, 32, NULL, 0, &value), ITSME_OK);
    EXPECT("derive tag NULL secret", itsme_derive_device_tag(seed_a, 32, 1, key, 32, NULL, 16, &value), ITSME_E_INVALID_ARGUMENT);

    itsme_store_free(store_a);
    itsme_store_free(store_b);
    itsme_identity_free(alice);
    itsme_identity_free(bob);
    itsme_secret_store_free(sa);
    itsme_secret_store_free(sb);
    itsme_random_free(rng_a);
    itsme_random_free(rng_b);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) failed++;
}

/* ---- the roll call (docs/PROTOCOL.md 20) ---------------------------------------- */

/* The relay's group room (15.9): slots given in order from 1 (a device that
 * reconnects gets a new one), the events joined, peer-joined and peer-left,
 * and every message forwarded in order to every other device with its
 * sender's slot.  The last message of each kind each slot sent is kept. */
enum { RC_MAX = 8 };
struct rc_room {
    itsme_rollcall *call[RC_MAX];
    uint32_t slot[RC_MAX];
    int n;
    uint32_t next_slot;
    uint8_t last[RC_MAX + 1][4][ITSME_ROLLCALL_MESSAGE_MAX]; /* by slot, by type */
    size_t last_len[RC_MAX + 1][4];
    int refused;
};

static uint32_t rc_join(struct rc_room *room, itsme_rollcall *rc, int64_t now);

static void rc_pump(struct rc_room *room, int64_t now) {
    static uint8_t m[ITSME_ROLLCALL_MESSAGE_MAX];
    int moved = 1;
    while (moved) {
        moved = 0;
        for (int i = 0; i < room->n; i++) {
            for (;;) {
                size_t len = 0;
                if (itsme_rollcall_next_outgoing(room->call[i], m, sizeof m, &len) != ITSME_OK) { failed++; return; }
                if (len == 0) break;
                moved = 1;
                uint32_t s = room->slot[i];
                if (s <= RC_MAX && len >= 2 && m[1] >= 1 && m[1] <= 3) {
                    memcpy(room->last[s][m[1]], m, len);
                    room->last_len[s][m[1]] = len;
                }
                for (int j = 0; j < room->n; j++) {
                    if (j == i) continue;
                    itsme_result r = itsme_rollcall_receive(room->call[j], m, len, s, now);
                    if (r != ITSME_OK) {
                        room->refused++;
                        fprintf(stderr, "FAIL rollcall room: slot %u refused a message of type %d of slot %u: %d\n",
                                room->slot[j], m[1], s, (int)r);
                    }
                }
            }
        }
    }
}

static uint32_t rc_join(struct rc_room *room, itsme_rollcall *rc, int64_t now) {
    uint32_t s = ++room->next_slot;
    uint8_t peers[2 * RC_MAX];
    for (int i = 0; i < room->n; i++) {
        EXPECT("rollcall peer joined", itsme_rollcall_peer_joined(room->call[i], s, now), ITSME_OK);
        peers[2 * i] = (uint8_t)(room->slot[i] >> 8);
        peers[2 * i + 1] = (uint8_t)room->slot[i];
    }
    EXPECT("rollcall joined", itsme_rollcall_joined(rc, s, room->n ? peers : NULL, (size_t)room->n, now), ITSME_OK);
    room->call[room->n] = rc;
    room->slot[room->n] = s;
    room->n++;
    rc_pump(room, now);
    return s;
}

static void rc_leave(struct rc_room *room, itsme_rollcall *rc, int64_t now) {
    int k = 0;
    while (k < room->n && room->call[k] != rc) k++;
    if (k == room->n) { failed++; return; }
    uint32_t s = room->slot[k];
    for (int i = k; i + 1 < room->n; i++) {
        room->call[i] = room->call[i + 1];
        room->slot[i] = room->slot[i + 1];
    }
    room->n--;
    for (int i = 0; i < room->n; i++) EXPECT("rollcall peer left", itsme_rollcall_peer_left(room->call[i], s, now), ITSME_OK);
    rc_pump(room, now);
}

static void rc_tick(struct rc_room *room, int64_t now) {
    for (int i = 0; i < room->n; i++) EXPECT("rollcall tick", itsme_rollcall_tick(room->call[i], now), ITSME_OK);
    rc_pump(room, now);
}

static itsme_rollcall_participant_info rc_participant(itsme_rollcall *rc, size_t index) {
    itsme_rollcall_participant_info p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    EXPECT("rollcall participant", itsme_rollcall_participant(rc, index, &p), ITSME_OK);
    return p;
}

/* The index of the participant that is contact `id` in `rc`, or 0. */
static size_t rc_index_of(itsme_rollcall *rc, int64_t id) {
    size_t count = 0;
    EXPECT("rollcall count", itsme_rollcall_participant_count(rc, &count), ITSME_OK);
    for (size_t i = 1; i < count; i++)
        if (rc_participant(rc, i).contact_id == id) return i;
    return 0;
}

/* The index of the participant of relay slot `slot` in `rc`, or 0. */
static size_t rc_index_at(itsme_rollcall *rc, uint32_t slot) {
    size_t count = 0;
    EXPECT("rollcall count", itsme_rollcall_participant_count(rc, &count), ITSME_OK);
    for (size_t i = 1; i < count; i++)
        if (rc_participant(rc, i).slot == slot) return i;
    return 0;
}

static size_t rc_head_count(itsme_rollcall *rc) {
    size_t n = 0;
    EXPECT("rollcall head count", itsme_rollcall_head_count(rc, &n), ITSME_OK);
    return n;
}

static itsme_rollcall_phase rc_phase(itsme_rollcall *rc) {
    itsme_rollcall_phase phase = 0;
    EXPECT("rollcall status", itsme_rollcall_status(rc, &phase), ITSME_OK);
    return phase;
}

static void rollcalls(void) {
    char dir[] = "/tmp/itsme-c-rollcall-XXXXXX";
    if (!mkdtemp(dir)) { failed++; return; }
    const char *names[3] = {"Ana", "Ben", "Cai"};
    itsme_secret_store *secrets[3] = {NULL};
    itsme_identity *ids[3] = {NULL};
    itsme_store *stores[3] = {NULL};
    uint8_t keys[3][32];
    char path[128], msg[256];
    size_t len = 0;
    for (int i = 0; i < 3; i++) {
        EXPECT("rc memory store", itsme_secret_store_new_memory(&secrets[i]), ITSME_OK);
        EXPECT("rc identity", itsme_identity_create(secrets[i], names[i], &ids[i]), ITSME_OK);
        EXPECT("rc key", itsme_identity_public_key(ids[i], keys[i], 32, &len), ITSME_OK);
        snprintf(path, sizeof path, "%s/%s.db", dir, names[i]);
        EXPECT("rc store", itsme_store_open(ids[i], path, &stores[i]), ITSME_OK);
    }
    /* Ana and Ben share a seed and each other's device secrets; Ana and Cai
     * a seed, Ana holding a device secret of Cai's that Cai's device no
     * longer has, Cai none of Ana's; Ben and Cai nothing (as rollcall.json). */
    uint8_t seed_ab[32], seed_ac[32], ds[3][16];
    memset(seed_ab, 0xAB, 32);
    memset(seed_ac, 0xAC, 32);
    for (int i = 0; i < 3; i++) memset(ds[i], 0x10 + i, 16);
    int64_t ana_ben = 0, ana_cai = 0, ben_ana = 0, cai_ana = 0;
    EXPECT("rc add", itsme_store_add(stores[0], "Ben", keys[1], 32, seed_ab, 32, ITSME_EXCHANGE_METHOD_QR, T0, &ana_ben), ITSME_OK);
    EXPECT("rc add", itsme_store_add(stores[0], "Cai", keys[2], 32, seed_ac, 32, ITSME_EXCHANGE_METHOD_QR, T0, &ana_cai), ITSME_OK);
    EXPECT("rc add", itsme_store_add(stores[1], "Ana", keys[0], 32, seed_ab, 32, ITSME_EXCHANGE_METHOD_QR, T0, &ben_ana), ITSME_OK);
    EXPECT("rc add", itsme_store_add(stores[2], "Ana", keys[0], 32, seed_ac, 32, ITSME_EXCHANGE_METHOD_QR, T0, &cai_ana), ITSME_OK);
    uint8_t long_secret[65] = {0};
    EXPECT("device secrets both empty", itsme_store_set_device_secrets(stores[0], ana_ben, NULL, 0, NULL, 0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("device secret of 65 bytes", itsme_store_set_device_secrets(stores[0], ana_ben, long_secret, 65, ds[1], 16), ITSME_E_INVALID_ARGUMENT);
    EXPECT("device secrets NULL with a length", itsme_store_set_device_secrets(stores[0], ana_ben, NULL, 16, ds[1], 16), ITSME_E_INVALID_ARGUMENT);
    EXPECT("device secrets no contact", itsme_store_set_device_secrets(stores[0], 999, ds[0], 16, ds[1], 16), ITSME_E_NOT_FOUND);
    EXPECT("device secrets", itsme_store_set_device_secrets(stores[0], ana_ben, ds[0], 16, ds[1], 16), ITSME_OK);
    EXPECT("device secrets", itsme_store_set_device_secrets(stores[0], ana_cai, ds[0], 16, ds[2], 16), ITSME_OK);
    EXPECT("device secrets", itsme_store_set_device_secrets(stores[1], ben_ana, ds[1], 16, ds[0], 16), ITSME_OK);

    /* The meeting code. */
    char code[ITSME_REMOTE_CODE_SIZE], checked[ITSME_REMOTE_CODE_SIZE], again[ITSME_REMOTE_CODE_SIZE];
    uint8_t seed[32] = {7};
    itsme_random *rng = NULL;
    EXPECT("meeting code NULL out_len", itsme_meeting_code_new(NULL, code, sizeof code, NULL), ITSME_E_INVALID_ARGUMENT);
    EXPECT("meeting code NULL out", itsme_meeting_code_new(NULL, NULL, sizeof code, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("meeting code short", itsme_meeting_code_new(NULL, code, sizeof code - 1, &len), ITSME_E_BUFFER_TOO_SMALL);
    EXPECT("meeting code size needed", len, ITSME_REMOTE_CODE_SIZE);
    EXPECT("random", itsme_random_new_deterministic(seed, 32, &rng), ITSME_OK);
    EXPECT("meeting code short draws nothing", itsme_meeting_code_new(rng, code, 0, &len), ITSME_E_BUFFER_TOO_SMALL);
    EXPECT("meeting code", itsme_meeting_code_new(rng, code, sizeof code, &len), ITSME_OK);
    EXPECT("meeting code length", len, ITSME_REMOTE_CODE_SIZE);
    EXPECT("meeting code form", strlen(code) == 9 && code[4] == '-', 1);
    EXPECT("meeting code checks", itsme_remote_code_check(code, checked, sizeof checked, &len), ITSME_OK);
    EXPECT("meeting code as checked", strcmp(code, checked), 0);
    itsme_random_free(rng);
    rng = NULL;
    EXPECT("random", itsme_random_new_deterministic(seed, 32, &rng), ITSME_OK);
    EXPECT("meeting code again", itsme_meeting_code_new(rng, again, sizeof again, &len), ITSME_OK);
    EXPECT("the same seed draws the same code", strcmp(code, again), 0);
    itsme_random_free(rng);
    EXPECT("meeting code from the system", itsme_meeting_code_new(NULL, again, sizeof again, &len), ITSME_OK);

    /* Starting: a typed code is checked (case, spaces and '-' do not
     * matter); a call binding is 16 to 64 bytes, or NULL with 0. */
    const int64_t R0 = T0 + 20000;
    itsme_rollcall *rc[3] = {NULL}, *spare = NULL;
    char typo[ITSME_REMOTE_CODE_SIZE];
    uint8_t binding[ITSME_CALL_BINDING_MAX + 1];
    memset(binding, 0x5A, sizeof binding);
    memcpy(typo, code, sizeof typo);
    typo[0] = typo[0] == 'A' ? 'B' : 'A';
    EXPECT("rollcall NULL store", itsme_rollcall_new(NULL, code, NULL, 0, NULL, R0, &spare), ITSME_E_INVALID_ARGUMENT);
    EXPECT("rollcall NULL code", itsme_rollcall_new(stores[0], NULL, NULL, 0, NULL, R0, &spare), ITSME_E_INVALID_ARGUMENT);
    EXPECT("rollcall NULL out", itsme_rollcall_new(stores[0], code, NULL, 0, NULL, R0, NULL), ITSME_E_INVALID_ARGUMENT);
    EXPECT("rollcall code with a typo", itsme_rollcall_new(stores[0], typo, NULL, 0, NULL, R0, &spare), ITSME_E_INVALID_ARGUMENT);
    EXPECT("the typo is told", itsme_store_last_error(stores[0], msg, sizeof msg, &len) == ITSME_OK && strstr(msg, "typo") != NULL, 1);
    EXPECT("rollcall code of 7", itsme_rollcall_new(stores[0], "ABCD-EFG", NULL, 0, NULL, R0, &spare), ITSME_E_INVALID_ARGUMENT);
    EXPECT("rollcall code with an O", itsme_rollcall_new(stores[0], "ABCD-EFGO", NULL, 0, NULL, R0, &spare), ITSME_E_INVALID_ARGUMENT);
    EXPECT("rollcall time before 1970", itsme_rollcall_new(stores[0], code, NULL, 0, NULL, -1, &spare), ITSME_E_INVALID_ARGUMENT);
    EXPECT("rollcall binding NULL with a length", itsme_rollcall_new(stores[0], code, NULL, 32, NULL, R0, &spare), ITSME_E_INVALID_ARGUMENT);
    EXPECT("rollcall binding of 15 bytes", itsme_rollcall_new(stores[0], code, binding, ITSME_CALL_BINDING_MIN - 1, NULL, R0, &spare), ITSME_E_INVALID_ARGUMENT);
    EXPECT("rollcall binding of 65 bytes", itsme_rollcall_new(stores[0], code, binding, ITSME_CALL_BINDING_MAX + 1, NULL, R0, &spare), ITSME_E_INVALID_ARGUMENT);
    EXPECT("rollcall binding of 0 bytes (not bound is NULL)", itsme_rollcall_new(stores[0], code, binding, 0, NULL, R0, &spare), ITSME_E_INVALID_ARGUMENT);
    EXPECT("nothing written", spare == NULL, 1);
    EXPECT("rollcall binding of 16 bytes", itsme_rollcall_new(stores[0], code, binding, ITSME_CALL_BINDING_MIN, NULL, R0, &spare), ITSME_OK);
    itsme_rollcall_free(spare);
    spare = NULL;
    EXPECT("rollcall binding of 64 bytes", itsme_rollcall_new(stores[0], code, binding, ITSME_CALL_BINDING_MAX, NULL, R0, &spare), ITSME_OK);
    itsme_rollcall_free(spare);
    spare = NULL;
    char lower[16];
    for (size_t i = 0; i <= strlen(code); i++) lower[i] = (char)(code[i] >= 'A' && code[i] <= 'Z' ? code[i] + 32 : code[i]);
    EXPECT("rollcall ana (typed in lower case)", itsme_rollcall_new(stores[0], lower, NULL, 0, NULL, R0, &rc[0]), ITSME_OK);
    EXPECT("rollcall ben", itsme_rollcall_new(stores[1], code, NULL, 0, NULL, R0, &rc[1]), ITSME_OK);
    EXPECT("rollcall cai", itsme_rollcall_new(stores[2], checked, NULL, 0, NULL, R0, &rc[2]), ITSME_OK);
    char room_name[3][ITSME_ROOM_NAME_SIZE];
    for (int i = 0; i < 3; i++) EXPECT("rollcall room", itsme_rollcall_room(rc[i], room_name[i], sizeof room_name[i], &len), ITSME_OK);
    EXPECT("one room", strcmp(room_name[0], room_name[1]) == 0 && strcmp(room_name[0], room_name[2]) == 0 && strlen(room_name[0]) == 32, 1);

    /* NULL handles. */
    itsme_rollcall_phase phase = 0;
    itsme_rollcall_state state = 0;
    uint8_t roster[ITSME_ROLLCALL_ROSTER_BYTES], stale[ITSME_ROLLCALL_ROSTER_BYTES];
    size_t count = 0;
    bool split = true;
    itsme_rollcall_participant_info info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    EXPECT("NULL status", itsme_rollcall_status(NULL, &phase), ITSME_E_INVALID_ARGUMENT);
    EXPECT("NULL joined", itsme_rollcall_joined(NULL, 1, NULL, 0, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("NULL receive", itsme_rollcall_receive(NULL, roster, 1, 1, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("NULL peer joined", itsme_rollcall_peer_joined(NULL, 1, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("NULL peer left", itsme_rollcall_peer_left(NULL, 1, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("NULL tick", itsme_rollcall_tick(NULL, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("NULL head count", itsme_rollcall_head_count(NULL, &count), ITSME_E_INVALID_ARGUMENT);
    EXPECT("NULL split", itsme_rollcall_split(NULL, &split), ITSME_E_INVALID_ARGUMENT);
    EXPECT("NULL confirm roster", itsme_rollcall_confirm_roster(NULL, roster, sizeof roster, NULL, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("NULL confirm said", itsme_rollcall_confirm_said(NULL, NULL, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("NULL count", itsme_rollcall_participant_count(NULL, &count), ITSME_E_INVALID_ARGUMENT);
    EXPECT("NULL participant", itsme_rollcall_participant(NULL, 0, &info), ITSME_E_INVALID_ARGUMENT);
    EXPECT("NULL enter heard", itsme_rollcall_enter_heard(NULL, 1, "ECHO 042", R0, &state), ITSME_E_INVALID_ARGUMENT);
    EXPECT("NULL last error", itsme_rollcall_last_error(NULL, msg, sizeof msg, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("NULL out head count", itsme_rollcall_head_count(rc[0], NULL), ITSME_E_INVALID_ARGUMENT);
    EXPECT("NULL out split", itsme_rollcall_split(rc[0], NULL), ITSME_E_INVALID_ARGUMENT);
    itsme_rollcall_free(NULL);

    /* Before joined nothing is queued; before the roster is confirmed
     * nothing of the code exists. */
    uint8_t m[ITSME_ROLLCALL_MESSAGE_MAX];
    EXPECT("nothing before joined", itsme_rollcall_next_outgoing(rc[0], m, sizeof m, &len) == ITSME_OK && len == 0, 1);
    EXPECT("a tick before joined", itsme_rollcall_tick(rc[0], R0), ITSME_OK);
    EXPECT("still nothing", itsme_rollcall_next_outgoing(rc[0], m, sizeof m, &len) == ITSME_OK && len == 0, 1);
    EXPECT("gathering", rc_phase(rc[0]), ITSME_ROLLCALL_PHASE_GATHERING);
    char said_code[3][ITSME_VOICE_CODE_SIZE];
    EXPECT("code before the roster", itsme_rollcall_code(rc[0], said_code[0], sizeof said_code[0], &len), ITSME_E_INVALID_STATE);
    EXPECT("said before the roster", itsme_rollcall_confirm_said(rc[0], NULL, R0), ITSME_E_INVALID_STATE);
    EXPECT("alone", itsme_rollcall_participant_count(rc[0], &count), ITSME_OK);
    EXPECT("alone: one", count, 1);
    EXPECT("head count alone", rc_head_count(rc[0]), 1);
    EXPECT("no split alone", itsme_rollcall_split(rc[0], &split) == ITSME_OK && !split, 1);
    EXPECT("the roster alone", itsme_rollcall_roster(rc[0], roster, sizeof roster, &len), ITSME_OK);
    EXPECT("a roster of this device alone", itsme_rollcall_confirm_roster(rc[0], roster, sizeof roster, NULL, R0), ITSME_E_INVALID_STATE);
    info = rc_participant(rc[0], 0);
    EXPECT("this device", info.index == 0 && info.slot == 0 && info.contact_id == 0 && !info.left && info.agrees, 1);
    EXPECT("this device is not a contact", info.state, ITSME_ROLLCALL_STATE_UNKNOWN);
    info.size = sizeof info - 1;
    EXPECT("participant size too small", itsme_rollcall_participant(rc[0], 0, &info), ITSME_E_INVALID_ARGUMENT);
    info.size = sizeof info;
    EXPECT("participant out of range", itsme_rollcall_participant(rc[0], 1, &info), ITSME_E_INVALID_ARGUMENT);
    EXPECT("participant far out of range", itsme_rollcall_participant(rc[0], (size_t)-1, &info), ITSME_E_INVALID_ARGUMENT);

    /* joined: a slot, and the peers' slots in 2 bytes each. */
    const uint8_t zero_peer[2] = {0, 0};
    EXPECT("joined slot 0", itsme_rollcall_joined(rc[0], 0, NULL, 0, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("joined slot 65536", itsme_rollcall_joined(rc[0], 65536, NULL, 0, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("joined 65536 peers", itsme_rollcall_joined(rc[0], 1, zero_peer, 65536, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("joined a peer in slot 0", itsme_rollcall_joined(rc[0], 1, zero_peer, 1, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("joined NULL peers with a count", itsme_rollcall_joined(rc[0], 1, NULL, 1, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("joined at a time before 1970", itsme_rollcall_joined(rc[0], 1, NULL, 0, -1), ITSME_E_INVALID_ARGUMENT);
    EXPECT("nothing queued by a refused joined", itsme_rollcall_next_outgoing(rc[0], m, sizeof m, &len) == ITSME_OK && len == 0, 1);
    /* The group room's frames as the relay sends them: what no group room
     * sends is refused and queues nothing. */
    static const char *const not_events[] = {
        "", "hello", "{\"type\":\"peer-joined\"}", "{\"type\":\"waiting\"}", "{\"type\":\"joined\",\"slot\":0,\"peers\":[]}",
        "{\"type\":\"peer-left\",\"slot\":65536}", "{\"type\":\"joined\",\"slot\":1,\"peers\":[0]}",
    };
    for (size_t i = 0; i < sizeof not_events / sizeof not_events[0]; i++) {
        const char *e = not_events[i];
        EXPECT(e, itsme_rollcall_room_text(rc[0], (const uint8_t *)e, strlen(e), R0), ITSME_E_MALFORMED_MESSAGE);
    }
    const char *refused = "{\"type\":\"refused\",\"reason\":\"no-peer\"}";
    EXPECT("room text: a refusal changes nothing", itsme_rollcall_room_text(rc[0], (const uint8_t *)refused, strlen(refused), R0), ITSME_OK);
    EXPECT("room text NULL", itsme_rollcall_room_text(NULL, (const uint8_t *)refused, strlen(refused), R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("room text NULL text", itsme_rollcall_room_text(rc[0], NULL, 4, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("room text before 1970", itsme_rollcall_room_text(rc[0], (const uint8_t *)refused, strlen(refused), -1), ITSME_E_INVALID_ARGUMENT);
    EXPECT("room binary empty", itsme_rollcall_room_binary(rc[0], zero_peer, 0, R0), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("room binary of one byte", itsme_rollcall_room_binary(rc[0], zero_peer, 1, R0), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("room binary from slot 0", itsme_rollcall_room_binary(rc[0], zero_peer, 2, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("room binary NULL", itsme_rollcall_room_binary(NULL, zero_peer, 2, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("nothing queued by refused frames", itsme_rollcall_next_outgoing(rc[0], m, sizeof m, &len) == ITSME_OK && len == 0, 1);

    /* Ana joins first, alone (slot 1): her HELLO and her VIEW. */
    struct rc_room *room = calloc(1, sizeof *room);
    if (!room) { failed++; return; }
    uint8_t hello[3][ITSME_ROLLCALL_MESSAGE_MAX];
    size_t hello_len[3] = {0};
    EXPECT("ana joins", itsme_rollcall_joined(rc[0], 1, NULL, 0, R0), ITSME_OK);
    EXPECT("her HELLO", itsme_rollcall_next_outgoing(rc[0], hello[0], sizeof hello[0], &hello_len[0]), ITSME_OK);
    EXPECT("a HELLO of 32 tags", hello_len[0], 133 + 16 * 32);
    EXPECT("a HELLO of version 2", hello[0][0] == 2 && hello[0][1] == 1, 1);
    EXPECT("VIEW too small", itsme_rollcall_next_outgoing(rc[0], m, 10, &len), ITSME_E_BUFFER_TOO_SMALL);
    EXPECT("size needed", len, 138 + 32 + 1);
    EXPECT("her VIEW", itsme_rollcall_next_outgoing(rc[0], m, sizeof m, &len), ITSME_OK);
    EXPECT("a VIEW of herself", len == 138 + 32 + 1 && m[1] == 3, 1);
    EXPECT("then nothing", itsme_rollcall_next_outgoing(rc[0], m, sizeof m, &len) == ITSME_OK && len == 0, 1);
    room->call[0] = rc[0];
    room->slot[0] = 1;
    room->n = 1;
    room->next_slot = 1;

    /* Garbage from a slot is refused and changes nothing. */
    const uint8_t junk[] = "hello, roll call";
    uint8_t unknown_type[2] = {2, 9}, version_1[2] = {1, 1};
    EXPECT("garbage", itsme_rollcall_receive(rc[0], junk, sizeof junk, 2, R0), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("empty", itsme_rollcall_receive(rc[0], junk, 0, 2, R0), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("unknown type", itsme_rollcall_receive(rc[0], unknown_type, 2, 2, R0), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("version 1", itsme_rollcall_receive(rc[0], version_1, 2, 2, R0), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("own HELLO, reflected", itsme_rollcall_receive(rc[0], hello[0], hello_len[0], 2, R0), ITSME_E_INVALID_KEY);
    EXPECT("a HELLO cut short", itsme_rollcall_receive(rc[0], hello[0], hello_len[0] - 1, 2, R0), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("slot 0", itsme_rollcall_receive(rc[0], hello[0], hello_len[0], 0, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("slot 65536", itsme_rollcall_receive(rc[0], hello[0], hello_len[0], 65536, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("peer joined slot 0", itsme_rollcall_peer_joined(rc[0], 0, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("peer left slot 70000", itsme_rollcall_peer_left(rc[0], 70000, R0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("peer joined at a time after 9999", itsme_rollcall_peer_joined(rc[0], 2, INT64_C(253402300800)), ITSME_E_INVALID_ARGUMENT);
    EXPECT("a tick before 1970", itsme_rollcall_tick(rc[0], -1), ITSME_E_INVALID_ARGUMENT);
    /* A HELLO of an earlier roll call of Ben's with this code: held at
     * most, never present (no VIEW of it names Ana). */
    uint8_t old_hello[ITSME_ROLLCALL_MESSAGE_MAX];
    size_t old_len = 0;
    EXPECT("an older roll call", itsme_rollcall_new(stores[1], code, NULL, 0, NULL, R0 - 300, &spare), ITSME_OK);
    EXPECT("joined", itsme_rollcall_joined(spare, 5, NULL, 0, R0 - 300), ITSME_OK);
    EXPECT("its HELLO", itsme_rollcall_next_outgoing(spare, old_hello, sizeof old_hello, &old_len), ITSME_OK);
    itsme_rollcall_free(spare);
    spare = NULL;
    EXPECT("a HELLO from a slot not in the room", itsme_rollcall_receive(rc[0], old_hello, old_len, 5, R0), ITSME_E_INVALID_STATE);
    EXPECT("slot 5 joins", itsme_rollcall_peer_joined(rc[0], 5, R0), ITSME_OK);
    EXPECT("a stale HELLO is held", itsme_rollcall_receive(rc[0], old_hello, old_len, 5, R0), ITSME_OK);
    EXPECT("still alone", itsme_rollcall_participant_count(rc[0], &count) == ITSME_OK && count == 1, 1);
    EXPECT("head count still 1", rc_head_count(rc[0]), 1);
    EXPECT("still gathering", rc_phase(rc[0]), ITSME_ROLLCALL_PHASE_GATHERING);
    EXPECT("slot 5 leaves", itsme_rollcall_peer_left(rc[0], 5, R0), ITSME_OK);

    /* Ben and Cai join (slots 2 and 3): HELLOs and VIEWs go round. */
    EXPECT("ana reads the roster", itsme_rollcall_roster(rc[0], stale, sizeof stale, &len), ITSME_OK);
    EXPECT("ben's slot", rc_join(room, rc[1], R0), 2);
    EXPECT("ana, ben: two", rc_head_count(rc[0]) == 2 && rc_head_count(rc[1]) == 2, 1);
    EXPECT("ana reads the roster of two", itsme_rollcall_roster(rc[0], stale, sizeof stale, &len), ITSME_OK);
    EXPECT("roster size", len, ITSME_ROLLCALL_ROSTER_BYTES);
    EXPECT("cai's slot", rc_join(room, rc[2], R0), 3);
    rc_tick(room, R0 + 1);
    EXPECT("no refusal", room->refused, 0);
    for (int i = 0; i < 3; i++) {
        EXPECT("three present", rc_head_count(rc[i]), 3);
        EXPECT("three", itsme_rollcall_participant_count(rc[i], &count) == ITSME_OK && count == 3, 1);
        for (size_t k = 0; k < 3; k++) EXPECT("agrees", rc_participant(rc[i], k).agrees, 1);
        EXPECT("no split", itsme_rollcall_split(rc[i], &split) == ITSME_OK && !split, 1);
    }
    memcpy(hello[1], room->last[2][1], room->last_len[2][1]);
    hello_len[1] = room->last_len[2][1];
    EXPECT("ben's HELLO again from slot 2", itsme_rollcall_receive(rc[0], hello[1], hello_len[1], 2, R0 + 1), ITSME_OK);
    EXPECT("ben's HELLO from cai's slot", itsme_rollcall_receive(rc[0], hello[1], hello_len[1], 3, R0 + 1), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("cai's HELLO from ben's slot", itsme_rollcall_receive(rc[0], room->last[3][1], room->last_len[3][1], 2, R0 + 1), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("a newcomer in slot 6", itsme_rollcall_peer_joined(rc[0], 6, R0 + 1), ITSME_OK);
    EXPECT("ben's HELLO from slot 6: one already held", itsme_rollcall_receive(rc[0], hello[1], hello_len[1], 6, R0 + 1), ITSME_OK);
    EXPECT("ben's VIEW again, from slot 6: ignored", itsme_rollcall_receive(rc[0], room->last[2][3], room->last_len[2][3], 6, R0 + 1), ITSME_OK);
    EXPECT("slot 6 leaves", itsme_rollcall_peer_left(rc[0], 6, R0 + 1), ITSME_OK);
    EXPECT("ben's VIEW to ben, reflected", itsme_rollcall_receive(rc[1], room->last[2][3], room->last_len[2][3], 3, R0 + 1), ITSME_E_INVALID_KEY);
    rc_pump(room, R0 + 1);
    size_t ana_sees_ben = rc_index_of(rc[0], ana_ben), ana_sees_cai = rc_index_of(rc[0], ana_cai);
    size_t ben_sees_ana = rc_index_of(rc[1], ben_ana), cai_sees_ana = rc_index_of(rc[2], cai_ana);
    EXPECT("ana sees ben and cai", ana_sees_ben > 0 && ana_sees_cai > 0 && ana_sees_ben != ana_sees_cai, 1);
    EXPECT("ben and cai see ana", ben_sees_ana > 0 && cai_sees_ana > 0, 1);
    info = rc_participant(rc[0], ana_sees_ben);
    EXPECT("ben is slot 2", info.slot, 2);
    EXPECT("ben not yet", info.state, ITSME_ROLLCALL_STATE_NOT_YET);
    size_t ben_sees_cai = 3 - ben_sees_ana;
    info = rc_participant(rc[1], ben_sees_cai);
    EXPECT("cai is unknown to ben", info.state == ITSME_ROLLCALL_STATE_UNKNOWN && info.contact_id == 0 && info.slot == 3, 1);

    /* Confirming: the roster shown must be the one held. */
    EXPECT("roster short", itsme_rollcall_roster(rc[0], roster, sizeof roster - 1, &len), ITSME_E_BUFFER_TOO_SMALL);
    EXPECT("enter heard before the roster", itsme_rollcall_enter_heard(rc[0], ana_sees_ben, "ECHO 042", R0, &state), ITSME_E_INVALID_STATE);
    EXPECT("a stale roster", itsme_rollcall_confirm_roster(rc[0], stale, sizeof stale, NULL, R0 + 1), ITSME_E_INVALID_STATE);
    EXPECT("a roster of 31 bytes", itsme_rollcall_confirm_roster(rc[0], stale, 31, NULL, R0 + 1), ITSME_E_INVALID_ARGUMENT);
    EXPECT("a roster at a time before 1970", itsme_rollcall_confirm_roster(rc[0], stale, sizeof stale, NULL, -5), ITSME_E_INVALID_ARGUMENT);
    for (int i = 0; i < 3; i++) {
        EXPECT("roster", itsme_rollcall_roster(rc[i], roster, sizeof roster, &len), ITSME_OK);
        if (i > 0) EXPECT("one roster for all", memcmp(roster, stale, sizeof roster), 0);
        EXPECT("confirm roster", itsme_rollcall_confirm_roster(rc[i], roster, sizeof roster, NULL, R0 + 1), ITSME_OK);
        EXPECT("confirmed", rc_phase(rc[i]), ITSME_ROLLCALL_PHASE_CONFIRMED);
        memcpy(stale, roster, sizeof roster);
    }
    EXPECT("confirm twice", itsme_rollcall_confirm_roster(rc[0], roster, sizeof roster, NULL, R0 + 1), ITSME_E_INVALID_STATE);
    for (int i = 0; i < 3; i++) {
        EXPECT("code short", itsme_rollcall_code(rc[i], said_code[i], 5, &len), ITSME_E_BUFFER_TOO_SMALL);
        EXPECT("code", itsme_rollcall_code(rc[i], said_code[i], sizeof said_code[i], &len), ITSME_OK);
        EXPECT("code length", len, strlen(said_code[i]) + 1);
    }

    /* Typing: the code's form, the participant, a non-contact. */
    EXPECT("heard not a code", itsme_rollcall_enter_heard(rc[0], ana_sees_ben, "ECHO 42", R0 + 1, &state), ITSME_E_INVALID_ARGUMENT);
    EXPECT("heard a short code", itsme_rollcall_enter_heard(rc[0], ana_sees_ben, "ECHO 0042", R0 + 1, &state), ITSME_E_INVALID_ARGUMENT);
    EXPECT("heard from this device", itsme_rollcall_enter_heard(rc[0], 0, said_code[0], R0 + 1, &state), ITSME_E_INVALID_ARGUMENT);
    EXPECT("heard from no one", itsme_rollcall_enter_heard(rc[0], 7, said_code[1], R0 + 1, &state), ITSME_E_INVALID_ARGUMENT);
    EXPECT("heard from a huge index", itsme_rollcall_enter_heard(rc[0], (size_t)-1, said_code[1], R0 + 1, &state), ITSME_E_INVALID_ARGUMENT);
    EXPECT("heard from a non-contact", itsme_rollcall_enter_heard(rc[1], ben_sees_cai, said_code[2], R0 + 1, &state), ITSME_E_INVALID_STATE);
    EXPECT("heard NULL out", itsme_rollcall_enter_heard(rc[0], ana_sees_ben, said_code[1], R0 + 1, NULL), ITSME_E_INVALID_ARGUMENT);
    /* Cai types Ana's code before her SAID arrives: not yet. */
    EXPECT("cai hears ana early", itsme_rollcall_enter_heard(rc[2], cai_sees_ana, said_code[0], R0 + 1, &state), ITSME_OK);
    EXPECT("not yet", state, ITSME_ROLLCALL_STATE_NOT_YET);

    /* SAIDs: each says its code; the room carries them. */
    for (int i = 0; i < 3; i++) {
        EXPECT("said", itsme_rollcall_confirm_said(rc[i], NULL, R0 + 1), ITSME_OK);
        EXPECT("said status", rc_phase(rc[i]), ITSME_ROLLCALL_PHASE_SAID);
    }
    EXPECT("said twice", itsme_rollcall_confirm_said(rc[2], NULL, R0 + 1), ITSME_E_INVALID_STATE);
    rc_pump(room, R0 + 1);
    EXPECT("no refusal", room->refused, 0);
    EXPECT("a SAID of 131 + 50 * 2 bytes", room->last_len[1][2], 231);
    EXPECT("cai's check came with ana's SAID", rc_participant(rc[2], cai_sees_ana).state, ITSME_ROLLCALL_STATE_VERIFIED_TAG_UNCHECKED);
    uint8_t *ana_said = room->last[1][2], *cai_said = room->last[3][2];
    size_t ana_said_len = room->last_len[1][2], cai_said_len = room->last_len[3][2];
    EXPECT("a SAID again is ignored", itsme_rollcall_receive(rc[0], cai_said, cai_said_len, 3, R0 + 1), ITSME_OK);
    EXPECT("a SAID carried by another slot", itsme_rollcall_receive(rc[0], cai_said, cai_said_len, 2, R0 + 1), ITSME_OK);
    EXPECT("a reflected SAID", itsme_rollcall_receive(rc[2], cai_said, cai_said_len, 1, R0 + 1), ITSME_E_INVALID_KEY);
    EXPECT("a SAID cut short", itsme_rollcall_receive(rc[1], cai_said, cai_said_len - 1, 3, R0 + 1), ITSME_E_MALFORMED_MESSAGE);
    uint8_t tampered[ITSME_ROLLCALL_MESSAGE_MAX];
    memcpy(tampered, ana_said, ana_said_len);
    tampered[67 + 49] ^= 1;
    EXPECT("a SAID with an entry changed", itsme_rollcall_receive(rc[1], tampered, ana_said_len, 1, R0 + 1), ITSME_E_AUTHENTICATION_FAILED);
    EXPECT("its signature fails: nothing changes", rc_participant(rc[1], ben_sees_ana).state, ITSME_ROLLCALL_STATE_NOT_YET);

    /* The roll call keeps its store: Ana's store handle is freed now, and
     * the outcomes are still recorded. */
    itsme_store_free(stores[0]);
    stores[0] = NULL;

    /* Wrong codes: three in a round at most. */
    char wrong[ITSME_VOICE_CODE_SIZE];
    snprintf(wrong, sizeof wrong, "%s", strcmp(said_code[0], "ALFA 000") == 0 ? "ALFA 001" : "ALFA 000");
    for (int attempt = 0; attempt < 3; attempt++) {
        EXPECT("a wrong code", itsme_rollcall_enter_heard(rc[1], ben_sees_ana, wrong, R0 + 2, &state), ITSME_OK);
        EXPECT("wrong", state, ITSME_ROLLCALL_STATE_WRONG);
    }
    EXPECT("a fourth", itsme_rollcall_enter_heard(rc[1], ben_sees_ana, said_code[0], R0 + 2, &state), ITSME_E_LOCKED);
    EXPECT("ana hears ben", itsme_rollcall_enter_heard(rc[0], ana_sees_ben, said_code[1], R0 + 2, &state), ITSME_OK);
    EXPECT("verified", state, ITSME_ROLLCALL_STATE_VERIFIED);
    EXPECT("again in the round", itsme_rollcall_enter_heard(rc[0], ana_sees_ben, said_code[1], R0 + 2, &state), ITSME_E_INVALID_STATE);
    EXPECT("ana hears cai", itsme_rollcall_enter_heard(rc[0], ana_sees_cai, said_code[2], R0 + 2, &state), ITSME_OK);
    EXPECT("cai's device changed", state, ITSME_ROLLCALL_STATE_DEVICE_CHANGED);

    /* Ben's connection drops: a new round for the others; it comes back
     * under a new slot, and its round comes back, confirmed and said. */
    rc_tick(room, R0 + 2);
    rc_leave(room, rc[1], R0 + 3);
    EXPECT("ana: two present", rc_head_count(rc[0]), 2);
    EXPECT("ana: a new round", rc_phase(rc[0]), ITSME_ROLLCALL_PHASE_GATHERING);
    EXPECT("ana: no code in it", itsme_rollcall_code(rc[0], msg, sizeof msg, &len), ITSME_E_INVALID_STATE);
    info = rc_participant(rc[0], ana_sees_ben);
    EXPECT("ben left, still verified", info.left && info.state == ITSME_ROLLCALL_STATE_VERIFIED && !info.agrees, 1);
    EXPECT("ben's slot", rc_join(room, rc[1], R0 + 4), 4);
    rc_tick(room, R0 + 5);
    EXPECT("no refusal", room->refused, 0);
    for (int i = 0; i < 3; i++) {
        EXPECT("three again", rc_head_count(rc[i]), 3);
        EXPECT("said again", rc_phase(rc[i]), ITSME_ROLLCALL_PHASE_SAID);
        EXPECT("the round's roster", itsme_rollcall_roster(rc[i], roster, sizeof roster, &len) == ITSME_OK && memcmp(roster, stale, sizeof roster) == 0, 1);
        char c[ITSME_VOICE_CODE_SIZE];
        EXPECT("the round's code", itsme_rollcall_code(rc[i], c, sizeof c, &len) == ITSME_OK && strcmp(c, said_code[i]) == 0, 1);
    }
    info = rc_participant(rc[0], ana_sees_ben);
    EXPECT("ben back in slot 4", info.slot == 4 && !info.left && info.state == ITSME_ROLLCALL_STATE_VERIFIED, 1);
    EXPECT("ben is locked in the round still", itsme_rollcall_enter_heard(rc[1], ben_sees_ana, said_code[0], R0 + 5, &state), ITSME_E_LOCKED);
    EXPECT("ana's view of ben: one place", itsme_rollcall_participant_count(rc[0], &count) == ITSME_OK && count == 3, 1);

    /* Ben leaves for good: he stays, marked. */
    EXPECT("ben leaves", itsme_rollcall_peer_left(rc[0], 4, R0 + 6), ITSME_OK);
    EXPECT("an unknown slot leaves", itsme_rollcall_peer_left(rc[0], 40, R0 + 6), ITSME_OK);
    info = rc_participant(rc[0], ana_sees_ben);
    EXPECT("left, still verified", info.left && info.state == ITSME_ROLLCALL_STATE_VERIFIED, 1);
    EXPECT("still three", itsme_rollcall_participant_count(rc[0], &count) == ITSME_OK && count == 3, 1);
    EXPECT("not present: nothing to type", itsme_rollcall_enter_heard(rc[0], ana_sees_ben, said_code[1], R0 + 6, &state), ITSME_E_INVALID_STATE);

    /* Ten minutes later the roll call is over, for good. */
    EXPECT("expired", itsme_rollcall_receive(rc[0], cai_said, cai_said_len, 3, R0 + 601), ITSME_E_EXPIRED);
    EXPECT("expired status", rc_phase(rc[0]), ITSME_ROLLCALL_PHASE_EXPIRED);
    EXPECT("no code once expired", itsme_rollcall_code(rc[0], said_code[0], sizeof said_code[0], &len), ITSME_E_INVALID_STATE);
    EXPECT("expired even at an earlier time", itsme_rollcall_confirm_said(rc[0], NULL, R0 + 2), ITSME_E_EXPIRED);
    EXPECT("no tick once expired", itsme_rollcall_tick(rc[0], R0 + 2), ITSME_E_EXPIRED);
    EXPECT("no join once expired", itsme_rollcall_joined(rc[0], 9, NULL, 0, R0 + 2), ITSME_E_EXPIRED);
    EXPECT("no peer once expired", itsme_rollcall_peer_joined(rc[0], 9, R0 + 2), ITSME_E_EXPIRED);
    /* A clock set back more than 30 s before the start ends it too. */
    EXPECT("a time before the start", itsme_rollcall_enter_heard(rc[1], ben_sees_ana, said_code[0], R0 - 31, &state), ITSME_E_EXPIRED);
    EXPECT("over", rc_phase(rc[1]), ITSME_ROLLCALL_PHASE_EXPIRED);
    EXPECT("the outcome stays", rc_participant(rc[0], ana_sees_ben).state, ITSME_ROLLCALL_STATE_VERIFIED);
    for (int i = 0; i < 3; i++) itsme_rollcall_free(rc[i]);

    /* Bound to calls: Ana and Ben to one, Cai to another; a fourth roll
     * call of Cai's not bound at all. */
    uint8_t call_a[32], call_b[32];
    memset(call_a, 0xCA, sizeof call_a);
    memset(call_b, 0xCB, sizeof call_b);
    snprintf(path, sizeof path, "%s/%s.db", dir, names[0]);
    EXPECT("ana's store again", itsme_store_open(ids[0], path, &stores[0]), ITSME_OK);
    itsme_rollcall *bound[4] = {NULL};
    EXPECT("bound ana", itsme_rollcall_new(stores[0], code, call_a, sizeof call_a, NULL, R0 + 10, &bound[0]), ITSME_OK);
    EXPECT("bound ben", itsme_rollcall_new(stores[1], code, call_a, sizeof call_a, NULL, R0 + 10, &bound[1]), ITSME_OK);
    EXPECT("cai in another call", itsme_rollcall_new(stores[2], code, call_b, sizeof call_b, NULL, R0 + 10, &bound[2]), ITSME_OK);
    EXPECT("cai not bound", itsme_rollcall_new(stores[2], code, NULL, 0, NULL, R0 + 10, &bound[3]), ITSME_OK);
    memset(room, 0, sizeof *room);
    for (int i = 0; i < 4; i++) rc_join(room, bound[i], R0 + 10);
    rc_tick(room, R0 + 11);
    EXPECT("no refusal", room->refused, 0);
    EXPECT("four present", rc_head_count(bound[0]), 4);
    EXPECT("ben: the same call", rc_participant(bound[0], rc_index_at(bound[0], 2)).state, ITSME_ROLLCALL_STATE_NOT_YET);
    info = rc_participant(bound[0], rc_index_at(bound[0], 3));
    EXPECT("cai: another call", info.state == ITSME_ROLLCALL_STATE_OTHER_CALL && info.contact_id == 0, 1);
    info = rc_participant(bound[0], rc_index_at(bound[0], 4));
    EXPECT("cai unbound: the binding differs", info.state == ITSME_ROLLCALL_STATE_BINDING_DIFFERS && info.contact_id == 0, 1);
    EXPECT("ana from cai's other call", rc_participant(bound[2], rc_index_at(bound[2], 1)).state, ITSME_ROLLCALL_STATE_OTHER_CALL);
    EXPECT("ana from cai unbound", rc_participant(bound[3], rc_index_at(bound[3], 1)).state, ITSME_ROLLCALL_STATE_BINDING_DIFFERS);
    for (int i = 0; i < 4; i++) {
        EXPECT("roster", itsme_rollcall_roster(bound[i], roster, sizeof roster, &len), ITSME_OK);
        EXPECT("confirm", itsme_rollcall_confirm_roster(bound[i], roster, sizeof roster, NULL, R0 + 11), ITSME_OK);
    }
    EXPECT("nothing to check in another call", itsme_rollcall_enter_heard(bound[0], rc_index_at(bound[0], 3), "ECHO 042", R0 + 11, &state), ITSME_E_INVALID_STATE);
    for (int i = 0; i < 4; i++) itsme_rollcall_free(bound[i]);
    free(room);

    /* The outcome was recorded in Ana's store though its handle was freed. */
    itsme_contact *ben = NULL;
    itsme_verification_state vs = 0;
    bool acknowledged = false;
    EXPECT("ben", itsme_store_get(stores[0], ana_ben, &ben), ITSME_OK);
    EXPECT("ben's state", itsme_contact_state(ben, &vs, &acknowledged), ITSME_OK);
    EXPECT("ben is verified", vs, ITSME_CONTACT_VERIFIED);
    itsme_contact_free(ben);

    for (int i = 0; i < 3; i++) {
        itsme_store_free(stores[i]);
        itsme_identity_free(ids[i]);
        itsme_secret_store_free(secrets[i]);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) failed++;
}

/* Unpadded base64url, for building offers by hand. */
static void base64url(const uint8_t *in, size_t len, char *out) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < len) v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len) v |= in[i + 2];
        out[o++] = alphabet[(v >> 18) & 63];
        out[o++] = alphabet[(v >> 12) & 63];
        if (i + 1 < len) out[o++] = alphabet[(v >> 6) & 63];
        if (i + 2 < len) out[o++] = alphabet[v & 63];
    }
    out[o] = 0;
}

static uint32_t pin_failures(itsme_identity *id) {
    uint32_t failures = 99;
    uint64_t wait = 99;
    if (itsme_pin_status(id, T0, &failures, &wait) != ITSME_OK) return 99;
    return failures;
}

static uint32_t import_failures(itsme_secret_store *store, int64_t now) {
    uint32_t failures = 99;
    uint64_t wait = 99;
    if (itsme_import_status(store, now, &failures, &wait) != ITSME_OK) return 99;
    return failures;
}

/* Moves every queued message from the sender to the receiver. */
static int transfer_pump(itsme_transfer *sender, itsme_transfer *receiver, int64_t now) {
    uint8_t m[ITSME_TRANSFER_MESSAGE_MAX];
    size_t len = 0;
    int count = 0;
    for (;;) {
        if (itsme_transfer_next_outgoing(sender, m, sizeof m, &len) != ITSME_OK) return -1;
        if (len == 0) return count;
        if (itsme_transfer_receive(receiver, m, len, now) != ITSME_OK) return -1;
        count++;
    }
}

static itsme_transfer_state transfer_state(itsme_transfer *t) {
    itsme_transfer_state s = 0;
    if (itsme_transfer_status(t, &s) != ITSME_OK) return 0;
    return s;
}

/* The password export, the import and install, and the live transfer.
 * Argon2id at the export's cost runs three times: one export, one wrong
 * password, one right one. */
static void transfers(void) {
    char dir[] = "/tmp/itsme-c-transfer-XXXXXX";
    if (!mkdtemp(dir)) { failed++; return; }
    char path[128], not_db[128];
    snprintf(path, sizeof path, "%s/contacts.db", dir);
    snprintf(not_db, sizeof not_db, "%s/not-a-db", dir);
    FILE *f = fopen(not_db, "w");
    if (f) { fputs("this is not a database, just some text that is long enough\n", f); fclose(f); }

    uint8_t seed[32] = {9}, pw_seed[32] = {5};
    itsme_random *rng = NULL, *rng_pw = NULL, *rng_pw2 = NULL;
    itsme_secret_store *old_secrets = NULL, *new_secrets = NULL;
    itsme_identity *old_id = NULL, *nina = NULL;
    char msg[512], old_fp[ITSME_FINGERPRINT_SIZE], text_buf[ITSME_EXPORT_TEXT_SIZE + 16];
    size_t len = 0;
    itsme_random_new_deterministic(seed, 32, &rng);
    itsme_random_new_deterministic(pw_seed, 32, &rng_pw);
    itsme_random_new_deterministic(pw_seed, 32, &rng_pw2);
    itsme_secret_store_new_memory(&old_secrets);
    itsme_secret_store_new_memory(&new_secrets);
    EXPECT("old identity", itsme_identity_create_with_random(old_secrets, "Olivia", rng, &old_id), ITSME_OK);
    EXPECT("old fingerprint", itsme_identity_fingerprint(old_id, old_fp, sizeof old_fp, &len), ITSME_OK);
    EXPECT("another identity on the new device", itsme_identity_create(new_secrets, "Nina", &nina), ITSME_OK);
    EXPECT("its PIN", itsme_pin_set(nina, "222222"), ITSME_OK);
    char nina_fp[ITSME_FINGERPRINT_SIZE];
    EXPECT("nina fingerprint", itsme_identity_fingerprint(nina, nina_fp, sizeof nina_fp, &len), ITSME_OK);

    /* The old device's contact store: two contacts, one with a device secret. */
    itsme_store *store = NULL;
    EXPECT("old store", itsme_store_open(old_id, path, &store), ITSME_OK);
    uint8_t key1[32], key2[32], cseed[32];
    memset(key1, 0x42, sizeof key1);
    memset(key2, 0x43, sizeof key2);
    memset(cseed, 7, sizeof cseed);
    int64_t c1 = 0, c2 = 0;
    EXPECT("contact 1", itsme_store_add(store, "Ann", key1, 32, cseed, 32, ITSME_EXCHANGE_QR, T0, &c1), ITSME_OK);
    EXPECT("contact 2", itsme_store_add(store, "Ben", key2, 32, cseed, 32, ITSME_EXCHANGE_QR, T0, &c2), ITSME_OK);
    char dcode[ITSME_DEGRADATION_CODE_SIZE];
    EXPECT("a device secret", itsme_store_degradation_code(store, c1, NULL, dcode, sizeof dcode, &len), ITSME_OK);
    itsme_store_free(store);
    store = NULL;

    /* Generated passwords: nothing is drawn unless the password fits. */
    char password[ITSME_EXPORT_PASSWORD_SIZE], again[ITSME_EXPORT_PASSWORD_SIZE];
    EXPECT("password short buffer", itsme_export_generate_password(rng_pw, password, 15, &len), ITSME_E_BUFFER_TOO_SMALL);
    EXPECT("password", itsme_export_generate_password(rng_pw, password, sizeof password, &len), ITSME_OK);
    EXPECT("password length", len, ITSME_EXPORT_PASSWORD_SIZE);
    EXPECT("password shape", strlen(password) == 15 && password[4] == '-' && password[9] == '-', 1);
    EXPECT("same seed", itsme_export_generate_password(rng_pw2, again, sizeof again, &len), ITSME_OK);
    EXPECT("failed calls drew nothing", strcmp(password, again), 0);
    EXPECT("next password", itsme_export_generate_password(rng_pw2, again, sizeof again, &len), ITSME_OK);
    EXPECT("passwords differ", strcmp(password, again) != 0, 1);
    EXPECT("system random password", itsme_export_generate_password(NULL, again, sizeof again, &len), ITSME_OK);

    /* Export: argument, password and buffer checks cost no PIN attempt. */
    uint8_t blob[ITSME_EXPORT_MAX];
    size_t blob_len = 0;
    const uint32_t GEN = ITSME_EXPORT_PASSWORD_GENERATED, CHO = ITSME_EXPORT_PASSWORD_CHOSEN;
    EXPECT("export without a PIN", itsme_identity_export(old_id, "123456", T0, password, GEN, NULL, blob, sizeof blob, &len), ITSME_E_NOT_FOUND);
    EXPECT("set PIN", itsme_pin_set(old_id, "123456"), ITSME_OK);
    EXPECT("export kind 0", itsme_identity_export(old_id, "123456", T0, password, 0, NULL, blob, sizeof blob, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("export kind 3", itsme_identity_export(old_id, "123456", T0, password, 3, NULL, blob, sizeof blob, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("export kind 257", itsme_identity_export(old_id, "123456", T0, password, 257, NULL, blob, sizeof blob, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("export password outside the alphabet", itsme_identity_export(old_id, "123456", T0, "ABCD-EFGH-JKMN0", GEN, NULL, blob, sizeof blob, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("export short generated", itsme_identity_export(old_id, "123456", T0, "ABCD-EFGH", GEN, NULL, blob, sizeof blob, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("export short chosen", itsme_identity_export(old_id, "123456", T0, "seven77", CHO, NULL, blob, sizeof blob, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("export short buffer", itsme_identity_export(old_id, "123456", T0, password, GEN, NULL, blob, 100, &len), ITSME_E_BUFFER_TOO_SMALL);
    EXPECT("export size needed", len, 144 + strlen("Olivia"));
    EXPECT("export malformed PIN", itsme_identity_export(old_id, "12345", T0, password, GEN, NULL, blob, sizeof blob, &len), ITSME_E_INVALID_PIN);
    EXPECT("no attempt spent so far", pin_failures(old_id), 0);
    EXPECT("export wrong PIN", itsme_identity_export(old_id, "000000", T0, password, GEN, NULL, blob, sizeof blob, &len), ITSME_E_WRONG_PIN);
    EXPECT("a wrong PIN is counted", pin_failures(old_id), 1);
    EXPECT("identity last error", itsme_identity_last_error(old_id, msg, sizeof msg, &len), ITSME_OK);
    EXPECT("no secret in the message", strstr(msg, "000000") == NULL && strstr(msg, password) == NULL, 1);
    EXPECT("export", itsme_identity_export(old_id, "123456", T0, password, GEN, NULL, blob, sizeof blob, &blob_len), ITSME_OK);
    EXPECT("export length", blob_len, 150);
    EXPECT("export magic", memcmp(blob, "ITSMEXP", 7), 0);
    EXPECT("the right PIN clears the count", pin_failures(old_id), 0);

    /* The header, read without any key derivation. */
    uint32_t passes = 99, memory = 99, kind = 99;
    EXPECT("header empty", itsme_export_header(blob, 0, &passes, &memory, &kind), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("header truncated", itsme_export_header(blob, 20, &passes, &memory, &kind), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("header", itsme_export_header(blob, blob_len, &passes, &memory, &kind), ITSME_OK);
    EXPECT("passes", passes, 3);
    EXPECT("memory", memory, 256 * 1024);
    EXPECT("kind", kind, ITSME_EXPORT_PASSWORD_GENERATED);
    struct { size_t at; uint8_t value; itsme_result expected; const char *what; } alterations[] = {
        {0, 'X', ITSME_E_MALFORMED_MESSAGE, "header: not an export"},
        {7, 3, ITSME_E_INVALID_ARGUMENT, "header: unknown version"},
        {8, 2, ITSME_E_INVALID_ARGUMENT, "header: unknown key derivation"},
        {12, 2, ITSME_E_INVALID_ARGUMENT, "header: 2 passes"},
        {14, 1, ITSME_E_INVALID_ARGUMENT, "header: 64 MiB"},
        {17, 3, ITSME_E_INVALID_ARGUMENT, "header: unknown password kind"},
    };
    uint8_t altered[ITSME_EXPORT_MAX];
    for (size_t i = 0; i < sizeof alterations / sizeof alterations[0]; i++) {
        memcpy(altered, blob, blob_len);
        altered[alterations[i].at] = alterations[i].value;
        EXPECT(alterations[i].what, itsme_export_header(altered, blob_len, &passes, &memory, &kind), alterations[i].expected);
        EXPECT("to text checks the header", itsme_export_to_text(altered, blob_len, text_buf, sizeof text_buf, &len), alterations[i].expected);
    }

    /* Text form. */
    const size_t text_size = 9 + (blob_len * 4 + 2) / 3 + 1;
    EXPECT("to text truncated", itsme_export_to_text(blob, 30, text_buf, sizeof text_buf, &len), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("to text", itsme_export_to_text(blob, blob_len, text_buf, sizeof text_buf, &len), ITSME_OK);
    EXPECT("text length", len, text_size);
    EXPECT("text prefix", strncmp(text_buf, "ITSMEXP1:", 9), 0);
    uint8_t back[ITSME_EXPORT_MAX];
    size_t back_len = 0;
    EXPECT("from text not an export", itsme_export_from_text("hello there", back, sizeof back, &back_len), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("from text damaged", itsme_export_from_text("ITSMEXP1:!!!!", back, sizeof back, &back_len), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("from text other text version", itsme_export_from_text("ITSMEXP2:AAAA", back, sizeof back, &back_len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("from text source v3 JSON", itsme_export_from_text("{\"version\": 3, \"data\": \"q83vEjRWeJA\"}", back, sizeof back, &back_len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("thread last error", itsme_last_error(msg, sizeof msg, &len), ITSME_OK);
    EXPECT("says it is never accepted", strstr(msg, "never accepted") != NULL, 1);
    EXPECT("from text source base64 (a sealed box of 72 bytes)",
           itsme_export_from_text("q83vEjRWeJCrze8SNFZ4kAABAgMEBQYHCAkKC6vN7xI0VniQq83vEjRWeJAAAQIDBAUGBwgJCgur"
                                  "ze8SNFZ4kKvN7xI0VniQ",
                                  back, sizeof back, &back_len),
           ITSME_E_INVALID_ARGUMENT);
    EXPECT("from text base64 too short to be a sealed box", itsme_export_from_text("q83vEjRWeJCrze8SNFZ4kA==", back, sizeof back, &back_len), ITSME_E_MALFORMED_MESSAGE);
    char spaced[sizeof text_buf + 8];
    snprintf(spaced, sizeof spaced, " \n%s\r\n ", text_buf);
    back_len = 0;
    EXPECT("from text", itsme_export_from_text(spaced, back, sizeof back, &back_len), ITSME_OK);
    EXPECT("round trip", back_len == blob_len && memcmp(back, blob, blob_len) == 0, 1);

    /* Import: refused headers and malformed passwords cost nothing. */
    itsme_import *imp = NULL;
    memcpy(altered, blob, blob_len);
    altered[7] = 3;
    EXPECT("open truncated", itsme_import_open(new_secrets, blob, 40, password, T0, &imp), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("open unknown version", itsme_import_open(new_secrets, altered, blob_len, password, T0, &imp), ITSME_E_INVALID_ARGUMENT);
    EXPECT("open password not of the kind", itsme_import_open(new_secrets, blob, blob_len, "correct horse battery", T0, &imp), ITSME_E_INVALID_ARGUMENT);
    uint32_t failures = 99;
    uint64_t wait = 99;
    EXPECT("nothing counted yet", import_failures(new_secrets, T0), 0);
    char wrong_password[ITSME_EXPORT_PASSWORD_SIZE];
    memcpy(wrong_password, password, sizeof wrong_password);
    wrong_password[0] = wrong_password[0] == 'A' ? 'B' : 'A';
    EXPECT("open wrong password", itsme_import_open(new_secrets, blob, blob_len, wrong_password, T0, &imp), ITSME_E_AUTHENTICATION_FAILED);
    EXPECT("status", itsme_import_status(new_secrets, T0, &failures, &wait), ITSME_OK);
    EXPECT("counted", failures, 1);
    EXPECT("no wait yet", wait, 0);
    EXPECT("store last error", itsme_secret_store_last_error(new_secrets, msg, sizeof msg, &len), ITSME_OK);
    EXPECT("says wrong password", strstr(msg, "wrong export password") != NULL, 1);
    EXPECT("no password in the message", strstr(msg, password) == NULL && strstr(msg, wrong_password) == NULL, 1);
    /* Typed back in lowercase without dashes. */
    char typed[ITSME_EXPORT_PASSWORD_SIZE];
    size_t t = 0;
    for (size_t i = 0; password[i]; i++)
        if (password[i] != '-') typed[t++] = (char)(password[i] >= 'A' && password[i] <= 'Z' ? password[i] + 32 : password[i]);
    typed[t] = 0;
    EXPECT("open", itsme_import_open(new_secrets, blob, blob_len, typed, T0 + 1, &imp), ITSME_OK);
    EXPECT("the right password clears the count", import_failures(new_secrets, T0 + 1), 0);

    char fp[ITSME_FINGERPRINT_SIZE], name[64];
    EXPECT("import fp", itsme_import_fingerprint(imp, fp, sizeof fp, &len), ITSME_OK);
    EXPECT("same identity", strcmp(fp, old_fp), 0);
    EXPECT("import name", itsme_import_name(imp, name, sizeof name, &len), ITSME_OK);
    EXPECT("name", strcmp(name, "Olivia"), 0);

    /* Check: another identity is in the new secret store. */
    itsme_import_report report = {.size = sizeof(itsme_import_report)};
    EXPECT("check empty path", itsme_import_check(imp, new_secrets, "", &report), ITSME_E_INVALID_ARGUMENT);
    EXPECT("check not a contact store", itsme_import_check(imp, new_secrets, not_db, &report), ITSME_E_DATABASE);
    EXPECT("import last error", itsme_import_last_error(imp, msg, sizeof msg, &len), ITSME_OK);
    EXPECT("import last error says something", strlen(msg) > 0, 1);
    EXPECT("check", itsme_import_check(imp, new_secrets, path, &report), ITSME_OK);
    EXPECT("wrong identity", report.wrong_identity, 1);
    EXPECT("the other is Nina", strcmp(report.other_fingerprint, nina_fp), 0);
    EXPECT("store exists", report.store_exists, 1);
    EXPECT("readable", report.contacts_readable, 2);
    EXPECT("unreadable", report.contacts_unreadable, 0);
    EXPECT("device secrets", report.device_secrets, 1);
    EXPECT("check without a store", itsme_import_check(imp, new_secrets, NULL, &report), ITSME_OK);
    EXPECT("no store", report.store_exists == 0 && report.contacts_readable == 0 && report.device_secrets == 0, 1);
    snprintf(name, sizeof name, "%s/missing.db", dir);
    EXPECT("check a missing file", itsme_import_check(imp, new_secrets, name, &report), ITSME_OK);
    EXPECT("missing file", report.store_exists, 0);

    /* Install: refused without ITSME_IMPORT_REPLACE, changing nothing. */
    itsme_identity *installed = NULL;
    EXPECT("install unknown flag", itsme_import_install(imp, new_secrets, path, 2, &installed), ITSME_E_INVALID_ARGUMENT);
    EXPECT("install empty path", itsme_import_install(imp, new_secrets, "", ITSME_IMPORT_REPLACE, &installed), ITSME_E_INVALID_ARGUMENT);
    EXPECT("install over another identity", itsme_import_install(imp, new_secrets, path, 0, &installed), ITSME_E_WRONG_IDENTITY);
    EXPECT("why", itsme_import_last_error(imp, msg, sizeof msg, &len) == ITSME_OK && strstr(msg, "nothing was changed") != NULL, 1);
    itsme_identity *loaded = NULL;
    EXPECT("Nina still there", itsme_identity_load(new_secrets, &loaded), ITSME_OK);
    EXPECT("Nina's fingerprint", itsme_identity_fingerprint(loaded, fp, sizeof fp, &len) == ITSME_OK && strcmp(fp, nina_fp) == 0, 1);
    itsme_identity_free(loaded);
    loaded = NULL;
    EXPECT("store unchanged", itsme_import_check(imp, new_secrets, path, &report) == ITSME_OK && report.device_secrets == 1, 1);
    EXPECT("install replacing", itsme_import_install(imp, new_secrets, path, ITSME_IMPORT_REPLACE, &installed), ITSME_OK);
    EXPECT("installed fingerprint", itsme_identity_fingerprint(installed, fp, sizeof fp, &len) == ITSME_OK && strcmp(fp, old_fp) == 0, 1);
    EXPECT("installed name", itsme_identity_name(installed, name, sizeof name, &len) == ITSME_OK && strcmp(name, "Olivia") == 0, 1);
    EXPECT("the device's PIN stays", itsme_pin_verify(installed, "222222", T0), ITSME_OK);
    EXPECT("check after install", itsme_import_check(imp, new_secrets, path, &report), ITSME_OK);
    EXPECT("no longer wrong", report.wrong_identity, 0);
    EXPECT("no other identity", report.other_fingerprint[0], 0);
    EXPECT("device secrets forgotten", report.device_secrets, 0);
    EXPECT("contacts kept", report.contacts_readable, 2);
    EXPECT("install again, no identity wanted", itsme_import_install(imp, new_secrets, path, 0, NULL), ITSME_OK);
    EXPECT("load", itsme_identity_load(new_secrets, &loaded), ITSME_OK);
    EXPECT("the stored identity is the import", itsme_identity_fingerprint(loaded, fp, sizeof fp, &len) == ITSME_OK && strcmp(fp, old_fp) == 0, 1);
    EXPECT("the store opens", itsme_store_open(loaded, path, &store), ITSME_OK);
    uint64_t count = 0;
    EXPECT("contacts", itsme_store_count(store, &count) == ITSME_OK && count == 2, 1);
    itsme_store_free(store);
    itsme_identity_free(loaded);
    itsme_identity_free(installed);
    itsme_import_free(imp);

    /* Live transfer: the receiver's side before the sender answers. */
    itsme_transfer *rx = NULL, *tx = NULL;
    EXPECT("receiver", itsme_transfer_new_receiver(rng, T0, &rx), ITSME_OK);
    EXPECT("awaiting peer", transfer_state(rx), ITSME_TRANSFER_AWAITING_PEER);
    char offer[ITSME_TRANSFER_OFFER_SIZE], offer2[ITSME_TRANSFER_OFFER_SIZE + 8];
    EXPECT("offer", itsme_transfer_offer(rx, offer, sizeof offer, &len), ITSME_OK);
    EXPECT("offer prefix", strncmp(offer, "ITSMETR2:", 9), 0);
    char room[ITSME_ROOM_NAME_SIZE], room2[ITSME_ROOM_NAME_SIZE];
    EXPECT("room", itsme_transfer_room(rx, room, sizeof room, &len), ITSME_OK);
    EXPECT("room length", len, ITSME_ROOM_NAME_SIZE);
    char sas_rx[ITSME_SHORT_CODE_SIZE], sas_tx[ITSME_SHORT_CODE_SIZE];
    EXPECT("sas before the key", itsme_transfer_sas(rx, sas_rx, sizeof sas_rx, &len), ITSME_E_INVALID_STATE);
    EXPECT("confirm before the key", itsme_transfer_confirm(rx, T0), ITSME_E_INVALID_STATE);
    itsme_import *taken = NULL;
    EXPECT("take before done", itsme_transfer_take_import(rx, &taken), ITSME_E_INVALID_STATE);
    uint8_t m[ITSME_TRANSFER_MESSAGE_MAX];
    EXPECT("receiver sends nothing", itsme_transfer_next_outgoing(rx, m, sizeof m, &len) == ITSME_OK && len == 0, 1);
    EXPECT("still awaiting", transfer_state(rx), ITSME_TRANSFER_AWAITING_PEER);

    /* The sender: a malformed offer is refused before the PIN. */
    EXPECT("sender not an offer", itsme_transfer_new_sender(old_id, "000000", "hello", NULL, T0, &tx), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("sender short offer", itsme_transfer_new_sender(old_id, "000000", "ITSMETR1:AAAA", NULL, T0, &tx), ITSME_E_MALFORMED_MESSAGE);
    uint8_t raw_offer[49] = {1};
    char crafted[ITSME_TRANSFER_OFFER_SIZE];
    memcpy(crafted, "ITSMETR2:", 9);
    base64url(raw_offer, sizeof raw_offer, crafted + 9);
    EXPECT("sender offer of version 1", itsme_transfer_new_sender(old_id, "000000", crafted, NULL, T0, &tx), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("the PIN was not tried", pin_failures(old_id), 0);
    EXPECT("sender malformed PIN", itsme_transfer_new_sender(old_id, "12", offer, NULL, T0, &tx), ITSME_E_INVALID_PIN);
    EXPECT("sender wrong PIN", itsme_transfer_new_sender(old_id, "000000", offer, NULL, T0, &tx), ITSME_E_WRONG_PIN);
    EXPECT("counted", pin_failures(old_id), 1);
    raw_offer[0] = 2; /* version 2, a zero (low-order) key */
    base64url(raw_offer, sizeof raw_offer, crafted + 9);
    EXPECT("sender low-order key", itsme_transfer_new_sender(old_id, "123456", crafted, NULL, T0, &tx), ITSME_E_INVALID_KEY);
    EXPECT("sender last error on the identity", itsme_identity_last_error(old_id, msg, sizeof msg, &len) == ITSME_OK && strstr(msg, "low-order") != NULL, 1);
    snprintf(offer2, sizeof offer2, "  %s\n", offer);
    EXPECT("sender", itsme_transfer_new_sender(old_id, "123456", offer2, rng, T0, &tx), ITSME_OK);
    EXPECT("sender compares at once", transfer_state(tx), ITSME_TRANSFER_COMPARE_SAS);
    EXPECT("sender's offer", itsme_transfer_offer(tx, offer2, sizeof offer2, &len), ITSME_OK);
    EXPECT("the offer it read", strcmp(offer2, offer), 0);
    EXPECT("sender room", itsme_transfer_room(tx, room2, sizeof room2, &len), ITSME_OK);
    EXPECT("same room", strcmp(room, room2), 0);
    EXPECT("sender sas", itsme_transfer_sas(tx, sas_tx, sizeof sas_tx, &len), ITSME_OK);
    EXPECT("sender receives nothing", itsme_transfer_receive(tx, (const uint8_t *)"\x01\x01", 2, T0), ITSME_E_INVALID_STATE);
    EXPECT("sender still comparing", transfer_state(tx), ITSME_TRANSFER_COMPARE_SAS);
    EXPECT("sender takes nothing", itsme_transfer_take_import(tx, &taken), ITSME_E_INVALID_STATE);
    EXPECT("key message", itsme_transfer_next_outgoing(tx, m, sizeof m, &len), ITSME_OK);
    EXPECT("key message kept until written", len, 34);
    size_t none = 5;
    EXPECT("then nothing", itsme_transfer_next_outgoing(tx, m + 64, sizeof m - 64, &none) == ITSME_OK && none == 0, 1);
    EXPECT("receive key", itsme_transfer_receive(rx, m, len, T0 + 1), ITSME_OK);
    EXPECT("receiver compares", transfer_state(rx), ITSME_TRANSFER_COMPARE_SAS);
    EXPECT("receiver sas", itsme_transfer_sas(rx, sas_rx, sizeof sas_rx, &len), ITSME_OK);
    EXPECT("same sas", strcmp(sas_rx, sas_tx), 0);
    EXPECT("nothing sent before the sender confirms", itsme_transfer_next_outgoing(tx, m, sizeof m, &len) == ITSME_OK && len == 0, 1);
    /* Including the contacts: the sender's own store, before it confirms. */
    char live_path[160];
    snprintf(live_path, sizeof live_path, "%s/olivia-live.db", dir);
    itsme_store *live = NULL, *ninas = NULL;
    EXPECT("a store of the sender", itsme_store_open(old_id, live_path, &live), ITSME_OK);
    snprintf(live_path, sizeof live_path, "%s/nina-live.db", dir);
    EXPECT("a store of another identity", itsme_store_open(nina, live_path, &ninas), ITSME_OK);
    EXPECT("include: no store", itsme_transfer_include_contacts(tx, NULL), ITSME_E_INVALID_ARGUMENT);
    EXPECT("include: no transfer", itsme_transfer_include_contacts(NULL, live), ITSME_E_INVALID_ARGUMENT);
    EXPECT("include on the receiver", itsme_transfer_include_contacts(rx, live), ITSME_E_INVALID_STATE);
    EXPECT("include another identity's store", itsme_transfer_include_contacts(tx, ninas), ITSME_E_WRONG_IDENTITY);
    EXPECT("nothing queued by the refusals", itsme_transfer_next_outgoing(tx, m, sizeof m, &len) == ITSME_OK && len == 0, 1);
    EXPECT("export with another identity's store", itsme_identity_export_with_contacts(old_id, "123456", T0, "a chosen password",
           ITSME_EXPORT_PASSWORD_CHOSEN, ninas, NULL, m, sizeof m, &len), ITSME_E_WRONG_IDENTITY);
    EXPECT("export with no store", itsme_identity_export_with_contacts(old_id, "123456", T0, "a chosen password",
           ITSME_EXPORT_PASSWORD_CHOSEN, NULL, NULL, m, sizeof m, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("sender confirms", itsme_transfer_confirm(tx, T0 + 2), ITSME_OK);
    EXPECT("include once confirmed", itsme_transfer_include_contacts(tx, live), ITSME_E_INVALID_STATE);
    itsme_store_free(live);
    itsme_store_free(ninas);
    EXPECT("sender done", transfer_state(tx), ITSME_TRANSFER_DONE);
    EXPECT("confirm twice", itsme_transfer_confirm(tx, T0 + 2), ITSME_E_INVALID_STATE);
    EXPECT("reject after done", itsme_transfer_reject(tx), ITSME_E_INVALID_STATE);
    /* The identity arrives before the receiver's person confirms: held. */
    EXPECT("identity early", transfer_pump(tx, rx, T0 + 3), 1);
    EXPECT("still comparing", transfer_state(rx), ITSME_TRANSFER_COMPARE_SAS);
    EXPECT("take before confirming", itsme_transfer_take_import(rx, &taken), ITSME_E_INVALID_STATE);
    EXPECT("receiver confirms", itsme_transfer_confirm(rx, T0 + 4), ITSME_OK);
    EXPECT("receiver done", transfer_state(rx), ITSME_TRANSFER_DONE);
    EXPECT("receiver confirms twice", itsme_transfer_confirm(rx, T0 + 4), ITSME_E_INVALID_STATE);
    EXPECT("receive after done", itsme_transfer_receive(rx, m, 34, T0 + 4), ITSME_E_INVALID_STATE);
    EXPECT("take", itsme_transfer_take_import(rx, &taken), ITSME_OK);
    itsme_import *twice = NULL;
    EXPECT("take twice", itsme_transfer_take_import(rx, &twice), ITSME_E_INVALID_STATE);
    EXPECT("transfer last error", itsme_transfer_last_error(rx, msg, sizeof msg, &len), ITSME_OK);
    EXPECT("says why", strstr(msg, "no received identity") != NULL, 1);
    EXPECT("taken fingerprint", itsme_import_fingerprint(taken, fp, sizeof fp, &len) == ITSME_OK && strcmp(fp, old_fp) == 0, 1);
    uint64_t carried = 99;
    EXPECT("no contacts came", itsme_import_contacts_size(taken, &carried) == ITSME_OK && carried == 0, 1);
    EXPECT("contacts size: no output", itsme_import_contacts_size(taken, NULL), ITSME_E_INVALID_ARGUMENT);
    snprintf(live_path, sizeof live_path, "%s/carried.db", dir);
    EXPECT("write contacts: none came", itsme_import_write_contacts(taken, live_path), ITSME_E_NOT_FOUND);
    EXPECT("write contacts: no path", itsme_import_write_contacts(taken, NULL), ITSME_E_INVALID_ARGUMENT);
    EXPECT("write contacts: empty path", itsme_import_write_contacts(taken, ""), ITSME_E_INVALID_ARGUMENT);
    FILE *probe = fopen(live_path, "rb");
    EXPECT("nothing written", probe == NULL, 1);
    if (probe) fclose(probe);
    itsme_secret_store *third = NULL;
    itsme_secret_store_new_memory(&third);
    EXPECT("check on a fresh device", itsme_import_check(taken, third, NULL, &report), ITSME_OK);
    EXPECT("nothing in the way", report.wrong_identity == 0 && report.other_fingerprint[0] == 0 && report.store_exists == 0, 1);
    EXPECT("install", itsme_import_install(taken, third, NULL, 0, &installed), ITSME_OK);
    EXPECT("installed", itsme_identity_fingerprint(installed, fp, sizeof fp, &len) == ITSME_OK && strcmp(fp, old_fp) == 0, 1);
    itsme_identity_free(installed);
    itsme_import_free(taken);
    itsme_secret_store_free(third);
    itsme_transfer_free(rx);
    itsme_transfer_free(tx);

    /* Failures end a transfer: a tampered identity message, a malformed
     * message, a low-order key, the 10 minutes; and a rejection. */
    rx = tx = NULL;
    EXPECT("receiver 2", itsme_transfer_new_receiver(NULL, T0, &rx), ITSME_OK);
    EXPECT("offer 2", itsme_transfer_offer(rx, offer, sizeof offer, &len), ITSME_OK);
    EXPECT("sender 2", itsme_transfer_new_sender(old_id, "123456", offer, NULL, T0, &tx), ITSME_OK);
    EXPECT("key 2", transfer_pump(tx, rx, T0), 1);
    EXPECT("receiver 2 confirms first", itsme_transfer_confirm(rx, T0), ITSME_OK);
    EXPECT("awaiting identity", transfer_state(rx), ITSME_TRANSFER_AWAITING_IDENTITY);
    EXPECT("sender 2 confirms", itsme_transfer_confirm(tx, T0), ITSME_OK);
    EXPECT("identity message", itsme_transfer_next_outgoing(tx, m, sizeof m, &len), ITSME_OK);
    EXPECT("identity message size", len, 2 + 82 + strlen("Olivia") + 4 + 16);
    m[len - 1] ^= 1;
    EXPECT("tampered identity", itsme_transfer_receive(rx, m, len, T0 + 1), ITSME_E_AUTHENTICATION_FAILED);
    EXPECT("failed", transfer_state(rx), ITSME_TRANSFER_FAILED);
    EXPECT("sas after failure", itsme_transfer_sas(rx, sas_rx, sizeof sas_rx, &len), ITSME_E_INVALID_STATE);
    m[len - 1] ^= 1;
    EXPECT("failure is final", itsme_transfer_receive(rx, m, len, T0 + 1), ITSME_E_INVALID_STATE);
    EXPECT("reject after failure", itsme_transfer_reject(rx), ITSME_E_INVALID_STATE);
    itsme_transfer_free(rx);
    itsme_transfer_free(tx);

    rx = NULL;
    EXPECT("receiver 3", itsme_transfer_new_receiver(NULL, T0, &rx), ITSME_OK);
    EXPECT("malformed message", itsme_transfer_receive(rx, (const uint8_t *)"\x01\x07xyz", 5, T0), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("failed", transfer_state(rx), ITSME_TRANSFER_FAILED);
    itsme_transfer_free(rx);
    rx = NULL;
    EXPECT("receiver 4", itsme_transfer_new_receiver(NULL, T0, &rx), ITSME_OK);
    uint8_t low[34] = {2, 1};
    EXPECT("low-order key", itsme_transfer_receive(rx, low, sizeof low, T0), ITSME_E_INVALID_KEY);
    itsme_transfer_free(rx);
    rx = NULL;
    EXPECT("receiver 5", itsme_transfer_new_receiver(NULL, T0, &rx), ITSME_OK);
    EXPECT("empty message", itsme_transfer_receive(rx, low, 0, T0), ITSME_E_MALFORMED_MESSAGE);
    itsme_transfer_free(rx);
    rx = NULL;
    EXPECT("receiver 6", itsme_transfer_new_receiver(NULL, T0, &rx), ITSME_OK);
    low[2] = 9; /* not a low-order point: a valid-looking key, too late */
    EXPECT("after 10 minutes", itsme_transfer_receive(rx, low, sizeof low, T0 + 601), ITSME_E_EXPIRED);
    EXPECT("expired is failed", transfer_state(rx), ITSME_TRANSFER_FAILED);
    itsme_transfer_free(rx);
    rx = NULL;
    EXPECT("receiver 7", itsme_transfer_new_receiver(NULL, T0, &rx), ITSME_OK);
    EXPECT("reject", itsme_transfer_reject(rx), ITSME_OK);
    EXPECT("rejected", transfer_state(rx), ITSME_TRANSFER_REJECTED);
    EXPECT("reject twice", itsme_transfer_reject(rx), ITSME_E_INVALID_STATE);
    EXPECT("confirm after reject", itsme_transfer_confirm(rx, T0), ITSME_E_INVALID_STATE);
    itsme_transfer_free(rx);

    itsme_identity_free(old_id);
    itsme_identity_free(nina);
    itsme_secret_store_free(old_secrets);
    itsme_secret_store_free(new_secrets);
    itsme_random_free(rng);
    itsme_random_free(rng_pw);
    itsme_random_free(rng_pw2);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) failed++;
}

/* A host replay store: a small table of seen keys, with switches. */
struct host_replay {
    uint8_t keys[16][32];
    int count, fail, destroyed;
};

static itsme_result replay_insert(void *ctx, const uint8_t *key, int64_t expires_at, int64_t now, bool *out_seen) {
    struct host_replay *r = ctx;
    (void)expires_at;
    (void)now;
    if (r->fail) return ITSME_E_DATABASE;
    for (int i = 0; i < r->count; i++) {
        if (memcmp(r->keys[i], key, 32) == 0) {
            *out_seen = true;
            return ITSME_OK;
        }
    }
    if (r->count == 16) return ITSME_E_LOCKED;
    memcpy(r->keys[r->count++], key, 32);
    *out_seen = false;
    return ITSME_OK;
}

static void replay_destroy(void *ctx) { ((struct host_replay *)ctx)->destroyed++; }

/* Profile records (PROTOCOL.md 18) and service approvals (19): round trips
 * through the C interface, every refusal, and misuse. */
static void profiles_and_approvals(void) {
    char dir[] = "/tmp/itsme-c-profile-XXXXXX";
    if (!mkdtemp(dir)) { failed++; return; }
    char path[64];
    snprintf(path, sizeof path, "%s/contacts.db", dir);
    itsme_secret_store *secrets = NULL, *bob_secrets = NULL;
    itsme_identity *alice = NULL, *bob = NULL;
    itsme_secret_store_new_memory(&secrets);
    itsme_secret_store_new_memory(&bob_secrets);
    itsme_identity_create(secrets, "Alice", &alice);
    itsme_identity_create(bob_secrets, "Bob", &bob);
    uint8_t alice_pk[32];
    size_t len = 0;
    itsme_identity_public_key(alice, alice_pk, sizeof alice_pk, &len);

    /* Create. */
    uint8_t photo[1000];
    for (size_t i = 0; i < sizeof photo; i++) photo[i] = (uint8_t)(i * 13);
    itsme_profile *made = NULL, *opened = NULL;
    EXPECT("profile empty", itsme_profile_create(alice, NULL, NULL, 0, NULL, NULL, &made), ITSME_E_INVALID_ARGUMENT);
    EXPECT("profile filename without photo", itsme_profile_create(alice, "A", NULL, 0, "a.jpg", NULL, &made), ITSME_E_INVALID_ARGUMENT);
    EXPECT("profile bad filename", itsme_profile_create(alice, "A", photo, 10, "../x", NULL, &made), ITSME_E_INVALID_ARGUMENT);
    static uint8_t record[ITSME_PROFILE_RECORD_MAX + 1];
    size_t most = ITSME_PROFILE_RECORD_MAX - ITSME_PROFILE_RECORD_OVERHEAD - 1;
    EXPECT("profile photo too large", itsme_profile_create(alice, "A", record, most + 1, NULL, NULL, &made), ITSME_E_INVALID_ARGUMENT);
    EXPECT("profile largest photo", itsme_profile_create(alice, "A", record, most, NULL, NULL, &made), ITSME_OK);
    itsme_profile_free(made);
    made = NULL;
    EXPECT("profile", itsme_profile_create(alice, "Alice Smith", photo, sizeof photo, "alice.jpg", NULL, &made), ITSME_OK);
    size_t record_len = 0;
    EXPECT("record size query", itsme_profile_record(made, NULL, 0, &record_len), ITSME_E_BUFFER_TOO_SMALL);
    EXPECT("record size", record_len, ITSME_PROFILE_RECORD_OVERHEAD + 11 + sizeof photo + 9);
    EXPECT("record", itsme_profile_record(made, record, sizeof record, &record_len), ITSME_OK);
    uint8_t reference[ITSME_PROFILE_REFERENCE_BYTES], id[ITSME_RECORD_ID_BYTES];
    EXPECT("reference", itsme_profile_reference(made, reference, sizeof reference, &len), ITSME_OK);
    EXPECT("record id", itsme_profile_record_id(made, id, sizeof id, &len), ITSME_OK);
    EXPECT("reference starts with the id", memcmp(reference, id, sizeof id), 0);
    char record_name[ITSME_RECORD_NAME_SIZE];
    EXPECT("record name", itsme_profile_record_name(made, record_name, sizeof record_name, &len), ITSME_OK);
    EXPECT("record name length", strlen(record_name), 32);

    /* Open: the round trip, then every refusal. */
    EXPECT("open short reference", itsme_profile_open(record, record_len, reference, 16, alice_pk, 32, &opened), ITSME_E_INVALID_ARGUMENT);
    EXPECT("open short key", itsme_profile_open(record, record_len, reference, 32, alice_pk, 31, &opened), ITSME_E_INVALID_ARGUMENT);
    EXPECT("open", itsme_profile_open(record, record_len, reference, 32, alice_pk, 32, &opened), ITSME_OK);
    char name[ITSME_NAME_MAX_BYTES + 1], filename[ITSME_PHOTO_FILENAME_MAX_BYTES + 1];
    static uint8_t got_photo[2000];
    EXPECT("opened name", itsme_profile_name(opened, name, sizeof name, &len), ITSME_OK);
    EXPECT("opened name is Alice Smith", strcmp(name, "Alice Smith"), 0);
    EXPECT("opened photo", itsme_profile_photo(opened, got_photo, sizeof got_photo, &len), ITSME_OK);
    EXPECT("opened photo bytes", len == sizeof photo && memcmp(got_photo, photo, sizeof photo) == 0, 1);
    EXPECT("opened filename", itsme_profile_photo_filename(opened, filename, sizeof filename, &len), ITSME_OK);
    EXPECT("opened filename is alice.jpg", strcmp(filename, "alice.jpg"), 0);
    uint8_t bad_reference[32];
    memcpy(bad_reference, reference, 32);
    bad_reference[0] ^= 1;
    itsme_profile *never = NULL;
    EXPECT("wrong record id", itsme_profile_open(record, record_len, bad_reference, 32, alice_pk, 32, &never), ITSME_E_AUTHENTICATION_FAILED);
    memcpy(bad_reference, reference, 32);
    bad_reference[31] ^= 1;
    EXPECT("wrong record key", itsme_profile_open(record, record_len, bad_reference, 32, alice_pk, 32, &never), ITSME_E_AUTHENTICATION_FAILED);
    uint8_t other_pk[32];
    itsme_identity_public_key(bob, other_pk, sizeof other_pk, &len);
    EXPECT("another owner", itsme_profile_open(record, record_len, reference, 32, other_pk, 32, &never), ITSME_E_AUTHENTICATION_FAILED);
    record[1 + 12 + 4] ^= 1; /* the name's ciphertext */
    EXPECT("tampered field", itsme_profile_open(record, record_len, reference, 32, alice_pk, 32, &never), ITSME_E_AUTHENTICATION_FAILED);
    record[1 + 12 + 4] ^= 1;
    record[1 + 12 + 4 + 11] ^= 1; /* the name's MAC */
    EXPECT("tampered field MAC", itsme_profile_open(record, record_len, reference, 32, alice_pk, 32, &never), ITSME_E_AUTHENTICATION_FAILED);
    record[1 + 12 + 4 + 11] ^= 1;
    record[record_len - 1] ^= 1;
    EXPECT("tampered record MAC", itsme_profile_open(record, record_len, reference, 32, alice_pk, 32, &never), ITSME_E_AUTHENTICATION_FAILED);
    record[record_len - 1] ^= 1;
    EXPECT("truncated record", itsme_profile_open(record, record_len - 1, reference, 32, alice_pk, 32, &never), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("oversize record", itsme_profile_open(record, sizeof record, reference, 32, alice_pk, 32, &never), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("still opens", itsme_profile_open(record, record_len, reference, 32, alice_pk, 32, &never), ITSME_OK);
    itsme_profile_free(never);

    /* Applied to Bob's contact for Alice. */
    itsme_store *store = NULL;
    EXPECT("bob opens his store", itsme_store_open(bob, path, &store), ITSME_OK);
    uint8_t seed[32] = {1};
    int64_t cid = 0;
    EXPECT("add alice", itsme_store_add(store, "Al", alice_pk, 32, seed, 32, ITSME_EXCHANGE_QR, T0, &cid), ITSME_OK);
    EXPECT("no photo yet", itsme_store_photo(store, cid, got_photo, sizeof got_photo, &len), ITSME_E_NOT_FOUND);
    EXPECT("apply unknown contact", itsme_store_apply_profile(store, cid + 1, opened), ITSME_E_NOT_FOUND);
    EXPECT("apply", itsme_store_apply_profile(store, cid, opened), ITSME_OK);
    itsme_contact *contact = NULL;
    itsme_store_get(store, cid, &contact);
    itsme_contact_name(contact, name, sizeof name, &len);
    EXPECT("contact renamed", strcmp(name, "Alice Smith"), 0);
    itsme_contact_free(contact);
    EXPECT("photo applied", itsme_store_photo(store, cid, got_photo, sizeof got_photo, &len) == ITSME_OK && len == sizeof photo, 1);
    EXPECT("filename applied", itsme_store_photo_filename(store, cid, filename, sizeof filename, &len), ITSME_OK);
    EXPECT("filename is alice.jpg", strcmp(filename, "alice.jpg"), 0);
    EXPECT("remove photo", itsme_store_set_photo(store, cid, NULL, 0, NULL), ITSME_OK);
    EXPECT("photo removed", itsme_store_photo(store, cid, got_photo, sizeof got_photo, &len), ITSME_E_NOT_FOUND);
    itsme_store_free(store);
    itsme_profile_free(opened);
    itsme_profile_free(made);

    /* Approvals: two devices of one person enroll with a service. */
    itsme_secret_store *phone = NULL, *tablet = NULL;
    itsme_secret_store_new_memory(&phone);
    itsme_secret_store_new_memory(&tablet);
    const char *service = "bank.example";
    uint8_t nonce[32] = {7}, enrollment[ITSME_ENROLLMENT_MAX];
    EXPECT("enroll bad service", itsme_credential_enroll(phone, "bank example", "Phone", nonce, 32, NULL, enrollment, sizeof enrollment, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("enroll short nonce", itsme_credential_enroll(phone, service, "Phone", nonce, 15, NULL, enrollment, sizeof enrollment, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("enroll short buffer", itsme_credential_enroll(phone, service, "Phone", nonce, 32, NULL, enrollment, 50, &len), ITSME_E_BUFFER_TOO_SMALL);
    EXPECT("enroll size", len, 98 + 5);
    uint8_t cred_id[ITSME_CREDENTIAL_ID_BYTES];
    EXPECT("nothing saved by a short buffer", itsme_credential_id(phone, service, cred_id, sizeof cred_id, &len), ITSME_E_NOT_FOUND);
    EXPECT("enroll phone", itsme_credential_enroll(phone, service, "Phone", nonce, 32, NULL, enrollment, sizeof enrollment, &len), ITSME_OK);
    itsme_credential_info phone_cred = {.size = sizeof(itsme_credential_info)}, tablet_cred = phone_cred;
    EXPECT("verify enrollment wrong service", itsme_enrollment_verify("evil.example", nonce, 32, enrollment, len, &phone_cred), ITSME_E_AUTHENTICATION_FAILED);
    nonce[0] ^= 1;
    EXPECT("verify enrollment wrong nonce", itsme_enrollment_verify(service, nonce, 32, enrollment, len, &phone_cred), ITSME_E_AUTHENTICATION_FAILED);
    nonce[0] ^= 1;
    EXPECT("verify enrollment truncated", itsme_enrollment_verify(service, nonce, 32, enrollment, len - 1, &phone_cred), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("verify enrollment", itsme_enrollment_verify(service, nonce, 32, enrollment, len, &phone_cred), ITSME_OK);
    EXPECT("label", strcmp(phone_cred.label, "Phone"), 0);
    EXPECT("credential id", itsme_credential_id(phone, service, cred_id, sizeof cred_id, &len), ITSME_OK);
    EXPECT("credential id matches", memcmp(cred_id, phone_cred.credential_id, sizeof cred_id), 0);
    EXPECT("enroll tablet", itsme_credential_enroll(tablet, service, "Tablet", nonce, 32, NULL, enrollment, sizeof enrollment, &len), ITSME_OK);
    EXPECT("verify tablet", itsme_enrollment_verify(service, nonce, 32, enrollment, len, &tablet_cred), ITSME_OK);
    uint8_t keys[64];
    memcpy(keys, phone_cred.public_key, 32);
    memcpy(keys + 32, tablet_cred.public_key, 32);

    /* A login: request, parse, sign, verify. */
    uint8_t request[ITSME_APPROVAL_REQUEST_MAX], approval[ITSME_APPROVAL_MAX];
    size_t request_len = 0, approval_len = 0;
    EXPECT("request repeated scope", itsme_approval_request_create(service, "Bank", "s1", "email email", 120, NULL, T0, request, sizeof request, &request_len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("request lifetime", itsme_approval_request_create(service, "Bank", "s1", "email", 601, NULL, T0, request, sizeof request, &request_len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("request", itsme_approval_request_create(service, "Bank", "s1", "profile email transfer", 120, NULL, T0, request, sizeof request, &request_len), ITSME_OK);
    itsme_approval_request_info info = {.size = sizeof(itsme_approval_request_info)};
    EXPECT("parse truncated", itsme_approval_request_parse(request, request_len - 1, T0, &info), ITSME_E_MALFORMED_MESSAGE);
    EXPECT("parse expired", itsme_approval_request_parse(request, request_len, T0 + 121, &info), ITSME_E_EXPIRED);
    EXPECT("parse", itsme_approval_request_parse(request, request_len, T0 + 1, &info), ITSME_OK);
    EXPECT("parsed scopes sorted", strcmp(info.scopes, "email profile transfer"), 0);
    EXPECT("parsed otp", strlen(info.otp), 6);
    EXPECT("parsed expiry", info.expires_at, T0 + 120);
    EXPECT("sign scope not requested", itsme_approval_sign(phone, request, request_len, ITSME_APPROVAL_APPROVE, "email admin", T0 + 2, approval, sizeof approval, &approval_len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("sign deny with scopes", itsme_approval_sign(phone, request, request_len, ITSME_APPROVAL_DENY, "email", T0 + 2, approval, sizeof approval, &approval_len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("sign unknown decision", itsme_approval_sign(phone, request, request_len, 3, NULL, T0 + 2, approval, sizeof approval, &approval_len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("sign not enrolled", itsme_approval_sign(secrets, request, request_len, ITSME_APPROVAL_APPROVE, "email", T0 + 2, approval, sizeof approval, &approval_len), ITSME_E_NOT_FOUND);
    EXPECT("sign expired", itsme_approval_sign(phone, request, request_len, ITSME_APPROVAL_APPROVE, "email", T0 + 121, approval, sizeof approval, &approval_len), ITSME_E_EXPIRED);
    EXPECT("sign", itsme_approval_sign(phone, request, request_len, ITSME_APPROVAL_APPROVE, "profile email", T0 + 2, approval, sizeof approval, &approval_len), ITSME_OK);

    struct host_replay host = {0};
    itsme_replay_store_callbacks table = {ITSME_REPLAY_STORE_CALLBACKS_VERSION, &host, replay_insert, replay_destroy};
    itsme_replay_store *replay = NULL, *memory = NULL;
    itsme_replay_store_callbacks no_insert = {ITSME_REPLAY_STORE_CALLBACKS_VERSION, &host, NULL, NULL};
    EXPECT("replay store NULL insert", itsme_replay_store_new_callbacks(&no_insert, &replay), ITSME_E_INVALID_ARGUMENT);
    EXPECT("replay store", itsme_replay_store_new_callbacks(&table, &replay), ITSME_OK);
    EXPECT("memory replay store", itsme_replay_store_new_memory(0, &memory), ITSME_OK);
    itsme_approval_result result = {.size = sizeof(itsme_approval_result)};
    EXPECT("verify unknown key", itsme_approval_verify(request, request_len, approval, approval_len, keys + 32, 1, replay, T0 + 3, &result), ITSME_E_NOT_FOUND);
    EXPECT("verify expired", itsme_approval_verify(request, request_len, approval, approval_len, keys, 2, replay, T0 + 121, &result), ITSME_E_EXPIRED);
    approval[approval_len - 1] ^= 1;
    EXPECT("verify bad signature", itsme_approval_verify(request, request_len, approval, approval_len, keys, 2, replay, T0 + 3, &result), ITSME_E_AUTHENTICATION_FAILED);
    approval[approval_len - 1] ^= 1;
    EXPECT("forgeries spend nothing", host.count, 0);
    host.fail = 1;
    EXPECT("verify, the host store fails", itsme_approval_verify(request, request_len, approval, approval_len, keys, 2, replay, T0 + 3, &result), ITSME_E_DATABASE);
    host.fail = 0;
    EXPECT("verify", itsme_approval_verify(request, request_len, approval, approval_len, keys, 2, replay, T0 + 3, &result), ITSME_OK);
    EXPECT("approved", result.decision, ITSME_APPROVAL_APPROVE);
    EXPECT("granted", strcmp(result.granted_scopes, "email profile"), 0);
    EXPECT("signed by the phone", memcmp(result.credential_id, phone_cred.credential_id, 16), 0);
    EXPECT("timestamp", result.timestamp, T0 + 2);
    EXPECT("replayed", itsme_approval_verify(request, request_len, approval, approval_len, keys, 2, replay, T0 + 4, &result), ITSME_E_REPLAYED);
    EXPECT("memory store: first", itsme_approval_verify(request, request_len, approval, approval_len, keys, 2, memory, T0 + 4, &result), ITSME_OK);
    EXPECT("memory store: replayed", itsme_approval_verify(request, request_len, approval, approval_len, keys, 2, memory, T0 + 4, &result), ITSME_E_REPLAYED);

    /* Another login: the tablet denies; a wrong OTP; a scope not requested. */
    uint8_t request2[ITSME_APPROVAL_REQUEST_MAX];
    size_t request2_len = 0;
    EXPECT("request 2", itsme_approval_request_create(service, "Bank", "s2", "email", 120, NULL, T0, request2, sizeof request2, &request2_len), ITSME_OK);
    EXPECT("answer to another request", itsme_approval_verify(request2, request2_len, approval, approval_len, keys, 2, replay, T0 + 3, &result) != ITSME_OK, 1);
    EXPECT("deny", itsme_approval_sign(tablet, request2, request2_len, ITSME_APPROVAL_DENY, NULL, T0 + 2, approval, sizeof approval, &approval_len), ITSME_OK);
    EXPECT("verify deny", itsme_approval_verify(request2, request2_len, approval, approval_len, keys, 2, replay, T0 + 3, &result), ITSME_OK);
    EXPECT("denied", result.decision, ITSME_APPROVAL_DENY);
    EXPECT("denied: no scope", strlen(result.granted_scopes), 0);
    EXPECT("a request is answered once", itsme_approval_sign(phone, request2, request2_len, ITSME_APPROVAL_APPROVE, "email", T0 + 2, approval, sizeof approval, &approval_len), ITSME_OK);
    EXPECT("approve after deny", itsme_approval_verify(request2, request2_len, approval, approval_len, keys, 2, replay, T0 + 3, &result), ITSME_E_REPLAYED);
    uint8_t request3[ITSME_APPROVAL_REQUEST_MAX];
    size_t request3_len = 0;
    EXPECT("request 3", itsme_approval_request_create(service, "Bank", "s3", "email", 120, NULL, T0, request3, sizeof request3, &request3_len), ITSME_OK);
    EXPECT("sign 3", itsme_approval_sign(phone, request3, request3_len, ITSME_APPROVAL_APPROVE, "email", T0 + 2, approval, sizeof approval, &approval_len), ITSME_OK);
    /* The approval carries its OTP after u8(1), the credential ID, the
     * decision and the timestamp: change one digit. */
    size_t otp_at = 1 + 16 + 1 + 8;
    approval[otp_at] = approval[otp_at] == '9' ? '0' : approval[otp_at] + 1;
    EXPECT("wrong OTP", itsme_approval_verify(request3, request3_len, approval, approval_len, keys, 2, replay, T0 + 3, &result), ITSME_E_AUTHENTICATION_FAILED);
    EXPECT("remove", itsme_credential_remove(phone, service), ITSME_OK);
    EXPECT("remove twice", itsme_credential_remove(phone, service), ITSME_E_NOT_FOUND);
    EXPECT("sign after remove", itsme_approval_sign(phone, request3, request3_len, ITSME_APPROVAL_APPROVE, "email", T0 + 2, approval, sizeof approval, &approval_len), ITSME_E_NOT_FOUND);

    itsme_replay_store_free(replay);
    EXPECT("host replay store destroyed once", host.destroyed, 1);
    itsme_replay_store_free(memory);
    itsme_secret_store_free(phone);
    itsme_secret_store_free(tablet);
    itsme_identity_free(alice);
    itsme_identity_free(bob);
    itsme_secret_store_free(secrets);
    itsme_secret_store_free(bob_secrets);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) failed++;
}

/* One side of an in-memory relay room for two room sessions: what the
 * relay sends this side, in order (text events, frames, the end). */
enum { ROOM_INBOX = 32 };
struct room_item { int kind; /* 0 text, 1 binary, 2 closed */ uint8_t bytes[ITSME_REMOTE_MESSAGE_MAX]; size_t len; };
struct room_side { struct room_item items[ROOM_INBOX]; int head, tail, left; };

static void room_put(struct room_side *side, int kind, const void *bytes, size_t len) {
    if (side->tail == ROOM_INBOX) { failed++; return; }
    struct room_item *item = &side->items[side->tail++];
    item->kind = kind;
    item->len = len;
    if (len) memcpy(item->bytes, bytes, len);
}

/* Steps two room sessions until both are DONE, each deciding `decision`
 * (1 confirm, 0 reject) at the SAS; returns the steps taken. */
static int room_run(itsme_room_session *s[2], itsme_exchange *x[2], const int decision[2]) {
    static const char waiting[] = "{\"type\":\"waiting\"}", joined[] = "{\"type\":\"peer-joined\"}",
                      left[] = "{\"type\":\"peer-left\"}";
    struct room_side side[2];
    memset(side, 0, sizeof side);
    room_put(&side[0], 0, waiting, sizeof waiting - 1);
    room_put(&side[0], 0, joined, sizeof joined - 1);
    room_put(&side[1], 0, joined, sizeof joined - 1);
    int done[2] = {0, 0}, steps = 0;
    while (!(done[0] && done[1]) && steps < 400) {
        steps++;
        for (int i = 0; i < 2; i++) {
            itsme_room_step step = 0;
            if (done[i] || itsme_room_session_next(s[i], T0 + 1, &step) != ITSME_OK) continue;
            if (step == ITSME_ROOM_STEP_SEND) {
                uint8_t m[ITSME_REMOTE_MESSAGE_MAX];
                size_t len = 0;
                EXPECT("room message", itsme_room_session_message(s[i], m, sizeof m, &len), ITSME_OK);
                if (side[1 - i].left) {
                    EXPECT("room send failed", itsme_room_session_send_failed(s[i]), ITSME_OK);
                } else {
                    room_put(&side[1 - i], 1, m, len);
                    EXPECT("room sent", itsme_room_session_sent(s[i]), ITSME_OK);
                }
            } else if (step == ITSME_ROOM_STEP_RECEIVE && side[i].head < side[i].tail) {
                struct room_item *item = &side[i].items[side[i].head++];
                if (item->kind == 0) {
                    EXPECT("room text", itsme_room_session_text(s[i], item->bytes, item->len), ITSME_OK);
                } else if (item->kind == 1) {
                    EXPECT("room binary", itsme_room_session_binary(s[i], item->bytes, item->len, T0 + 1), ITSME_OK);
                } else {
                    EXPECT("room closed", itsme_room_session_closed(s[i], 1000), ITSME_OK);
                }
            } else if (step == ITSME_ROOM_STEP_DECIDE) {
                int64_t id = 0;
                if (decision[i]) {
                    EXPECT("room confirm", itsme_exchange_confirm(x[i], T0 + 1, &id), ITSME_OK);
                } else {
                    EXPECT("room reject", itsme_exchange_reject(x[i]), ITSME_OK);
                }
            } else if (step == ITSME_ROOM_STEP_LEAVE) {
                if (!side[i].left) {
                    side[i].left = 1;
                    if (!side[1 - i].left) {
                        room_put(&side[1 - i], 0, left, sizeof left - 1);
                        room_put(&side[1 - i], 2, NULL, 0);
                    }
                }
                EXPECT("room left", itsme_room_session_left(s[i]), ITSME_OK);
            } else if (step == ITSME_ROOM_STEP_DONE) {
                done[i] = 1;
            }
        }
    }
    return steps;
}

/* The relay's contract for hosts, the mailbox session's requests, and the
 * room driver: out of order, out of range, and a real-time exchange
 * carried through an in-memory room from C. */
static void relay_and_rooms(void) {
    char dir[] = "/tmp/itsme-c-rooms-XXXXXX";
    if (!mkdtemp(dir)) { failed++; return; }
    static const char id[] = "00112233445566778899aabbccddeeff";
    static const char token[] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE";
    char text[512], path[128];
    size_t len = 0;
    itsme_relay_answer answer = 0;

    /* The relay's contract. */
    EXPECT("path", itsme_relay_path(ITSME_RELAY_ROUTE_RECORD, id, text, sizeof text, &len), ITSME_OK);
    EXPECT("path text", strcmp(text, "/v1/records/00112233445566778899aabbccddeeff"), 0);
    EXPECT("path: unknown route", itsme_relay_path(99, id, text, sizeof text, &len), ITSME_E_INVALID_ARGUMENT);
    /* A record's PUT answer: a new record's delete token, or none for the
     * same bytes again; anything else is not the relay's answer. */
    static const char created[] = "{\"delete_token\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE\"}";
    EXPECT("record stored: created", itsme_relay_record_stored((const uint8_t *)created, strlen(created), text, sizeof text, &len), ITSME_OK);
    EXPECT("record stored: the token", strcmp(text, token) == 0 && len == strlen(token) + 1, 1);
    EXPECT("record stored: the same bytes", itsme_relay_record_stored((const uint8_t *)"{}", 2, text, sizeof text, &len) == ITSME_OK && len == 1 && text[0] == 0, 1);
    EXPECT("record stored: a token buffer too small", itsme_relay_record_stored((const uint8_t *)created, strlen(created), text, 43, &len), ITSME_E_BUFFER_TOO_SMALL);
    static const char *const not_stored[] = {"", "[]", "{\"delete_token\":\"short\"}", "{\"token\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE\"}"};
    for (size_t i = 0; i < sizeof not_stored / sizeof not_stored[0]; i++) {
        const char *b = not_stored[i];
        EXPECT(b, itsme_relay_record_stored((const uint8_t *)b, strlen(b), text, sizeof text, &len), ITSME_E_MALFORMED_MESSAGE);
    }
    EXPECT("record stored: NULL body with a length", itsme_relay_record_stored(NULL, 2, text, sizeof text, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("path: upper-case ID", itsme_relay_path(ITSME_RELAY_ROUTE_ROOM, "00112233445566778899AABBCCDDEEFF", text, sizeof text, &len),
           ITSME_E_INVALID_ARGUMENT);
    EXPECT("path: short ID", itsme_relay_path(ITSME_RELAY_ROUTE_ROOM, "0011", text, sizeof text, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("answer: created", itsme_relay_answer_of(ITSME_RELAY_ROUTE_INVITE, "POST", 201, &answer), ITSME_OK);
    EXPECT("answer: created is success", answer, ITSME_RELAY_ANSWER_SUCCESS);
    EXPECT("answer: 200 to a create", itsme_relay_answer_of(ITSME_RELAY_ROUTE_INVITE, "POST", 200, &answer), ITSME_OK);
    EXPECT("answer: 200 to a create is refused", answer, ITSME_RELAY_ANSWER_REFUSED);
    EXPECT("answer: same record", itsme_relay_answer_of(ITSME_RELAY_ROUTE_RECORD, "PUT", 200, &answer), ITSME_OK);
    EXPECT("answer: same record is success", answer, ITSME_RELAY_ANSWER_SUCCESS);
    EXPECT("answer: 404", itsme_relay_answer_of(ITSME_RELAY_ROUTE_RECORD, "GET", 404, &answer), ITSME_OK);
    EXPECT("answer: 404 is gone", answer, ITSME_RELAY_ANSWER_GONE);
    EXPECT("answer: no answer", itsme_relay_answer_of(ITSME_RELAY_ROUTE_RECORD, "GET", 0, &answer), ITSME_OK);
    EXPECT("answer: no answer is refused", answer, ITSME_RELAY_ANSWER_REFUSED);
    EXPECT("answer: method not served", itsme_relay_answer_of(ITSME_RELAY_ROUTE_INVITE_ACCEPT, "GET", 200, &answer),
           ITSME_E_INVALID_ARGUMENT);
    EXPECT("answer: lower-case method", itsme_relay_answer_of(ITSME_RELAY_ROUTE_INVITE, "post", 201, &answer), ITSME_E_INVALID_ARGUMENT);
    EXPECT("answer: status 1000", itsme_relay_answer_of(ITSME_RELAY_ROUTE_INVITE, "POST", 1000, &answer), ITSME_E_INVALID_ARGUMENT);
    EXPECT("headers", itsme_relay_request_headers(ITSME_RELAY_ROUTE_INVITE_MESSAGES, "POST", token, text, sizeof text, &len), ITSME_OK);
    EXPECT("headers carry the token", strstr(text, "Authorization: Bearer AAAA") != NULL, 1);
    EXPECT("headers: no token on a create", itsme_relay_request_headers(ITSME_RELAY_ROUTE_INVITE, "POST", token, text, sizeof text, &len),
           ITSME_OK);
    EXPECT("headers: none presented", strstr(text, "Authorization") == NULL, 1);
    EXPECT("headers: a token with bits past 32 bytes",
           itsme_relay_request_headers(ITSME_RELAY_ROUTE_INVITE, "DELETE", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB", text, sizeof text, &len),
           ITSME_E_INVALID_ARGUMENT);
    EXPECT("headers: a short token", itsme_relay_request_headers(ITSME_RELAY_ROUTE_INVITE, "DELETE", "AAAA", text, sizeof text, &len),
           ITSME_E_INVALID_ARGUMENT);
    {
        static const char body[] = "{\"error\":\"rate-limited\",\"message\":\"slow\\u0007 down\"}";
        static const uint8_t junk[] = {0xFF, 0xFE, 0x00, 0x7B};
        EXPECT("refusal kind", itsme_relay_refusal_kind(429, (const uint8_t *)body, sizeof body - 1, text, sizeof text, &len), ITSME_OK);
        EXPECT("refusal kind text", strcmp(text, "rate-limited"), 0);
        EXPECT("refusal message", itsme_relay_refusal_message(429, (const uint8_t *)body, sizeof body - 1, text, sizeof text, &len), ITSME_OK);
        EXPECT("refusal message: one line", strcmp(text, "slow  down"), 0);
        EXPECT("refusal of junk", itsme_relay_refusal_kind(502, junk, sizeof junk, text, sizeof text, &len), ITSME_OK);
        EXPECT("refusal of junk names no kind", len, 1);
        EXPECT("refusal of junk, a 404", itsme_relay_refusal_kind(404, junk, sizeof junk, text, sizeof text, &len), ITSME_OK);
        EXPECT("a 404 stands for not-found", strcmp(text, "not-found"), 0);
        EXPECT("refusal message of junk", itsme_relay_refusal_message(502, junk, sizeof junk, text, sizeof text, &len), ITSME_OK);
        EXPECT("refusal message names the status", strcmp(text, "the relay answered 502"), 0);
        EXPECT("refusal: status 1000", itsme_relay_refusal_kind(1000, NULL, 0, text, sizeof text, &len), ITSME_E_INVALID_ARGUMENT);
    }
    EXPECT("header name", itsme_relay_header_name(ITSME_RELAY_HEADER_RETRY_AFTER, text, sizeof text, &len), ITSME_OK);
    EXPECT("header name text", strcmp(text, "Retry-After"), 0);
    EXPECT("header name: unknown", itsme_relay_header_name(0, text, sizeof text, &len), ITSME_E_INVALID_ARGUMENT);

    /* Two people and a real-time invite. */
    itsme_secret_store *sa = NULL, *sb = NULL;
    itsme_identity *alice = NULL, *bob = NULL;
    itsme_store *store_a = NULL, *store_b = NULL;
    itsme_exchange *x[2] = {NULL, NULL}, *invite = NULL;
    char invite_code[ITSME_REMOTE_CODE_SIZE], encryption_code[ITSME_REMOTE_CODE_SIZE];
    EXPECT("memory store", itsme_secret_store_new_memory(&sa), ITSME_OK);
    EXPECT("memory store", itsme_secret_store_new_memory(&sb), ITSME_OK);
    EXPECT("alice", itsme_identity_create(sa, "Alice", &alice), ITSME_OK);
    EXPECT("bob", itsme_identity_create(sb, "Bob", &bob), ITSME_OK);
    snprintf(path, sizeof path, "%s/a.db", dir);
    EXPECT("open a", itsme_store_open(alice, path, &store_a), ITSME_OK);
    snprintf(path, sizeof path, "%s/b.db", dir);
    EXPECT("open b", itsme_store_open(bob, path, &store_b), ITSME_OK);

    /* The mailbox session's requests: nothing pending. */
    {
        itsme_mailbox_session *m = NULL;
        EXPECT("invite", itsme_exchange_new_invite(alice, store_a, false, NULL, T0, &invite), ITSME_OK);
        EXPECT("mailbox", itsme_mailbox_session_new(invite, &m), ITSME_OK);
        EXPECT("method before a step", itsme_mailbox_session_request_method(m, text, sizeof text, &len), ITSME_E_INVALID_STATE);
        EXPECT("headers before a step", itsme_mailbox_session_request_headers(m, text, sizeof text, &len), ITSME_E_INVALID_STATE);
        EXPECT("an invite is no room's", itsme_room_session_for_exchange(invite, &(itsme_room_session *){NULL}), ITSME_E_INVALID_ARGUMENT);
        itsme_mailbox_request request = 0;
        itsme_mailbox_outcome outcome = 0;
        EXPECT("begin", itsme_mailbox_session_begin(m, 0), ITSME_OK);
        EXPECT("next", itsme_mailbox_session_next_request(m, &request), ITSME_OK);
        EXPECT("method", itsme_mailbox_session_request_method(m, text, sizeof text, &len), ITSME_OK);
        EXPECT("a create is a POST", strcmp(text, "POST"), 0);
        EXPECT("headers", itsme_mailbox_session_request_headers(m, text, sizeof text, &len), ITSME_OK);
        EXPECT("a create presents no token", strstr(text, "Authorization") == NULL, 1);
        EXPECT("a busy relay", itsme_mailbox_session_answer(m, 503, NULL, 0, T0, &outcome), ITSME_OK);
        EXPECT("ends the step", outcome, ITSME_MAILBOX_OUTCOME_STEP_ENDED);
        EXPECT("nothing pending after", itsme_mailbox_session_request_method(m, text, sizeof text, &len), ITSME_E_INVALID_STATE);
        itsme_mailbox_session_free(m);
        itsme_exchange_free(invite);
    }

    /* The room driver, out of order and out of range. */
    EXPECT("realtime invite", itsme_exchange_new_invite(alice, store_a, true, NULL, T0, &x[0]), ITSME_OK);
    EXPECT("invite code", itsme_exchange_invite_code(x[0], invite_code, sizeof invite_code, &len), ITSME_OK);
    EXPECT("encryption code", itsme_exchange_encryption_code(x[0], encryption_code, sizeof encryption_code, &len), ITSME_OK);
    EXPECT("realtime accept", itsme_exchange_accept_invite(bob, store_b, invite_code, encryption_code, true, NULL, T0, &x[1]), ITSME_OK);
    itsme_room_session *s[2] = {NULL, NULL};
    itsme_room_step step = 0;
    itsme_room_failure failure = 0;
    bool present = true;
    EXPECT("room a", itsme_room_session_for_exchange(x[0], &s[0]), ITSME_OK);
    EXPECT("room b", itsme_room_session_for_exchange(x[1], &s[1]), ITSME_OK);
    EXPECT("path", itsme_room_session_path(s[0], text, sizeof text, &len), ITSME_OK);
    EXPECT("path is a room's", strncmp(text, "/v1/rooms/", 10), 0);
    EXPECT("sent before a send", itsme_room_session_sent(s[0]), ITSME_E_INVALID_STATE);
    EXPECT("send failed before a send", itsme_room_session_send_failed(s[0]), ITSME_E_INVALID_STATE);
    EXPECT("left before a leave", itsme_room_session_left(s[0]), ITSME_E_INVALID_STATE);
    EXPECT("message before a send", itsme_room_session_message(s[0], (uint8_t *)text, sizeof text, &len), ITSME_E_INVALID_STATE);
    EXPECT("next: a time out of range", itsme_room_session_next(s[0], INT64_MAX, &step), ITSME_E_INVALID_ARGUMENT);
    EXPECT("closed: code 5000", itsme_room_session_closed(s[0], 5000), ITSME_E_INVALID_ARGUMENT);
    EXPECT("next", itsme_room_session_next(s[0], T0, &step), ITSME_OK);
    EXPECT("waits for the peer", step, ITSME_ROOM_STEP_RECEIVE);
    EXPECT("peer present", itsme_room_session_peer_present(s[0], &present), ITSME_OK);
    EXPECT("not yet", present, false);
    EXPECT("no failure yet", itsme_room_session_failure(s[0], &failure), ITSME_OK);
    EXPECT("none", failure, ITSME_ROOM_FAILURE_NONE);
    EXPECT("failure kind", itsme_room_session_failure_kind(s[0], text, sizeof text, &len), ITSME_OK);
    EXPECT("failure kind is empty", len, 1);

    /* The whole exchange, both confirming. */
    const int both[2] = {1, 1};
    EXPECT("the room run ends", room_run(s, x, both) < 400, 1);
    for (int i = 0; i < 2; i++) {
        itsme_exchange_state state = 0;
        EXPECT("status", itsme_exchange_status(x[i], &state, NULL), ITSME_OK);
        EXPECT("confirmed through the room", state, ITSME_EXCHANGE_STATE_CONFIRMED);
        EXPECT("no failure", itsme_room_session_failure(s[i], &failure), ITSME_OK);
        EXPECT("none", failure, ITSME_ROOM_FAILURE_NONE);
        EXPECT("done", itsme_room_session_next(s[i], T0 + 2, &step), ITSME_OK);
        EXPECT("stays done", step, ITSME_ROOM_STEP_DONE);
        itsme_room_session_free(s[i]);
        itsme_exchange_free(x[i]);
    }

    /* A room that fails before the SAS: full. */
    EXPECT("realtime invite", itsme_exchange_new_invite(alice, store_a, true, NULL, T0, &x[0]), ITSME_OK);
    EXPECT("room", itsme_room_session_for_exchange(x[0], &s[0]), ITSME_OK);
    EXPECT("full", itsme_room_session_closed(s[0], 4009), ITSME_OK);
    EXPECT("failure", itsme_room_session_failure(s[0], &failure), ITSME_OK);
    EXPECT("room full", failure, ITSME_ROOM_FAILURE_ROOM_FULL);
    EXPECT("failure kind", itsme_room_session_failure_kind(s[0], text, sizeof text, &len), ITSME_OK);
    EXPECT("room-full", strcmp(text, "room-full"), 0);
    {
        itsme_exchange_state state = 0;
        EXPECT("status", itsme_exchange_status(x[0], &state, NULL), ITSME_OK);
        EXPECT("rejected", state, ITSME_EXCHANGE_STATE_REJECTED);
    }
    EXPECT("next", itsme_room_session_next(s[0], T0, &step), ITSME_OK);
    EXPECT("leave", step, ITSME_ROOM_STEP_LEAVE);
    EXPECT("left", itsme_room_session_left(s[0]), ITSME_OK);
    EXPECT("left twice", itsme_room_session_left(s[0]), ITSME_E_INVALID_STATE);
    EXPECT("a frame after the end", itsme_room_session_binary(s[0], (const uint8_t *)"xy", 2, T0), ITSME_OK);
    itsme_room_session_free(s[0]);
    itsme_exchange_free(x[0]);

    /* A transfer's room: a room closed while the new device waits alone is
     * joined again; rejoined only then; a full room is not joined again. */
    itsme_transfer *rx = NULL;
    itsme_room_session *ts = NULL;
    EXPECT("transfer receiver", itsme_transfer_new_receiver(NULL, T0, &rx), ITSME_OK);
    EXPECT("transfer room NULL", itsme_room_session_for_transfer(NULL, &ts), ITSME_E_INVALID_ARGUMENT);
    EXPECT("transfer room NULL out", itsme_room_session_for_transfer(rx, NULL), ITSME_E_INVALID_ARGUMENT);
    EXPECT("transfer room", itsme_room_session_for_transfer(rx, &ts), ITSME_OK);
    EXPECT("rejoined before a rejoin", itsme_room_session_rejoined(ts), ITSME_E_INVALID_STATE);
    EXPECT("rejoined NULL", itsme_room_session_rejoined(NULL), ITSME_E_INVALID_ARGUMENT);
    EXPECT("transfer closed while alone", itsme_room_session_closed(ts, 4000), ITSME_OK);
    EXPECT("next", itsme_room_session_next(ts, T0, &step), ITSME_OK);
    EXPECT("rejoin", step, ITSME_ROOM_STEP_REJOIN);
    EXPECT("rejoined", itsme_room_session_rejoined(ts), ITSME_OK);
    EXPECT("rejoined twice", itsme_room_session_rejoined(ts), ITSME_E_INVALID_STATE);
    EXPECT("next", itsme_room_session_next(ts, T0, &step), ITSME_OK);
    EXPECT("receive", step, ITSME_ROOM_STEP_RECEIVE);
    EXPECT("a full room", itsme_room_session_closed(ts, 4009), ITSME_OK);
    EXPECT("next", itsme_room_session_next(ts, T0, &step), ITSME_OK);
    EXPECT("leave, not rejoin", step, ITSME_ROOM_STEP_LEAVE);
    itsme_room_session_free(ts);
    itsme_transfer_free(rx);

    itsme_store_free(store_a);
    itsme_store_free(store_b);
    itsme_identity_free(alice);
    itsme_identity_free(bob);
    itsme_secret_store_free(sa);
    itsme_secret_store_free(sb);
}

int main(void) {
    EXPECT("init", itsme_init(), ITSME_OK);
    no_handles();
    identity_and_pin();
    host_callbacks();
    contact_store();
    exchanges();
    rollcalls();
    transfers();
    profiles_and_approvals();
    relay_and_rooms();
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
