//! Device transfer through the safe Rust API (docs/PROTOCOL.md section 17):
//! a password export moved from one memory secret store to another with
//! its contact store file (after which a contact sees a changed device),
//! the export-password limiter, installing over another identity, the live
//! transfer (round trip with a backup of the contact store, a mismatched
//! SAS, a tampered identity message), the contact store carried inside an
//! export of format version 2 or a live transfer's store messages (written
//! out on the new device, installed, every contact there), and malformed
//! inputs.
//!
//! Each export or import of a password export runs Argon2id over 256 MiB
//! (about a second), so only a few tests make any.

mod common;

use common::encoding::{base64url_decode, base64url_encode};
use common::{assert_kind, rng, state, TempDir, T0};
use itsme::{
    ContactStore, ErrorKind, Exchange, ExchangeMethod, ExchangeState, ExportHeader, Identity, Import, ImportReport,
    OnlineVerify, OtherIdentity, PasswordKind, SecretStore, TransferReceiver, TransferSender, TransferState,
    VerificationState, VoiceOutcome,
};
use std::path::Path;

const PIN: &str = "123456";
/// What Argon2id runs with: libsodium's moderate level.
const MODERATE: (u32, u32) = (3, 256 * 1024);
/// How long a live transfer may take.
const LIFETIME: i64 = 600;

/// An identity drawn from `rng(tag)` in a fresh memory secret store, with
/// PIN 123456.
fn person(name: &str, tag: u8) -> (SecretStore, Identity) {
    let secrets = SecretStore::memory().unwrap();
    let identity = Identity::create_with_random(&secrets, name, Some(&mut rng(tag))).unwrap();
    identity.set_pin(PIN).unwrap();
    (secrets, identity)
}

/// A whole QR exchange, both confirming: each stores the other verified,
/// with device secrets.  Returns the id under which `a` stored `b`.
fn befriend(a: (&Identity, &ContactStore), b: (&Identity, &ContactStore), tag: u8) -> i64 {
    let mut xa = Exchange::qr(a.0, a.1, T0, Some(&mut rng(tag))).unwrap();
    let mut xb = Exchange::qr(b.0, b.1, T0, Some(&mut rng(tag + 1))).unwrap();
    let (from_a, from_b) = (xa.next_outgoing().unwrap(), xb.next_outgoing().unwrap());
    xa.receive(&from_b, T0).unwrap();
    xb.receive(&from_a, T0).unwrap();
    assert_eq!((state(&xa), state(&xb)), (ExchangeState::CompareSas, ExchangeState::CompareSas));
    xb.confirm(T0).unwrap();
    xa.confirm(T0).unwrap()
}

/// Moves `identity` by a whole live transfer at T0 and returns the import,
/// as the new device receives it.
fn live_import(identity: &Identity, tag: u8) -> Import {
    let mut receiver = TransferReceiver::new(T0, Some(&mut rng(tag))).unwrap();
    let mut sender = TransferSender::new(identity, PIN, &receiver.offer().unwrap(), T0, Some(&mut rng(tag + 1))).unwrap();
    receiver.receive(&sender.next_outgoing().unwrap(), T0).unwrap();
    assert_eq!(receiver.sas().unwrap(), sender.sas().unwrap());
    sender.confirm(T0).unwrap();
    receiver.confirm(T0).unwrap();
    receiver.receive(&sender.next_outgoing().unwrap(), T0).unwrap();
    receiver.take_import().unwrap()
}

/// The names of the contacts `identity` reads in the store at `path`.
fn contact_names(identity: &Identity, path: &Path) -> Vec<String> {
    let store = ContactStore::open(identity, path).unwrap();
    let mut names: Vec<String> = store.iter(10).map(|contact| contact.unwrap().name).collect();
    names.sort();
    names
}

/// A report with no other identity.
fn report(store_exists: bool, readable: u64, unreadable: u64, device_secrets: u64) -> ImportReport {
    ImportReport {
        wrong_identity: unreadable > 0,
        other_identity: None,
        store_exists,
        contacts_readable: readable,
        contacts_unreadable: unreadable,
        device_secrets,
    }
}

// ---------------------------------------------------------------------------
// The password export
// ---------------------------------------------------------------------------

#[test]
fn a_password_export_moves_the_identity_and_its_contact_store() {
    let (old_dir, new_dir) = (TempDir::new("transfer-old"), TempDir::new("transfer-new"));
    let (old_path, new_path) = (old_dir.path().join("contacts.db"), new_dir.path().join("contacts.db"));
    let (_old_secrets, alice) = person("Alice", 1);
    let (_bob_secrets, bob) = person("Bob", 2);
    {
        let at_alice = ContactStore::open(&alice, &old_path).unwrap();
        let at_bob = ContactStore::open(&bob, old_dir.path().join("bob.db")).unwrap();
        befriend((&alice, &at_alice), (&bob, &at_bob), 3);
        at_alice.add("Carol", &[0x42; 32], &[7; 32], ExchangeMethod::Qr, T0).unwrap();
    }
    // Every handle is closed, so the copy holds everything.
    std::fs::copy(&old_path, &new_path).unwrap();

    let password = itsme::generate_export_password(Some(&mut rng(4))).unwrap();
    let blob = alice.export(PIN, T0, password.as_str(), PasswordKind::Generated, None).unwrap();
    assert_eq!(alice.pin_status(T0).unwrap(), (0, 0));
    // The header, then the sealed seed, contacts key, name and fingerprint.
    let contents = 32 + 32 + 2 + "Alice".len() + 16;
    assert_eq!(blob.len(), HEADER_BYTES + contents + TAG_BYTES);
    assert_eq!(blob.len(), 144 + "Alice".len());
    assert_eq!(
        itsme::export_header(&blob).unwrap(),
        ExportHeader { passes: MODERATE.0, memory_kib: MODERATE.1, password_kind: PasswordKind::Generated }
    );
    let text = itsme::export_to_text(&blob).unwrap();
    assert_eq!(text, format!("ITSMEXP1:{}", base64url_encode(&blob)));
    assert!(text.len() <= itsme::EXPORT_TEXT_MAX);

    // The new device: the text scanned (with white space around it), the
    // password typed in lower case with spaces.
    let secrets = SecretStore::memory().unwrap();
    let scanned = itsme::export_from_text(&format!("  {text}\n")).unwrap();
    assert_eq!(scanned, blob);
    let typed = password.as_str().to_lowercase().replace('-', " ");
    let import = Import::open(&secrets, &scanned, &typed, T0 + 60).unwrap();
    assert_eq!(import.fingerprint().unwrap(), alice.fingerprint().unwrap());
    assert_eq!(import.name().unwrap(), "Alice");
    assert_eq!(secrets.import_status(T0 + 60).unwrap(), (0, 0));

    // Bob (with device secrets) and Carol (without) are readable.
    assert_eq!(import.check(&secrets, Some(&new_path)).unwrap(), report(true, 2, 0, 1));
    assert_eq!(import.check(&secrets, None).unwrap(), report(false, 0, 0, 0));
    let installed = import.install(&secrets, Some(&new_path), false).unwrap();
    assert_eq!(installed.public_key().unwrap(), alice.public_key().unwrap());
    assert_eq!(installed.name().unwrap(), "Alice");
    assert!(!installed.pin_is_set().unwrap(), "the new device had no PIN");
    let loaded = Identity::load(&secrets).unwrap();
    assert_eq!(loaded.public_key().unwrap(), alice.public_key().unwrap());

    assert_eq!(contact_names(&loaded, &new_path), ["Bob", "Carol"]);
    let contacts = ContactStore::open(&installed, &new_path).unwrap();
    let bob_there = contacts.get_by_key(&bob.public_key().unwrap()).unwrap();
    assert_eq!((bob_there.name.as_str(), bob_there.state), ("Bob", VerificationState::Verified));
    // The device secrets stayed behind; installing again changes nothing.
    assert_eq!(import.check(&secrets, Some(&new_path)).unwrap(), report(true, 2, 0, 0));
    import.install(&secrets, Some(&new_path), false).unwrap();
    assert_eq!(contact_names(&loaded, &new_path), ["Bob", "Carol"]);

    // So Bob sees a changed device at the next verification.
    let at_bob = ContactStore::open(&bob, old_dir.path().join("bob.db")).unwrap();
    let alice_there = at_bob.get_by_key(&alice.public_key().unwrap()).unwrap();
    let now = T0 + 3600;
    let mut a = OnlineVerify::new(&contacts, bob_there.id, None, None, now, None).unwrap();
    let mut b = OnlineVerify::new(&at_bob, alice_there.id, None, None, now, None).unwrap();
    loop {
        let (from_a, from_b) = (a.next_outgoing().unwrap(), b.next_outgoing().unwrap());
        if from_a.is_empty() && from_b.is_empty() {
            break;
        }
        if !from_a.is_empty() {
            b.receive(&from_a, now).unwrap();
        }
        if !from_b.is_empty() {
            a.receive(&from_b, now).unwrap();
        }
    }
    assert_eq!(a.sas().unwrap(), b.sas().unwrap());
    assert_eq!(b.confirm(now).unwrap(), VoiceOutcome::DeviceChanged);
    assert_eq!(a.confirm(now).unwrap(), VoiceOutcome::VerifiedTagUnchecked, "no device secret here");
    assert_eq!(at_bob.get(alice_there.id).unwrap().state, VerificationState::Degraded);
}

