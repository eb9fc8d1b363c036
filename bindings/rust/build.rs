//! Links libitsme.
//!
//! The library search directory comes from, in order:
//! 1. the `ITSME_LIB_DIR` environment variable, if set;
//! 2. `pkg-config --libs-only-L itsme`, if it succeeds;
//! 3. nothing: the linker's system paths.

use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=ITSME_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_SYSROOT_DIR");

    if let Some(dir) = env::var_os("ITSME_LIB_DIR") {
        let dir = dir.to_string_lossy().into_owned();
        if !dir.is_empty() {
            println!("cargo:rustc-link-search=native={dir}");
        }
    } else if let Some(dirs) = pkg_config_lib_dirs() {
        for dir in dirs {
            println!("cargo:rustc-link-search=native={dir}");
        }
    }
    println!("cargo:rustc-link-lib=dylib=itsme");
}

/// The `-L` directories pkg-config reports for itsme, or None if pkg-config
/// is missing or does not know the package.
fn pkg_config_lib_dirs() -> Option<Vec<String>> {
    let output = Command::new("pkg-config")
        .args(["--libs-only-L", "itsme"])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    Some(
        text.split_whitespace()
            .filter_map(|flag| flag.strip_prefix("-L"))
            .filter(|dir| !dir.is_empty())
            .map(str::to_owned)
            .collect(),
    )
}
