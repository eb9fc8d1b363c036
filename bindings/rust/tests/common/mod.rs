//! Helpers shared by the integration tests.

#![allow(dead_code)]

pub mod encoding;
pub mod json;
pub mod people;
pub mod room;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A fixed "now" for PIN tests (unix seconds).
pub const T0: i64 = 1_800_000_000;

/// A fresh directory under the system temporary directory, removed with
/// everything in it when dropped.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let path = std::env::temp_dir().join(format!(
            "itsme-rust-{label}-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir(&path).expect("create temporary directory");
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A reproducible random source, one per tag.
pub fn rng(tag: u8) -> itsme::DeterministicRandom {
    itsme::DeterministicRandom::new(&[tag; 32]).unwrap()
}

/// An exchange's state.
pub fn state(exchange: &itsme::Exchange) -> itsme::ExchangeState {
    exchange.status().unwrap().0
}

/// Asserts that a result is an error of the given kind.
#[track_caller]
pub fn assert_kind<T: std::fmt::Debug>(result: itsme::Result<T>, kind: itsme::ErrorKind) -> itsme::Error {
    match result {
        Ok(value) => panic!("expected {kind:?}, got Ok({value:?})"),
        Err(error) => {
            assert_eq!(error.kind(), kind, "unexpected error: {error}");
            assert_eq!(error.message, itsme::result_message(error.code));
            error
        }
    }
}