#[test]
fn wrong_passwords_are_counted_and_lock_after_five() {
    // The longest name makes the largest export.
    let name = format!("{}é", "Alice ".repeat(21));
    assert_eq!(name.len(), itsme::NAME_MAX_BYTES);
    let (_old_secrets, alice) = person(&name, 5);
    let password = itsme::generate_export_password(Some(&mut rng(6))).unwrap();
    let wrong = itsme::generate_export_password(Some(&mut rng(7))).unwrap();
    assert_ne!(password.as_str(), wrong.as_str());
    let blob = alice.export(PIN, T0, password.as_str(), PasswordKind::Generated, None).unwrap();
    assert_eq!(blob.len(), itsme::EXPORT_MAX);
    assert_eq!(itsme::export_to_text(&blob).unwrap().len(), itsme::EXPORT_TEXT_MAX);

    let secrets = SecretStore::memory().unwrap();
    assert_eq!(secrets.import_status(T0).unwrap(), (0, 0));
    for failures in 1..=5u32 {
        let error = assert_kind(Import::open(&secrets, &blob, wrong.as_str(), T0), ErrorKind::AuthenticationFailed);
        assert!(!error.detail.is_empty());
        let wait = if failures == 5 { 300 } else { 0 };
        assert_eq!(secrets.import_status(T0).unwrap(), (failures, wait), "after {failures} wrong passwords");
    }
    // Locked: even the right password is neither checked nor counted.
    assert_kind(Import::open(&secrets, &blob, password.as_str(), T0 + 100), ErrorKind::Locked);
    assert_eq!(secrets.import_status(T0 + 100).unwrap(), (5, 200));
    // The limiter is the new device's: another store is not locked, and
    // the old device's PIN was not touched.
    assert_eq!(SecretStore::memory().unwrap().import_status(T0).unwrap(), (0, 0));
    assert_eq!(alice.pin_status(T0).unwrap(), (0, 0));
    // After the wait the right password opens it and clears the count.
    let import = Import::open(&secrets, &blob, password.as_str(), T0 + 300).unwrap();
    assert_eq!((import.fingerprint().unwrap(), import.name().unwrap()), (alice.fingerprint().unwrap(), name));
    assert_eq!(secrets.import_status(T0 + 300).unwrap(), (0, 0));
}

// ---------------------------------------------------------------------------
// Installing
// ---------------------------------------------------------------------------

#[test]
fn installing_over_another_identity_needs_replace() {
    let dir = TempDir::new("transfer-install");
    let path = dir.path().join("contacts.db");
    let (_old_secrets, alice) = person("Alice", 10);
    let import = live_import(&alice, 11);

    // The device holds Dave, with PIN 654321 and two contacts of his.
    let target = SecretStore::memory().unwrap();
    let dave = Identity::create_with_random(&target, "Dave", Some(&mut rng(13))).unwrap();
    dave.set_pin("654321").unwrap();
    {
        let at_dave = ContactStore::open(&dave, &path).unwrap();
        at_dave.add("Erin", &[0x51; 32], &[1; 32], ExchangeMethod::Qr, T0).unwrap();
        at_dave.add("Frank", &[0x52; 32], &[2; 32], ExchangeMethod::Bluetooth, T0).unwrap();
    }
    let daves = Some(OtherIdentity::Fingerprint(dave.fingerprint().unwrap()));
    let found = import.check(&target, Some(&path)).unwrap();
    assert_eq!(
        found,
        ImportReport {
            wrong_identity: true,
            other_identity: daves.clone(),
            store_exists: true,
            contacts_readable: 0,
            contacts_unreadable: 2,
            device_secrets: 0,
        }
    );
    // Another identity alone, or unreadable contacts alone, are each a
    // wrong identity.
    let without_store = import.check(&target, None).unwrap();
    assert_eq!(
        (without_store.wrong_identity, without_store.other_identity, without_store.store_exists),
        (true, daves.clone(), false)
    );
    let empty = SecretStore::memory().unwrap();
    assert_eq!(import.check(&empty, Some(&path)).unwrap(), report(true, 0, 2, 0));

    // Without replace nothing changes.
    let error = assert_kind(import.install(&target, Some(&path), false), ErrorKind::WrongIdentity);
    assert!(!error.detail.is_empty());
    assert_kind(import.install(&empty, Some(&path), false), ErrorKind::WrongIdentity);
    assert_kind(Identity::load(&empty), ErrorKind::NotFound);
    assert_eq!(Identity::load(&target).unwrap().public_key().unwrap(), dave.public_key().unwrap());
    assert_eq!(contact_names(&dave, &path), ["Erin", "Frank"]);
    assert_eq!(import.check(&target, Some(&path)).unwrap(), found);

    // With replace: Alice's identity, Dave's PIN, none of Dave's contacts.
    let installed = import.install(&target, Some(&path), true).unwrap();
    assert_eq!(installed.public_key().unwrap(), alice.public_key().unwrap());
    let loaded = Identity::load(&target).unwrap();
    assert_eq!(loaded.public_key().unwrap(), alice.public_key().unwrap());
    assert!(loaded.pin_is_set().unwrap(), "the PIN set on the device stays");
    loaded.verify_pin("654321", T0).unwrap();
    assert_eq!(contact_names(&loaded, &path), Vec::<String>::new());
    assert_eq!(import.check(&target, Some(&path)).unwrap(), report(true, 0, 0, 0));
    // The store is Alice's now.
    assert_kind(ContactStore::open(&dave, &path), ErrorKind::WrongIdentity);
    ContactStore::open(&installed, &path).unwrap().add("Grace", &[0x53; 32], &[3; 32], ExchangeMethod::Qr, T0).unwrap();
    assert_eq!(contact_names(&loaded, &path), ["Grace"]);
}

