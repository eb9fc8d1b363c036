//! What the binding adds to its raw layer.  `src/sys.rs` is generated from
//! `include/itsme.h` by `scripts/abi generate` (and `scripts/abi check`
//! fails when it is stale); its struct layouts are checked against C's when
//! it compiles.  Left to check here: the library the crate loads is the
//! version the crate was generated for, the safe layer knows every result
//! code the library has, and the functions of a test build
//! (`include/itsme_testing.h`) are reached when the library exports them
//! and refused by name when it does not.

use itsme::{sys, ErrorKind};

#[test]
fn the_loaded_library_is_the_version_of_the_header() {
    let (major, minor, patch) = (sys::ITSME_VERSION_MAJOR, sys::ITSME_VERSION_MINOR, sys::ITSME_VERSION_PATCH);
    assert_eq!(itsme::ABI_VERSION, (major, minor));
    assert_eq!(sys::ITSME_VERSION_STRING, format!("{major}.{minor}.{patch}"));
    assert_eq!(sys::ITSME_VERSION_NUMBER, major * 10_000 + minor * 100 + patch);
    assert_eq!(itsme::version(), sys::ITSME_VERSION_STRING);
    assert_eq!(itsme::version_number(), sys::ITSME_VERSION_NUMBER);
    itsme::init().unwrap();
}

#[test]
fn the_safe_layer_knows_every_result_code() {
    // The codes are the ones the library has a message for.
    let unknown = itsme::result_message(i32::MAX);
    let codes: Vec<i32> = (0..1000).filter(|&code| itsme::result_message(code) != unknown).collect();
    assert_eq!(codes.first(), Some(&sys::ITSME_OK));
    assert!(codes.contains(&sys::ITSME_E_INVALID_ARGUMENT), "{codes:?}");
    for code in codes.into_iter().filter(|&code| code != sys::ITSME_OK) {
        let kind = ErrorKind::from_code(code);
        assert!(!matches!(kind, ErrorKind::Other(_)), "{code} ({}) has no ErrorKind", itsme::result_message(code));
        assert_eq!(kind.code(), code);
    }
    // The binding's own code is none of the library's.
    assert_eq!(ErrorKind::from_code(itsme::INCOMPATIBLE_VERSION_CODE), ErrorKind::IncompatibleVersion);
    assert_eq!(itsme::result_message(itsme::INCOMPATIBLE_VERSION_CODE), unknown);
}

#[test]
fn testing_functions_are_reached_or_refused_by_name() {
    let outcome = itsme::derive_sas(&[1; 32], &[2; 32]);
    if sys::testing_functions_available() {
        assert!(!outcome.expect("a test build's itsme_derive_sas").is_empty());
    } else {
        let error = outcome.expect_err("itsme_derive_sas answered from a release build");
        assert_eq!(error.kind(), itsme::ErrorKind::TestBuildRequired);
        assert_eq!(error.kind().code(), itsme::TEST_BUILD_REQUIRED_CODE);
        let text = error.to_string();
        assert!(text.contains("itsme_derive_sas") && text.contains("test build"), "{text}");
    }
}
