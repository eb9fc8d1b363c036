//! `src/sys.rs` against `include/itsme.h`: the same functions with the same
//! parameter and return types, the same callback tables (secret store,
//! replay store) and data structs (voice derivation, approval request,
//! credential, approval result) with their layouts, the same typedefs and
//! the same constant values, the same deprecated functions; and the
//! library's runtime version equal to the header's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn header() -> String {
    read("../../include/itsme.h")
}

fn sys_source() -> String {
    read("src/sys.rs")
}

// ---------------------------------------------------------------------------
// C parsing
// ---------------------------------------------------------------------------

/// The header's attribute macros: written before a declaration, they change
/// no type.  `ITSME_DEPRECATED` takes an argument (the message).
const ATTRIBUTE_MACROS: [&str; 2] = ["ITSME_WARN_UNUSED_RESULT", "ITSME_DEPRECATED"];

/// The header without comments, preprocessor lines, `#ifdef __cplusplus`
/// blocks and attribute macros, with whitespace collapsed.
fn c_code(header: &str) -> String {
    without_attributes(&c_code_with_attributes(header))
}

/// Removes every use of an attribute macro, with its argument list if it
/// has one.
fn without_attributes(code: &str) -> String {
    let mut code = code.to_owned();
    for name in ATTRIBUTE_MACROS {
        while let Some(at) = code.find(name) {
            let mut end = at + name.len();
            if code[end..].starts_with('(') {
                end = matching_paren(&code, end) + 1;
            }
            code.replace_range(at..end, " ");
        }
    }
    code.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The functions the header marks `ITSME_DEPRECATED(...)`.
fn c_deprecated(header: &str) -> BTreeSet<String> {
    let code = c_code_with_attributes(header);
    let mut names = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("ITSME_DEPRECATED(") {
        let close = matching_paren(rest, at + "ITSME_DEPRECATED".len());
        let declaration = &rest[close + 1..];
        let open = declaration.find('(').expect("a function after ITSME_DEPRECATED");
        let head = without_attributes(&declaration[..open]);
        names.insert(head.rsplit(' ').next().unwrap_or_default().to_owned());
        rest = &rest[close..];
    }
    names
}

/// [`c_code`] with the attribute macros still in place.
fn c_code_with_attributes(header: &str) -> String {
    let mut without_comments = String::new();
    let mut rest = header;
    while let Some(start) = rest.find("/*") {
        without_comments.push_str(&rest[..start]);
        let end = rest[start..].find("*/").expect("unterminated comment") + start + 2;
        without_comments.push(' ');
        rest = &rest[end..];
    }
    without_comments.push_str(rest);

    let mut code = String::new();
    let mut skipping = 0usize;
    for line in without_comments.lines() {
        let trimmed = line.trim();
        if let Some(directive) = trimmed.strip_prefix('#') {
            let directive = directive.trim_start();
            if directive.starts_with("ifdef __cplusplus") {
                skipping += 1;
            } else if directive.starts_with("endif") && skipping > 0 {
                skipping -= 1;
            }
            continue;
        }
        if skipping == 0 {
            code.push_str(line);
            code.push(' ');
        }
    }
    code.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An integer literal without its `u`/`U`/`l`/`L` suffix (`1u` is `1`).
fn c_integer(value: &str) -> &str {
    if value.starts_with(|c: char| c.is_ascii_digit()) {
        value.trim_end_matches(['u', 'U', 'l', 'L'])
    } else {
        value
    }
}

/// The `#define ITSME_...` macros that have a value, integer suffixes and
/// trailing comments dropped; not the attribute macros, and any other
/// macro that takes arguments or expands to an attribute is an error.
fn c_macros(header: &str) -> BTreeMap<String, String> {
    let mut macros = BTreeMap::new();
    for line in header.lines() {
        let line = line.split("/*").next().unwrap_or_default().trim();
        let Some(rest) = line.strip_prefix("#define ") else { continue };
        let mut parts = rest.trim().splitn(2, char::is_whitespace);
        let name = parts.next().unwrap_or_default();
        let value = parts.next().unwrap_or_default().trim();
        if ATTRIBUTE_MACROS.contains(&name.split('(').next().unwrap_or_default()) {
            continue;
        }
        assert!(
            !name.contains('(') && !value.contains("__attribute__"),
            "a new macro {name} that is not a constant: add it to ATTRIBUTE_MACROS if it is an attribute"
        );
        if name.starts_with("ITSME_") && !value.is_empty() {
            macros.insert(name.to_owned(), c_integer(value).to_owned());
        }
    }
    macros
}

/// Splits at top-level commas.
fn split_params(text: &str) -> Vec<String> {
    let mut params = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    let mut previous = ' ';
    for c in text.chars() {
        match c {
            '(' | '<' => depth += 1,
            // The `>` of `->` closes nothing.
            '>' if previous == '-' => {}
            ')' | '>' => depth -= 1,
            _ => {}
        }
        previous = c;
        if c == ',' && depth == 0 {
            params.push(current.trim().to_owned());
            current.clear();
        } else {
            current.push(c);
        }
    }
    if !current.trim().is_empty() {
        params.push(current.trim().to_owned());
    }
    params
}

/// Index of the parenthesis closing the one at `open`.
fn matching_paren(text: &str, open: usize) -> usize {
    let mut depth = 0;
    for (i, c) in text[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return open + i;
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced parentheses in {text:?}");
}

/// A C type (without a declarator name) written the way sys.rs writes it.
fn c_type_to_rust(c_type: &str) -> String {
    let stars = c_type.matches('*').count();
    let spaced = c_type.replace('*', " ");
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let is_const = words.first() == Some(&"const");
    let base: Vec<&str> = words.into_iter().filter(|w| *w != "const").collect();
    assert_eq!(base.len(), 1, "unexpected C type {c_type:?}");
    let base = match base[0] {
        "char" => "c_char",
        "int" => "c_int",
        "void" => "c_void",
        "uint8_t" => "u8",
        "int32_t" => "i32",
        "uint32_t" => "u32",
        "int64_t" => "i64",
        "uint64_t" => "u64",
        "size_t" => "usize",
        other if other.starts_with("itsme_") => other,
        other => panic!("unmapped C type {other:?} in {c_type:?}"),
    };
    if stars == 0 {
        return base.to_owned();
    }
    let mut rust = "*mut ".repeat(stars - 1);
    rust.push_str(if is_const { "*const " } else { "*mut " });
    rust.push_str(base);
    rust
}

/// A C parameter declaration without its name, e.g. `const char *name`
/// becomes `const char *`.
fn c_param_type(param: &str) -> String {
    let param = param.trim();
    let end = param.trim_end_matches(|c: char| c.is_alphanumeric() || c == '_');
    // A lone type such as `void` or `size_t` has no name to strip.
    if end.trim().is_empty() || !param.contains([' ', '*']) {
        return param.to_owned();
    }
    end.trim().to_owned()
}

/// A C parameter list as Rust types; `(void)` is empty.
fn c_params_to_rust(params: &str) -> Vec<String> {
    let params = params.trim();
    if params == "void" || params.is_empty() {
        return Vec::new();
    }
    split_params(params).iter().map(|p| c_type_to_rust(&c_param_type(p))).collect()
}

/// Return type: `void` is empty.
fn c_return_to_rust(c_type: &str) -> String {
    if c_type.trim() == "void" {
        String::new()
    } else {
        c_type_to_rust(c_type)
    }
}

/// A C function signature: return type and parameter types, in Rust
/// spelling.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Signature {
    ret: String,
    params: Vec<String>,
}

/// Replaces brace-enclosed bodies (struct definitions) in C code by `{}`.
fn without_bodies(code: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in code.chars() {
        match c {
            '{' => {
                if depth == 0 {
                    out.push_str("{}");
                }
                depth += 1;
            }
            '}' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// The functions the header declares.
fn c_functions(header: &str) -> BTreeMap<String, Signature> {
    let code = without_bodies(&c_code(header));
    let mut functions = BTreeMap::new();
    for statement in code.split(';') {
        let statement = statement.trim();
        if statement.is_empty() || statement.starts_with("typedef") {
            continue;
        }
        let open = statement.find('(').unwrap_or_else(|| panic!("not a function: {statement:?}"));
        let close = matching_paren(statement, open);
        let head = statement[..open].trim();
        let name_start = head.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
        let name = &head[name_start..];
        assert!(name.starts_with("itsme_"), "unexpected declaration {statement:?}");
        let ret = c_return_to_rust(&head[..name_start]);
        let params = c_params_to_rust(&statement[open + 1..close]);
        assert!(functions.insert(name.to_owned(), Signature { ret, params }).is_none(), "{name} twice");
    }
    functions
}

/// `typedef T name;` for scalar typedefs.
fn c_typedefs(header: &str) -> BTreeMap<String, String> {
    let code = without_bodies(&c_code(header));
    let mut typedefs = BTreeMap::new();
    for statement in code.split(';') {
        let Some(rest) = statement.trim().strip_prefix("typedef ") else { continue };
        if rest.starts_with("struct ") {
            continue;
        }
        let (ty, name) = rest.rsplit_once(' ').unwrap();
        typedefs.insert(name.to_owned(), c_type_to_rust(ty));
    }
    typedefs
}

/// `typedef struct name name;` opaque types.
fn c_opaque_types(header: &str) -> BTreeSet<String> {
    let code = without_bodies(&c_code(header));
    let mut names = BTreeSet::new();
    for statement in code.split(';') {
        let Some(rest) = statement.trim().strip_prefix("typedef struct ") else { continue };
        let words: Vec<&str> = rest.split_whitespace().collect();
        if words.len() == 2 && words[0] == words[1] {
            names.insert(words[0].to_owned());
        }
    }
    names
}

/// Fields of a callback table `typedef struct name { ... }`: data fields as
/// their type, function pointers as their signature.
fn c_callback_fields(header: &str, name: &str) -> Vec<(String, String)> {
    let code = c_code(header);
    let start = code.find(&format!("typedef struct {name} {{")).unwrap_or_else(|| panic!("struct {name}"));
    let body_start = code[start..].find('{').unwrap() + start + 1;
    let body_end = code[body_start..].find('}').unwrap() + body_start;
    let mut fields = Vec::new();
    for field in code[body_start..body_end].split(';') {
        let field = field.trim();
        if field.is_empty() {
            continue;
        }
        if let Some(pointer) = field.find("(*") {
            let name_end = field[pointer..].find(')').unwrap() + pointer;
            let name = field[pointer + 2..name_end].trim();
            let params_open = field[name_end..].find('(').unwrap() + name_end;
            let params_close = matching_paren(field, params_open);
            let ret = c_return_to_rust(&field[..pointer]);
            let params = c_params_to_rust(&field[params_open + 1..params_close]);
            let mut rust = format!("Option<unsafe extern \"C\" fn({})", params.join(", "));
            if !ret.is_empty() {
                rust.push_str(&format!(" -> {ret}"));
            }
            rust.push('>');
            fields.push((name.to_owned(), rust));
        } else {
            let ty = c_param_type(field);
            let name = field[ty.len()..].trim().to_owned();
            fields.push((name, c_type_to_rust(&ty)));
        }
    }
    fields
}

/// Fields of a plain data struct `typedef struct name { ... } name;` as
/// (name, Rust type); arrays become `[T; N]`.
fn c_struct_fields(header: &str, name: &str) -> Vec<(String, String)> {
    let code = c_code(header);
    let start = code.find(&format!("typedef struct {name} {{")).unwrap_or_else(|| panic!("struct {name}"));
    let body_start = code[start..].find('{').unwrap() + start + 1;
    let body_end = code[body_start..].find('}').unwrap() + body_start;
    let mut fields = Vec::new();
    for field in code[body_start..body_end].split(';') {
        let field = field.trim();
        if field.is_empty() {
            continue;
        }
        let (declarator, array) = match field.find('[') {
            Some(open) => (&field[..open], Some(field[open + 1..field.len() - 1].trim())),
            None => (field, None),
        };
        let ty = c_param_type(declarator);
        let field_name = declarator[ty.len()..].trim().to_owned();
        let rust = c_type_to_rust(&ty);
        fields.push((field_name, array.map_or(rust.clone(), |n| format!("[{rust}; {n}]"))));
    }
    fields
}

// ---------------------------------------------------------------------------
// Rust parsing
// ---------------------------------------------------------------------------

/// sys.rs without `//` comments, whitespace collapsed.
fn rust_code(source: &str) -> String {
    source
        .lines()
        .map(|line| match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        })
        .collect::<Vec<_>>()
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Rust parameter list (`name: Type, ...`) as types, with whitespace
/// normalised.
fn rust_params(params: &str) -> Vec<String> {
    split_params(params)
        .iter()
        .map(|p| {
            let (_, ty) = p.split_once(':').unwrap_or_else(|| panic!("parameter without type: {p:?}"));
            normalise_rust_type(ty)
        })
        .collect()
}

fn normalise_rust_type(ty: &str) -> String {
    ty.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace("( ", "(")
        .replace(" )", ")")
        .replace("< ", "<")
        .replace(" >", ">")
        .replace(",)", ")")
        .replace(",>", ">")
        .trim()
        .to_owned()
}

/// The functions declared in `extern "C"` blocks of sys.rs.
fn rust_functions(source: &str) -> BTreeMap<String, Signature> {
    let code = rust_code(source);
    let mut functions = BTreeMap::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("pub fn ") {
        let decl = &rest[at + "pub fn ".len()..];
        let open = decl.find('(').unwrap();
        let name = decl[..open].trim().to_owned();
        let close = matching_paren(decl, open);
        let params = rust_params(&decl[open + 1..close]);
        let semicolon = decl[close..].find(';').unwrap() + close;
        let tail = decl[close + 1..semicolon].trim();
        let ret = tail.strip_prefix("->").map(normalise_rust_type).unwrap_or_default();
        assert!(functions.insert(name.clone(), Signature { ret, params }).is_none(), "{name} twice");
        rest = &decl[semicolon..];
    }
    functions
}

/// The functions sys.rs marks `#[deprecated]`.
fn rust_deprecated(source: &str) -> BTreeSet<String> {
    let code = rust_code(source);
    let mut names = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("#[deprecated") {
        let declaration = &rest[at..];
        let function = declaration.find("pub fn ").expect("a function after #[deprecated]") + "pub fn ".len();
        let name_end = declaration[function..].find('(').unwrap() + function;
        names.insert(declaration[function..name_end].trim().to_owned());
        rest = &declaration[name_end..];
    }
    names
}

/// `pub const NAME: T = VALUE;` items of sys.rs.
fn rust_consts(source: &str) -> BTreeMap<String, (String, String)> {
    let mut consts = BTreeMap::new();
    for line in source.lines() {
        let Some(rest) = line.trim().strip_prefix("pub const ") else { continue };
        let (name, rest) = rest.split_once(':').unwrap();
        let (ty, value) = rest.split_once('=').unwrap();
        let value = value.trim().trim_end_matches(';').trim();
        consts.insert(name.trim().to_owned(), (ty.trim().to_owned(), value.to_owned()));
    }
    consts
}

/// `pub type NAME = T;` items of sys.rs.
fn rust_type_aliases(source: &str) -> BTreeMap<String, String> {
    let mut aliases = BTreeMap::new();
    for line in source.lines() {
        let Some(rest) = line.trim().strip_prefix("pub type ") else { continue };
        let (name, ty) = rest.split_once('=').unwrap();
        aliases.insert(name.trim().to_owned(), ty.trim().trim_end_matches(';').trim().to_owned());
    }
    aliases
}

/// `#[repr(C)] pub struct NAME { _data: [u8; 0], _marker: PhantomData<...> }`
/// items of sys.rs.
fn rust_opaque_types(source: &str) -> BTreeSet<String> {
    let code = rust_code(source);
    let mut names = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("#[repr(C)] pub struct ") {
        let decl = &rest[at + "#[repr(C)] pub struct ".len()..];
        let name_end = decl.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap();
        let body_end = decl.find('}').unwrap();
        let body = &decl[name_end..body_end];
        if body.contains("_data: [u8; 0]") && body.contains("_marker: PhantomData<") {
            names.insert(decl[..name_end].to_owned());
        }
        rest = &decl[body_end..];
    }
    names
}

/// Fields of a callback table `pub struct name { ... }` in sys.rs.
fn rust_callback_fields(source: &str, name: &str) -> Vec<(String, String)> {
    let code = rust_code(source);
    let start = code.find(&format!("pub struct {name} {{")).unwrap_or_else(|| panic!("struct {name}"));
    let open = code[start..].find('{').unwrap() + start;
    let mut depth = 0;
    let mut close = open;
    for (i, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    close = open + i;
                    break;
                }
            }
            _ => {}
        }
    }
    split_params(&code[open + 1..close])
        .iter()
        .map(|field| {
            let field = field.trim().strip_prefix("pub ").expect("public field");
            let (name, ty) = field.split_once(':').unwrap();
            let ty = normalise_rust_type(ty);
            // Parameter names inside function pointer types are not part of
            // the type.
            let ty = match (ty.find("fn("), ty.rfind(')')) {
                (Some(open), Some(close)) => {
                    let params = rust_params(&ty[open + 3..close]);
                    format!("{}{}{}", &ty[..open + 3], params.join(", "), &ty[close..])
                }
                _ => ty,
            };
            (name.trim().to_owned(), ty)
        })
        .collect()
}

/// Fields of `pub struct NAME { ... }` in sys.rs, a plain data struct.
fn rust_struct_fields(source: &str, name: &str) -> Vec<(String, String)> {
    let code = rust_code(source);
    let start = code.find(&format!("pub struct {name} {{")).unwrap_or_else(|| panic!("struct {name}"));
    let open = code[start..].find('{').unwrap() + start;
    let close = code[open..].find('}').unwrap() + open;
    split_params(&code[open + 1..close])
        .iter()
        .map(|field| {
            let field = field.trim().strip_prefix("pub ").expect("public field");
            let (name, ty) = field.split_once(':').unwrap();
            (name.trim().to_owned(), normalise_rust_type(ty))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
fn functions_agree() {
    let header = c_functions(&header());
    let sys = rust_functions(&sys_source());
    assert!(header.len() >= 27, "parsed only {} functions from the header", header.len());
    let header_names: BTreeSet<_> = header.keys().collect();
    let sys_names: BTreeSet<_> = sys.keys().collect();
    assert_eq!(
        header_names.difference(&sys_names).collect::<Vec<_>>(),
        Vec::<&&String>::new(),
        "declared in itsme.h but not in sys.rs"
    );
    assert_eq!(
        sys_names.difference(&header_names).collect::<Vec<_>>(),
        Vec::<&&String>::new(),
        "declared in sys.rs but not in itsme.h"
    );
    for (name, c) in &header {
        let rust = &sys[name];
        assert_eq!(rust.params.len(), c.params.len(), "{name}: parameter count");
        assert_eq!(rust, c, "{name}: signature");
    }
}

#[test]
fn deprecated_functions_agree() {
    let header = c_deprecated(&header());
    assert!(header.contains("itsme_store_close"), "{header:?}");
    assert_eq!(rust_deprecated(&sys_source()), header, "functions deprecated in itsme.h and in sys.rs");
}

#[test]
fn callback_table_agrees() {
    let header = c_callback_fields(&header(), "itsme_secret_store_callbacks");
    let sys = rust_callback_fields(&sys_source(), "itsme_secret_store_callbacks");
    let names = |fields: &[(String, String)]| fields.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&sys), names(&header), "field order");
    assert_eq!(names(&header), ["ctx", "get", "put", "remove", "destroy"]);
    assert_eq!(sys, header);
}

#[test]
fn replay_callback_table_agrees() {
    use itsme::sys::itsme_replay_store_callbacks;
    use std::mem::{offset_of, size_of};
    let header = c_callback_fields(&header(), "itsme_replay_store_callbacks");
    let sys = rust_callback_fields(&sys_source(), "itsme_replay_store_callbacks");
    let names = |fields: &[(String, String)]| fields.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&header), ["ctx", "insert", "destroy"]);
    assert_eq!(
        header[1].1,
        "Option<unsafe extern \"C\" fn(*mut c_void, *const u8, i64, i64, *mut i32) -> itsme_result>"
    );
    assert_eq!(sys, header);
    // Three pointers, as C lays them out.
    let pointer = size_of::<*const u8>();
    assert_eq!(size_of::<itsme_replay_store_callbacks>(), 3 * pointer);
    assert_eq!(offset_of!(itsme_replay_store_callbacks, insert), pointer);
    assert_eq!(offset_of!(itsme_replay_store_callbacks, destroy), 2 * pointer);
}

#[test]
fn approval_structs_agree() {
    use itsme::sys::{itsme_approval_request_info, itsme_approval_result, itsme_credential_info};
    use std::mem::{align_of, offset_of, size_of};
    let header = header();
    let source = sys_source();
    for name in ["itsme_approval_request_info", "itsme_credential_info", "itsme_approval_result"] {
        let fields = c_struct_fields(&header, name);
        assert!(!fields.is_empty(), "{name}");
        assert_eq!(rust_struct_fields(&source, name), fields, "{name}");
    }
    let request = c_struct_fields(&header, "itsme_approval_request_info");
    let names: Vec<&str> = request.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(names, ["service_id", "service_name", "session_id", "otp", "issued_at", "expires_at", "scopes"]);
    assert_eq!(request[0].1, "[c_char; ITSME_SERVICE_ID_MAX_BYTES + 1]");
    assert_eq!(request[6].1, "[c_char; ITSME_SCOPES_TEXT_SIZE]");

    // The layouts C gives these structs: char arrays packed, the 64-bit
    // fields aligned to 8.
    type Info = itsme_approval_request_info;
    assert_eq!(offset_of!(Info, service_id), 0);
    assert_eq!(offset_of!(Info, service_name), 256);
    assert_eq!(offset_of!(Info, session_id), 256 + 129);
    assert_eq!(offset_of!(Info, otp), 256 + 129 + 129);
    assert_eq!(offset_of!(Info, issued_at), 528, "521 rounded up to 8");
    assert_eq!(offset_of!(Info, expires_at), 536);
    assert_eq!(offset_of!(Info, scopes), 544);
    assert_eq!(size_of::<Info>(), 544 + 2080);
    assert_eq!(align_of::<Info>(), 8);

    type Credential = itsme_credential_info;
    assert_eq!(offset_of!(Credential, credential_id), 0);
    assert_eq!(offset_of!(Credential, public_key), 16);
    assert_eq!(offset_of!(Credential, label), 48);
    assert_eq!(size_of::<Credential>(), 48 + 129);
    assert_eq!(align_of::<Credential>(), 1);

    type Result = itsme_approval_result;
    assert_eq!(offset_of!(Result, decision), 0);
    assert_eq!(offset_of!(Result, credential_id), 4);
    assert_eq!(offset_of!(Result, timestamp), 24, "20 rounded up to 8");
    assert_eq!(offset_of!(Result, granted_scopes), 32);
    assert_eq!(size_of::<Result>(), 32 + 2080);
    assert_eq!(align_of::<Result>(), 8);
}

#[test]
fn voice_derivation_struct_agrees() {
    use itsme::sys::itsme_voice_derivation;
    let header = c_struct_fields(&header(), "itsme_voice_derivation");
    assert_eq!(header.len(), 9, "{header:?}");
    assert_eq!(header[1], ("my_words".to_owned(), "[u8; 5]".to_owned()));
    assert_eq!(rust_struct_fields(&sys_source(), "itsme_voice_derivation"), header);
    // The layout is part of the ABI: no padding.
    assert_eq!(std::mem::size_of::<itsme_voice_derivation>(), 32);
    assert_eq!(std::mem::offset_of!(itsme_voice_derivation, my_words), 4);
    assert_eq!(std::mem::offset_of!(itsme_voice_derivation, their_words), 9);
    assert_eq!(std::mem::offset_of!(itsme_voice_derivation, i_select_first), 14);
    assert_eq!(std::mem::offset_of!(itsme_voice_derivation, my_code), 16);
    assert_eq!(std::mem::offset_of!(itsme_voice_derivation, their_tag), 28);
}

#[test]
fn types_agree() {
    let header = header();
    let source = sys_source();
    let aliases = rust_type_aliases(&source);
    for (name, ty) in c_typedefs(&header) {
        assert_eq!(aliases.get(&name), Some(&ty), "typedef {name}");
    }
    let opaque = c_opaque_types(&header);
    let expected = [
        "itsme_contact",
        "itsme_contact_list",
        "itsme_exchange",
        "itsme_identity",
        "itsme_import",
        "itsme_online_verify",
        "itsme_pin_update",
        "itsme_profile",
        "itsme_random",
        "itsme_replay_store",
        "itsme_secret_store",
        "itsme_store",
        "itsme_transfer",
        "itsme_voice",
    ];
    assert_eq!(opaque, expected.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>());
    assert_eq!(rust_opaque_types(&source), opaque);
}

#[test]
fn result_codes_agree() {
    let macros = c_macros(&header());
    let consts = rust_consts(&sys_source());
    let is_code = |name: &str| name == "ITSME_OK" || name.starts_with("ITSME_E_");
    let header_codes: BTreeMap<&str, i32> =
        macros.iter().filter(|(n, _)| is_code(n)).map(|(n, v)| (n.as_str(), v.parse().unwrap())).collect();
    let sys_codes: BTreeMap<&str, i32> = consts
        .iter()
        .filter(|(n, _)| is_code(n))
        .map(|(n, (ty, v))| {
            assert_eq!(ty, "itsme_result", "{n} type");
            (n.as_str(), v.parse().unwrap())
        })
        .collect();
    assert_eq!(sys_codes, header_codes);
    assert_eq!(header_codes["ITSME_OK"], 0);
    assert_eq!(header_codes["ITSME_E_INTERNAL"], 17);
    let mut values: Vec<i32> = header_codes.values().copied().collect();
    values.sort();
    // Codes are dense from 0: a gap or a duplicate is a mistake.
    assert_eq!(values, (0..header_codes.len() as i32).collect::<Vec<_>>());
    // The safe binding knows every code.
    for (name, code) in header_codes {
        if code != 0 {
            assert!(!matches!(itsme::ErrorKind::from_code(code), itsme::ErrorKind::Other(_)), "{name}");
        }
    }
}

#[test]
fn every_constant_agrees() {
    let macros = c_macros(&header());
    let consts = rust_consts(&sys_source());
    let header_names: BTreeSet<_> = macros.keys().collect();
    let sys_names: BTreeSet<_> = consts.keys().collect();
    assert_eq!(header_names, sys_names, "the #define ITSME_* macros and sys.rs constants differ");
    for (name, value) in &macros {
        let (_, rust_value) = &consts[name];
        if value.starts_with('"') {
            assert_eq!(rust_value, value, "{name}");
        } else {
            assert_eq!(rust_value.parse::<i64>().ok(), value.parse::<i64>().ok(), "{name}");
            assert!(value.parse::<i64>().is_ok(), "{name} = {value}");
        }
    }
    // And the values compiled into the crate are the ones in the text.
    use itsme::sys::*;
    let compiled: [(&str, i64); 72] = [
        ("ITSME_VERSION_MAJOR", ITSME_VERSION_MAJOR.into()),
        ("ITSME_VERSION_MINOR", ITSME_VERSION_MINOR.into()),
        ("ITSME_VERSION_PATCH", ITSME_VERSION_PATCH.into()),
        ("ITSME_VERSION_NUMBER", ITSME_VERSION_NUMBER.into()),
        ("ITSME_PUBLIC_KEY_BYTES", ITSME_PUBLIC_KEY_BYTES as i64),
        ("ITSME_FINGERPRINT_CHARS", ITSME_FINGERPRINT_CHARS as i64),
        ("ITSME_FINGERPRINT_SIZE", ITSME_FINGERPRINT_SIZE as i64),
        ("ITSME_PIN_LENGTH", ITSME_PIN_LENGTH as i64),
        ("ITSME_NAME_MAX_BYTES", ITSME_NAME_MAX_BYTES as i64),
        ("ITSME_ACCESSIBLE_WHEN_UNLOCKED", ITSME_ACCESSIBLE_WHEN_UNLOCKED.into()),
        ("ITSME_E_INTERNAL", ITSME_E_INTERNAL.into()),
        ("ITSME_E_MALFORMED_MESSAGE", ITSME_E_MALFORMED_MESSAGE.into()),
        ("ITSME_E_EXPIRED", ITSME_E_EXPIRED.into()),
        ("ITSME_E_REPLAYED", ITSME_E_REPLAYED.into()),
        ("ITSME_SHORT_CODE_SIZE", ITSME_SHORT_CODE_SIZE as i64),
        ("ITSME_SHORT_CODE_VALUES", ITSME_SHORT_CODE_VALUES.into()),
        ("ITSME_QR_PAYLOAD_MAX", ITSME_QR_PAYLOAD_MAX as i64),
        ("ITSME_BLUETOOTH_FRAME_MAX", ITSME_BLUETOOTH_FRAME_MAX as i64),
        ("ITSME_REMOTE_CODE_SIZE", ITSME_REMOTE_CODE_SIZE as i64),
        ("ITSME_REMOTE_MESSAGE_MAX", ITSME_REMOTE_MESSAGE_MAX as i64),
        ("ITSME_RELAY_ID_SIZE", ITSME_RELAY_ID_SIZE as i64),
        ("ITSME_EXCHANGE_AWAITING_PEER", ITSME_EXCHANGE_AWAITING_PEER.into()),
        ("ITSME_EXCHANGE_FAILED", ITSME_EXCHANGE_FAILED.into()),
        ("ITSME_EXCHANGE_FLAG_UNAUTHENTICATED", ITSME_EXCHANGE_FLAG_UNAUTHENTICATED.into()),
        ("ITSME_EXCHANGE_FLAG_PEER_REJECTED", ITSME_EXCHANGE_FLAG_PEER_REJECTED.into()),
        ("ITSME_EXCHANGE_REALTIME", ITSME_EXCHANGE_REALTIME.into()),
        ("ITSME_VOICE_WAITING", ITSME_VOICE_WAITING.into()),
        ("ITSME_VOICE_SELECTING", ITSME_VOICE_SELECTING.into()),
        ("ITSME_VOICE_COMPARING", ITSME_VOICE_COMPARING.into()),
        ("ITSME_VOICE_FINISHED", ITSME_VOICE_FINISHED.into()),
        ("ITSME_VOICE_FAILED", ITSME_VOICE_FAILED.into()),
        ("ITSME_VOICE_TURN_NONE", ITSME_VOICE_TURN_NONE.into()),
        ("ITSME_VOICE_TURN_MINE", ITSME_VOICE_TURN_MINE.into()),
        ("ITSME_VOICE_TURN_THEIRS", ITSME_VOICE_TURN_THEIRS.into()),
        ("ITSME_VOICE_VERIFIED", ITSME_VOICE_VERIFIED.into()),
        ("ITSME_VOICE_DEVICE_CHANGED", ITSME_VOICE_DEVICE_CHANGED.into()),
        ("ITSME_VOICE_MISMATCH", ITSME_VOICE_MISMATCH.into()),
        ("ITSME_VOICE_VERIFIED_TAG_UNCHECKED", ITSME_VOICE_VERIFIED_TAG_UNCHECKED.into()),
        ("ITSME_VOICE_TAG_UNKNOWN", ITSME_VOICE_TAG_UNKNOWN.into()),
        ("ITSME_VOICE_CODE_SIZE", ITSME_VOICE_CODE_SIZE as i64),
        ("ITSME_VOICE_SESSION_ID_SIZE", ITSME_VOICE_SESSION_ID_SIZE as i64),
        ("ITSME_DEGRADATION_CODE_SIZE", ITSME_DEGRADATION_CODE_SIZE as i64),
        ("ITSME_ONLINE_VERIFY_RUNNING", ITSME_ONLINE_VERIFY_RUNNING.into()),
        ("ITSME_ONLINE_VERIFY_COMPARE_SAS", ITSME_ONLINE_VERIFY_COMPARE_SAS.into()),
        ("ITSME_ONLINE_VERIFY_CONFIRMED", ITSME_ONLINE_VERIFY_CONFIRMED.into()),
        ("ITSME_ONLINE_VERIFY_REJECTED", ITSME_ONLINE_VERIFY_REJECTED.into()),
        ("ITSME_ONLINE_VERIFY_FAILED", ITSME_ONLINE_VERIFY_FAILED.into()),
        ("ITSME_ROOM_NAME_SIZE", ITSME_ROOM_NAME_SIZE as i64),
        ("ITSME_ONLINE_VERIFY_MESSAGE_MAX", ITSME_ONLINE_VERIFY_MESSAGE_MAX as i64),
        ("ITSME_PIN_UPDATE_RUNNING", ITSME_PIN_UPDATE_RUNNING.into()),
        ("ITSME_PIN_UPDATE_DONE", ITSME_PIN_UPDATE_DONE.into()),
        ("ITSME_PIN_UPDATE_FAILED", ITSME_PIN_UPDATE_FAILED.into()),
        ("ITSME_PIN_UPDATE_FRAME_MAX", ITSME_PIN_UPDATE_FRAME_MAX as i64),
        ("ITSME_PROFILE_RECORD_MAX", ITSME_PROFILE_RECORD_MAX as i64),
        ("ITSME_PROFILE_RECORD_OVERHEAD", ITSME_PROFILE_RECORD_OVERHEAD as i64),
        ("ITSME_RECORD_ID_BYTES", ITSME_RECORD_ID_BYTES as i64),
        ("ITSME_PROFILE_REFERENCE_BYTES", ITSME_PROFILE_REFERENCE_BYTES as i64),
        ("ITSME_RECORD_NAME_SIZE", ITSME_RECORD_NAME_SIZE as i64),
        ("ITSME_PHOTO_FILENAME_MAX_BYTES", ITSME_PHOTO_FILENAME_MAX_BYTES as i64),
        ("ITSME_CREDENTIAL_ID_BYTES", ITSME_CREDENTIAL_ID_BYTES as i64),
        ("ITSME_SERVICE_ID_MAX_BYTES", ITSME_SERVICE_ID_MAX_BYTES as i64),
        ("ITSME_SESSION_ID_MAX_BYTES", ITSME_SESSION_ID_MAX_BYTES as i64),
        ("ITSME_OTP_SIZE", ITSME_OTP_SIZE as i64),
        ("ITSME_SCOPES_MAX", ITSME_SCOPES_MAX as i64),
        ("ITSME_SCOPE_MAX_BYTES", ITSME_SCOPE_MAX_BYTES as i64),
        ("ITSME_SCOPES_TEXT_SIZE", ITSME_SCOPES_TEXT_SIZE as i64),
        ("ITSME_ENROLLMENT_MAX", ITSME_ENROLLMENT_MAX as i64),
        ("ITSME_APPROVAL_REQUEST_MAX", ITSME_APPROVAL_REQUEST_MAX as i64),
        ("ITSME_APPROVAL_MAX", ITSME_APPROVAL_MAX as i64),
        ("ITSME_APPROVAL_LIFETIME_MAX", ITSME_APPROVAL_LIFETIME_MAX),
        ("ITSME_APPROVAL_APPROVE", ITSME_APPROVAL_APPROVE.into()),
        ("ITSME_APPROVAL_DENY", ITSME_APPROVAL_DENY.into()),
    ];
    // The derived sizes hold: a scope list of 32 scopes of 64 bytes with
    // its separators and NUL, a reference made of an ID and a 16-byte key.
    assert_eq!(ITSME_SCOPES_TEXT_SIZE, ITSME_SCOPES_MAX * ITSME_SCOPE_MAX_BYTES + ITSME_SCOPES_MAX - 1 + 1);
    assert_eq!(ITSME_PROFILE_REFERENCE_BYTES, ITSME_RECORD_ID_BYTES + 16);
    assert_eq!(ITSME_RECORD_NAME_SIZE, 2 * ITSME_RECORD_ID_BYTES + 1);
    assert_eq!(ITSME_ONLINE_VERIFY_MESSAGE_MAX, 2 + 96 + 16, "a PROOF with a reference");
    for (name, value) in compiled {
        assert_eq!(macros[name].parse::<i64>().unwrap(), value, "{name}");
    }
}

#[test]
fn version_macros_equal_the_runtime_version() {
    let macros = c_macros(&header());
    let number = |name: &str| macros[name].parse::<u32>().unwrap();
    let (major, minor, patch) =
        (number("ITSME_VERSION_MAJOR"), number("ITSME_VERSION_MINOR"), number("ITSME_VERSION_PATCH"));
    let string = macros["ITSME_VERSION_STRING"].trim_matches('"').to_owned();
    assert_eq!(string, format!("{major}.{minor}.{patch}"));
    assert_eq!(number("ITSME_VERSION_NUMBER"), major * 10_000 + minor * 100 + patch);

    assert_eq!(itsme::version(), string);
    assert_eq!(itsme::version_number(), number("ITSME_VERSION_NUMBER"));
    // SAFETY: no arguments.
    unsafe {
        assert_eq!(itsme::sys::itsme_version_number(), number("ITSME_VERSION_NUMBER"));
        let text = std::ffi::CStr::from_ptr(itsme::sys::itsme_version_string());
        assert_eq!(text.to_str().unwrap(), string);
    }
}

#[test]
fn size_functions_equal_the_macros() {
    let macros = c_macros(&header());
    let number = |name: &str| macros[name].parse::<usize>().unwrap();
    // SAFETY: no arguments.
    unsafe {
        assert_eq!(itsme::sys::itsme_public_key_bytes(), number("ITSME_PUBLIC_KEY_BYTES"));
        assert_eq!(itsme::sys::itsme_fingerprint_size(), number("ITSME_FINGERPRINT_SIZE"));
        assert_eq!(itsme::sys::itsme_name_max_bytes(), number("ITSME_NAME_MAX_BYTES"));
    }
    assert_eq!(number("ITSME_FINGERPRINT_SIZE"), number("ITSME_FINGERPRINT_CHARS") + 1);
}

#[test]
fn parsers_see_what_they_should() {
    // Guards against a parser that silently finds nothing.
    let header = c_functions(&header());
    assert_eq!(
        header["itsme_fingerprint_from_public_key"],
        Signature {
            ret: "itsme_result".into(),
            params: vec!["*const u8", "usize", "*mut c_char", "usize", "*mut usize"]
                .into_iter()
                .map(String::from)
                .collect(),
        }
    );
    assert_eq!(header["itsme_version_string"], Signature { ret: "*const c_char".into(), params: vec![] });
    assert_eq!(
        header["itsme_secret_store_free"],
        Signature { ret: String::new(), params: vec!["*mut itsme_secret_store".into()] }
    );
    assert_eq!(header["itsme_identity_load"].params[1], "*mut *mut itsme_identity");
    assert_eq!(
        header["itsme_exchange_status"].params,
        ["*const itsme_exchange", "*mut itsme_exchange_state", "*mut u32"]
    );
    assert_eq!(header["itsme_bluetooth_th1"].params.len(), 12);
    assert_eq!(header["itsme_nato_word"], Signature { ret: "*const c_char".into(), params: vec!["u32".into()] });
    assert_eq!(header["itsme_derive_voice"].params.len(), 14);
    assert_eq!(header["itsme_derive_voice"].params[13], "*mut itsme_voice_derivation");
    assert_eq!(
        header["itsme_voice_status"].params,
        ["*const itsme_voice", "*mut itsme_voice_state", "*mut u32"]
    );
    assert_eq!(
        header["itsme_online_verify_new"].params,
        ["*mut itsme_store", "i64", "i64", "*mut itsme_random", "i64", "*mut *mut itsme_online_verify"]
    );
    assert_eq!(
        header["itsme_online_verify_confirm"].params,
        ["*mut itsme_online_verify", "*mut itsme_store", "i64", "*mut itsme_voice_outcome"]
    );
    assert_eq!(header["itsme_pin_update_status"].params, ["*const itsme_pin_update", "*mut itsme_pin_update_state"]);
    assert_eq!(header["itsme_derive_degradation_code"].params.len(), 9);
    assert_eq!(
        header["itsme_profile_open"].params,
        ["*const u8", "usize", "*const u8", "usize", "*const u8", "usize", "*mut *mut itsme_profile"]
    );
    assert_eq!(header["itsme_profile_create"].params[0], "*const itsme_identity");
    assert_eq!(
        header["itsme_store_apply_profile"].params,
        ["*mut itsme_store", "i64", "*const itsme_profile"]
    );
    assert_eq!(
        header["itsme_online_verify_peer_profile"].params,
        ["*const itsme_online_verify", "*mut u8", "usize", "*mut usize"]
    );
    assert_eq!(header["itsme_approval_verify"].params.len(), 9);
    assert_eq!(header["itsme_approval_verify"].params[6], "*mut itsme_replay_store");
    assert_eq!(header["itsme_approval_verify"].params[8], "*mut itsme_approval_result");
    assert_eq!(header["itsme_approval_sign"].params[3], "itsme_approval_decision");
    assert_eq!(header["itsme_approval_request_create"].params.len(), 10);
    assert_eq!(
        header["itsme_replay_store_new_callbacks"].params,
        ["*const itsme_replay_store_callbacks", "*mut *mut itsme_replay_store"]
    );
    // Attribute macros are not part of a type.
    assert_eq!(
        header["itsme_pin_verify"],
        Signature {
            ret: "itsme_result".into(),
            params: vec!["*mut itsme_identity".into(), "*const c_char".into(), "i64".into()],
        }
    );
    assert_eq!(header["itsme_store_close"], Signature { ret: String::new(), params: vec!["*mut itsme_store".into()] });
    assert_eq!(header["itsme_store_free"], header["itsme_store_close"]);
    let sys = rust_functions(&sys_source());
    assert_eq!(sys["itsme_identity_load"], header["itsme_identity_load"]);
    // `1u` is read as 1, and a comment after a value is not part of it.
    let macros = c_macros(&read("../../include/itsme.h"));
    assert_eq!(macros["ITSME_EXCHANGE_FLAG_PEER_REJECTED"], "8");
    assert_eq!(macros["ITSME_OTP_SIZE"], "7");
}