// ---------------------------------------------------------------------------
// The live transfer
// ---------------------------------------------------------------------------

#[test]
fn a_live_transfer_moves_the_identity() {
    let (old_dir, new_dir) = (TempDir::new("transfer-live-old"), TempDir::new("transfer-live-new"));
    let new_path = new_dir.path().join("contacts.db");
    let (_old_secrets, alice) = person("Alice", 20);
    // The contact store goes along as a backup made while it is open.
    let at_alice = ContactStore::open(&alice, old_dir.path().join("contacts.db")).unwrap();
    at_alice.add("Bob", &[0x42; 32], &[7; 32], ExchangeMethod::Qr, T0).unwrap();
    at_alice.backup(&new_path).unwrap();
    assert_kind(at_alice.backup(&new_path), ErrorKind::AlreadyExists);

    let mut receiver = TransferReceiver::new(T0, Some(&mut rng(21))).unwrap();
    assert_eq!(receiver.state().unwrap(), TransferState::AwaitingPeer);
    let offer = receiver.offer().unwrap();
    assert!(offer.starts_with("ITSMETR2:") && offer.len() == 75, "{offer:?}");
    let room = receiver.room().unwrap();
    assert!(room.len() == 32 && room.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')), "{room:?}");
    assert_kind(receiver.sas(), ErrorKind::InvalidState);

    let mut sender = TransferSender::new(&alice, PIN, &offer, T0 + 10, Some(&mut rng(22))).unwrap();
    assert_eq!(sender.state().unwrap(), TransferState::CompareSas);
    assert_eq!((sender.offer().unwrap(), sender.room().unwrap()), (offer.clone(), room.clone()));
    let key = sender.next_outgoing().unwrap();
    assert_eq!((key.len(), &key[..2]), (34, &[2u8, 1][..]));
    assert!(sender.next_outgoing().unwrap().is_empty());

    receiver.receive(&key, T0 + 20).unwrap();
    assert_eq!(receiver.state().unwrap(), TransferState::CompareSas);
    let sas = receiver.sas().unwrap();
    assert_eq!(sender.sas().unwrap(), sas);
    itsme::short_code_parse(&sas).unwrap();

    sender.confirm(T0 + 30).unwrap();
    assert_eq!(sender.state().unwrap(), TransferState::Done);
    let identity = sender.next_outgoing().unwrap();
    // Version and type, then the sealed contents (seed, contacts key, name,
    // fingerprint) and u32(len(store)), 0 here, and the tag.
    assert_eq!(identity.len(), 2 + 32 + 32 + 2 + "Alice".len() + 16 + 4 + 16);
    assert_eq!(&identity[..2], [2, 2]);
    assert!(identity.len() <= itsme::TRANSFER_MESSAGE_MAX);
    assert!(sender.next_outgoing().unwrap().is_empty());
    assert_kind(sender.confirm(T0 + 30), ErrorKind::InvalidState);
    assert_kind(sender.reject(), ErrorKind::InvalidState);

    // The identity arrives before the person confirmed on the new device:
    // it is held unopened.
    receiver.receive(&identity, T0 + 31).unwrap();
    assert_eq!(receiver.state().unwrap(), TransferState::CompareSas);
    assert_kind(receiver.take_import(), ErrorKind::InvalidState);
    receiver.confirm(T0 + 40).unwrap();
    assert_eq!(receiver.state().unwrap(), TransferState::Done);
    let import = receiver.take_import().unwrap();
    assert_kind(receiver.take_import(), ErrorKind::InvalidState);
    assert_kind(receiver.receive(&identity, T0 + 41), ErrorKind::InvalidState);
    assert_kind(receiver.reject(), ErrorKind::InvalidState);
    assert_eq!((import.fingerprint().unwrap(), import.name().unwrap()), (alice.fingerprint().unwrap(), "Alice".into()));
    assert_eq!(import.contacts_size().unwrap(), 0, "no store was included");

    let secrets = SecretStore::memory().unwrap();
    assert_eq!(import.check(&secrets, Some(&new_path)).unwrap(), report(true, 1, 0, 0));
    let installed = import.install(&secrets, Some(&new_path), false).unwrap();
    assert_eq!(installed.public_key().unwrap(), alice.public_key().unwrap());
    assert_eq!(Identity::load(&secrets).unwrap().fingerprint().unwrap(), alice.fingerprint().unwrap());
    assert_eq!(contact_names(&installed, &new_path), ["Bob"]);
    // The same identity is no wrong identity.
    assert_eq!(import.check(&secrets, Some(&new_path)).unwrap(), report(true, 1, 0, 0));

    // The other order: the new device confirms first and waits.
    let mut receiver = TransferReceiver::new(T0, Some(&mut rng(23))).unwrap();
    let mut sender = TransferSender::new(&alice, PIN, &receiver.offer().unwrap(), T0, Some(&mut rng(24))).unwrap();
    assert_ne!(receiver.room().unwrap(), room, "each transfer has its own room");
    receiver.receive(&sender.next_outgoing().unwrap(), T0).unwrap();
    receiver.confirm(T0 + 5).unwrap();
    assert_eq!(receiver.state().unwrap(), TransferState::AwaitingIdentity);
    assert_kind(receiver.confirm(T0 + 5), ErrorKind::InvalidState);
    sender.confirm(T0 + 6).unwrap();
    receiver.receive(&sender.next_outgoing().unwrap(), T0 + 7).unwrap();
    assert_eq!(receiver.state().unwrap(), TransferState::Done);
    assert_eq!(receiver.take_import().unwrap().fingerprint().unwrap(), alice.fingerprint().unwrap());
}

#[test]
fn a_mismatched_sas_is_rejected_and_nothing_is_sent() {
    let (_alice_secrets, alice) = person("Alice", 30);
    let (_mallory_secrets, mallory) = person("Mallory", 31);
    let mut receiver = TransferReceiver::new(T0, Some(&mut rng(32))).unwrap();
    let offer = receiver.offer().unwrap();
    let mut sender = TransferSender::new(&alice, PIN, &offer, T0, Some(&mut rng(33))).unwrap();
    // Someone else in the room answers the same offer first.
    let mut intruder = TransferSender::new(&mallory, PIN, &offer, T0, Some(&mut rng(34))).unwrap();
    let _sent = sender.next_outgoing().unwrap();
    receiver.receive(&intruder.next_outgoing().unwrap(), T0 + 1).unwrap();
    assert_eq!(receiver.sas().unwrap(), intruder.sas().unwrap());
    assert_ne!(receiver.sas().unwrap(), sender.sas().unwrap());

    // Alice sees two different codes and rejects on the old device.
    sender.reject().unwrap();
    assert_eq!(sender.state().unwrap(), TransferState::Rejected);
    assert!(sender.next_outgoing().unwrap().is_empty(), "a rejected transfer sends nothing");
    assert_kind(sender.confirm(T0 + 2), ErrorKind::InvalidState);
    assert_kind(sender.reject(), ErrorKind::InvalidState);
    assert!(sender.next_outgoing().unwrap().is_empty());

    // The intruder's identity arrives but stays unopened; the new device
    // rejects too.
    intruder.confirm(T0 + 2).unwrap();
    receiver.receive(&intruder.next_outgoing().unwrap(), T0 + 3).unwrap();
    assert_eq!(receiver.state().unwrap(), TransferState::CompareSas);
    receiver.reject().unwrap();
    assert_eq!(receiver.state().unwrap(), TransferState::Rejected);
    assert_kind(receiver.take_import(), ErrorKind::InvalidState);
    assert_kind(receiver.confirm(T0 + 4), ErrorKind::InvalidState);
}

#[test]
fn a_tampered_identity_message_fails() {
    let (_old_secrets, alice) = person("Alice", 40);
    for (n, confirm_first) in [(0u8, true), (1, false)] {
        let mut receiver = TransferReceiver::new(T0, Some(&mut rng(41 + 2 * n))).unwrap();
        let mut sender = TransferSender::new(&alice, PIN, &receiver.offer().unwrap(), T0, Some(&mut rng(42 + 2 * n))).unwrap();
        receiver.receive(&sender.next_outgoing().unwrap(), T0).unwrap();
        sender.confirm(T0).unwrap();
        let identity = sender.next_outgoing().unwrap();
        let mut tampered = identity.clone();
        tampered[40] ^= 1;
        let error = if confirm_first {
            receiver.confirm(T0).unwrap();
            assert_kind(receiver.receive(&tampered, T0), ErrorKind::AuthenticationFailed)
        } else {
            // Held unopened until the person confirms.
            receiver.receive(&tampered, T0).unwrap();
            assert_kind(receiver.confirm(T0), ErrorKind::AuthenticationFailed)
        };
        assert!(!error.detail.is_empty());
        assert_eq!(receiver.state().unwrap(), TransferState::Failed, "confirm first: {confirm_first}");
        // A failure is final.
        assert_kind(receiver.receive(&identity, T0), ErrorKind::InvalidState);
        assert_kind(receiver.take_import(), ErrorKind::InvalidState);
        assert_kind(receiver.sas(), ErrorKind::InvalidState);
    }
}

// ---------------------------------------------------------------------------
// The contact store inside: exports of format version 2, store messages
// ---------------------------------------------------------------------------

/// Section 17.3: the contact store travels in chunks of 32 KiB.
const CHUNK: usize = 32_768;

/// A photo large enough that a store holding it takes several chunks.
fn photo() -> Vec<u8> {
    (0..100_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
}

/// A contact store at `path` for `identity`: Bob, verified by a real QR
/// exchange (so with device secrets), and Carol with the photo.
fn contacts_with_a_photo(identity: &Identity, path: &Path, dir: &TempDir, tag: u8) -> ContactStore {
    let contacts = ContactStore::open(identity, path).unwrap();
    let (_bob_secrets, bob) = person("Bob", tag);
    let at_bob = ContactStore::open(&bob, dir.path().join(format!("bob-{tag}.db"))).unwrap();
    befriend((identity, &contacts), (&bob, &at_bob), tag + 1);
    let carol = contacts.add("Carol", &[0x43; 32], &[7; 32], ExchangeMethod::Qr, T0).unwrap();
    contacts.set_photo(carol, &photo(), "carol.jpg").unwrap();
    contacts
}

/// Carol's photo in the store at `path`, as `identity` reads it.
fn carols_photo(identity: &Identity, path: &Path) -> (Vec<u8>, String) {
    let contacts = ContactStore::open(identity, path).unwrap();
    let carol = contacts.iter(10).map(Result::unwrap).find(|contact| contact.name == "Carol").unwrap();
    contacts.photo(carol.id).unwrap()
}

/// Every message the sender has queued, in order.
fn pump(sender: &mut TransferSender) -> Vec<Vec<u8>> {
    let mut messages = Vec::new();
    loop {
        let message = sender.next_outgoing().unwrap();
        if message.is_empty() {
            return messages;
        }
        assert!(message.len() <= itsme::TRANSFER_MESSAGE_MAX);
        messages.push(message);
    }
}

/// A sender and a receiver of `identity` at T0, the key delivered: both
/// compare the SAS.
fn started(identity: &Identity, tag: u8) -> (TransferReceiver, TransferSender) {
    let mut receiver = TransferReceiver::new(T0, Some(&mut rng(tag))).unwrap();
    let mut sender = TransferSender::new(identity, PIN, &receiver.offer().unwrap(), T0, Some(&mut rng(tag + 1))).unwrap();
    receiver.receive(&sender.next_outgoing().unwrap(), T0).unwrap();
    (receiver, sender)
}

#[test]
fn an_export_with_contacts_carries_the_contact_store() {
    let (old_dir, new_dir) = (TempDir::new("transfer-v2-old"), TempDir::new("transfer-v2-new"));
    let new_path = new_dir.path().join("contacts.db");
    let (_old_secrets, alice) = person("Alice", 100);
    // The store stays open (in use) while the export copies it.
    let contacts = contacts_with_a_photo(&alice, &old_dir.path().join("contacts.db"), &old_dir, 101);
    let password = itsme::generate_export_password(None).unwrap();
    let blob = alice
        .export_with_contacts(PIN, T0, password.as_str(), PasswordKind::Generated, &contacts, None)
        .unwrap();
    assert_eq!(alice.pin_status(T0).unwrap(), (0, 0), "one attempt, the right PIN");
    assert_eq!(&blob[..9], b"ITSMEXP\x02\x01", "format version 2");
    assert_eq!(
        itsme::export_header(&blob).unwrap(),
        ExportHeader { passes: MODERATE.0, memory_kib: MODERATE.1, password_kind: PasswordKind::Generated }
    );
    assert_kind(itsme::export_to_text(&blob), ErrorKind::InvalidArgument);
    let store_size = blob.len() - 144 - "Alice".len();
    assert!(store_size > photo().len() && (store_size as u64) <= itsme::EXPORT_CONTACTS_MAX);

    let secrets = SecretStore::memory().unwrap();
    let import = Import::open(&secrets, &blob, password.as_str(), T0 + 60).unwrap();
    assert_eq!(import.fingerprint().unwrap(), alice.fingerprint().unwrap());
    assert_eq!(import.contacts_size().unwrap(), store_size as u64);
    assert_eq!(import.check(&secrets, Some(&new_path)).unwrap(), report(false, 0, 0, 0), "not written yet");
    import.write_contacts(&new_path).unwrap();
    let written = std::fs::read(&new_path).unwrap();
    assert_eq!(written.len(), store_size);
    assert!(written.starts_with(b"SQLite format 3\0"));
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&new_path).unwrap().permissions().mode() & 0o777, 0o600);
    }
    assert_kind(import.write_contacts(&new_path), ErrorKind::AlreadyExists);
    assert_eq!(std::fs::read(&new_path).unwrap(), written, "nothing is overwritten");
    // Bob (with device secrets) and Carol: all there.
    assert_eq!(import.check(&secrets, Some(&new_path)).unwrap(), report(true, 2, 0, 1));
    let installed = import.install(&secrets, Some(&new_path), false).unwrap();
    assert_eq!(installed.public_key().unwrap(), alice.public_key().unwrap());
    assert_eq!(contact_names(&installed, &new_path), ["Bob", "Carol"]);
    assert_eq!(carols_photo(&installed, &new_path), (photo(), "carol.jpg".to_owned()));
    // The device secrets stayed behind.
    assert_eq!(import.check(&secrets, Some(&new_path)).unwrap(), report(true, 2, 0, 0));
}

