#!/usr/bin/env python3
"""Reads a libitsme header with clang and writes its machine-read description.

    abi/tools/read.py include/itsme.h abi/itsme.abi.json

The header is parsed by clang (-ast-dump=json) with ITSME_ABI_READER
defined, so the annotation macros (ITSME_OUT, ITSME_VALUES, ...) become
annotate attributes the reader sees; its macros come from clang's
preprocessor (-dM) and its comments from -fparse-all-comments.  Everything
that restates the header (the Rust and Python raw layers, the JVM layer,
scripts/check-abi's inputs, the C contract suite) is generated from the
JSON this writes: see abi/README.md for its schema.

The reader refuses what it cannot describe (a parameter whose role neither
its name nor an annotation tells, a size parameter without its buffer, a
handle without its release function) rather than guess.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

CLANG = os.environ.get("CLANG", "clang")
INTEGERS = {
    "int8_t": (8, True), "uint8_t": (8, False), "int16_t": (16, True), "uint16_t": (16, False),
    "int32_t": (32, True), "uint32_t": (32, False), "int64_t": (64, True), "uint64_t": (64, False),
    "size_t": (64, False), "int": (32, True),
}
# Attribute and guard macros: not constants of the interface.
NOT_CONSTANTS = re.compile(r"^ITSME(_TESTING)?_H$|^ITSME_(WARN_UNUSED_RESULT|DEPRECATED|ABI|OUT|VALUES|"
                           r"ITEM_BYTES|TIME|OPTIONAL)$")


class ReadError(Exception):
    pass


def run_clang(header: str, args: List[str]) -> str:
    base = [CLANG, "-x", "c", "-std=c11", "-DITSME_ABI_READER", "-I", os.path.dirname(header) or "."]
    out = subprocess.run(base + args + [header], check=True, capture_output=True, text=True)
    return out.stdout


def comment_text(node: Dict[str, Any]) -> str:
    """The text of a FullComment, its lines joined and re-wrapped as written."""
    lines: List[str] = []

    def walk(n: Dict[str, Any]) -> None:
        if n.get("kind") == "TextComment":
            lines.append(n.get("text", "").strip())
        for c in n.get("inner", []):
            walk(c)
        if n.get("kind") == "ParagraphComment":
            lines.append("")

    walk(node)
    text = "\n".join(lines).strip()
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text


# --- types -----------------------------------------------------------------

class Types:
    def __init__(self) -> None:
        self.handles: Dict[str, Dict[str, Any]] = {}
        self.structs: Dict[str, Dict[str, Any]] = {}
        self.aliases: Dict[str, str] = {}      # itsme_result -> int32_t

    def parse(self, spelled: str) -> Dict[str, Any]:
        """A type descriptor from clang's spelling of a type."""
        t = spelled.strip()
        m = re.match(r"^(.*)\(\*\)\((.*)\)$", t)
        if m:
            params = [p.strip() for p in m.group(2).split(",")] if m.group(2).strip() not in ("", "void") else []
            return {"kind": "function_pointer", "c": t, "returns": self.parse(m.group(1)),
                    "params": [{"type": self.parse(p)} for p in params]}
        m = re.match(r"^(.*)\[(\d+)\]$", t)
        if m:
            return {"kind": "array", "c": t, "of": self.parse(m.group(1)), "length": int(m.group(2))}
        if t.endswith("*"):
            inner = t[:-1].strip()
            const = False
            if inner.startswith("const "):
                const, inner = True, inner[len("const "):]
            elif inner.endswith(" const"):
                const, inner = True, inner[: -len(" const")]
            return {"kind": "pointer", "c": t, "const": const, "to": self.parse(inner)}
        if t.startswith("const "):
            d = self.parse(t[len("const "):])
            return dict(d, c=t)
        if t.startswith("struct "):
            t = t[len("struct "):]
        if t == "void":
            return {"kind": "void", "c": t}
        if t == "bool" or t == "_Bool":
            return {"kind": "bool", "c": "bool"}
        if t == "char":
            return {"kind": "char", "c": t}
        if t in INTEGERS:
            bits, signed = INTEGERS[t]
            return {"kind": "int", "c": t, "name": t, "bits": bits, "signed": signed}
        if t in self.aliases:
            base = self.parse(self.aliases[t])
            return dict(base, c=t, typedef=t)
        if t in self.handles:
            return {"kind": "handle", "c": t, "name": t}
        if t in self.structs:
            return {"kind": "struct", "c": t, "name": t}
        raise ReadError(f"unknown type {spelled!r}")


