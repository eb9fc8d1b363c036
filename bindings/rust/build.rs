//! Links libitsme, and lets the programs Cargo runs load it.
//!
//! The library directory comes from, in order:
//! 1. the `ITSME_LIB_DIR` environment variable, if set;
//! 2. `pkg-config --libs-only-L itsme`, if it succeeds (for a library
//!    installed outside pkg-config's default paths, set `PKG_CONFIG_PATH` to
//!    `<prefix>/lib/pkgconfig`);
//! 3. nothing: the linker's system paths, with a warning.
//!
//! The `libitsme.so*` files of that directory are symlinked into `OUT_DIR`,
//! and `OUT_DIR` is the link search path.  Cargo puts the search paths that
//! lie inside its target directory on the loader path of the programs it
//! runs, so `cargo run` and `cargo test` of this crate and of every crate
//! that depends on it load the library without `LD_LIBRARY_PATH`.  (A
//! `-rpath` link argument would not do: it reaches only this crate's own
//! tests and examples, not a dependent's binaries.)
//!
//! A library whose MAJOR.MINOR is not [`ABI_VERSION`] fails the build.

use std::env;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{self, Command};

include!("src/abi_version.rs");

/// The file name of the library and the prefix of its versioned names.
const LIBRARY: &str = "libitsme.so";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/abi_version.rs");
    for variable in [
        "ITSME_LIB_DIR",
        "PKG_CONFIG",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
        "PKG_CONFIG_SYSROOT_DIR",
    ] {
        println!("cargo:rerun-if-env-changed={variable}");
    }

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("Cargo sets OUT_DIR"));
    // Links from an earlier run may name another directory or version.
    if let Err(e) = remove_links(&out_dir) {
        fail(&format!(
            "cannot clear the old links to libitsme in {}: {e}",
            out_dir.display()
        ));
    }

    match find_library() {
        Found::Dir(dir, source) => {
            let dir = fs::canonicalize(&dir).unwrap_or(dir);
            check_file_versions(&dir, &source);
            link_into(&dir, &out_dir);
            println!("cargo:rustc-link-search=native={}", out_dir.display());
            // For the build scripts of dependents, as DEP_ITSME_LIB_DIR
            // (an application's RPATH, say).
            println!("cargo:lib_dir={}", dir.display());
            // A reinstalled library (another patch or ABI version) runs the
            // checks again.
            println!("cargo:rerun-if-changed={}", dir.join(LIBRARY).display());
        }
        Found::SystemPaths => {}
        Found::Nowhere(why) => println!(
            "cargo:warning={why}: set PKG_CONFIG_PATH to the directory of itsme.pc (<prefix>/lib/pkgconfig \
             after `make install PREFIX=<prefix>`) or ITSME_LIB_DIR to the directory of libitsme.so; \
             trying the linker's system paths"
        ),
    }
    println!("cargo:rustc-link-lib=dylib=itsme");
}

/// Where the library is.
enum Found {
    /// In this directory, named by this setting (for messages).
    Dir(PathBuf, String),
    /// pkg-config knows it and names no directory: a system directory,
    /// which the linker searches anyway.
    SystemPaths,
    /// Not found, for this reason.
    Nowhere(String),
}

fn find_library() -> Found {
    if let Some(dir) = env::var_os("ITSME_LIB_DIR").filter(|dir| !dir.is_empty()) {
        let dir = PathBuf::from(dir);
        let source = format!("ITSME_LIB_DIR={}", dir.display());
        return if dir.join(LIBRARY).exists() {
            Found::Dir(dir, source)
        } else {
            Found::Nowhere(format!("{source} holds no {LIBRARY}"))
        };
    }
    let Some(version) = pkg_config(&["--modversion", "itsme"]) else {
        return Found::Nowhere("libitsme not found (pkg-config does not know itsme)".to_owned());
    };
    check_version(version.trim(), "pkg-config --modversion itsme");
    let flags = pkg_config(&["--libs-only-L", "itsme"]).unwrap_or_default();
    let dirs: Vec<PathBuf> = flags
        .split_whitespace()
        .filter_map(|flag| flag.strip_prefix("-L"))
        .map(PathBuf::from)
        .collect();
    match dirs.iter().find(|dir| dir.join(LIBRARY).exists()) {
        Some(dir) => Found::Dir(dir.clone(), format!("pkg-config (-L{})", dir.display())),
        None if dirs.is_empty() => Found::SystemPaths,
        None => Found::Nowhere(format!(
            "pkg-config names {}, which holds no {LIBRARY}",
            flags.trim()
        )),
    }
}