#[test]
fn an_export_with_contacts_checks_before_the_pin() {
    let dir = TempDir::new("transfer-v2-export-errors");
    let (_alice_secrets, alice) = person("Alice", 110);
    let (_mallory_secrets, mallory) = person("Mallory", 111);
    let mine = ContactStore::open(&alice, dir.path().join("alice.db")).unwrap();
    let theirs = ContactStore::open(&mallory, dir.path().join("mallory.db")).unwrap();
    let password = itsme::generate_export_password(None).unwrap();
    let generated = PasswordKind::Generated;
    let error = assert_kind(
        alice.export_with_contacts(PIN, T0, password.as_str(), generated, &theirs, None),
        ErrorKind::WrongIdentity,
    );
    assert!(!error.detail.is_empty());
    for (bad, kind) in [("ABCD-EFGH-JKMN0", generated), ("short", PasswordKind::Chosen)] {
        assert_kind(alice.export_with_contacts("000000", T0, bad, kind, &mine, None), ErrorKind::InvalidArgument);
    }
    assert_kind(alice.export_with_contacts(PIN, -1, password.as_str(), generated, &mine, None), ErrorKind::InvalidArgument);
    assert_eq!(alice.pin_status(T0).unwrap(), (0, 0), "no attempt was spent");
    // The size is asked for first, before the PIN: only the call that
    // exports checks it, so a wrong PIN costs one attempt.
    assert_kind(alice.export_with_contacts("000000", T0, password.as_str(), generated, &mine, None), ErrorKind::WrongPin);
    assert_eq!(alice.pin_status(T0).unwrap(), (1, 0));
    assert_kind(alice.export_with_contacts("12", T0, password.as_str(), generated, &mine, None), ErrorKind::InvalidPin);
    assert_eq!(alice.pin_status(T0).unwrap(), (1, 0));
    // No PIN, no export.
    let bare = SecretStore::memory().unwrap();
    let without_pin = Identity::create(&bare, "Bob").unwrap();
    let bobs = ContactStore::open(&without_pin, dir.path().join("bob.db")).unwrap();
    assert_kind(without_pin.export_with_contacts(PIN, T0, password.as_str(), generated, &bobs, None), ErrorKind::NotFound);
}

