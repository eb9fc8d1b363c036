#!/usr/bin/env python3
"""Writes tests/c/contract_test.c: the C contract suite, one table of checks
derived from abi/itsme.abi.json (and abi/itsme_testing.abi.json when it
exists), each check run in a process of its own by tests/c/contract_runtime.h.

From each function's roles: before itsme_init (ITSME_E_NOT_INITIALIZED,
nothing written); each pointer parameter NULL alone (ITSME_E_INVALID_ARGUMENT,
nothing else written; an in_bytes NULL with length 0 and the parameters
tests/c/contract_fixtures.h marks NULL_OK are accepted); release functions on
NULL and on a real handle; and, from the function's fixture: invalid UTF-8
and overlong text, times out of range, the size query, cap - 1 and the exact
cap of every output buffer, and every output written on success.  Size
functions (`size_t itsme_x(void)` with a macro ITSME_X) return their macro.

Every function that writes an output needs a FIXTURE line in
tests/c/contract_fixtures.h: this script fails, naming it, when one lacks
one.  The functions of abi/itsme_testing.abi.json are compiled in only with
-DITSME_CONTRACT_TESTING, against the test build of the library.

Run from the repository root with no arguments (scripts/abi generate).
"""
import re
import sys

from _description import Description, read

FIXTURES = "tests/c/contract_fixtures.h"
OUTPUT = "tests/c/contract_test.c"
INIT = "itsme_init"  # the conventions of include/itsme.h: before it, ITSME_E_NOT_INITIALIZED

ROLE = {
    "handle": "CT_R_HANDLE", "out_handle": "CT_R_OUT_HANDLE", "in_text": "CT_R_IN_TEXT",
    "in_bytes": "CT_R_IN_BYTES", "in_len": "CT_R_IN_LEN", "out_text": "CT_R_OUT_TEXT",
    "out_bytes": "CT_R_OUT_BYTES", "out_cap": "CT_R_OUT_CAP", "out_len": "CT_R_OUT_LEN",
    "out_value": "CT_R_OUT_VALUE", "out_struct": "CT_R_OUT_STRUCT", "in_struct": "CT_R_IN_STRUCT",
    "callbacks": "CT_R_CALLBACKS", "time": "CT_R_TIME", "value": "CT_R_VALUE",
}
INPUT_ROLES = {"handle", "in_text", "in_bytes", "in_len", "value", "time", "callbacks", "in_struct"}
POINTER_ROLES = {"handle", "out_handle", "in_text", "in_bytes", "out_text", "out_bytes", "out_len",
                 "out_value", "out_struct", "in_struct", "callbacks"}


def fail(message):
    sys.exit("abi/tools/c_contract.py: " + message)