/// Refuses a library file of another ABI: the versions in the names of the
/// files that are the same file as `libitsme.so` (the loader would refuse
/// another minor too, but only when the program starts).  Warns when the
/// name programs load the library by is missing.
fn check_file_versions(dir: &Path, source: &str) {
    if let Ok(library) = fs::canonicalize(dir.join(LIBRARY)) {
        for name in library_names(dir) {
            let Some(version) = name
                .strip_prefix(LIBRARY)
                .and_then(|rest| rest.strip_prefix('.'))
            else {
                continue;
            };
            if fs::canonicalize(dir.join(&name)).ok().as_ref() == Some(&library) {
                check_version(version, &format!("{source}: {name}"));
            }
        }
    }
    let soname = format!("{LIBRARY}.{}.{}", ABI_VERSION.0, ABI_VERSION.1);
    if !dir.join(&soname).exists() {
        println!(
            "cargo:warning={source}: {} holds no {soname}, the name programs load the library by",
            dir.display()
        );
    }
}

/// Fails the build unless `version` ("0.2", "0.2.0") is of [`ABI_VERSION`];
/// a version without a minor ("0") says nothing and passes.
fn check_version(version: &str, what: &str) {
    let mut parts = version.split('.').map(str::parse::<u32>);
    let (Some(Ok(major)), Some(Ok(minor))) = (parts.next(), parts.next()) else {
        return;
    };
    let (want_major, want_minor) = ABI_VERSION;
    if (major, minor) != ABI_VERSION {
        fail(&format!(
            "{what} is libitsme {version}, but this crate (itsme {}) was written for libitsme \
             {want_major}.{want_minor} (any {want_major}.{want_minor}.x): install libitsme \
             {want_major}.{want_minor}, or use a version of the crate written for {major}.{minor}",
            env::var("CARGO_PKG_VERSION").unwrap_or_default(),
        ));
    }
}

/// Symlinks every `libitsme.so*` of `dir` into `out_dir`.
fn link_into(dir: &Path, out_dir: &Path) {
    for name in library_names(dir) {
        let (original, link) = (dir.join(&name), out_dir.join(&name));
        if let Err(e) = symlink(&original, &link) {
            fail(&format!(
                "cannot link {} to {}: {e}",
                link.display(),
                original.display()
            ));
        }
    }
}

/// Removes the `libitsme.so*` entries an earlier run left in `out_dir`.
fn remove_links(out_dir: &Path) -> io::Result<()> {
    for name in library_names(out_dir) {
        fs::remove_file(out_dir.join(name))?;
    }
    Ok(())
}

/// The names `libitsme.so` and `libitsme.so.*` in `dir`, sorted; links
/// included, even dangling ones.
fn library_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name == LIBRARY || name.starts_with(&format!("{LIBRARY}.")))
        .collect();
    names.sort();
    names
}

/// The output of `pkg-config <args>`, or None if pkg-config is missing or
/// fails (it does not know itsme).
fn pkg_config(args: &[&str]) -> Option<String> {
    let program = env::var_os("PKG_CONFIG")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "pkg-config".into());
    let output = Command::new(program).args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    String::from_utf8(output.stdout).ok()
}

#[cfg(unix)]
fn symlink(original: &Path, link: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(original, link)
}

#[cfg(not(unix))]
fn symlink(original: &Path, link: &Path) -> io::Result<()> {
    fs::copy(original, link).map(|_| ())
}

/// Stops the build with a message Cargo shows.
fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    process::exit(1);
}