#[test]
fn a_live_transfer_carries_the_contact_store() {
    let (old_dir, new_dir) = (TempDir::new("transfer-v2-live-old"), TempDir::new("transfer-v2-live-new"));
    let new_path = new_dir.path().join("contacts.db");
    let (_old_secrets, alice) = person("Alice", 120);
    let contacts = contacts_with_a_photo(&alice, &old_dir.path().join("contacts.db"), &old_dir, 121);
    let (mut receiver, mut sender) = started(&alice, 123);
    assert_eq!(receiver.sas().unwrap(), sender.sas().unwrap());
    sender.include_contacts(&contacts).unwrap();
    assert_eq!(sender.state().unwrap(), TransferState::CompareSas);
    // The copy is made now: a contact added afterwards does not travel.
    contacts.add("Late", &[0x4c; 32], &[8; 32], ExchangeMethod::Qr, T0).unwrap();
    sender.confirm(T0).unwrap();
    assert_eq!(sender.state().unwrap(), TransferState::Done);
    let messages = pump(&mut sender);
    let (identity, store_messages) = messages.split_first().unwrap();
    assert_eq!(&identity[..2], [2, 2]);
    assert_eq!(identity.len(), 2 + 32 + 32 + 2 + "Alice".len() + 16 + 4 + 16);
    assert!(store_messages.len() >= 4, "a store over 96 KiB takes four chunks at least");
    assert!(store_messages.iter().all(|message| message[..2] == [2, 3]));
    let (last, whole) = store_messages.split_last().unwrap();
    assert!(whole.iter().all(|message| message.len() == itsme::TRANSFER_MESSAGE_MAX));
    assert!((2 + 1 + 16..=itsme::TRANSFER_MESSAGE_MAX).contains(&last.len()));
    let store_size: usize = store_messages.iter().map(|message| message.len() - 18).sum();
    assert_eq!(store_messages.len(), store_size.div_ceil(CHUNK));

    receiver.confirm(T0).unwrap();
    receiver.receive(identity, T0).unwrap();
    for message in store_messages {
        assert_eq!(receiver.state().unwrap(), TransferState::AwaitingIdentity, "the store has not all arrived");
        assert_kind(receiver.take_import(), ErrorKind::InvalidState);
        receiver.receive(message, T0).unwrap();
    }
    assert_eq!(receiver.state().unwrap(), TransferState::Done);
    assert_kind(receiver.receive(last, T0), ErrorKind::InvalidState);
    let import = receiver.take_import().unwrap();
    assert_eq!(import.contacts_size().unwrap(), store_size as u64);
    import.write_contacts(&new_path).unwrap();
    assert_eq!(std::fs::metadata(&new_path).unwrap().len(), store_size as u64);
    let secrets = SecretStore::memory().unwrap();
    assert_eq!(import.check(&secrets, Some(&new_path)).unwrap(), report(true, 2, 0, 1));
    let installed = import.install(&secrets, Some(&new_path), false).unwrap();
    assert_eq!(installed.public_key().unwrap(), alice.public_key().unwrap());
    assert_eq!(contact_names(&installed, &new_path), ["Bob", "Carol"]);
    assert_eq!(carols_photo(&installed, &new_path), (photo(), "carol.jpg".to_owned()));
    assert_eq!(contacts.count().unwrap(), 3, "the old device keeps its store");
}

#[test]
fn store_messages_before_the_confirmation_are_held() {
    let dir = TempDir::new("transfer-v2-held");
    let (_old_secrets, alice) = person("Alice", 130);
    let contacts = contacts_with_a_photo(&alice, &dir.path().join("contacts.db"), &dir, 131);
    let (mut receiver, mut sender) = started(&alice, 133);
    sender.include_contacts(&contacts).unwrap();
    sender.confirm(T0).unwrap();
    let messages = pump(&mut sender);
    for message in &messages {
        receiver.receive(message, T0).unwrap();
    }
    assert_eq!(receiver.state().unwrap(), TransferState::CompareSas, "held unopened");
    receiver.confirm(T0).unwrap();
    assert_eq!(receiver.state().unwrap(), TransferState::Done);
    let size: usize = messages[1..].iter().map(|message| message.len() - 18).sum();
    assert_eq!(receiver.take_import().unwrap().contacts_size().unwrap(), size as u64);
}

