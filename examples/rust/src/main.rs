//! itsme-example: create or load an identity, print its fingerprint, set and
//! verify a PIN, then show the PIN lockout in a scratch directory.
//!
//!     itsme-example DIR
//!
//! `cargo run -- DIR` needs only PKG_CONFIG_PATH (or ITSME_LIB_DIR) when
//! libitsme is not installed in a system directory: the itsme crate links it
//! where cargo's runs find it (bindings/rust/README.md).

use itsme::{ErrorKind, Identity, SecretStore};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

const PIN: &str = "123456";
const WRONG_PIN: &str = "000000";

/// A failure: what was being done and why it failed.
struct Failure(String);

impl Failure {
    fn new(context: &str, error: impl std::fmt::Display) -> Failure {
        Failure(format!("{context}: {error}"))
    }
}

/// Adds a context to a library error.
trait Context<T> {
    fn context(self, context: &str) -> Result<T, Failure>;
}

impl<T> Context<T> for itsme::Result<T> {
    fn context(self, context: &str) -> Result<T, Failure> {
        self.map_err(|error| Failure::new(context, error))
    }
}

/// The current time in unix seconds.
fn now() -> Result<i64, Failure> {
    let elapsed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| Failure::new("clock", e))?;
    i64::try_from(elapsed.as_secs()).map_err(|e| Failure::new("clock", e))
}

/// Opens DIR's store and loads its identity, or creates one named "Example".
fn open_identity(dir: &Path) -> Result<(SecretStore, Identity), Failure> {
    let store = SecretStore::file(dir).context("open store")?;
    let identity = match Identity::load(&store) {
        Ok(identity) => identity,
        Err(error) if error.kind() == ErrorKind::NotFound => {
            Identity::create(&store, "Example").context("create identity")?
        }
        Err(error) => return Err(Failure::new("load identity", error)),
    };
    Ok((store, identity))
}

/// A fresh directory under the system temporary directory, removed with its
/// contents when dropped.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new() -> Result<ScratchDir, Failure> {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let base = std::env::temp_dir();
        for attempt in 0..100u32 {
            let path = base.join(format!("itsme-example-{}-{nanos}-{attempt}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(ScratchDir(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Failure::new("create scratch directory", e)),
            }
        }
        Err(Failure("create scratch directory: no free name".into()))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Five wrong PINs in a scratch store, then the right one, which must be
/// refused.
fn show_lockout() -> Result<(), Failure> {
    let scratch = ScratchDir::new()?;
    let (_store, identity) = open_identity(&scratch.0)?;
    let now = now()?;
    identity.set_pin(PIN).context("set PIN")?;
    for _ in 0..5 {
        match identity.verify_pin(WRONG_PIN, now) {
            Err(error) if error.kind() == ErrorKind::WrongPin => {}
            Ok(()) => return Err(Failure("wrong PIN not refused: it was accepted".into())),
            Err(error) => return Err(Failure::new("wrong PIN not refused", error)),
        }
    }
    match identity.verify_pin(PIN, now) {
        Err(error) if error.kind() == ErrorKind::Locked => {
            let (_failures, wait) = identity.pin_status(now).context("PIN status")?;
            println!("lockout: {} (wait {wait} s)", error.message);
            Ok(())
        }
        Ok(()) => Err(Failure("expected a lockout: the PIN was accepted".into())),
        Err(error) => Err(Failure::new("expected a lockout", error)),
    }
}

fn run(dir: &Path) -> Result<(), Failure> {
    itsme::init().context("init")?;
    {
        let (_store, identity) = open_identity(dir)?;
        println!("fingerprint: {}", identity.fingerprint().context("fingerprint")?);
        if !identity.pin_is_set().context("PIN")? {
            identity.set_pin(PIN).context("PIN")?;
        }
        identity.verify_pin(PIN, now()?).context("PIN")?;
        println!("pin: verified");
    }
    show_lockout()
}

fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().collect();
    if args.len() != 2 {
        let program = args.first().map(|a| a.to_string_lossy().into_owned());
        eprintln!("usage: {} DIR", program.as_deref().unwrap_or("itsme-example"));
        return ExitCode::from(2);
    }
    match run(Path::new(&args[1])) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(message)) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}