ANNOTATION_MACROS = {"ITSME_VALUES": "values", "ITSME_OUT": "out", "ITSME_ITEM_BYTES": "item_bytes",
                     "ITSME_TIME": "time", "ITSME_OPTIONAL": "optional"}
SOURCE = ""


def annotations(node: Dict[str, Any]) -> List[str]:
    """The annotation macros on a declaration, as "what" or "what=argument".
    clang's JSON dump leaves out an annotate attribute's text, so each is
    read from the header at the place its macro was expanded."""
    found = []
    for c in node.get("inner", []):
        if c.get("kind") != "AnnotateAttr":
            continue
        at = offset(c["range"]["begin"])
        m = re.match(r"(ITSME_\w+)\s*(?:\(\s*([^)]*?)\s*\))?", SOURCE[at:])
        if not m or m.group(1) not in ANNOTATION_MACROS:
            raise ReadError(f"an annotation at offset {at} is not one of {sorted(ANNOTATION_MACROS)}")
        what = ANNOTATION_MACROS[m.group(1)]
        found.append(f"{what}={m.group(2)}" if m.group(2) is not None else what)
    return found


# --- roles -----------------------------------------------------------------

def assign_roles(fn: str, params: List[Dict[str, Any]], constants: Dict[str, Any]) -> None:
    """Gives each parameter its role.  Roles: handle, out_handle, in_text,
    in_bytes (+ in_len), out_text / out_bytes (+ out_cap, out_len), out_value,
    out_struct, in_struct, callbacks, time, value.  A size parameter that
    follows a buffer is that buffer's length or capacity; the out_len that
    follows a capacity is its written length."""
    n = len(params)
    i = 0
    while i < n:
        p = params[i]
        t = p["type"]
        ann = p.pop("annotations")
        name = p["name"]
        nxt = params[i + 1] if i + 1 < n else None
        nxt2 = params[i + 2] if i + 2 < n else None

        def is_size(q: Optional[Dict[str, Any]]) -> bool:
            return q is not None and q["type"]["kind"] == "int" and q["type"]["c"] == "size_t"

        def is_len_ptr(q: Optional[Dict[str, Any]]) -> bool:
            return (q is not None and q["type"]["kind"] == "pointer" and not q["type"]["const"]
                    and q["type"]["to"]["c"] == "size_t")

        if t["kind"] == "pointer" and t["to"]["kind"] == "handle":
            p["role"] = "handle"
        elif t["kind"] == "pointer" and t["to"]["kind"] == "pointer" and t["to"]["to"]["kind"] == "handle":
            p["role"] = "out_handle"
        elif t["kind"] == "pointer" and t["to"]["kind"] == "char" and t["const"]:
            p["role"] = "in_text"
        elif t["kind"] == "pointer" and t["to"]["kind"] in ("char", "int") and not t["const"] \
                and t["to"]["c"] in ("char", "uint8_t") and is_size(nxt):
            p["role"] = "out_text" if t["to"]["kind"] == "char" else "out_bytes"
            p["cap"] = nxt["name"]  # type: ignore[index]
            nxt["role"] = "out_cap"  # type: ignore[index]
            nxt.pop("annotations")  # type: ignore[union-attr]
            i += 1
            if is_len_ptr(nxt2) and nxt2["name"].endswith("len"):  # type: ignore[index]
                p["len"] = nxt2["name"]  # type: ignore[index]
                nxt2["role"] = "out_len"  # type: ignore[index]
                nxt2.pop("annotations")  # type: ignore[union-attr]
                i += 1
        elif t["kind"] == "pointer" and t["const"] and t["to"]["c"] == "uint8_t" and is_size(nxt):
            p["role"] = "in_bytes"
            p["len"] = nxt["name"]  # type: ignore[index]
            nxt["role"] = "in_len"  # type: ignore[index]
            item = [a for a in nxt.pop("annotations") if a.startswith("item_bytes=")]  # type: ignore[union-attr]
            if item:
                p["item_bytes"] = constant_value(item[0].split("=", 1)[1], constants)
            i += 1
        elif t["kind"] == "pointer" and t["to"]["kind"] == "struct":
            struct = t["to"]["name"]
            if struct.endswith("_callbacks"):
                p["role"] = "callbacks"
            else:
                p["role"] = "in_struct" if t["const"] else "out_struct"
        elif t["kind"] == "pointer" and not t["const"] and t["to"]["kind"] in ("int", "bool"):
            if not (name.startswith("out") or "out" in ann):
                raise ReadError(f"{fn}: parameter {name} is a scalar pointer not named out_*: annotate it ITSME_OUT")
            p["role"] = "out_value"
        elif t["kind"] in ("int", "bool"):
            if t["c"] == "size_t" and not ann and name not in ("limit", "index", "capacity"):
                raise ReadError(f"{fn}: size_t {name} follows no buffer")
            p["role"] = "time" if (t["c"] == "int64_t" and (name == "now" or "time" in ann)) else "value"
        else:
            raise ReadError(f"{fn}: cannot tell the role of {name} ({t['c']})")
        # An itsme_random is always optional: NULL is the operating system.
        if "optional" in ann or (t["kind"] == "pointer" and t["to"].get("name") == "itsme_random"
                                 and p["role"] == "handle"):
            p["optional"] = True
        if "annotations" in p:
            p.pop("annotations")
        i += 1