#[test]
fn altered_store_messages_fail() {
    let dir = TempDir::new("transfer-v2-altered");
    let (_old_secrets, alice) = person("Alice", 140);
    let contacts = contacts_with_a_photo(&alice, &dir.path().join("contacts.db"), &dir, 141);
    for (n, change) in ["altered", "swapped", "repeated"].into_iter().enumerate() {
        let (mut receiver, mut sender) = started(&alice, 150 + 2 * n as u8);
        sender.include_contacts(&contacts).unwrap();
        sender.confirm(T0).unwrap();
        receiver.confirm(T0).unwrap();
        let mut messages = pump(&mut sender);
        match change {
            "altered" => messages[1][100] ^= 1,
            "swapped" => messages.swap(1, 2),
            _ => messages[2] = messages[1].clone(),
        }
        receiver.receive(&messages[0], T0).unwrap();
        let failed = messages[1..].iter().map(|message| receiver.receive(message, T0)).find(Result::is_err);
        let error = failed.unwrap_or_else(|| panic!("{change}: every store message was accepted")).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::AuthenticationFailed, "{change}: {error}");
        assert_eq!(receiver.state().unwrap(), TransferState::Failed, "{change}");
        assert_kind(receiver.take_import(), ErrorKind::InvalidState);
    }
}

#[test]
fn include_contacts_errors() {
    let dir = TempDir::new("transfer-v2-include-errors");
    let (_alice_secrets, alice) = person("Alice", 160);
    let (_mallory_secrets, mallory) = person("Mallory", 161);
    let mine = ContactStore::open(&alice, dir.path().join("alice.db")).unwrap();
    let theirs = ContactStore::open(&mallory, dir.path().join("mallory.db")).unwrap();
    let (mut receiver, mut sender) = started(&alice, 162);
    // A store of another identity than the sender's: refused, and the
    // transfer goes on without a store.
    let error = assert_kind(sender.include_contacts(&theirs), ErrorKind::WrongIdentity);
    assert!(!error.detail.is_empty());
    assert_eq!(sender.state().unwrap(), TransferState::CompareSas);
    sender.confirm(T0).unwrap();
    assert_kind(sender.include_contacts(&mine), ErrorKind::InvalidState);
    let messages = pump(&mut sender);
    assert_eq!(messages.len(), 1, "the identity alone");
    receiver.confirm(T0).unwrap();
    receiver.receive(&messages[0], T0).unwrap();
    let import = receiver.take_import().unwrap();
    assert_eq!(import.contacts_size().unwrap(), 0);
    // Rejected, or failed: too late too.
    let (_, mut rejected) = started(&alice, 164);
    rejected.reject().unwrap();
    assert_kind(rejected.include_contacts(&mine), ErrorKind::InvalidState);
    let mut late = TransferSender::new(&alice, PIN, &TransferReceiver::new(T0, None).unwrap().offer().unwrap(), T0, None)
        .unwrap();
    assert_kind(late.confirm(T0 + LIFETIME + 1), ErrorKind::Expired);
    assert_kind(late.include_contacts(&mine), ErrorKind::InvalidState);
}

#[test]
fn write_contacts_errors() {
    let dir = TempDir::new("transfer-v2-write-errors");
    let (_alice_secrets, alice) = person("Alice", 170);
    let contacts = ContactStore::open(&alice, dir.path().join("alice.db")).unwrap();
    contacts.add("Bob", &[0x42; 32], &[7; 32], ExchangeMethod::Qr, T0).unwrap();
    let target = dir.path().join("written.db");
    // An import that carries no store.
    let without = live_import(&alice, 171);
    assert_eq!(without.contacts_size().unwrap(), 0);
    assert_kind(without.write_contacts(&target), ErrorKind::NotFound);
    assert!(!target.exists());
    // One that does.
    let (mut receiver, mut sender) = started(&alice, 173);
    sender.include_contacts(&contacts).unwrap();
    sender.confirm(T0).unwrap();
    receiver.confirm(T0).unwrap();
    for message in pump(&mut sender) {
        receiver.receive(&message, T0).unwrap();
    }
    let import = receiver.take_import().unwrap();
    let size = import.contacts_size().unwrap();
    assert!(size > 0);
    let existing = dir.path().join("existing.db");
    std::fs::write(&existing, b"keep me").unwrap();
    assert_kind(import.write_contacts(&existing), ErrorKind::AlreadyExists);
    assert_eq!(std::fs::read(&existing).unwrap(), b"keep me");
    assert_kind(import.write_contacts(dir.path()), ErrorKind::AlreadyExists);
    assert_kind(import.write_contacts(""), ErrorKind::InvalidArgument);
    assert_kind(import.write_contacts("contacts\0.db"), ErrorKind::InvalidArgument);
    let missing = dir.path().join("missing").join("written.db");
    assert_kind(import.write_contacts(&missing), ErrorKind::Database);
    assert!(!dir.path().join("missing").exists());
    // Written, then again elsewhere: the import keeps the store.
    import.write_contacts(&target).unwrap();
    import.write_contacts(dir.path().join("again.db")).unwrap();
    assert_eq!(std::fs::read(&target).unwrap(), std::fs::read(dir.path().join("again.db")).unwrap());
    assert_eq!(std::fs::metadata(&target).unwrap().len(), size);
    assert_eq!(itsme::EXPORT_CONTACTS_MAX, 64 * 1024 * 1024);
    assert_eq!(itsme::TRANSFER_MESSAGE_MAX, 2 + CHUNK + 16);
}

