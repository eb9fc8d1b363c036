// The one place that names the ABI this crate was written for.  Included by
// src/lib.rs (the run-time check in `init`) and by build.rs (the build-time
// check of the library it finds).

/// The version of libitsme this crate was written for, as `(MAJOR, MINOR)`.
///
/// While the major version is 0, the minor version names the ABI: the
/// crate works with any `0.2.x` library and refuses another `MAJOR.MINOR`,
/// at build time (its build script checks the library it finds) and at run
/// time ([`init`] returns [`ErrorKind::IncompatibleVersion`]).
pub const ABI_VERSION: (u32, u32) = (0, 2);