def constant_value(text: str, constants: Dict[str, Any]) -> int:
    text = text.strip()
    if re.fullmatch(r"\d+", text):
        return int(text)
    if text in constants and isinstance(constants[text]["value"], int):
        return int(constants[text]["value"])
    raise ReadError(f"not a known integer constant: {text}")


# --- macros ----------------------------------------------------------------

def read_constants(header: str, source: str) -> Tuple[List[Dict[str, Any]], Dict[str, Any]]:
    defined = run_clang(header, ["-E", "-dM"])
    ours = {m.group(1) for m in re.finditer(r"^\s*#\s*define\s+(ITSME_\w+)\b(?!\()", source, flags=re.M)}
    values: Dict[str, str] = {}
    for line in defined.splitlines():
        m = re.match(r"#define (ITSME_\w+) (.*)$", line)
        if m and m.group(1) in ours and not NOT_CONSTANTS.match(m.group(1)):
            values[m.group(1)] = m.group(2).strip()
    lines = source.splitlines()
    order: List[str] = []
    for idx, line in enumerate(lines):
        m = re.match(r"^\s*#\s*define\s+(ITSME_\w+)\b(?!\()", line)
        if m and m.group(1) in values and m.group(1) not in order:
            order.append(m.group(1))
    constants: List[Dict[str, Any]] = []
    by_name: Dict[str, Any] = {}
    for name in order:
        raw = values[name]
        raw = re.sub(r"/\*.*?\*/", "", raw).strip()
        entry: Dict[str, Any] = {"name": name}
        if re.fullmatch(r"-?\d+", raw):
            entry["value"] = int(raw)
        elif re.fullmatch(r'"[^"\\]*"', raw):
            entry["value"] = raw[1:-1]
        elif re.fullmatch(r"ITSME_\w+", raw) and raw in by_name:
            entry["value"] = by_name[raw]["value"]
            entry["alias_of"] = raw
        else:
            raise ReadError(f"constant {name} = {raw!r} is neither a number, a string nor another constant")
        doc = define_doc(lines, name)
        if doc:
            entry["doc"] = doc
        constants.append(entry)
        by_name[name] = entry
    return constants, by_name