/// The receiver's side has no `include_contacts` in the safe API; the C
/// function refuses it.
#[test]
fn include_contacts_on_a_receiver_is_refused() {
    use itsme::sys;
    let dir = TempDir::new("transfer-v2-raw");
    let path = format!("{}\0", dir.path().join("contacts.db").display());
    itsme::init().unwrap();
    let (mut secrets, mut identity, mut store, mut receiver) =
        (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: valid places for the outputs; NUL-terminated texts; each
    // handle released once, after its last use.
    unsafe {
        assert_eq!(sys::itsme_secret_store_new_memory(&mut secrets), sys::ITSME_OK);
        assert_eq!(sys::itsme_identity_create(secrets, c"Alice".as_ptr(), &mut identity), sys::ITSME_OK);
        assert_eq!(sys::itsme_store_open(identity, path.as_ptr().cast(), &mut store), sys::ITSME_OK);
        assert_eq!(sys::itsme_transfer_new_receiver(std::ptr::null_mut(), T0, &mut receiver), sys::ITSME_OK);
        assert_eq!(sys::itsme_transfer_include_contacts(receiver, store), sys::ITSME_E_INVALID_STATE);
        assert_eq!(sys::itsme_transfer_include_contacts(receiver, std::ptr::null_mut()), sys::ITSME_E_INVALID_ARGUMENT);
        let mut state = 0;
        assert_eq!(sys::itsme_transfer_status(receiver, &mut state), sys::ITSME_OK);
        assert_eq!(state, sys::ITSME_TRANSFER_AWAITING_PEER, "the refusal changes nothing");
        sys::itsme_transfer_free(receiver);
        sys::itsme_store_free(store);
        sys::itsme_identity_free(identity);
        sys::itsme_secret_store_free(secrets);
    }
}

// ---------------------------------------------------------------------------
// Bad inputs
// ---------------------------------------------------------------------------

/// The size of an export's header: the fields of PROTOCOL.md 17.1.
const HEADER_BYTES: usize = 7 + 1 + 1 + 4 + 4 + 1 + 16 + 12;
/// The AES-256-GCM tag after the sealed contents.
const TAG_BYTES: usize = 16;

/// An export of the synthetic kind: a header with these fields, a zero
/// salt and nonce, and 40 bytes of body.
fn synthetic(version: u8, kdf: u8, passes: u32, memory_kib: u32, kind: u8) -> Vec<u8> {
    let mut blob = b"ITSMEXP".to_vec();
    blob.extend([version, kdf]);
    blob.extend(passes.to_be_bytes());
    blob.extend(memory_kib.to_be_bytes());
    blob.push(kind);
    blob.extend([0u8; 16 + 12]);
    assert_eq!(blob.len(), HEADER_BYTES);
    // A 1-byte name's size: the smallest export there is.
    blob.extend([0xA5u8; 32 + 32 + 2 + 1 + 16 + 16]);
    blob
}

#[test]
fn malformed_offers_and_messages() {
    let (_old_secrets, alice) = person("Alice", 50);
    let receiver = TransferReceiver::new(T0, Some(&mut rng(51))).unwrap();
    let offer = receiver.offer().unwrap();
    let offer_bytes = base64url_decode(&offer["ITSMETR2:".len()..]).unwrap();
    assert_eq!((offer_bytes.len(), offer_bytes[0]), (49, 2));
    let with_prefix = |prefix: &str, version: u8, key: &[u8]| {
        let mut bytes = vec![version];
        bytes.extend(&offer_bytes[1..17]);
        bytes.extend(key);
        format!("{prefix}{}", base64url_encode(&bytes))
    };
    let with = |version: u8, key: &[u8]| with_prefix("ITSMETR2:", version, key);
    // Not offers: refused before the PIN, so no attempt is counted even
    // with a wrong PIN.
    for bad in [
        String::new(),
        "ITSMETR2:".to_owned(),
        "ITSMETR2:!!!!".to_owned(),
        // Version 1 is no longer spoken, in the prefix or the bytes.
        offer.replace("ITSMETR2:", "ITSMETR1:"),
        with_prefix("ITSMETR1:", 1, &offer_bytes[17..]),
        offer.replace("ITSMETR2:", "ITSMETR3:"),
        offer[..offer.len() - 3].to_owned(),
        format!("{offer}AAAA"),
        with(1, &offer_bytes[17..]),
        with(3, &offer_bytes[17..]),
        itsme::export_to_text(&synthetic(1, 1, 3, 262_144, 1)).unwrap(),
    ] {
        assert_kind(TransferSender::new(&alice, "000000", &bad, T0, None), ErrorKind::MalformedMessage);
    }
    assert_eq!(alice.pin_status(T0).unwrap(), (0, 0));
    // A real offer with a wrong PIN costs an attempt; a malformed PIN not.
    assert_kind(TransferSender::new(&alice, "000000", &offer, T0, None), ErrorKind::WrongPin);
    assert_kind(TransferSender::new(&alice, "12345", &offer, T0, None), ErrorKind::InvalidPin);
    assert_eq!(alice.pin_status(T0).unwrap(), (1, 0));
    // A low-order key in the offer.
    assert_kind(TransferSender::new(&alice, PIN, &with(2, &[0; 32]), T0, None), ErrorKind::InvalidKey);

    // The receiver's side: each of these ends the transfer.
    let mut key = vec![2u8, 1];
    key.extend(&offer_bytes[17..]);
    let mut zero_key = vec![2u8, 1];
    zero_key.extend([0; 32]);
    let mut version_1_key = vec![1u8, 1];
    version_1_key.extend(&offer_bytes[17..]);
    let cases: [(&str, Vec<u8>, ErrorKind); 8] = [
        ("empty", Vec::new(), ErrorKind::MalformedMessage),
        ("another version", vec![3, 1, 7, 7], ErrorKind::MalformedMessage),
        ("a key of version 1", version_1_key, ErrorKind::MalformedMessage),
        ("a short key", key[..33].to_vec(), ErrorKind::MalformedMessage),
        ("an identity before the key", [&[2u8, 2][..], &[9; 103]].concat(), ErrorKind::MalformedMessage),
        ("a store message before the key", [&[2u8, 3][..], &[9; 40]].concat(), ErrorKind::MalformedMessage),
        ("its own key reflected", key, ErrorKind::InvalidKey),
        ("a low-order key", zero_key, ErrorKind::InvalidKey),
    ];
    for (what, message, kind) in cases {
        // The same seed: the receiver of the offer above.
        let mut receiver = TransferReceiver::new(T0, Some(&mut rng(51))).unwrap();
        assert_eq!(receiver.offer().unwrap(), offer);
        assert_kind(receiver.receive(&message, T0), kind);
        assert_eq!(receiver.state().unwrap(), TransferState::Failed, "{what}");
        assert_kind(receiver.receive(&message, T0), ErrorKind::InvalidState);
    }
    // The same key twice, and a key after ten minutes.
    let mut receiver = TransferReceiver::new(T0, Some(&mut rng(70))).unwrap();
    assert_kind(receiver.confirm(T0), ErrorKind::InvalidState);
    assert_eq!(receiver.state().unwrap(), TransferState::AwaitingPeer, "a call in the wrong state does not fail it");
    let mut sender = TransferSender::new(&alice, PIN, &receiver.offer().unwrap(), T0, None).unwrap();
    let key = sender.next_outgoing().unwrap();
    receiver.receive(&key, T0).unwrap();
    assert_kind(receiver.receive(&key, T0), ErrorKind::MalformedMessage);
    assert_eq!(receiver.state().unwrap(), TransferState::Failed);
    let mut late = TransferReceiver::new(T0, Some(&mut rng(71))).unwrap();
    let mut sender = TransferSender::new(&alice, PIN, &late.offer().unwrap(), T0 + LIFETIME, None).unwrap();
    assert_kind(late.receive(&sender.next_outgoing().unwrap(), T0 + LIFETIME + 1), ErrorKind::Expired);
    assert_eq!(late.state().unwrap(), TransferState::Failed);
    assert_kind(TransferReceiver::new(-1, None), ErrorKind::InvalidArgument);
}

#[test]
fn malformed_exports_and_texts() {
    // Texts: the source app's exports are refused with the reason.
    for old in [
        r#"{"version":3,"iv":"AAAAAAAAAAAAAAAA","data":"c2VhbGVk"}"#,
        "c29tZSBzZWFsZWQgYm94IG9mIHRoZSBvbGQgYXBwOiBhIG5vbmNlLCBhIHRhZyBhbmQgaXRzIEpTT04gcGF5bG9hZA==",
        "c29tZSBzZWFsZWQgYm94IG9mIHRoZSBvbGQgYXBwOiBhIG5vbmNlLCBhIHRhZyBhbmQgaXRzIEpTT04gcGF5bG9hZA==\n",
    ] {
        let error = assert_kind(itsme::export_from_text(old), ErrorKind::InvalidArgument);
        assert!(!error.detail.is_empty(), "{old:?}");
    }
    for damaged in ["", "hello, world", "ITSMEXP1:***", "ITSMEXP1:A", "ITSMEXP1:AAAA=="] {
        assert_kind(itsme::export_from_text(damaged), ErrorKind::MalformedMessage);
    }

    // Blobs: the header is read and range-checked without deriving a key.
    let good = synthetic(1, 1, 3, 262_144, 1);
    let header = |passes, memory_kib, password_kind| ExportHeader { passes, memory_kib, password_kind };
    assert_eq!(itsme::export_header(&good).unwrap(), header(3, 262_144, PasswordKind::Generated));
    assert_eq!(
        itsme::export_header(&synthetic(1, 1, 10, 1_048_576, 2)).unwrap(),
        header(10, 1_048_576, PasswordKind::Chosen)
    );
    let text = itsme::export_to_text(&good).unwrap();
    assert_eq!(itsme::export_from_text(&text).unwrap(), good);

    let secrets = SecretStore::memory().unwrap();
    let generated = itsme::generate_export_password(None).unwrap();
    let mut foreign = good.clone();
    foreign[..7].copy_from_slice(b"ITSMEXQ");
    let mut padded = good.clone();
    padded.extend([0u8; 128]);
    let refused: [(&str, Vec<u8>, ErrorKind); 13] = [
        ("empty", Vec::new(), ErrorKind::MalformedMessage),
        ("truncated", good[..HEADER_BYTES + TAG_BYTES - 1].to_vec(), ErrorKind::MalformedMessage),
        ("shorter than any export", good[..good.len() - 1].to_vec(), ErrorKind::MalformedMessage),
        ("longer than any export", padded, ErrorKind::MalformedMessage),
        ("not an export", foreign, ErrorKind::MalformedMessage),
        ("version 3", synthetic(3, 1, 3, 262_144, 1), ErrorKind::InvalidArgument),
        // Version 2 carries a store of at least one byte: 146 bytes at least.
        ("version 2 without a store", synthetic(2, 1, 3, 262_144, 1), ErrorKind::MalformedMessage),
        ("another key derivation", synthetic(1, 2, 3, 262_144, 1), ErrorKind::InvalidArgument),
        ("2 passes", synthetic(1, 1, 2, 262_144, 1), ErrorKind::InvalidArgument),
        ("11 passes", synthetic(1, 1, 11, 262_144, 1), ErrorKind::InvalidArgument),
        ("128 MiB", synthetic(1, 1, 3, 131_072, 1), ErrorKind::InvalidArgument),
        ("2 GiB", synthetic(1, 1, 3, 2_097_152, 1), ErrorKind::InvalidArgument),
        ("password kind 3", synthetic(1, 1, 3, 262_144, 3), ErrorKind::InvalidArgument),
    ];
    for (what, blob, kind) in refused {
        let error = assert_kind(itsme::export_header(&blob), kind);
        assert!(!error.detail.is_empty(), "{what}");
        assert_kind(itsme::export_to_text(&blob), kind);
        let error = assert_kind(Import::open(&secrets, &blob, generated.as_str(), T0), kind);
        assert!(!error.detail.is_empty(), "{what}");
    }
    // A password that is not of the header's kind.
    assert_kind(Import::open(&secrets, &good, "not a password", T0), ErrorKind::InvalidArgument);
    assert_kind(Import::open(&secrets, &good, "ABCD-EFGH-JKMN", T0), ErrorKind::InvalidArgument);
    assert_kind(Import::open(&secrets, &synthetic(1, 1, 3, 262_144, 2), "seven!!", T0), ErrorKind::InvalidArgument);
    assert_kind(Import::open(&secrets, &good, generated.as_str(), -1), ErrorKind::InvalidArgument);
    assert_eq!(secrets.import_status(T0).unwrap(), (0, 0), "nothing refused above was counted");
    // Version 2 with a store: its header reads, but it has no text form.
    let mut with_store = synthetic(2, 1, 3, 262_144, 1);
    with_store.push(0xA5);
    assert_eq!(itsme::export_header(&with_store).unwrap(), header(3, 262_144, PasswordKind::Generated));
    assert_kind(itsme::export_to_text(&with_store), ErrorKind::InvalidArgument);

    // Exporting: the password is checked before the PIN.
    let (_old_secrets, alice) = person("Alice", 80);
    let chosen_too_short = "x".repeat(itsme::EXPORT_CHOSEN_PASSWORD_MIN - 1);
    for (password, kind) in [
        ("ABCD-EFGH-JKMN", PasswordKind::Generated),
        ("ABCD-EFGH-JKMN0", PasswordKind::Generated),
        ("correct horse battery staple", PasswordKind::Generated),
        (chosen_too_short.as_str(), PasswordKind::Chosen),
    ] {
        assert_kind(alice.export("000000", T0, password, kind, None), ErrorKind::InvalidArgument);
    }
    assert_eq!(alice.pin_status(T0).unwrap(), (0, 0));
    assert_kind(alice.export("000000", T0, generated.as_str(), PasswordKind::Generated, None), ErrorKind::WrongPin);
    assert_kind(alice.export("12345", T0, generated.as_str(), PasswordKind::Generated, None), ErrorKind::InvalidPin);
    assert_eq!(alice.pin_status(T0).unwrap(), (1, 0));
    // No PIN, no export.
    let without_pin = Identity::create(&SecretStore::memory().unwrap(), "Bob").unwrap();
    assert_kind(without_pin.export("123456", T0, generated.as_str(), PasswordKind::Generated, None), ErrorKind::NotFound);
}

#[test]
fn generated_passwords() {
    let a = itsme::generate_export_password(Some(&mut rng(90))).unwrap();
    let b = itsme::generate_export_password(Some(&mut rng(90))).unwrap();
    let c = itsme::generate_export_password(Some(&mut rng(91))).unwrap();
    assert_eq!(a.as_str(), b.as_str(), "the same seed gives the same password");
    assert_ne!(a.as_str(), c.as_str());
    for password in [&a, &c, &itsme::generate_export_password(None).unwrap()] {
        let shown = password.as_str();
        let groups: Vec<&str> = shown.split('-').collect();
        assert_eq!(groups.iter().map(|g| g.len()).collect::<Vec<_>>(), [4, 4, 5], "{shown}");
        assert!(
            groups.concat().bytes().all(|c| b"23456789ABCDEFGHJKMNPQRSTUVWXYZ".contains(&c)),
            "{shown}"
        );
    }
    assert_eq!(format!("{a:?}"), "ExportPassword(..)");
}

#[test]
fn handles_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Import>();
    check::<TransferReceiver>();
    check::<TransferSender>();
}
