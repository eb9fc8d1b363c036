/*
 * identity_example: create or load an identity, print its fingerprint,
 * set and verify a PIN, then show the PIN lockout in a scratch directory.
 *
 *   cc identity_example.c $(pkg-config --cflags --libs itsme) -o identity_example
 *   ./identity_example DIR
 */
#define _XOPEN_SOURCE 700
#include <itsme.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Prints "context: static message (detail)" and returns 1. */
static int fail_store(const char *context, itsme_result rc, const itsme_secret_store *store) {
    char detail[512] = "";
    size_t len = 0;
    if (store) {
        itsme_secret_store_last_error(store, detail, sizeof detail, &len);
    } else {
        itsme_last_error(detail, sizeof detail, &len);
    }
    fprintf(stderr, "%s: %s (%s)\n", context, itsme_result_message(rc), detail);
    return 1;
}

static int fail_identity(const char *context, itsme_result rc, const itsme_identity *identity) {
    char detail[512] = "";
    size_t len = 0;
    itsme_identity_last_error(identity, detail, sizeof detail, &len);
    fprintf(stderr, "%s: %s (%s)\n", context, itsme_result_message(rc), detail);
    return 1;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

/* Opens DIR's store and loads its identity, or creates one named "Example". */
static int open_identity(const char *dir, itsme_secret_store **store, itsme_identity **identity) {
    itsme_result rc = itsme_secret_store_open_file(dir, store);
    if (rc != ITSME_OK) return fail_store("open store", rc, NULL);
    rc = itsme_identity_load(*store, identity);
    if (rc == ITSME_E_NOT_FOUND) rc = itsme_identity_create(*store, "Example", identity);
    if (rc != ITSME_OK) return fail_store("load identity", rc, *store);
    return 0;
}

static int show_lockout(void) {
    char template[] = "/tmp/itsme-example-XXXXXX";
    char *dir = mkdtemp(template);
    if (!dir) { perror("mkdtemp"); return 1; }
    itsme_secret_store *store = NULL;
    itsme_identity *identity = NULL;
    int status = open_identity(dir, &store, &identity);
    if (status == 0) {
        int64_t now = (int64_t)time(NULL);
        itsme_result rc = itsme_pin_set(identity, "123456");
        if (rc != ITSME_OK) status = fail_identity("set PIN", rc, identity);
        for (int i = 0; status == 0 && i < 5; i++) {
            rc = itsme_pin_verify(identity, "000000", now);
            if (rc != ITSME_E_WRONG_PIN) status = fail_identity("wrong PIN not refused", rc, identity);
        }
        if (status == 0) {
            rc = itsme_pin_verify(identity, "123456", now);
            if (rc != ITSME_E_LOCKED) {
                status = fail_identity("expected a lockout", rc, identity);
            } else {
                uint32_t failures = 0;
                uint64_t wait = 0;
                itsme_result st = itsme_pin_status(identity, now, &failures, &wait);
                if (st != ITSME_OK) {
                    status = fail_identity("PIN status", st, identity);
                } else {
                    printf("lockout: %s (wait %llu s)\n", itsme_result_message(rc), (unsigned long long)wait);
                }
            }
        }
    }
    itsme_identity_free(identity);
    itsme_secret_store_free(store);
    nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    return status;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    itsme_result rc = itsme_init();
    if (rc != ITSME_OK) return fail_store("init", rc, NULL);

    itsme_secret_store *store = NULL;
    itsme_identity *identity = NULL;
    int status = open_identity(argv[1], &store, &identity);
    if (status == 0) {
        char fingerprint[ITSME_FINGERPRINT_SIZE];
        size_t len = 0;
        rc = itsme_identity_fingerprint(identity, fingerprint, sizeof fingerprint, &len);
        if (rc != ITSME_OK) status = fail_identity("fingerprint", rc, identity);
        else printf("fingerprint: %s\n", fingerprint);
    }
    if (status == 0) {
        bool is_set = false;
        rc = itsme_pin_is_set(identity, &is_set);
        if (rc == ITSME_OK && !is_set) rc = itsme_pin_set(identity, "123456");
        if (rc == ITSME_OK) rc = itsme_pin_verify(identity, "123456", (int64_t)time(NULL));
        if (rc != ITSME_OK) status = fail_identity("PIN", rc, identity);
        else printf("pin: verified\n");
    }
    itsme_identity_free(identity);
    itsme_secret_store_free(store);
    if (status == 0) status = show_lockout();
    return status;
}