def define_doc(lines: List[str], name: str) -> str:
    """The comment just above a #define, or at the end of its line."""
    for idx, line in enumerate(lines):
        if re.match(rf"^\s*#\s*define\s+{name}\b", line):
            trailing = re.search(r"/\*(.*?)\*/", line)
            if trailing:
                return trailing.group(1).strip()
            j = idx - 1
            if j >= 0 and lines[j].rstrip().endswith("*/"):
                block = []
                while j >= 0:
                    block.insert(0, lines[j])
                    if lines[j].lstrip().startswith("/*"):
                        break
                    j -= 1
                text = "\n".join(block)
                text = re.sub(r"^\s*/\*+|\*+/\s*$", "", text.strip())
                return "\n".join(l.strip().lstrip("*").strip() for l in text.splitlines()).strip()
            return ""
    return ""


# --- the reading ------------------------------------------------------------

def read(header: str) -> Dict[str, Any]:
    global SOURCE
    source = open(header, encoding="utf-8").read()
    SOURCE = source
    constants, by_name = read_constants(header, source)
    ast = json.loads(run_clang(header, ["-fsyntax-only", "-fparse-all-comments", "-Xclang", "-ast-dump=json"]))
    every = [n for n in ast["inner"] if str(n.get("name", "")).startswith("itsme")]
    mine = {id(n) for n in declared_in(ast["inner"], header)}

    types = Types()
    defined_records = {n["name"] for n in every if n["kind"] == "RecordDecl" and n.get("completeDefinition")}
    for n in every:
        if n["kind"] == "TypedefDecl":
            q = n["type"]["qualType"]
            if q.startswith("struct "):
                record = q[len("struct "):]
                if record != n["name"]:
                    raise ReadError(f"typedef {n['name']} names struct {record}")
                if record in defined_records:
                    types.structs[record] = {}
                else:
                    types.handles[record] = {}
            else:
                types.aliases[n["name"]] = q

    # What this header declares (a header that includes itsme.h describes
    # only its own declarations; the types it borrows are known above).
    nodes = [n for n in every if id(n) in mine]

    # Enumerations: integer typedefs annotated ITSME_VALUES(prefix...).
    enums: List[Dict[str, Any]] = []
    typedefs: List[Dict[str, Any]] = []
    for n in nodes:
        if n["kind"] != "TypedefDecl" or n["name"] not in types.aliases:
            continue
        entry: Dict[str, Any] = {"name": n["name"], "type": types.parse(types.aliases[n["name"]])}
        typedefs.append(entry)
        prefixes = [a.split("=", 1)[1] for a in annotations(n) if a.startswith("values=")]
        if prefixes:
            members = [c["name"] for c in constants if isinstance(c["value"], int) and "alias_of" not in c
                       and any(c["name"] == p or (p.endswith("_") and c["name"].startswith(p)) for p in prefixes)]
            if not members:
                raise ReadError(f"{n['name']}: no constant matches {prefixes}")
            enums.append({"name": n["name"], "type": entry["type"], "prefixes": prefixes, "members": members})
            for m in members:
                by_name[m]["type"] = n["name"]

    structs: List[Dict[str, Any]] = []
    callback_tables: List[Dict[str, Any]] = []
    for n in nodes:
        if n["kind"] != "RecordDecl" or not n.get("completeDefinition"):
            continue
        fields = []
        for f in n.get("inner", []):
            if f["kind"] != "FieldDecl":
                continue
            ft = types.parse(f["type"]["qualType"])
            field: Dict[str, Any] = {"name": f["name"], "type": ft}
            end_loc = f["range"]["end"]
            text = source[offset(f["range"]["begin"]): offset(end_loc) + int(end_loc.get("tokLen", 0))]
            if ft["kind"] == "array":
                m = re.search(r"\[([^\]]*)\]\s*$", text)
                spelled = m.group(1).strip() if m else ""
                if re.fullmatch(r"\d+", spelled):
                    field["length_literal"] = True
                else:
                    field["length_expr"] = spelled
            if ft["kind"] == "function_pointer":
                m = re.search(r"\(\s*\*\s*\w+\s*\)\s*\((.*)\)\s*$", text, flags=re.S)
                names = [re.findall(r"(\w+)\s*$", p.strip())[0] for p in m.group(1).split(",")] if m else []
                for param, pname in zip(ft["params"], names):
                    param["name"] = pname
            fields.append(field)
        doc = next((comment_text(c) for c in n.get("inner", []) if c["kind"] == "FullComment"), "")
        entry = {"name": n["name"], "fields": fields}
        typedef_doc = next((comment_text(c) for t in nodes if t["kind"] == "TypedefDecl" and t["name"] == n["name"]
                            for c in t.get("inner", []) if c["kind"] == "FullComment"), "")
        if doc or typedef_doc:
            entry["doc"] = doc or typedef_doc
        if any(f["type"]["kind"] == "function_pointer" for f in fields):
            callback_tables.append(entry)
        else:
            structs.append(entry)

    functions: List[Dict[str, Any]] = []
    previous_end_line = -10
    previous_doc = ""
    line_of = line_index(source)
    for n in nodes:
        if n["kind"] != "FunctionDecl":
            continue
        begin = offset(n["range"]["begin"])
        end = offset(n["range"]["end"])
        fn: Dict[str, Any] = {"name": n["name"]}
        returns = re.match(r"^(.*?)\s*\(", n["type"]["qualType"]).group(1)  # type: ignore[union-attr]
        fn["returns"] = types.parse(returns)
        attrs = [c["kind"] for c in n.get("inner", [])]
        fn["must_use"] = "WarnUnusedResultAttr" in attrs
        dep = next((c for c in n.get("inner", []) if c["kind"] == "DeprecatedAttr"), None)
        if dep is not None:
            fn["deprecated"] = dep.get("message", "")
        fn_ann = annotations(n)
        if "testing" in fn_ann:
            fn["testing"] = True
        params = []
        for p in n.get("inner", []):
            if p["kind"] == "ParmVarDecl":
                params.append({"name": p["name"], "type": types.parse(p["type"]["qualType"]),
                               "annotations": annotations(p)})
        assign_roles(n["name"], params, by_name)
        fn["params"] = params
        # Every function that returns a result code refuses to work before
        # itsme_init() (the header's conventions), except itsme_init itself
        # and the last-error readers; the others (versions, texts, sizes,
        # releases) need none.
        fn["needs_init"] = (fn["returns"].get("typedef") == "itsme_result" and not n["name"].endswith("last_error")
                            and n["name"] != "itsme_init")
        fn["writes_output"] = any(p["role"].startswith("out_") and p["role"] not in ("out_cap", "out_len")
                                  for p in params)
        doc = next((comment_text(c) for c in n.get("inner", []) if c["kind"] == "FullComment"), "")
        start_line = line_of(begin)
        # A comment may document a run of declarations with no blank line
        # between them: the later ones share it.
        attr_lines = len([a for a in attrs if a in ("WarnUnusedResultAttr", "DeprecatedAttr")])
        if not doc and start_line - attr_lines - 1 == previous_end_line and previous_doc:
            fn["doc_shared_with"] = functions[-1]["name"]
            doc = previous_doc
        if doc:
            fn["doc"] = doc
        functions.append(fn)
        previous_end_line = line_of(end)
        previous_doc = doc

    # Handles: each opaque type with the function that releases it and the
    # one that reads its last error.
    names = {f["name"]: f for f in functions}
    handles = []
    declared_handles = [n["name"] for n in nodes if n["kind"] == "TypedefDecl" and n["name"] in types.handles]
    for h in declared_handles:
        release = next((f["name"] for f in functions if f["name"] == h + "_free"), None)
        if release is None:
            raise ReadError(f"handle {h} has no release function {h}_free")
        entry = {"name": h, "release": release}
        if h + "_last_error" in names:
            entry["last_error"] = h + "_last_error"
        handles.append(entry)
    # A size macro ITSME_X and its function itsme_x(void) (the header's
    # conventions), paired.
    for c in constants:
        fn_name = c["name"].lower()
        if fn_name in names and not names[fn_name]["params"] and "alias_of" not in c:
            c["function"] = fn_name
            names[fn_name]["returns_constant"] = c["name"]
    for f in functions:
        if f["name"].endswith("_free") and f["returns"]["kind"] == "void":
            f["releases"] = f["params"][0]["type"]["to"]["name"]

    return {
        "header": os.path.basename(header),
        "version": by_name["ITSME_VERSION_STRING"]["value"] if "ITSME_VERSION_STRING" in by_name else None,
        "constants": constants,
        "typedefs": typedefs,
        "enums": enums,
        "handles": handles,
        "structs": structs,
        "callback_tables": callback_tables,
        "functions": functions,
    }


