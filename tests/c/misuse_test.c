/*
 * Misuse of the C interface from C: NULL pointers, zero lengths, short
 * buffers, out-of-order calls, wrong PINs and misbehaving host callbacks
 * must all give result codes, never a crash.  Prints "N passed, N failed".
 */
#include <itsme.h>

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

static void before_init(void) {
    itsme_secret_store *store = NULL;
    EXPECT("memory store before init", itsme_secret_store_new_memory(&store), ITSME_E_NOT_INITIALIZED);
    EXPECT("no handle written before init", store == NULL, 1);
    EXPECT("open file before init", itsme_secret_store_open_file("/tmp", &store), ITSME_E_NOT_INITIALIZED);
    uint8_t key[32] = {0};
    char fp[17];
    size_t len = 0;
    EXPECT("fingerprint before init", itsme_fingerprint_from_public_key(key, 32, fp, sizeof fp, &len),
           ITSME_E_NOT_INITIALIZED);
    /* These need no init. */
    EXPECT("version before init", strcmp(itsme_version_string(), ITSME_VERSION_STRING), 0);
    EXPECT("message before init", itsme_result_message(ITSME_OK) != NULL, 1);
}

static void no_handles(void) {
    EXPECT("init again", itsme_init(), ITSME_OK);
    EXPECT("version number", itsme_version_number(), ITSME_VERSION_NUMBER);
    EXPECT("unknown code", strcmp(itsme_result_message(9999), "unknown result code"), 0);
    EXPECT("negative code", strcmp(itsme_result_message(-1), "unknown result code"), 0);
    EXPECT("sizes", itsme_public_key_bytes(), ITSME_PUBLIC_KEY_BYTES);
    EXPECT("sizes", itsme_fingerprint_size(), ITSME_FINGERPRINT_SIZE);
    EXPECT("sizes", itsme_name_max_bytes(), ITSME_NAME_MAX_BYTES);

    uint8_t key[32] = {1};
    char fp[ITSME_FINGERPRINT_SIZE];
    size_t len = 0;
    EXPECT("fp NULL key", itsme_fingerprint_from_public_key(NULL, 32, fp, sizeof fp, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("fp zero length", itsme_fingerprint_from_public_key(key, 0, fp, sizeof fp, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("fp short key", itsme_fingerprint_from_public_key(key, 31, fp, sizeof fp, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("fp NULL out_len", itsme_fingerprint_from_public_key(key, 32, fp, sizeof fp, NULL), ITSME_E_INVALID_ARGUMENT);
    memset(fp, 'Z', sizeof fp);
    len = 0;
    EXPECT("fp short buffer", itsme_fingerprint_from_public_key(key, 32, fp, 16, &len), ITSME_E_BUFFER_TOO_SMALL);
    EXPECT("fp size needed", len, ITSME_FINGERPRINT_SIZE);
    EXPECT("fp untouched on failure", fp[0] == 'Z' && fp[15] == 'Z', 1);
    len = 0;
    EXPECT("fp zero cap NULL out", itsme_fingerprint_from_public_key(key, 32, NULL, 0, &len), ITSME_E_BUFFER_TOO_SMALL);
    EXPECT("fp size needed", len, ITSME_FINGERPRINT_SIZE);
    len = 777;
    EXPECT("fp NULL out big cap", itsme_fingerprint_from_public_key(key, 32, NULL, 64, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("out_len untouched on invalid argument", len, 777);
    EXPECT("fp ok", itsme_fingerprint_from_public_key(key, 32, fp, sizeof fp, &len), ITSME_OK);
    EXPECT("fp length", len, 17);
    EXPECT("fp terminated", strlen(fp), 16);

    EXPECT("memory NULL out", itsme_secret_store_new_memory(NULL), ITSME_E_INVALID_ARGUMENT);
    itsme_secret_store *store = NULL;
    EXPECT("file NULL dir", itsme_secret_store_open_file(NULL, &store), ITSME_E_INVALID_ARGUMENT);
    EXPECT("file empty dir", itsme_secret_store_open_file("", &store), ITSME_E_INVALID_ARGUMENT);
    EXPECT("file not a directory", itsme_secret_store_open_file("/dev/null", &store), ITSME_E_SECRET_STORE);
    char msg[256];
    EXPECT("thread last error", itsme_last_error(msg, sizeof msg, &len), ITSME_OK);
    EXPECT("thread last error says why", strstr(msg, "not a directory") != NULL, 1);
    EXPECT("thread last error NULL", itsme_last_error(NULL, 0, NULL), ITSME_E_INVALID_ARGUMENT);
    EXPECT("callbacks NULL", itsme_secret_store_new_callbacks(NULL, &store), ITSME_E_INVALID_ARGUMENT);
    itsme_secret_store_callbacks partial = {0};
    partial.get = host_get;
    EXPECT("callbacks missing put", itsme_secret_store_new_callbacks(&partial, &store), ITSME_E_INVALID_ARGUMENT);
    EXPECT("still no handle", store == NULL, 1);

    itsme_identity *id = NULL;
    EXPECT("create NULL store", itsme_identity_create(NULL, "A", &id), ITSME_E_INVALID_ARGUMENT);
    EXPECT("load NULL store", itsme_identity_load(NULL, &id), ITSME_E_INVALID_ARGUMENT);
    EXPECT("fingerprint NULL identity", itsme_identity_fingerprint(NULL, fp, sizeof fp, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("pin NULL identity", itsme_pin_verify(NULL, "123456", T0), ITSME_E_INVALID_ARGUMENT);
    EXPECT("last error NULL store", itsme_secret_store_last_error(NULL, msg, sizeof msg, &len), ITSME_E_INVALID_ARGUMENT);
    EXPECT("last error NULL identity", itsme_identity_last_error(NULL, msg, sizeof msg, &len), ITSME_E_INVALID_ARGUMENT);
    itsme_identity_free(NULL);
    itsme_secret_store_free(NULL);
    passed++; /* freeing NULL did not crash */
}

static void identity_and_pin(void) {
    itsme_secret_store *store = NULL;
    EXPECT("memory store", itsme_secret_store_new_memory(&store), ITSME_OK);
    itsme_identity *id = NULL;
    EXPECT("load empty", itsme_identity_load(store, &id), ITSME_E_NOT_FOUND);
    EXPECT("create NULL name", itsme_identity_create(store, NULL, &id), ITSME_E_INVALID_ARGUMENT);
    EXPECT("create empty name", itsme_identity_create(store, "", &id), ITSME_E_INVALID_ARGUMENT);
    EXPECT("create bad UTF-8", itsme_identity_create(store, "\xff\xfe", &id), ITSME_E_INVALID_ARGUMENT);
    char long_name[200];
    memset(long_name, 'x', 129);
    long_name[129] = 0;
    EXPECT("create long name", itsme_identity_create(store, long_name, &id), ITSME_E_INVALID_ARGUMENT);
    long_name[128] = 0;
    EXPECT("create 128-byte name", itsme_identity_create(store, long_name, &id), ITSME_OK);
    itsme_identity *second = NULL;
    EXPECT("create twice", itsme_identity_create(store, "B", &second), ITSME_E_ALREADY_EXISTS);
    EXPECT("no handle on failure", second == NULL, 1);
    char msg[256];
    size_t len = 0;
    EXPECT("store last error", itsme_secret_store_last_error(store, msg, sizeof msg, &len), ITSME_OK);
    EXPECT("store last error text", strstr(msg, "already") != NULL, 1);
    EXPECT("store last error short", itsme_secret_store_last_error(store, msg, 1, &len), ITSME_E_BUFFER_TOO_SMALL);
    EXPECT("store last error size", len, strlen(msg) + 1);

    uint8_t pk[ITSME_PUBLIC_KEY_BYTES];
    EXPECT("public key short", itsme_identity_public_key(id, pk, 31, &len), ITSME_E_BUFFER_TOO_SMALL);
    EXPECT("public key needed", len, 32);
    EXPECT("public key", itsme_identity_public_key(id, pk, sizeof pk, &len), ITSME_OK);
    char fp1[ITSME_FINGERPRINT_SIZE], fp2[ITSME_FINGERPRINT_SIZE];
    EXPECT("fingerprint", itsme_identity_fingerprint(id, fp1, sizeof fp1, &len), ITSME_OK);
    EXPECT("fingerprint of key", itsme_fingerprint_from_public_key(pk, sizeof pk, fp2, sizeof fp2, &len), ITSME_OK);
    EXPECT("fingerprints agree", strcmp(fp1, fp2), 0);
    char name[200];
    EXPECT("name", itsme_identity_name(id, name, sizeof name, &len), ITSME_OK);
    EXPECT("name length", len, 129);
    EXPECT("set NULL name", itsme_identity_set_name(id, NULL), ITSME_E_INVALID_ARGUMENT);
    EXPECT("set name", itsme_identity_set_name(id, "Zo\xc3\xab"), ITSME_OK);

    int is_set = 7;
    EXPECT("pin is set NULL out", itsme_pin_is_set(id, NULL), ITSME_E_INVALID_ARGUMENT);
    EXPECT("pin is set", itsme_pin_is_set(id, &is_set), ITSME_OK);
    EXPECT("pin not set yet", is_set, 0);
    EXPECT("verify before set", itsme_pin_verify(id, "123456", T0), ITSME_E_NOT_FOUND);
    EXPECT("set NULL pin", itsme_pin_set(id, NULL), ITSME_E_INVALID_ARGUMENT);
    EXPECT("set short pin", itsme_pin_set(id, "12345"), ITSME_E_INVALID_PIN);
    EXPECT("set letters", itsme_pin_set(id, "12345a"), ITSME_E_INVALID_PIN);
    EXPECT("set bad UTF-8 pin", itsme_pin_set(id, "\xff\xff\xff\xff\xff\xff"), ITSME_E_INVALID_PIN);
    EXPECT("set pin", itsme_pin_set(id, "123456"), ITSME_OK);
    EXPECT("set pin twice", itsme_pin_set(id, "654321"), ITSME_E_ALREADY_EXISTS);
    EXPECT("negative time", itsme_pin_verify(id, "123456", -5), ITSME_E_INVALID_ARGUMENT);
    EXPECT("verify", itsme_pin_verify(id, "123456", T0), ITSME_OK);
    uint32_t failures = 99;
    uint64_t wait = 99;
    EXPECT("status NULL", itsme_pin_status(id, T0, NULL, &wait), ITSME_E_INVALID_ARGUMENT);
    EXPECT("status untouched", failures == 99 && wait == 99, 1);
    for (int i = 0; i < 5; i++) EXPECT("wrong pin", itsme_pin_verify(id, "000000", T0), ITSME_E_WRONG_PIN);
    EXPECT("malformed during lock", itsme_pin_verify(id, "1", T0), ITSME_E_INVALID_PIN);
    EXPECT("locked", itsme_pin_verify(id, "123456", T0 + 10), ITSME_E_LOCKED);
    EXPECT("change while locked", itsme_pin_change(id, "123456", "111111", T0 + 10), ITSME_E_LOCKED);
    EXPECT("status", itsme_pin_status(id, T0 + 10, &failures, &wait), ITSME_OK);
    EXPECT("failures", failures, 5);
    EXPECT("wait", wait, 290);
    EXPECT("identity last error", itsme_identity_last_error(id, msg, sizeof msg, &len), ITSME_OK);
    EXPECT("last error has no PIN", strstr(msg, "123456") == NULL && strstr(msg, "111111") == NULL, 1);
    EXPECT("change NULL new", itsme_pin_change(id, "123456", NULL, T0 + 300), ITSME_E_INVALID_ARGUMENT);
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
    itsme_secret_store_callbacks cb = {hs, host_get, host_put, host_remove, host_destroy};
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
    EXPECT("no handle on failure", again == NULL, 1);
    itsme_secret_store_free(store);
    EXPECT("not destroyed while an identity holds it", hs->destroyed, 0);
    itsme_identity_free(id);
    EXPECT("destroyed once", hs->destroyed, 1);
    free(hs);
}

int main(void) {
    before_init();
    EXPECT("init", itsme_init(), ITSME_OK);
    no_handles();
    identity_and_pin();
    host_callbacks();
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