def read_fixtures(known):
    """FIXTURE(function, ...), NULL_OK(function, parameter) and
    BAD_TEXT(function, parameter, code) lines, each on one line."""
    fixtures, null_ok, bad_text = set(), set(), {}
    with open(FIXTURES, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for number, line in enumerate(lines, 1):
        where = "%s:%d" % (FIXTURES, number)
        m = re.match(r"\s*FIXTURE\((\w+)\s*,", line)
        if m:
            name = m.group(1)
            if not line.rstrip().endswith(")"):
                fail(where + ": a FIXTURE is one line, ending with its `)`")
            if name in fixtures:
                fail(where + ": a second FIXTURE for " + name)
            if name not in known:
                fail(where + ": FIXTURE for " + name + ", which the header does not declare")
            fixtures.add(name)
            continue
        m = re.match(r"\s*NULL_OK\((\w+)\s*,\s*(\w+)\s*\)\s*$", line)
        if m:
            if m.group(1) not in known or m.group(2) not in known[m.group(1)]:
                fail(where + ": NULL_OK names no parameter of the header: " + line.strip())
            null_ok.add((m.group(1), m.group(2)))
            continue
        m = re.match(r"\s*BAD_TEXT\((\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*\)\s*$", line)
        if m:
            if m.group(1) not in known or m.group(2) not in known[m.group(1)]:
                fail(where + ": BAD_TEXT names no parameter of the header: " + line.strip())
            bad_text[(m.group(1), m.group(2))] = m.group(3)
            continue
        if re.match(r"\s*(FIXTURE|NULL_OK|BAD_TEXT)\b", line):
            fail(where + ": cannot read " + line.strip())
    return fixtures, null_ok, bad_text


def c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Generator:
    def __init__(self, abi, testing):
        self.abi = abi
        self.testing = testing
        self.functions = [(f, False) for f in abi["functions"]]
        if testing:
            self.functions += [(f, True) for f in testing["functions"]]
        self.handles = {h["name"]: h for h in abi["handles"] + (testing or {}).get("handles", [])}
        self.structs = {s["name"]: s for s in abi["structs"] + (testing or {}).get("structs", [])}
        self.constants = {c["name"]: c for c in abi["constants"] + (testing or {}).get("constants", [])}
        known = {f["name"]: {p["name"] for p in f["params"]} for f, _ in self.functions}
        self.fixtures, self.null_ok, self.bad_text = read_fixtures(known)
        missing = [f["name"] for f, _ in self.functions
                   if f.get("writes_output") and f["name"] not in self.fixtures]
        if missing:
            fail("no FIXTURE in %s for %s (every function that writes an output needs one)"
                 % (FIXTURES, ", ".join(missing)))
        self.out = []
        self.decl = []
        self.entries = []

    def w(self, text=""):
        self.out.append(text)

    def has_size_field(self, struct_name):
        s = self.structs.get(struct_name)
        return bool(s and s["fields"] and s["fields"][0]["name"] == "size"
                    and s["fields"][0]["type"].get("name") == "size_t")

    def constant_for(self, f):
        """A function of no parameters returning an integer, named like a macro."""
        if f["params"] or f["returns"]["kind"] not in ("int", "bool"):
            return None
        name = "ITSME_" + f["name"][len("itsme_"):].upper()
        c = self.constants.get(name)
        return name if c is not None and isinstance(c["value"], int) else None

    # ---- one function returning itsme_result ------------------------------------

    def result_function(self, f, index):
        name = f["name"]
        params = f["params"]
        pos = {p["name"]: i for i, p in enumerate(params)}
        inputs = [p for p in params if p["role"] in INPUT_ROLES]
        w = self.w
        d = self.decl.append
        d("struct args_%s {" % name)
        for p in inputs:
            d("    %s %s;" % (p["type"]["c"], p["name"]))
        if not inputs:
            d("    int unused;")
        d("};")
        if name in self.fixtures:
            d("#define FIXTURE_%s(...) static void fixture_%s(struct args_%s *a) { (void)a; __VA_ARGS__; }"
              % (name, name, name))
        else:
            d("#define FIXTURE_%s(...)" % name)
        w("/* %s */" % name)
        # defaults
        body = ["    struct args_%s *a = p;" % name, "    (void)a;"]
        for p in params:
            role, n, t = p["role"], p["name"], p["type"]
            if role == "handle":
                body.append("    a->%s = live ? fx_%s() : NULL;" % (n, t["to"]["name"]))
            elif role == "in_text":
                body.append("    a->%s = FX_TEXT;" % n)
            elif role == "in_bytes":
                body.append("    a->%s = fx_bytes;" % n)
                body.append("    a->%s = %s;" % (p["len"], "1" if p.get("item_bytes") else "32"))
            elif role == "value":
                body.append("    a->%s = 0;" % n)
            elif role == "time":
                body.append("    a->%s = FX_NOW;" % n)
            elif role == "callbacks":
                body.append("    a->%s = fx_%s();" % (n, t["to"]["name"]))
            elif role == "in_struct":
                sname = t["to"]["name"]
                body.append("    static %s s_%s;" % (sname, n))
                body.append("    memset(&s_%s, 0, sizeof s_%s);" % (n, n))
                if self.has_size_field(sname):
                    body.append("    s_%s.size = sizeof s_%s;" % (n, n))
                body.append("    a->%s = &s_%s;" % (n, n))
        if name in self.fixtures:
            body.append("    if (live) fixture_%s(a);" % name)
        else:
            body.append("    (void)live;")
        w("static void setup_%s(void *p, int live) {" % name)
        self.out.extend(body)
        w("}")
        # mutations
        w("static int mutate_%s(void *p, const struct ct_check *c) {" % name)
        w("    struct args_%s *a = p;" % name)
        w("    (void)a;")
        w("    switch (c->param) {")
        for i, p in enumerate(params):
            role, n = p["role"], p["name"]
            if role in ("handle", "callbacks", "in_struct"):
                w("    case %d: if (c->kind == CT_NULL) a->%s = NULL; return 0;" % (i, n))
            elif role == "in_text":
                w("    case %d: ct_mutate_text(c, &a->%s); return 0;" % (i, n))
            elif role == "in_bytes":
                w("    case %d: if (c->kind == CT_NULL) a->%s = NULL; return a->%s == 0;" % (i, n, p["len"]))
            elif role == "time":
                w("    case %d: ct_mutate_time(c, &a->%s); return 0;" % (i, n))
        w("    default: return 0;")
        w("    }")
        w("}")
        # the call
        args = []
        for i, p in enumerate(params):
            role, n, t = p["role"], p["name"], p["type"]
            if role in INPUT_ROLES:
                args.append("a->" + n)
            elif role == "out_cap":
                args.append("o->cap[%d]" % i)
            else:
                args.append("(%s)o->ptr[%d]" % (t["c"], i))
        w("static itsme_result invoke_%s(void *p, struct ct_outs *o) {" % name)
        w("    struct args_%s *a = p;" % name)
        w("    (void)a;")
        w("    (void)o;")
        w("    return %s(%s);" % (name, ", ".join(args)))
        w("}")
        # the parameter table
        w("static const struct ct_param params_%s[] = {" % name)
        for p in params:
            role, n, t = p["role"], p["name"], p["type"]
            size, release, size_field = "0", "NULL", 0
            if role == "out_value":
                size = "sizeof(%s)" % t["to"]["c"]
            elif role == "out_struct":
                size = "sizeof(%s)" % t["to"]["name"]
                size_field = int(self.has_size_field(t["to"]["name"]))
            elif role == "out_handle":
                size = "sizeof(void *)"
                release = "ct_release_" + t["to"]["to"]["name"]
            cap = pos[p["cap"]] if p.get("cap") else -1
            ln = pos[p["len"]] if role in ("out_text", "out_bytes") and p.get("len") else -1
            bad = self.bad_text.get((name, n), "ITSME_E_INVALID_ARGUMENT")
            w("    {%s, %s, %s, %d, %d, %d, %s, %d, %s}," % (
                c_string(n), ROLE[role], size, cap, ln, size_field, release,
                int((name, n) in self.null_ok or (bool(p.get("optional")) and role != "in_bytes")), bad))
        if not params:
            w("    {\"\", CT_R_VALUE, 0, -1, -1, 0, NULL, 0, 0},")
        w("};")
        w("static const struct ct_function function_%s = {%s, %d, sizeof(struct args_%s), params_%s, %d, "
          "setup_%s, mutate_%s, invoke_%s};" % (name, c_string(name), int(name in self.fixtures), name, name,
                                                len(params), name, name, name))
        w("static void run_%s(const struct ct_check *c) { ct_run_result(&function_%s, c); }" % (name, name))
        w()
        # the checks
        def entry(kind, param=-1, what=""):
            label = name + ": " + what
            self.entries.append((name, label, "run_" + name, index, kind, param))

        if name == INIT:
            # the function the conventions name: it initialises, idempotently
            entry("CT_SUCCESS", -1, "succeeds again once initialised")
        elif f.get("needs_init"):
            entry("CT_BEFORE_INIT", -1, "before itsme_init")
        for i, p in enumerate(params):
            if p["role"] in POINTER_ROLES:
                entry("CT_NULL", i, "%s NULL" % p["name"])
        if name in self.fixtures:
            for i, p in enumerate(params):
                if p["role"] == "in_text":
                    entry("CT_BAD_UTF8", i, "%s not UTF-8" % p["name"])
                    entry("CT_LONG_TEXT", i, "%s longer than ITSME_TEXT_MAX" % p["name"])
                elif p["role"] == "time":
                    entry("CT_TIME_NEGATIVE", i, "%s below 0" % p["name"])
                    entry("CT_TIME_AFTER_9999", i, "%s after 9999" % p["name"])
                elif p["role"] in ("out_text", "out_bytes") and p.get("len"):
                    entry("CT_SIZE_QUERY", i, "%s size query" % p["name"])
                    entry("CT_SHORT", i, "%s cap - 1" % p["name"])
                elif p["role"] == "out_struct" and self.has_size_field(p["type"]["to"]["name"]):
                    entry("CT_STRUCT_SIZE", i, "%s->size too small" % p["name"])
            entry("CT_SUCCESS", -1, "success with the exact cap" if any(
                p["role"] in ("out_text", "out_bytes") for p in params) else "success")

    # ---- other functions --------------------------------------------------------

    def other_function(self, f, index):
        name = f["name"]
        w = self.w
        w("/* %s */" % name)
        if f.get("releases"):
            h = f["releases"]
            w("static void run_%s(const struct ct_check *c) {" % name)
            w("    if (c->kind == CT_RELEASE_NULL) {")
            w("        %s(NULL);" % name)
            w("        return;")
            w("    }")
            w("    %s *h = fx_%s();" % (h, h))
            w("    if (!h) exit(77); /* no handle of this type in this build */")
            w("    ct_forget(h);")
            w("    %s(h);" % name)
            w("}")
            self.entries.append((name, name + ": NULL", "run_" + name, index, "CT_RELEASE_NULL", -1))
            self.entries.append((name, name + ": a handle", "run_" + name, index, "CT_RELEASE_HANDLE", -1))
            w()
            return
        constant = self.constant_for(f)
        w("static void run_%s(const struct ct_check *c) {" % name)
        w("    (void)c;")
        if constant:
            w("    if ((unsigned long long)%s() != (unsigned long long)%s)" % (name, constant))
            w("        ct_fail(\"returns %%llu, %s is %%llu\", (unsigned long long)%s(), (unsigned long long)%s);"
              % (constant, name, constant))
            kind, what = "CT_CONSTANT", "returns " + constant
        else:
            args = []
            for p in f["params"]:
                t = p["type"]
                args.append("NULL" if t["kind"] == "pointer" else "0")
            call = "%s(%s)" % (name, ", ".join(args))
            ret = f["returns"]
            if ret["kind"] == "void":
                w("    %s;" % call)
                what = "called with NULL"
            elif ret["kind"] == "pointer" and ret["to"]["kind"] == "char":
                w("    const char *text = %s;" % call)
                w("    if (text == NULL || strlen(text) == 0) ct_fail(\"no text\");")
                what = "text for zero arguments"
            else:
                w("    (void)%s;" % call)
                what = "called"
            kind = "CT_CALL"
        w("}")
        self.entries.append((name, name + ": " + what, "run_" + name, index, kind, -1))
        w()

    def generate(self):
        w = self.w
        abi = self.abi
        w("/*")
        w(" * GENERATED by scripts/abi generate (abi/tools/c_contract.py) from include/itsme.h:")
        w(" * do not edit.  The contract suite of the C interface: every function of")
        w(" * abi/itsme.abi.json against the conventions of include/itsme.h, each check")
        w(" * in a process of its own.  Fixtures: tests/c/contract_fixtures.h.  With")
        w(" * -DITSME_CONTRACT_TESTING (the test build of the library) it also checks")
        w(" * the functions of abi/itsme_testing.abi.json.")
        w(" * Usage: contract_test [part of a check's label]")
        w(" */")
        w("#if defined(__GNUC__) || defined(__clang__)")
        w("/* the fixtures' helpers a build does not use (the test-only functions') */")
        w("#pragma GCC diagnostic ignored \"-Wunused-function\"")
        w("/* deprecated functions are checked like the others */")
        w("#pragma GCC diagnostic ignored \"-Wdeprecated-declarations\"")
        w("#endif")
        w('#include "contract_runtime.h"')
        if self.testing:
            w("#ifdef ITSME_CONTRACT_TESTING")
            w("#include <itsme_testing.h>")
            w("#endif")
        for f, t in self.functions:
            if t:
                w("#ifdef ITSME_CONTRACT_TESTING")
            w("#define CT_HAS_%s 1" % f["name"])
            if t:
                w("#endif")
        tables = abi["callback_tables"] + (self.testing or {}).get("callback_tables", [])
        for table in sorted(tables, key=lambda t: t["name"]):
            version = "ITSME_" + table["name"][len("itsme_"):].upper() + "_VERSION"
            if table["fields"] and table["fields"][0]["name"] == "version" and version in self.constants:
                w("#define CT_VERSION_%s %s /* its first field, the version the caller sets */"
                  % (table["name"], version))
        for f, t in self.functions:
            if any(p["role"] in ("out_text", "out_bytes") and not p.get("len") for p in f["params"]):
                w("#define CT_NO_OUT_LEN_%s 1 /* an output buffer without out_len */" % f["name"])
        for name in sorted(self.structs):
            if self.has_size_field(name):
                w("#define CT_SIZED_%s 1 /* its first field is the size the caller sets */" % name)
        w('#include "contract_support.h"')
        w()
        handles = sorted(self.handles)
        for h in handles:
            w("static void ct_release_%s(void *h) { %s(h); }" % (h, self.handles[h]["release"]))
        w()
        # argument structs and fixtures first, the fixtures file next, then the rest
        result_functions = [(f, t, i) for i, (f, t) in enumerate(self.functions)
                            if f["returns"].get("typedef") == "itsme_result"]
        others = [(f, t, i) for i, (f, t) in enumerate(self.functions)
                  if f["returns"].get("typedef") != "itsme_result"]
        body_start = len(self.out)
        for f, t, i in result_functions:
            if t:
                w("#ifdef ITSME_CONTRACT_TESTING")
                self.decl.append("#ifdef ITSME_CONTRACT_TESTING")
            self.result_function(f, i)
            if t:
                w("#endif")
                self.decl.append("#else")
                self.decl.append("#define FIXTURE_%s(...)" % f["name"])
                self.decl.append("#endif")
        for f, t, i in others:
            if t:
                w("#ifdef ITSME_CONTRACT_TESTING")
            self.other_function(f, i)
            if t:
                w("#endif")
        rest = self.out[body_start:]
        del self.out[body_start:]
        self.out.extend(self.decl)
        w()
        w("#define FIXTURE(function, ...) FIXTURE_##function(__VA_ARGS__)")
        w("#define NULL_OK(function, parameter)")
        w("#define BAD_TEXT(function, parameter, code)")
        w('#include "contract_fixtures.h"')
        w()
        self.out.extend(rest)
        # the table
        w("static const struct ct_entry ct_entries[] = {")
        for name, label, run, index, kind, param in self.entries:
            testing = self.functions[index][1]
            if testing:
                w("#ifdef ITSME_CONTRACT_TESTING")
            w("    {%s, %s, %s, {%s, %d}}," % (c_string(name), c_string(label), run, kind, param))
            if testing:
                w("#endif")
        w("};")
        w()
        w("static const char *const ct_declared[] = {")
        for f, t in self.functions:
            if t:
                w("#ifdef ITSME_CONTRACT_TESTING")
            w("    %s," % c_string(f["name"]))
            if t:
                w("#endif")
        w("};")
        w()
        w("int main(int argc, char **argv) {")
        w("    return ct_main(argc, argv, ct_entries, (int)(sizeof ct_entries / sizeof ct_entries[0]), ct_declared,")
        w("                   (int)(sizeof ct_declared / sizeof ct_declared[0]));")
        w("}")
        return "\n".join(self.out) + "\n"


def main():
    description = read(Description)
    generator = Generator(description.main, description.testing)
    text = generator.generate()
    with open(OUTPUT, "w", encoding="utf-8") as f:
        f.write(text)
    tested = sum(1 for _, t in generator.functions if t)
    print("abi c contract: %s (%d checks of %d functions, %d of them test-only)"
          % (OUTPUT, len(generator.entries), len(generator.functions), tested))


if __name__ == "__main__":
    main()