def declared_in(nodes: List[Dict[str, Any]], header: str) -> List[Dict[str, Any]]:
    """The top-level nodes whose declaration is in `header` itself.  clang's
    JSON names a location's file only where it changes from the previous
    location's, so the current file is carried from node to node."""
    current = ""
    found = []
    want = os.path.abspath(header)

    def note(loc: Dict[str, Any]) -> None:
        nonlocal current
        for key in ("spellingLoc", "expansionLoc"):
            if key in loc:
                note(loc[key])
        if "file" in loc:
            current = loc["file"]

    for n in nodes:
        note(n.get("range", {}).get("begin", {}))
        note(n.get("loc", {}))
        note(n.get("range", {}).get("end", {}))
        if str(n.get("name", "")).startswith("itsme") and current and os.path.abspath(current) == want:
            found.append(n)
    return found


def offset(loc: Dict[str, Any]) -> int:
    """A source offset from a clang location (one inside a macro expansion
    gives its expansion's place)."""
    if "offset" in loc:
        return int(loc["offset"])
    return int(loc["expansionLoc"]["offset"])


def line_index(source: str):  # type: ignore[no-untyped-def]
    starts = [0] + [m.end() for m in re.finditer("\n", source)]

    def line_of(offset: int) -> int:
        lo, hi = 0, len(starts)
        while lo + 1 < hi:
            mid = (lo + hi) // 2
            if starts[mid] <= offset:
                lo = mid
            else:
                hi = mid
        return lo + 1
    return line_of


def layouts(header: str, description: Dict[str, Any]) -> None:
    """Adds each struct's size, alignment and field offsets, as this
    platform's C compiler lays them out (the generated layers check theirs
    against these)."""
    records = description["structs"] + description["callback_tables"]
    if not records:
        return
    lines = ["#include <stddef.h>", "#include <stdio.h>", f'#include "{os.path.abspath(header)}"', "int main(void) {"]
    for r in records:
        lines.append(f'printf("%s %zu %zu\\n", "{r["name"]}", sizeof({r["name"]}), _Alignof({r["name"]}));')
        for f in r["fields"]:
            lines.append(f'printf("%s.%s %zu\\n", "{r["name"]}", "{f["name"]}", offsetof({r["name"]}, {f["name"]}));')
    lines.append("return 0; }")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "layout.c")
        exe = os.path.join(tmp, "layout")
        open(src, "w").write("\n".join(lines) + "\n")
        subprocess.run([CLANG, "-std=c11", "-I", os.path.dirname(os.path.abspath(header)), src, "-o", exe], check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        parts = line.split()
        found[parts[0]] = [int(x) for x in parts[1:]]
    for r in records:
        r["size"], r["align"] = found[r["name"]]
        for f in r["fields"]:
            f["offset"] = found[f"{r['name']}.{f['name']}"][0]


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 64
    header, output = sys.argv[1], sys.argv[2]
    try:
        description = read(header)
        layouts(header, description)
    except ReadError as e:
        print(f"abi read: {header}: {e}", file=sys.stderr)
        return 1
    text = json.dumps(description, indent=1, ensure_ascii=False) + "\n"
    with open(output + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(output + ".tmp", output)
    print(f"abi read: {header}: {len(description['functions'])} functions, {len(description['constants'])} constants, "
          f"{len(description['handles'])} handles, {len(description['structs'])} structs, "
          f"{len(description['callback_tables'])} callback tables -> {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
