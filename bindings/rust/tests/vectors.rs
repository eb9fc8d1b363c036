//! The protocol test vectors (Tests/ProtocolVectors/*.json, described in
//! its README.md) replayed through the C interface: whole QR and Bluetooth
//! exchanges from each party's deterministic random seed, source-format
//! imports and rejections, voice verification plans, heard codes and
//! sessions, degradation codes, whole Online Verify sessions and PIN
//! Updates, typed remote codes and whole invite and real-time exchanges,
//! password exports made and opened byte for byte and their rejections,
//! exports with the contacts opened and the store they carry written out,
//! whole live device transfers (the contact store's messages replayed into
//! the receiver) and their rejections, profile records
//! opened and refused, service enrollments, requests and approvals verified
//! and refused, the roll call made again by its three devices in a group
//! room (contacts with the vectors' seeds and device secrets: HELLOs,
//! roster, codes, SAIDs, VIEWs, outcomes), bound to two calls, and its
//! rejections, and every pure derivation.  The Online
//! Verify and PIN Update sides hold each other as contacts added with the
//! vector's seed, which have no device secrets: the Online Verify PROOF
//! messages (which carry device tags) are therefore not compared.

mod common;

use common::encoding::{base32_decode, base64url_decode, base64url_encode, hex_decode, hex_encode};
use common::json::Json;
use common::room::GroupRoom;
use common::TempDir;
use itsme::{
    ContactStore, DeterministicRandom, ErrorKind, Exchange, ExchangeFlags, ExchangeMethod, ExportHeader,
    ExchangeState, Identity, Import, OnlineVerify, OnlineVerifyState, PasswordKind, PinUpdate, PinUpdateState,
    Profile, RollCall, RollCallPhase, RollCallState, SecretStore, TransferReceiver, TransferSender, TransferState,
    VerificationState, VoiceOutcome, VoiceSession, VoiceState, VoiceTurn,
};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

const T0: i64 = 1_800_000_000;

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../Tests/ProtocolVectors")
}

fn load(file: &str) -> Json {
    let path = vectors_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    Json::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Checks a byte string against a vector's hex, showing both in hex.
#[track_caller]
fn assert_hex(actual: &[u8], vector: &Json, key: &str, context: &str) {
    assert_eq!(hex_encode(actual), vector.text(key), "{context}: {key}");
}

/// lv_cat (section 1): each part prefixed with its length as unsigned LEB128.
fn lv_cat(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in parts {
        let mut n = part.len();
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            out.push(if n > 0 { byte | 0x80 } else { byte });
            if n == 0 {
                break;
            }
        }
        out.extend_from_slice(part);
    }
    out
}

/// One side of a vector exchange: its identity made from its random seed,
/// and that same random source kept for its exchange.
struct Party {
    _secrets: SecretStore,
    identity: Identity,
    rng: DeterministicRandom,
    contacts: ContactStore,
    _dir: TempDir,
}

impl Party {
    /// Creates the party's identity from `random_seed` and checks it
    /// against the vector.
    fn new(vector: &Json, context: &str) -> Party {
        let mut rng = DeterministicRandom::new(&vector.hex_array("random_seed")).unwrap();
        let secrets = SecretStore::memory().unwrap();
        let identity = Identity::create_with_random(&secrets, vector.text("name_text"), Some(&mut rng)).unwrap();
        assert_hex(&identity.public_key().unwrap(), vector, "identity_public", context);
        assert_eq!(identity.fingerprint().unwrap(), vector.text("fingerprint_text"), "{context}: fingerprint_text");
        assert_eq!(identity.name().unwrap(), vector.text("name_text"), "{context}");
        let dir = TempDir::new("vectors");
        let contacts = ContactStore::open(&identity, dir.path().join("contacts.db")).unwrap();
        Party { _secrets: secrets, identity, rng, contacts, _dir: dir }
    }
}

#[test]
fn json_reader() {
    let parsed = Json::parse(r#" { "a" : [1, -2, true, false, null, "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"], "b": {} , "c": [] } "#)
        .unwrap();
    assert_eq!(parsed.array("a")[0], Json::Int(1));
    assert_eq!(parsed.array("a")[1], Json::Int(-2));
    assert_eq!(parsed.array("a")[2..5], [Json::Bool(true), Json::Bool(false), Json::Null]);
    assert_eq!(parsed.array("a")[5].as_str(), "x\"\\/\u{8}\u{c}\n\r\t\u{e9}\u{1F600}");
    assert_eq!(parsed.field("b"), &Json::Object(Vec::new()));
    assert_eq!(parsed.array("c").len(), 0);
    assert_eq!(Json::parse("\"Ćarol\"").unwrap().as_str(), "Ćarol");
    for bad in ["", "{", "[1,]", "{\"a\" 1}", "01", "1.5", "1e3", "\"\\x\"", "\"\\ud800\"", "tru", "[1] 2", "{\"a\":1,\"a\":2}", "\"\u{1}\""] {
        assert!(Json::parse(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn every_vector_file_is_read() {
    let mut names: Vec<String> = std::fs::read_dir(vectors_dir())
        .expect("Tests/ProtocolVectors")
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".json"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "approval.json",
            "bluetooth.json",
            "encoding.json",
            "export.json",
            "online-verify.json",
            "pin-update.json",
            "profile.json",
            "qr.json",
            "reexchange.json",
            "remote.json",
            "rollcall.json",
            "sas.json",
            "seed.json",
            "source-v5.json",
            "transfer.json",
            "voice.json"
        ]
    );
    for name in names {
        load(&name);
    }
}

// ---------------------------------------------------------------------------
// encoding.json
// ---------------------------------------------------------------------------

#[test]
fn short_codes() {
    let codes = load("encoding.json");
    let codes = codes.field("short_code");
    for case in codes.array("format") {
        let value = u32::try_from(case.int("value")).unwrap();
        assert_eq!(itsme::short_code_format(value).unwrap(), case.text("text"), "format {value}");
        assert_eq!(itsme::short_code_parse(case.text("text")).unwrap(), value, "parse {}", case.text("text"));
    }
    for case in codes.array("parse_valid") {
        let input = case.text("input_text");
        assert_eq!(i64::from(itsme::short_code_parse(input).unwrap()), case.int("value"), "{input:?}");
    }
    for case in codes.array("parse_invalid") {
        let input = case.as_str();
        let error = itsme::short_code_parse(input).expect_err(input);
        assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{input:?}");
    }
    assert!(!codes.array("parse_invalid").is_empty());
}

/// Section 1's name rule, through identity creation: every valid name is
/// kept byte for byte, and every refused code point is refused.
#[test]
fn names() {
    let encoding = load("encoding.json");
    let names = encoding.field("names");
    for case in names.array("valid") {
        let text = case.as_str();
        let identity = Identity::create(&SecretStore::memory().unwrap(), text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(identity.name().unwrap(), text);
    }
    let mut refused = HashSet::new();
    for case in names.array("invalid") {
        let text = case.text("text");
        let code_point = u32::try_from(case.int("code_point")).unwrap();
        assert!(text.contains(char::from_u32(code_point).unwrap()), "{text:?}");
        let error = Identity::create(&SecretStore::memory().unwrap(), text).expect_err(text);
        assert_eq!(error.kind(), ErrorKind::InvalidArgument, "U+{code_point:04X}");
        refused.insert(code_point);
    }
    let expected: HashSet<u32> = (0x00..0x20)
        .chain(0x7F..0xA0)
        .chain([0x200B, 0xFEFF])
        .chain(0x202A..=0x202E)
        .chain(0x2060..=0x2064)
        .chain(0x2066..=0x2069)
        .collect();
    assert_eq!(refused, expected);
}

/// The test's own base64url, used to take QR payloads apart.
#[test]
fn base64url_of_the_tests() {
    let encoding = load("encoding.json");
    let cases = encoding.field("base64url");
    for case in cases.array("valid") {
        let bytes = case.hex("bytes");
        assert_eq!(base64url_encode(&bytes), case.text("text"));
        assert_eq!(base64url_decode(case.text("text")).as_deref(), Some(&bytes[..]));
    }
    for case in cases.array("invalid") {
        assert_eq!(base64url_decode(case.as_str()), None, "{:?}", case.as_str());
    }
}

// ---------------------------------------------------------------------------
// seed.json, sas.json
// ---------------------------------------------------------------------------

#[test]
fn seeds() {
    let seeds = load("seed.json");
    for (i, case) in seeds.as_array().iter().enumerate() {
        let (fa, fb) = (case.text("a_fingerprint_text"), case.text("b_fingerprint_text"));
        let mut salt = [fa, fb];
        salt.sort();
        assert_eq!(salt.concat(), case.text("salt_text"), "seed {i}: salt");
        // Each side derives the same seed, with the fingerprints in either
        // order.
        for (secret, public) in [("a_ephemeral_secret", "b_ephemeral_public"), ("b_ephemeral_secret", "a_ephemeral_public")] {
            for (x, y) in [(fa, fb), (fb, fa)] {
                let seed = itsme::derive_seed(&case.hex(secret), &case.hex(public), x, y).unwrap();
                assert_hex(&seed, case, "seed", &format!("seed {i} from {secret}"));
            }
        }
        // Lowercase fingerprints are the same fingerprints.
        let seed = itsme::derive_seed(&case.hex("a_ephemeral_secret"), &case.hex("b_ephemeral_public"), &fa.to_lowercase(), fb)
            .unwrap();
        assert_hex(&seed, case, "seed", &format!("seed {i} (lowercase)"));
    }
}

#[test]
fn sas() {
    let cases = load("sas.json");
    for (i, case) in cases.as_array().iter().enumerate() {
        let text = itsme::derive_sas(&case.hex("seed"), &case.hex("transcript_hash")).unwrap();
        assert_eq!(text, case.text("text"), "sas {i}");
        assert_eq!(i64::from(itsme::short_code_parse(&text).unwrap()), case.int("value"), "sas {i}");
        // The value is the 8-byte okm, big-endian, modulo 260000.
        let okm = u64::from_be_bytes(case.hex_array("okm"));
        assert_eq!(okm % u64::from(itsme::SHORT_CODE_VALUES), case.int("value") as u64, "sas {i}");
    }
}

// ---------------------------------------------------------------------------
// qr.json
// ---------------------------------------------------------------------------

/// Both sides of an exchange show the vector's SAS and hold the peer's
/// name, fingerprint and identity key; the SAS text parses to its value.
fn assert_sas_ready(sides: [(&Exchange, &Json, &str); 2], vector: &Json, context: &str) {
    for (ex, peer, side) in sides {
        assert_eq!(ex.sas().unwrap(), vector.text("sas_text"), "{context}: {side} sas_text");
        assert_eq!(ex.peer_name().unwrap(), peer.text("name_text"), "{context} {side}");
        assert_eq!(ex.peer_fingerprint().unwrap(), peer.text("fingerprint_text"), "{context} {side}");
        assert_eq!(ex.peer_public_key().unwrap(), Some(peer.hex_array("identity_public")), "{context} {side}");
    }
    assert_eq!(
        i64::from(itsme::short_code_parse(vector.text("sas_text")).unwrap()),
        vector.int("sas_value"),
        "{context}"
    );
}

/// The seed as `mine` derives it from its ephemeral secret and the other's
/// ephemeral key (section 3).
fn party_seed(mine: &Json, theirs: &Json) -> [u8; itsme::SEED_BYTES] {
    itsme::derive_seed(
        &mine.hex("ephemeral_secret"),
        &theirs.hex("ephemeral_public"),
        mine.text("fingerprint_text"),
        theirs.text("fingerprint_text"),
    )
    .unwrap()
}

#[test]
fn qr_exchanges() {
    let qr = load("qr.json");
    let exchanges = qr.array("exchanges");
    assert!(!exchanges.is_empty());
    for (i, vector) in exchanges.iter().enumerate() {
        let (va, vb) = (vector.field("a"), vector.field("b"));
        let context = format!("qr exchange {i}");
        let mut a = Party::new(va, &format!("{context} a"));
        let mut b = Party::new(vb, &format!("{context} b"));
        let mut ea = Exchange::qr(&a.identity, &a.contacts, T0, Some(&mut a.rng)).unwrap();
        let mut eb = Exchange::qr(&b.identity, &b.contacts, T0, Some(&mut b.rng)).unwrap();

        let pa = ea.next_outgoing().unwrap();
        let pb = eb.next_outgoing().unwrap();
        for (payload, v, side) in [(&pa, va, "a"), (&pb, vb, "b")] {
            let text = std::str::from_utf8(payload).unwrap();
            assert_eq!(text, v.text("payload_text"), "{context}: {side} payload_text");
            let raw = base64url_decode(text.strip_prefix("ITSME1:").unwrap()).unwrap();
            assert_hex(&raw, v, "payload", &format!("{context} {side}"));
            assert_eq!(hex_encode(&raw), format!("{}{}", v.text("body"), v.text("signature")), "{context} {side}");
        }

        ea.receive(&pb, T0).unwrap();
        eb.receive(&pa, T0).unwrap();
        for (ex, side) in [(&ea, "a"), (&eb, "b")] {
            assert_eq!(ex.status().unwrap(), (ExchangeState::CompareSas, ExchangeFlags::empty()), "{context} {side}");
        }
        assert_sas_ready([(&ea, vb, "a"), (&eb, va, "b")], vector, &context);

        // The pure derivations agree with the exchange.
        let th = itsme::qr_transcript_hash(&pa, &pb).unwrap();
        assert_hex(&th, vector, "transcript_hash", &context);
        assert_eq!(itsme::qr_transcript_hash(&pb, &pa).unwrap(), th, "{context}: either order");
        for (mine, theirs) in [(va, vb), (vb, va)] {
            let seed = party_seed(mine, theirs);
            assert_hex(&seed, vector, "seed", &context);
            assert_eq!(itsme::derive_sas(&seed, &th).unwrap(), vector.text("sas_text"), "{context}");
        }

        // Both confirm: each stores the other, verified.
        let id_a = ea.confirm(T0).unwrap();
        let id_b = eb.confirm(T0).unwrap();
        assert_eq!(a.contacts.get(id_a).unwrap().state, VerificationState::Verified);
        assert_eq!(b.contacts.get(id_b).unwrap().name, va.text("name_text"));
    }
}

/// Every rejection case, fed to an exchange of its receiver (the vector
/// party with that identity key, remade from its random seed).
#[test]
fn qr_rejections() {
    let qr = load("qr.json");
    let parties: Vec<&Json> = qr.array("exchanges").iter().flat_map(|e| [e.field("a"), e.field("b")]).collect();
    let rejections = qr.array("rejections");
    assert!(!rejections.is_empty());
    for case in rejections {
        let what = case.text("case_text");
        let receiver = case.field("receiver");
        let party = parties
            .iter()
            .find(|p| p.text("identity_public") == receiver.text("identity_public"))
            .unwrap_or_else(|| panic!("{what}: no vector party has the receiver's key"));
        let mut me = Party::new(party, what);
        let mut ex = Exchange::qr(&me.identity, &me.contacts, T0, Some(&mut me.rng)).unwrap();
        assert_eq!(ex.next_outgoing().unwrap(), party.text("payload_text").as_bytes(), "{what}: receiver's payload");
        let error = ex.receive(case.text("payload_text").as_bytes(), T0).expect_err(what);
        assert_eq!(error.kind(), error_kind(case.text("error_text")), "{what}: {error}");
        let (state, _) = ex.status().unwrap();
        // A text that is not a whole payload (another code, a reading cut
        // short or run on) leaves the exchange as it was; the rest end it.
        let ends = bool_field(case, "ends_exchange");
        assert_eq!(ends, error.kind() != ErrorKind::InvalidArgument, "{what}");
        let expected = if ends { ExchangeState::Failed } else { ExchangeState::AwaitingPeer };
        assert_eq!(state, expected, "{what}: {error}");
    }
}

// ---------------------------------------------------------------------------
// source-v5.json
// ---------------------------------------------------------------------------

#[test]
fn source_v5_imports() {
    let v5 = load("source-v5.json");
    let imports = v5.array("imports");
    assert!(!imports.is_empty());
    for case in imports {
        let text = case.text("text");
        let receiver = case.field("receiver");
        // The receiver's seed, from its ephemeral secret.
        let seed = itsme::derive_seed(
            &receiver.hex("ephemeral_secret"),
            &case.hex("ephemeral_public"),
            receiver.text("fingerprint_text"),
            case.text("fingerprint_text"),
        )
        .unwrap();
        assert_hex(&seed, case, "seed", text);
        let mut salt = [receiver.text("fingerprint_text"), case.text("fingerprint_text")];
        salt.sort();
        assert_eq!(salt.concat(), case.text("salt_text"));

        // An exchange reads it: unauthenticated, no SAS, saved flagged.
        let secrets = SecretStore::memory().unwrap();
        let me = Identity::create(&secrets, "Receiver").unwrap();
        let dir = TempDir::new("vectors-v5");
        let contacts = ContactStore::open(&me, dir.path().join("contacts.db")).unwrap();
        let mut ex = Exchange::qr(&me, &contacts, T0, None).unwrap();
        ex.receive(text.as_bytes(), T0).unwrap();
        assert_eq!(ex.status().unwrap(), (ExchangeState::Imported, ExchangeFlags::UNAUTHENTICATED), "{text}");
        assert_eq!(ex.peer_name().unwrap(), case.text("name_text"), "{text}");
        assert_eq!(ex.peer_fingerprint().unwrap(), case.text("fingerprint_text"), "{text}");
        assert_eq!(ex.peer_public_key().unwrap(), None, "{text}");
        assert_eq!(ex.sas().unwrap_err().kind(), ErrorKind::InvalidState, "{text}");
        let id = ex.save(T0).unwrap();
        let contact = contacts.get(id).unwrap();
        assert_eq!((contact.name.as_str(), contact.public_key), (case.text("name_text"), None));
        assert_eq!(contact.fingerprint, case.text("fingerprint_text"));
    }
}

#[test]
fn source_v5_rejections() {
    let v5 = load("source-v5.json");
    let rejections = v5.array("rejections");
    assert!(!rejections.is_empty());
    let me = Identity::create(&SecretStore::memory().unwrap(), "Receiver").unwrap();
    let dir = TempDir::new("vectors-v5-rejections");
    let contacts = ContactStore::open(&me, dir.path().join("contacts.db")).unwrap();
    // The imports' receiver has no random seed, so it cannot be remade
    // through the C interface: a case carrying its fingerprint (the
    // own-fingerprint check) is given ours instead.
    let receivers: Vec<&str> = v5.array("imports").iter().map(|i| i.field("receiver").text("fingerprint_text")).collect();
    let mine = me.fingerprint().unwrap();
    for case in rejections {
        let what = case.text("case_text");
        let mut text = case.text("text").to_owned();
        for receiver in &receivers {
            text = text.replace(receiver, &mine).replace(&receiver.to_lowercase(), &mine.to_lowercase());
        }
        let mut ex = Exchange::qr(&me, &contacts, T0, None).unwrap();
        let error = ex.receive(text.as_bytes(), T0).expect_err(what);
        assert_eq!(error.kind(), error_kind(case.text("error_text")), "{what}: {error}");
        let (state, _) = ex.status().unwrap();
        if error.kind() == ErrorKind::InvalidArgument {
            assert_eq!(state, ExchangeState::AwaitingPeer, "{what}: {error}");
        } else {
            assert_eq!(state, ExchangeState::Failed, "{what}: {error}");
        }
    }
}

// ---------------------------------------------------------------------------
// bluetooth.json
// ---------------------------------------------------------------------------

/// Takes the next frame of an exchange and checks it against a vector.
#[track_caller]
fn frame(ex: &mut Exchange, party: &Json, key: &str, context: &str) -> Vec<u8> {
    let frame = ex.next_outgoing().unwrap();
    assert_hex(&frame, party, key, context);
    frame
}

#[test]
fn bluetooth_exchanges() {
    let bluetooth = load("bluetooth.json");
    let exchanges = bluetooth.array("exchanges");
    assert!(!exchanges.is_empty());
    for (i, vector) in exchanges.iter().enumerate() {
        let context = format!("bluetooth exchange {i}");
        let (va, vb) = (vector.field("a"), vector.field("b"));
        let code = vector.text("session_code_text");
        assert_eq!(i64::from(itsme::short_code_parse(code).unwrap()), vector.int("session_code_value"), "{context}");

        // A draws the session code; B is given it.
        let mut a = Party::new(va, &format!("{context} a"));
        let mut b = Party::new(vb, &format!("{context} b"));
        let mut ea = Exchange::bluetooth(&a.identity, &a.contacts, None, T0, Some(&mut a.rng)).unwrap();
        assert_eq!(ea.session_code().unwrap(), code, "{context}: session_code_text");
        let mut eb = Exchange::bluetooth(&b.identity, &b.contacts, Some(code), T0, Some(&mut b.rng)).unwrap();

        let hello_a = frame(&mut ea, va, "hello", &format!("{context} a"));
        let hello_b = frame(&mut eb, vb, "hello", &format!("{context} b"));
        eb.receive(&hello_a, T0).unwrap();
        ea.receive(&hello_b, T0).unwrap();
        let key_a = frame(&mut ea, va, "key", &format!("{context} a"));
        let key_b = frame(&mut eb, vb, "key", &format!("{context} b"));
        eb.receive(&key_a, T0).unwrap();
        ea.receive(&key_b, T0).unwrap();
        let data_a = frame(&mut ea, va, "data_frame", &format!("{context} a"));
        let data_b = frame(&mut eb, vb, "data_frame", &format!("{context} b"));
        eb.receive(&data_a, T0).unwrap();
        ea.receive(&data_b, T0).unwrap();
        assert_sas_ready([(&ea, vb, "a"), (&eb, va, "b")], vector, &context);

        // Both confirm.
        ea.confirm(T0).unwrap();
        eb.confirm(T0).unwrap();
        let confirm_a = frame(&mut ea, va, "confirm_frame", &format!("{context} a"));
        let confirm_b = frame(&mut eb, vb, "confirm_frame", &format!("{context} b"));
        eb.receive(&confirm_a, T0).unwrap();
        ea.receive(&confirm_b, T0).unwrap();
        // Each settles the other's CONFIRM (8.1).
        for ex in [&mut ea, &mut eb] {
            assert_eq!(ex.status().unwrap(), (ExchangeState::AwaitingDecision, ExchangeFlags::PEER_CONFIRMED), "{context}");
            assert!(ex.settle(T0).unwrap().is_some(), "{context}");
            assert_eq!(ex.status().unwrap(), (ExchangeState::Confirmed, ExchangeFlags::PEER_CONFIRMED), "{context}");
        }
    }
}

#[test]
fn bluetooth_derivations() {
    let bluetooth = load("bluetooth.json");
    for (i, vector) in bluetooth.array("exchanges").iter().enumerate() {
        let context = format!("bluetooth exchange {i}");
        let (va, vb) = (vector.field("a"), vector.field("b"));
        let code = vector.text("session_code_text");

        for party in [va, vb] {
            let commitment = itsme::bluetooth_commitment(
                &party.hex("identity_public"),
                &party.hex("ephemeral_public"),
                party.text("name_text"),
                &party.hex("device_secret"),
            )
            .unwrap();
            assert_hex(&commitment, party, "commitment", &context);
            // HELLO and KEY carry what the header of section 7.1 says.
            let fingerprint = hex_decode(party.text("fingerprint_text")).unwrap();
            assert_hex(&[&[1u8, 1][..], &fingerprint, &commitment].concat(), party, "hello", &context);
            assert_hex(&[&[1u8, 2][..], &party.hex("ephemeral_public")].concat(), party, "key", &context);
        }

        let (initiator, responder) = match (va.text("role_text"), vb.text("role_text")) {
            ("initiator", "responder") => (va, vb),
            ("responder", "initiator") => (vb, va),
            roles => panic!("{context}: roles {roles:?}"),
        };
        // The lower fingerprint initiates.
        assert!(initiator.text("fingerprint_text") < responder.text("fingerprint_text"), "{context}");

        let th1 = itsme::bluetooth_th1(
            code,
            &initiator.hex("hello"),
            &responder.hex("hello"),
            &initiator.hex("key"),
            &responder.hex("key"),
        )
        .unwrap();
        assert_hex(&th1, vector, "th1", &context);

        for (mine, theirs) in [(initiator, responder), (responder, initiator)] {
            let (key_i, key_r) =
                itsme::bluetooth_session_keys(&mine.hex("ephemeral_secret"), &theirs.hex("ephemeral_public"), &th1).unwrap();
            assert_hex(&key_i, vector, "key_initiator", &context);
            assert_hex(&key_r, vector, "key_responder", &context);
            let seed = party_seed(mine, theirs);
            assert_hex(&seed, vector, "seed", &context);
        }

        let th = itsme::bluetooth_transcript_hash(&th1, &initiator.hex("plaintext"), &responder.hex("plaintext")).unwrap();
        assert_hex(&th, vector, "transcript_hash", &context);
        // The final transcript's lv_cat input, and the seed's salt (sections 3, 7.4).
        let input = lv_cat(&[b"itsme-bluetooth-transcript-v1", &th1, &initiator.hex("plaintext"), &responder.hex("plaintext")]);
        assert_hex(&input, vector, "transcript_input", &context);
        let mut fingerprints = [va.text("fingerprint_text"), vb.text("fingerprint_text")];
        fingerprints.sort();
        assert_eq!(vector.text("salt_text"), fingerprints.concat(), "{context}: salt_text");
        // The session code's draws (4.2): all but the last at or above
        // 4294940000, the last taken modulo 260000.
        let draws: Vec<u32> = vector
            .array("session_code_draws")
            .iter()
            .map(|d| u32::from_be_bytes(<[u8; 4]>::try_from(hex_decode(d.as_str()).unwrap().as_slice()).unwrap()))
            .collect();
        let (last, before) = draws.split_last().expect("session_code_draws");
        assert!(before.iter().all(|&d| d >= 4_294_940_000) && *last < 4_294_940_000, "{context}: draws");
        assert_eq!(i64::from(last % itsme::SHORT_CODE_VALUES), vector.int("session_code_value"), "{context}");
        assert_eq!(itsme::derive_sas(&vector.hex("seed"), &th).unwrap(), vector.text("sas_text"), "{context}");

        // The plaintext is the contact data and its signature.
        for party in [va, vb] {
            assert_eq!(
                party.text("plaintext"),
                format!("{}{}", party.text("data"), party.text("signature")),
                "{context}"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// voice.json
// ---------------------------------------------------------------------------

fn words(value: &Json) -> Vec<u8> {
    value.as_array().iter().map(|w| u8::try_from(w.as_i64()).unwrap()).collect()
}

fn bool_field(value: &Json, key: &str) -> bool {
    match value.field(key) {
        Json::Bool(b) => *b,
        other => panic!("{key} is {}, not a boolean", other.summary()),
    }
}

/// A NATO word and `digits` digits of `value`.
fn voice_text(value: i64, digits: u32) -> String {
    let scale = 10i64.pow(digits);
    let word = itsme::nato_word(u32::try_from(value / scale).unwrap()).unwrap();
    format!("{word} {:0width$}", value % scale, width = digits as usize)
}

#[test]
fn voice_sessions() {
    let voice = load("voice.json");
    let sessions = voice.array("sessions");
    assert!(!sessions.is_empty());
    let mut pid_sizes = Vec::new();
    for (i, case) in sessions.iter().enumerate() {
        let context = format!("voice session {i}");
        let (seed, window) = (case.hex("seed"), case.int("window"));
        let (a, b) = (case.hex("a_pid"), case.hex("b_pid"));
        pid_sizes.extend([a.len(), b.len()]);
        assert_eq!(voice_text(case.int("session_id_value"), 2), case.text("session_id_text"), "{context}");
        assert_eq!(itsme::derive_session_id(&seed, window).unwrap(), case.text("session_id_text"), "{context}");
        assert_eq!(itsme::derive_words(&seed, window, &a).unwrap().to_vec(), words(case.field("a_words")), "{context}");
        assert_eq!(itsme::derive_words(&seed, window, &b).unwrap().to_vec(), words(case.field("b_words")), "{context}");
        let lower_first = itsme::derive_lower_selects_first(&seed, window).unwrap();
        assert_eq!(lower_first, bool_field(case, "lower_selects_first"), "{context}");
        assert_eq!(lower_first, case.int("first_selector_byte") & 1 == 0, "{context}");
        // The whole HMAC of 9.4 (no HMAC here to recompute it: its first byte).
        let first_hmac = case.hex("first_selector_hmac");
        assert_eq!(first_hmac.len(), 32, "{context}");
        assert_eq!(i64::from(first_hmac[0]), case.int("first_selector_byte"), "{context}");
        let a_first = (a < b) == lower_first;
        assert_eq!(case.text("first_text"), if a_first { "a" } else { "b" }, "{context}");
        let (first, second) = if a_first { (&a, &b) } else { (&b, &a) };
        let (w1, w2) = (u32::try_from(case.int("w1")).unwrap(), u32::try_from(case.int("w2")).unwrap());
        for (pid, side) in [(&a, "a"), (&b, "b")] {
            let code = itsme::derive_code(&seed, window, first, w1, second, w2, pid).unwrap();
            assert_eq!(code, case.text(&format!("{side}_code_text")), "{context} {side}");
            assert_eq!(voice_text(case.int(&format!("{side}_code_value")), 3), code, "{context} {side}");
            let secret = case.hex(&format!("{side}_device_secret"));
            let tag = itsme::derive_device_tag(&seed, window, pid, &secret).unwrap();
            assert_eq!(i64::from(tag), case.int(&format!("{side}_tag")), "{context} {side}");
        }
        // One side in one call, from each side.
        for (me, them, side, other) in [(&a, &b, "a", "b"), (&b, &a, "b", "a")] {
            let (my_secret, their_secret) =
                (case.hex(&format!("{side}_device_secret")), case.hex(&format!("{other}_device_secret")));
            let d = itsme::derive_voice(&seed, window, me, them, &my_secret, &their_secret, w1, w2).unwrap();
            assert_eq!(i64::from(d.session_id), case.int("session_id_value"), "{context} {side}");
            assert_eq!(d.my_words.to_vec(), words(case.field(&format!("{side}_words"))), "{context} {side}");
            assert_eq!(d.their_words.to_vec(), words(case.field(&format!("{other}_words"))), "{context} {side}");
            assert_eq!(d.i_select_first, case.text("first_text") == side, "{context} {side}");
            assert_eq!(i64::from(d.my_code), case.int(&format!("{side}_code_value")), "{context} {side}");
            assert_eq!(i64::from(d.their_code), case.int(&format!("{other}_code_value")), "{context} {side}");
            assert_eq!(i64::from(d.my_tag), case.int(&format!("{side}_tag")), "{context} {side}");
            assert_eq!(i64::from(d.their_tag), case.int(&format!("{other}_tag")), "{context} {side}");
        }
    }
    pid_sizes.sort();
    pid_sizes.dedup();
    assert_eq!(pid_sizes, [8, 32], "identity keys and a fingerprint");
}

/// A device of a new identity: the session ID of a voice session depends on
/// no pid, so a bound session's can be read without the vector's keys.
struct VoiceDevice {
    _secrets: SecretStore,
    identity: Identity,
    contacts: ContactStore,
    _dir: TempDir,
}

impl VoiceDevice {
    fn new(name: &str) -> VoiceDevice {
        let secrets = SecretStore::memory().unwrap();
        let identity = Identity::create(&secrets, name).unwrap();
        let dir = TempDir::new("vectors-voice-bound");
        let contacts = ContactStore::open(&identity, dir.path().join("contacts.db")).unwrap();
        VoiceDevice { _secrets: secrets, identity, contacts, _dir: dir }
    }

    /// Adds `other` as a contact with `seed`; its id.
    fn befriend(&self, other: &VoiceDevice, seed: &[u8]) -> i64 {
        let key = other.identity.public_key().unwrap();
        self.contacts.add("Peer", &key, seed, ExchangeMethod::Qr, T0).unwrap()
    }
}

/// Sessions bound to a call (9.7): the documented inputs, the unbound values
/// through the pure derivations (9.2 and 9.6 unchanged), and the session ID
/// read by two real sessions bound by the vector's binding (and the unbound
/// one by a session not bound), whose codes then match each other.
#[test]
fn voice_bound_sessions() {
    let voice = load("voice.json");
    let sessions = voice.array("bound_sessions");
    assert!(!sessions.is_empty());
    let mut lengths = Vec::new();
    for (i, case) in sessions.iter().enumerate() {
        let context = format!("voice bound session {i}");
        let (seed, window, binding) = (case.hex("seed"), case.int("window"), case.hex("binding"));
        assert!((itsme::CALL_BINDING_MIN..=itsme::CALL_BINDING_MAX).contains(&binding.len()), "{context}");
        lengths.push(binding.len());
        let (a, b) = (case.hex("a_pid"), case.hex("b_pid"));
        let u64_window = window.to_be_bytes();
        // The session ID takes u8(1) and cb as two more items.
        let input = lv_cat(&[b"itsme-session-id-v1", &u64_window, &[1], &binding]);
        assert_eq!(hex_encode(&input), case.text("session_id_input"), "{context}");
        assert_eq!(voice_text(case.int("session_id_value"), 2), case.text("session_id_text"), "{context}");
        let unbound_id = voice_text(case.int("unbound_session_id_value"), 2);
        assert_eq!(itsme::derive_session_id(&seed, window).unwrap(), unbound_id, "{context}: unbound");
        assert_ne!(unbound_id, case.text("session_id_text"), "{context}");
        // Words and the first selector do not change.
        assert_eq!(itsme::derive_words(&seed, window, &a).unwrap().to_vec(), words(case.field("a_words")), "{context}");
        assert_eq!(itsme::derive_words(&seed, window, &b).unwrap().to_vec(), words(case.field("b_words")), "{context}");
        let a_first = (a < b) == itsme::derive_lower_selects_first(&seed, window).unwrap();
        assert_eq!(case.text("first_text"), if a_first { "a" } else { "b" }, "{context}");
        let (first, second) = if a_first { (&a, &b) } else { (&b, &a) };
        let (w1, w2) = (u8::try_from(case.int("w1")).unwrap(), u8::try_from(case.int("w2")).unwrap());
        let info = lv_cat(&[b"itsme-interactive-code-v1", first, &[w1], second, &[w2], &[1], &binding]);
        assert_eq!(hex_encode(&info), case.text("code_info"), "{context}");
        for (pid, side) in [(&a, "a"), (&b, "b")] {
            let bound = case.text(&format!("{side}_code_text"));
            assert_eq!(voice_text(case.int(&format!("{side}_code_value")), 3), bound, "{context} {side}");
            let unbound = itsme::derive_code(&seed, window, first, w1.into(), second, w2.into(), pid).unwrap();
            assert_eq!(voice_text(case.int(&format!("unbound_{side}_code_value")), 3), unbound, "{context} {side}");
            assert_ne!(unbound, bound, "{context} {side}");
        }
        // Two real sessions bound by the binding, planned for the window.
        let (plan, start) = (30 * window - 1, 30 * window);
        let devices = [VoiceDevice::new("A"), VoiceDevice::new("B"), VoiceDevice::new("C")];
        let (x_peer, y_peer) = (devices[0].befriend(&devices[1], &seed), devices[1].befriend(&devices[0], &seed));
        let mut x = VoiceSession::new(&devices[0].contacts, x_peer, Some(&binding), plan).unwrap();
        let mut y = VoiceSession::new(&devices[1].contacts, y_peer, Some(&binding), plan).unwrap();
        for session in [&mut x, &mut y] {
            assert_eq!(session.window().unwrap(), window, "{context}");
            session.start(start).unwrap();
            assert_eq!(session.session_id().unwrap(), case.text("session_id_text"), "{context}");
        }
        // A device of the same seed, not bound, in the same window.
        let z_peer = devices[2].befriend(&devices[0], &seed);
        let mut z = VoiceSession::new(&devices[2].contacts, z_peer, None, plan).unwrap();
        z.start(start).unwrap();
        assert_eq!(z.session_id().unwrap(), unbound_id, "{context}: not bound");
        // The two bound sides go on to codes that match.
        for _ in 0..2 {
            let (selector, listener) =
                if x.turn().unwrap() == VoiceTurn::Mine { (&mut x, &mut y) } else { (&mut y, &mut x) };
            let word = u32::from(selector.words().unwrap()[0]);
            selector.select(word, start).unwrap();
            listener.select(word, start).unwrap();
        }
        assert_eq!(x.your_code().unwrap().0, y.their_code().unwrap().0, "{context}");
        let ((x_code, x_tag), (y_code, y_tag)) = (x.your_code().unwrap(), y.your_code().unwrap());
        // Contacts added without device secrets: the tags are not checked.
        assert_eq!(x.check(&y_code, y_tag, start).unwrap(), VoiceOutcome::VerifiedTagUnchecked, "{context}");
        assert_eq!(y.check(&x_code, x_tag, start).unwrap(), VoiceOutcome::VerifiedTagUnchecked, "{context}");
    }
    lengths.sort();
    lengths.dedup();
    assert_eq!(lengths, [16, 32], "bindings of 16 and 32 bytes");
}

/// A contact stored with a known seed and no device secrets, so that one
/// side can run a voice session alone: the pure derivations give the other
/// side's words.
struct VoiceContact {
    party: Party,
    peer_pid: Vec<u8>,
    id: i64,
}

const VOICE_SEED: [u8; 32] = [5; 32];

impl VoiceContact {
    fn new() -> VoiceContact {
        let qr = load("qr.json");
        let vector = &qr.array("exchanges")[0];
        let party = Party::new(vector.field("a"), "voice contact");
        let peer = vector.field("b");
        let peer_pid = peer.hex("identity_public");
        let id = party.contacts.add(peer.text("name_text"), &peer_pid, &VOICE_SEED, ExchangeMethod::Qr, T0).unwrap();
        VoiceContact { party, peer_pid, id }
    }

    /// A session planned at `now`, started and with both words entered;
    /// returns it and the time it started.
    fn comparing(&self, now: i64) -> (VoiceSession, i64) {
        let contacts = &self.party.contacts;
        let mut session = VoiceSession::new(contacts, self.id, None, now).unwrap();
        let window = session.window().unwrap();
        session.start(30 * window).unwrap();
        let theirs = itsme::derive_words(&VOICE_SEED, window, &self.peer_pid).unwrap();
        for _ in 0..2 {
            let word = match session.turn().unwrap() {
                VoiceTurn::Mine => session.words().unwrap()[0],
                _ => theirs[0],
            };
            session.select(u32::from(word), 30 * window).unwrap();
        }
        assert_eq!(session.state().unwrap(), VoiceState::Comparing);
        (session, 30 * window)
    }
}

#[test]
fn voice_plans() {
    let voice = load("voice.json");
    for (i, case) in voice.array("plans").iter().enumerate() {
        let contact = VoiceContact::new();
        if let Some(Json::Int(last)) = case.get("last_window") {
            contact.party.contacts.use_window(contact.id, *last).unwrap();
        }
        let (now, window) = (case.int("now"), case.int("window"));
        let session = VoiceSession::new(&contact.party.contacts, contact.id, None, now).unwrap();
        let timing = session.timing(now).unwrap();
        assert_eq!((timing.window, timing.starts_in), (window, case.int("starts_in")), "plan {i}");
        assert_eq!(timing.ends_in, 30 * (window + 2) - now, "plan {i}");
    }
}

#[test]
fn voice_heard_codes() {
    let voice = load("voice.json");
    let parse = voice.field("code_parse");
    let contact = VoiceContact::new();
    let mut now = T0;
    for case in parse.array("valid") {
        let typed = case.text("input_text");
        let (mut session, started) = contact.comparing(now);
        now = started;
        let (expected, tag) = session.their_code().unwrap();
        assert_eq!(tag, None, "no device secrets: the tag is not checked");
        let outcome = session.check(typed, 0, now).unwrap();
        let matches = voice_text(case.int("value"), 3) == expected;
        let want = if matches { VoiceOutcome::VerifiedTagUnchecked } else { VoiceOutcome::Mismatch };
        assert_eq!(outcome, want, "{typed:?}");
        // The expected code, typed in the same form, matches.
        let (mut session, started) = contact.comparing(now);
        now = started;
        let (expected, _) = session.their_code().unwrap();
        let (word, digits) = expected.split_once(' ').unwrap();
        let trimmed = typed.trim_matches(' ');
        let lead = &typed[..typed.len() - typed.trim_start_matches(' ').len()];
        let trail = &typed[typed.trim_end_matches(' ').len()..];
        let separator = if trimmed.contains('-') { "-" } else { " " };
        let typed_word = trimmed.split([' ', '-']).next().unwrap();
        let word = if typed_word.chars().all(|c| c.is_ascii_lowercase()) {
            word.to_lowercase()
        } else if typed_word.chars().skip(1).all(|c| c.is_ascii_lowercase()) {
            format!("{}{}", &word[..1], word[1..].to_lowercase())
        } else {
            word.to_owned()
        };
        let same_form = format!("{lead}{word}{separator}{digits}{trail}");
        assert_eq!(session.check(&same_form, 0, now).unwrap(), VoiceOutcome::VerifiedTagUnchecked, "{same_form:?}");
    }
    let (mut session, started) = contact.comparing(now);
    for case in parse.array("invalid") {
        let typed = case.as_str();
        let error = session.check(typed, 0, started).expect_err(typed);
        assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{typed:?}");
        assert_eq!(session.state().unwrap(), VoiceState::Comparing, "{typed:?}");
    }
}

// ---------------------------------------------------------------------------
// voice.json: the degradation code
// ---------------------------------------------------------------------------

/// 24 base-32 letters in six groups of four.
fn degradation_text(letters: &str) -> String {
    letters.as_bytes().chunks(4).map(|group| std::str::from_utf8(group).unwrap()).collect::<Vec<_>>().join("-")
}

#[test]
fn degradation_codes() {
    let voice = load("voice.json");
    let cases = voice.array("degradation");
    assert!(!cases.is_empty());
    for (i, case) in cases.iter().enumerate() {
        let code = itsme::derive_degradation_code(&case.hex("seed"), &case.hex("pid"), &case.hex("secret")).unwrap();
        assert_eq!(code, case.text("code_text"), "degradation {i}");
        let raw = base32_decode(&code.replace('-', "")).unwrap();
        assert_eq!(raw, [case.hex("secret"), case.hex("mac")].concat(), "degradation {i}: secret and mac");
        assert_eq!(case.hex("mac").len(), 5);
    }
}

#[test]
fn degradation_code_parsing() {
    let voice = load("voice.json");
    let parse = voice.field("degradation_parse");
    let example = &voice.array("degradation")[0];
    let contact = VoiceContact::new();
    let contacts = &contact.party.contacts;
    for case in parse.array("valid") {
        let typed = case.text("input_text");
        let letters: String = typed.chars().filter(|c| *c != ' ' && *c != '-').collect::<String>().to_uppercase();
        let raw = case.hex("bytes");
        assert_eq!(base32_decode(&letters).as_deref(), Some(&raw[..]), "{typed:?}");
        // The first 16 letters carry the 10-byte secret alone: a code
        // derived from it starts with them, whatever the seed and person.
        let code = itsme::derive_degradation_code(&example.hex("seed"), &example.hex("pid"), &raw[..10]).unwrap();
        assert_eq!(code[..19], degradation_text(&letters)[..19], "{typed:?}");
        // Typed to a contact it parses: refused as a wrong code, not as junk
        // (fewer wrong codes than lock).
        let error = contacts.accept_degradation_code(contact.id, typed, T0).expect_err(typed);
        assert_eq!(error.kind(), ErrorKind::AuthenticationFailed, "{typed:?}");
    }
    for case in parse.array("invalid") {
        let typed = case.as_str();
        let error = contacts.accept_degradation_code(contact.id, typed, T0).expect_err(typed);
        assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{typed:?}");
    }
}

// ---------------------------------------------------------------------------
// online-verify.json, pin-update.json
// ---------------------------------------------------------------------------

/// One side of a session vector: its identity, drawn from
/// `identity_random_seed`, holding the other side as a contact added with
/// the vector's seed.
struct VectorSide {
    contacts: ContactStore,
    _identity: Identity,
    _secrets: SecretStore,
    id: i64,
    _dir: TempDir,
}

/// Both sides of a session vector, `a` then `b`.
fn vector_sides(vector: &Json, context: &str) -> [VectorSide; 2] {
    let other = |side: &str| if side == "a" { "b" } else { "a" };
    ["a", "b"].map(|side| {
        let party = vector.field(side);
        let secrets = SecretStore::memory().unwrap();
        let mut rng = DeterministicRandom::new(&party.hex_array("identity_random_seed")).unwrap();
        let identity = Identity::create_with_random(&secrets, &side.to_uppercase(), Some(&mut rng)).unwrap();
        assert_hex(&identity.public_key().unwrap(), party, "pid", &format!("{context} {side}"));
        let dir = TempDir::new("vectors-sessions");
        let contacts = ContactStore::open(&identity, dir.path().join("contacts.db")).unwrap();
        let peer = vector.field(other(side));
        let id = contacts
            .add(&other(side).to_uppercase(), &peer.hex("pid"), &vector.hex("seed"), ExchangeMethod::Qr, T0)
            .unwrap();
        VectorSide { contacts, _identity: identity, _secrets: secrets, id, _dir: dir }
    })
}

/// (initiator side, responder side) of a session vector: indices into
/// `vector_sides`.
fn roles(vector: &Json, context: &str) -> (usize, usize) {
    let (a, b) = (vector.field("a").hex("pid"), vector.field("b").hex("pid"));
    let roles = match vector.text("initiator_text") {
        "a" => (0, 1),
        "b" => (1, 0),
        other => panic!("{context}: initiator_text {other:?}"),
    };
    assert_eq!(roles.0 == 0, a < b, "{context}: the lower pid initiates");
    roles
}

/// An optional hex member: `None` when missing or `null`.
fn optional_hex(vector: &Json, key: &str) -> Option<Vec<u8>> {
    match vector.get(key) {
        None | Some(Json::Null) => None,
        Some(value) => Some(hex_decode(value.as_str()).unwrap_or_else(|| panic!("{key} is not hex"))),
    }
}

/// Both sides of a session vector, each from its random seed (bound to its
/// `*_binding` where the vector has that member, not null), play every
/// message: the COMMIT and the KEYs (with `bind` where bound) are the
/// vector's, the PROOFs of its length.  Returns the sides, their sessions
/// (`a` then `b`) once both PROOFs are in, and (initiator, responder).
fn play_online_verify(vector: &Json, context: &str) -> ([VectorSide; 2], Vec<OnlineVerify>, (usize, usize)) {
    let sides = vector_sides(vector, context);
    let (window, now) = (vector.int("window"), 30 * vector.int("window"));
    let mut made: Vec<OnlineVerify> = ["a", "b"]
        .iter()
        .zip(&sides)
        .map(|(side, s)| {
            let mut rng = DeterministicRandom::new(&vector.field(side).hex_array("random_seed")).unwrap();
            let binding = optional_hex(vector, &format!("{side}_binding"));
            let mut session =
                OnlineVerify::new(&s.contacts, s.id, Some(window), binding.as_deref(), now, Some(&mut rng)).unwrap();
            // A side that shares its profile puts the reference in its
            // PROOF (section 11.3).
            if let Some(reference) = vector.field(side).get("profile_reference") {
                let reference = hex_decode(reference.as_str()).expect("profile_reference");
                session.share_profile(&reference).unwrap();
            }
            session
        })
        .collect();
    for session in &made {
        assert_eq!(session.room().unwrap(), vector.text("room"), "{context}: room");
    }
    let (ii, ri) = roles(vector, context);
    let name = |index: usize| if index == 0 { "a" } else { "b" };
    // 11.4: a bound side appends bind to its KEY.
    let bind = |index: usize| {
        optional_hex(vector, &format!("{}_bind", name(index))).map_or(String::new(), |b| hex_encode(&b))
    };
    let (i_bind, r_bind) = (bind(ii), bind(ri));
    let (a, b) = made.split_at_mut(1);
    let (initiator, responder) = if ii == 0 { (&mut a[0], &mut b[0]) } else { (&mut b[0], &mut a[0]) };
    assert!(responder.next_outgoing().unwrap().is_empty(), "{context}: the responder waits for the COMMIT");
    let commit = initiator.next_outgoing().unwrap();
    assert_hex(&commit, vector, "commit", context);
    responder.receive(&commit, now).unwrap();
    let key_r = responder.next_outgoing().unwrap();
    assert_hex(&key_r, vector, "key_r", context);
    initiator.receive(&key_r, now).unwrap();
    let key_i = initiator.next_outgoing().unwrap();
    assert_hex(&key_i, vector, "key_i", context);
    for (key, index, bind) in [(&key_r, ri, &r_bind), (&key_i, ii, &i_bind)] {
        let side = vector.field(name(index));
        assert_eq!(
            hex_encode(key),
            format!("0102{}{}{bind}", side.text("ephemeral_public"), side.text("challenge")),
            "{context}: {}'s KEY",
            name(index)
        );
    }
    let proof_i = initiator.next_outgoing().unwrap();
    responder.receive(&key_i, now).unwrap();
    let proof_r = responder.next_outgoing().unwrap();
    // The PROOFs carry device tags, which need device secrets these
    // contacts lack: only their length is the vector's.
    assert_eq!(proof_i.len(), vector.hex("proof_message_i").len(), "{context}");
    assert_eq!(proof_r.len(), vector.hex("proof_message_r").len(), "{context}");
    responder.receive(&proof_i, now).unwrap();
    initiator.receive(&proof_r, now).unwrap();
    (sides, made, (ii, ri))
}

#[test]
fn online_verify_sessions() {
    let online = load("online-verify.json");
    let sessions = online.array("sessions");
    assert!(!sessions.is_empty());
    assert!(
        sessions.iter().any(|v| v.field("a").get("profile_reference").is_some()),
        "a session carries profile references"
    );
    for (n, vector) in sessions.iter().enumerate() {
        let context = format!("online verify session {n}");
        let now = 30 * vector.int("window");
        let (_sides, mut made, (ii, ri)) = play_online_verify(vector, &context);
        let (a, b) = made.split_at_mut(1);
        let (initiator, responder) = if ii == 0 { (&mut a[0], &mut b[0]) } else { (&mut b[0], &mut a[0]) };
        for (session, peer) in [
            (&mut *initiator, if ri == 0 { "a" } else { "b" }),
            (&mut *responder, if ii == 0 { "a" } else { "b" }),
        ] {
            assert_eq!(session.state().unwrap(), OnlineVerifyState::CompareSas, "{context}");
            assert_eq!(session.sas().unwrap(), vector.text("sas_text"), "{context}: sas_text");
            assert_eq!(session.peer_profile().unwrap_err().kind(), ErrorKind::InvalidState, "{context}: before confirming");
            // Without device secrets the tags are not checked.
            assert_eq!(session.confirm(now).unwrap(), VoiceOutcome::VerifiedTagUnchecked, "{context}");
            // The peer's profile reference, once the SAS is confirmed.
            match vector.field(peer).get("profile_reference") {
                Some(reference) => {
                    let received = session.peer_profile().unwrap();
                    assert_eq!(hex_encode(&received), reference.as_str(), "{context}: {peer}'s reference");
                }
                None => assert_eq!(session.peer_profile().unwrap_err().kind(), ErrorKind::NotFound, "{context}"),
            }
        }
        assert_eq!(itsme::derive_sas(&vector.hex("seed"), &vector.hex("th")).unwrap(), vector.text("sas_text"));
        assert_eq!(i64::from(itsme::short_code_parse(vector.text("sas_text")).unwrap()), vector.int("sas_value"));
    }
}

/// Sessions bound to a call (11.4), played from both sides' random seeds
/// and bindings: the KEYs carry `bind`, and both sides end in the vector's
/// `state_text`; a SAS only when both are bound to one call, and nothing
/// recorded otherwise.
#[test]
fn online_verify_bound_sessions() {
    let online = load("online-verify.json");
    let sessions = online.array("bound_sessions");
    let mut states: Vec<&str> = sessions.iter().map(|v| v.text("state_text")).collect();
    states.sort();
    assert_eq!(states, ["binding_differs", "compare_sas", "other_call"], "every end state");
    for vector in sessions {
        let context = format!("online verify bound session ({})", vector.text("state_text"));
        let now = 30 * vector.int("window");
        for side in ["a", "b"] {
            let (binding, bind) =
                (optional_hex(vector, &format!("{side}_binding")), optional_hex(vector, &format!("{side}_bind")));
            assert_eq!(binding.is_some(), bind.is_some(), "{context}: {side}");
            assert_eq!(bind.map_or(0, |b| b.len()), if binding.is_some() { 32 } else { 0 }, "{context}: {side}");
        }
        let expected = match vector.text("state_text") {
            "compare_sas" => OnlineVerifyState::CompareSas,
            "binding_differs" => OnlineVerifyState::BindingDiffers,
            "other_call" => OnlineVerifyState::OtherCall,
            other => panic!("{context}: state_text {other:?}"),
        };
        let (sides, mut made, _) = play_online_verify(vector, &context);
        for (session, side) in made.iter_mut().zip(&sides) {
            assert_eq!(session.state().unwrap(), expected, "{context}");
            if expected == OnlineVerifyState::CompareSas {
                assert_eq!(session.sas().unwrap(), vector.text("sas_text"), "{context}: sas_text");
                assert_eq!(session.confirm(now).unwrap(), VoiceOutcome::VerifiedTagUnchecked, "{context}");
            } else {
                assert!(vector.get("sas_text").is_none(), "{context}: no SAS");
                let before = side.contacts.get(side.id).unwrap();
                assert_eq!(session.sas().unwrap_err().kind(), ErrorKind::InvalidState, "{context}: no SAS");
                assert_eq!(session.confirm(now).unwrap_err().kind(), ErrorKind::InvalidState, "{context}");
                assert_eq!(session.reject().unwrap_err().kind(), ErrorKind::InvalidState, "{context}: final");
                assert_eq!(session.state().unwrap(), expected, "{context}");
                assert_eq!(side.contacts.get(side.id).unwrap(), before, "{context}: nothing recorded");
                assert_eq!(before.verified_at, None, "{context}: never verified");
            }
        }
        if expected == OnlineVerifyState::CompareSas {
            assert_eq!(itsme::derive_sas(&vector.hex("seed"), &vector.hex("th")).unwrap(), vector.text("sas_text"));
        }
    }
}

/// Each Online Verify refusal played against a fresh side of its session:
/// every message but the last is accepted, the last refused as named.
#[test]
fn online_verify_rejections() {
    let online = load("online-verify.json");
    let rejections = online.array("rejections");
    assert!(!rejections.is_empty());
    for (i, case) in rejections.iter().enumerate() {
        let context = format!("online verify rejection {i} ({})", case.text("case_text"));
        let vector = &online.array("sessions")[usize::try_from(case.int("session")).unwrap()];
        let sides = vector_sides(vector, &context);
        let (window, now) = (vector.int("window"), 30 * vector.int("window"));
        let side = case.text("receiver_text");
        let s = &sides[if side == "a" { 0 } else { 1 }];
        let mut rng = DeterministicRandom::new(&vector.field(side).hex_array("random_seed")).unwrap();
        let mut session = OnlineVerify::new(&s.contacts, s.id, Some(window), None, now, Some(&mut rng)).unwrap();
        let messages = case.array("messages");
        for (n, message) in messages.iter().enumerate() {
            let result = session.receive(&hex_decode(message.as_str()).unwrap(), now);
            if n + 1 < messages.len() {
                result.unwrap_or_else(|e| panic!("{context}: message {n} failed: {e}"));
            } else {
                let error = result.expect_err(&context);
                assert_eq!(error.kind(), error_kind(case.text("result")), "{context}: {error}");
            }
        }
    }
}

#[test]
fn pin_update_sessions() {
    let pin_update = load("pin-update.json");
    let sessions = pin_update.array("sessions");
    assert!(!sessions.is_empty());
    for (n, vector) in sessions.iter().enumerate() {
        let context = format!("pin update session {n}");
        let sides = vector_sides(vector, &context);
        let (window, now) = (vector.int("window"), 30 * vector.int("window"));
        let mut made: Vec<PinUpdate> = ["a", "b"]
            .iter()
            .zip(&sides)
            .map(|(side, s)| {
                let mut rng = DeterministicRandom::new(&vector.field(side).hex_array("random_seed")).unwrap();
                PinUpdate::new(&s.contacts, s.id, Some(window), now, Some(&mut rng)).unwrap()
            })
            .collect();
        for update in &made {
            assert_eq!(update.session_code().unwrap(), vector.text("session_code_text"), "{context}");
        }
        assert_eq!(
            i64::from(itsme::short_code_parse(vector.text("session_code_text")).unwrap()),
            vector.int("session_code_value")
        );
        let (ii, ri) = roles(vector, &context);
        let (a, b) = made.split_at_mut(1);
        let (initiator, responder) = if ii == 0 { (&mut a[0], &mut b[0]) } else { (&mut b[0], &mut a[0]) };
        let key_i = initiator.next_outgoing().unwrap();
        let key_r = responder.next_outgoing().unwrap();
        assert_hex(&key_i, vector, "key_i", &context);
        assert_hex(&key_r, vector, "key_r", &context);
        let initiator_side = vector.field(if ii == 0 { "a" } else { "b" });
        assert_eq!(hex_encode(&key_i), format!("0101{}", initiator_side.text("ephemeral_public")), "{context}");
        responder.receive(&key_i, now).unwrap();
        initiator.receive(&key_r, now).unwrap();
        let new_i = initiator.next_outgoing().unwrap();
        assert_hex(&new_i, vector, "new_i", &context);
        assert!(responder.next_outgoing().unwrap().is_empty(), "{context}: the responder waits for the NEW");
        responder.receive(&new_i, now).unwrap();
        let new_r = responder.next_outgoing().unwrap();
        assert_hex(&new_r, vector, "new_r", &context);
        initiator.receive(&new_r, now).unwrap();
        let done = initiator.next_outgoing().unwrap();
        assert_hex(&done, vector, "done", &context);
        // The NEW plaintexts: new device secret || confirmation, 48 bytes
        // sealed into the 66-byte frames.
        let responder_side = vector.field(if ri == 0 { "a" } else { "b" });
        for (role, side) in [("i", initiator_side), ("r", responder_side)] {
            let plain = vector.hex(&format!("new_plaintext_{role}"));
            assert_eq!(plain, [side.hex("new_device_secret"), vector.hex(&format!("confirm_{role}"))].concat(), "{context}");
            assert_eq!(vector.hex(&format!("new_{role}")).len(), 2 + plain.len() + 16, "{context}");
        }
        responder.receive(&done, now).unwrap();
        for (update, side) in [(&mut *initiator, &sides[ii]), (&mut *responder, &sides[ri])] {
            assert_eq!(update.state().unwrap(), PinUpdateState::Done, "{context}");
            assert!(update.next_outgoing().unwrap().is_empty(), "{context}");
            assert_eq!(side.contacts.get(side.id).unwrap().state, VerificationState::Verified, "{context}");
        }
    }
}

// ---------------------------------------------------------------------------
// profile.json
// ---------------------------------------------------------------------------

#[test]
fn profile_records() {
    let vectors = load("profile.json");
    assert_eq!(vectors.int("max_record_bytes"), itsme::PROFILE_RECORD_MAX as i64);
    let owner = vectors.hex("owner_public");
    let records = vectors.array("records");
    assert!(!records.is_empty());
    for (n, vector) in records.iter().enumerate() {
        let context = format!("profile record {n}");
        let record = vector.hex("record");
        assert_eq!(record.len() as i64, vector.int("size"), "{context}: size");
        let fields = vector.array("fields");
        let names: Vec<&str> = fields.iter().map(|f| f.text("field_name_text")).collect();
        assert_eq!(names, ["name", "photo", "photo-filename"], "{context}");
        let values: Vec<Vec<u8>> = fields.iter().map(|f| f.hex("value")).collect();
        assert_eq!(record.len(), itsme::PROFILE_RECORD_OVERHEAD + values.iter().map(Vec::len).sum::<usize>(), "{context}");
        // The layout of 18.2: version, three fields, the record MAC.
        let mut expected = vec![1u8];
        for field in fields {
            let ciphertext = field.hex("ciphertext");
            expected.extend(field.hex("nonce"));
            expected.extend((ciphertext.len() as u32).to_be_bytes());
            expected.extend(&ciphertext);
            expected.extend(field.hex("mac"));
        }
        expected.extend(vector.hex("record_mac"));
        assert_eq!(hex_encode(&expected), hex_encode(&record), "{context}: record layout");
        // The reference is the record ID and the record key; the ID is the
        // first 16 bytes of the record MAC.
        let reference = vector.hex("reference");
        assert_eq!(hex_encode(&reference), format!("{}{}", vector.text("record_id"), vector.text("record_key")), "{context}");
        assert_eq!(vector.text("record_mac")[..32], *vector.text("record_id"), "{context}");

        let profile = Profile::open(&record, &reference, &owner).unwrap_or_else(|e| panic!("{context}: {e}"));
        assert_eq!(profile.name().unwrap(), vector.text("name_text"), "{context}: name");
        assert_eq!(profile.name().unwrap().as_bytes(), values[0], "{context}: name bytes");
        assert_hex(&profile.photo().unwrap(), &fields[1], "value", &context);
        assert_eq!(profile.photo_filename().unwrap(), vector.text("photo_filename_text"), "{context}: photo_filename_text");
        assert_eq!(profile.photo_filename().unwrap().as_bytes(), values[2], "{context}: filename bytes");
        assert_hex(&profile.record_id().unwrap(), vector, "record_id", &context);
        assert_eq!(profile.record_name().unwrap(), vector.text("record_name_text"), "{context}: record_name_text");
        assert_hex(&profile.reference().unwrap(), vector, "reference", &context);
        assert_hex(&profile.record().unwrap(), vector, "record", &context);
        let reference = itsme::ProfileReference::from_bytes(&reference).unwrap();
        assert_eq!(reference.record_name(), vector.text("record_name_text"), "{context}");
    }

    let refusals = vectors.array("refusals");
    assert!(refusals.iter().any(|case| case.get("record_zero_bytes").is_some()));
    for case in refusals {
        let context = format!("profile refusal {:?}", case.text("case_text"));
        let record = match case.get("record_zero_bytes") {
            Some(count) => vec![0u8; usize::try_from(count.as_i64()).unwrap()],
            None => case.hex("record"),
        };
        let kind = error_kind(case.text("error_text"));
        let error = Profile::open(&record, &case.hex("reference"), &case.hex("owner_public"))
            .map(|_| ())
            .expect_err(&context);
        assert_eq!(error.kind(), kind, "{context}: {error}");
        assert!(!error.detail.is_empty(), "{context}: a detail");
    }
}

// ---------------------------------------------------------------------------
// approval.json
// ---------------------------------------------------------------------------

/// A scope list given as text: space-separated, "" for none.
fn scope_list(text: &str) -> Vec<&str> {
    if text.is_empty() {
        Vec::new()
    } else {
        text.split(' ').collect()
    }
}

fn public_keys(vector: &Json) -> Vec<[u8; 32]> {
    vector
        .array("public_keys")
        .iter()
        .map(|key| <[u8; 32]>::try_from(hex_decode(key.as_str()).expect("a key").as_slice()).expect("32 bytes"))
        .collect()
}

/// Every insert a closure replay store received: (key, expires_at, now).
type Inserts = Arc<Mutex<Vec<([u8; 32], i64, i64)>>>;

/// A replay store backed by a closure (a set of keys), and what it saw.
fn closure_store() -> (itsme::ReplayStore, Inserts) {
    let inserts: Inserts = Arc::default();
    let seen = inserts.clone();
    let mut keys = HashSet::new();
    let store = itsme::ReplayStore::from_fn(move |key, expires_at, now| {
        seen.lock().unwrap().push((*key, expires_at, now));
        Ok(!keys.insert(*key))
    })
    .unwrap();
    (store, inserts)
}

#[test]
fn approvals() {
    let vectors = load("approval.json");
    // Enrollment: each device's key drawn from its random source, the
    // message and the stored item byte for byte; the service's check.
    let mut devices = Vec::new();
    for (n, vector) in vectors.array("enrollments").iter().enumerate() {
        let context = format!("enrollment {n}");
        let items = common::people::Items::default();
        let store = SecretStore::from_backend(Box::new(items.clone())).unwrap();
        let mut rng = DeterministicRandom::new(&vector.hex_array("random_seed")).unwrap();
        let service = vector.text("service_id_text");
        let enrollment = store.enroll(service, vector.text("label_text"), &vector.hex("nonce"), Some(&mut rng)).unwrap();
        assert_hex(&enrollment, vector, "enrollment", &context);
        assert_hex(&store.credential_id(service).unwrap(), vector, "credential_id", &context);
        let item = items.get(vector.text("credential_item_text")).unwrap_or_else(|| panic!("{context}: the item"));
        assert_hex(&item, vector, "credential_item", &context);
        let credential = itsme::verify_enrollment(service, &vector.hex("nonce"), &enrollment).unwrap();
        assert_hex(&credential.credential_id, vector, "credential_id", &context);
        assert_hex(&credential.public_key, vector, "public_key", &context);
        assert_eq!(credential.label, vector.text("label_text"), "{context}");
        devices.push(store);
    }
    assert_eq!(devices.len(), 2, "two devices of one user");

    // Requests: made byte for byte from the random source, read back.
    let requests = vectors.array("requests");
    for (n, vector) in requests.iter().enumerate() {
        let context = format!("request {n}");
        let mut rng = DeterministicRandom::new(&vector.hex_array("random_seed")).unwrap();
        let request = itsme::create_approval_request(
            vector.text("service_id_text"),
            vector.text("service_name_text"),
            vector.text("session_id_text"),
            &scope_list(vector.text("scopes_given_text")),
            vector.int("lifetime"),
            vector.int("now"),
            Some(&mut rng),
        )
        .unwrap();
        assert_hex(&request, vector, "request", &context);
        let shown = itsme::ApprovalRequest::parse(&request, vector.int("now")).unwrap();
        assert_eq!(shown.service_id, vector.text("service_id_text"), "{context}");
        assert_eq!(shown.service_name, vector.text("service_name_text"), "{context}");
        assert_eq!(shown.session_id, vector.text("session_id_text"), "{context}");
        assert_eq!(shown.otp, vector.text("otp_text"), "{context}");
        assert_eq!((shown.issued_at, shown.expires_at), (vector.int("issued_at"), vector.int("expires_at")), "{context}");
        assert_eq!(shown.scopes, scope_list(vector.text("scopes_text")), "{context}");
        // Still shown at its expiry, not a second later.
        itsme::ApprovalRequest::parse(&request, vector.int("expires_at")).unwrap();
        let late = itsme::ApprovalRequest::parse(&request, vector.int("expires_at") + 1);
        assert_eq!(late.unwrap_err().kind(), ErrorKind::Expired, "{context}");
    }

    // Approvals: signed byte for byte by the enrolled device, verified.
    for vector in vectors.array("approvals") {
        let context = format!("approval {:?}", vector.text("case_text"));
        let device = &devices[usize::try_from(vector.int("enrollment")).unwrap()];
        let request_vector = &requests[usize::try_from(vector.int("request")).unwrap()];
        let request = request_vector.hex("request");
        let decision = itsme::ApprovalDecision::try_from(u32::try_from(vector.int("decision")).unwrap()).unwrap();
        let approval = device
            .sign_approval(&request, decision, &scope_list(vector.text("granted_given_text")), vector.int("timestamp"))
            .unwrap();
        assert_hex(&approval, vector, "approval", &context);
        let keys = public_keys(vector);
        let now = vector.int("verify_now");
        let memory = itsme::ReplayStore::memory(0).unwrap();
        let (closure, inserts) = closure_store();
        for replay in [&memory, &closure] {
            let result = itsme::verify_approval(&request, &approval, &keys, replay, now).unwrap();
            assert_eq!(result.decision, decision, "{context}");
            assert_hex(&result.credential_id, vector, "credential_id", &context);
            assert_eq!(result.timestamp, vector.int("timestamp"), "{context}");
            assert_eq!(result.granted_scopes, scope_list(vector.text("granted_text")), "{context}");
            let again = itsme::verify_approval(&request, &approval, &keys, replay, now);
            assert_eq!(again.unwrap_err().kind(), ErrorKind::Replayed, "{context}");
        }
        // The replay key of 19.5 step 7, kept until the request expires.
        let inserts = inserts.lock().unwrap();
        assert_eq!(inserts.len(), 2, "{context}");
        for (key, expires_at, at) in inserts.iter() {
            assert_eq!(hex_encode(key), request_vector.text("replay_key"), "{context}: replay_key");
            assert_eq!((*expires_at, *at), (request_vector.int("expires_at"), now), "{context}");
        }
    }

    // Refusals, each against a replay store that starts empty: the
    // in-memory one and a closure.
    let refusals = vectors.array("refusals");
    for case in refusals {
        let context = format!("approval refusal {:?}", case.text("case_text"));
        let kind = error_kind(case.text("error_text"));
        let (request, keys, now) = (case.hex("request"), public_keys(case), case.int("now"));
        let approvals: Vec<Vec<u8>> =
            case.array("approvals").iter().map(|a| hex_decode(a.as_str()).expect("an approval")).collect();
        let (last, before) = approvals.split_last().expect("at least one approval");
        let memory = itsme::ReplayStore::memory(0).unwrap();
        let (closure, _) = closure_store();
        for replay in [&memory, &closure] {
            for approval in before {
                // Each earlier one verifies, or is a forgery that spends
                // nothing.
                let _ = itsme::verify_approval(&request, approval, &keys, replay, now);
            }
            let error = itsme::verify_approval(&request, last, &keys, replay, now).map(|_| ()).expect_err(&context);
            assert_eq!(error.kind(), kind, "{context}: {error}");
            assert!(!error.detail.is_empty(), "{context}: a detail");
        }
    }
    for kind in ["invalid_argument", "malformed_message", "expired", "not_found", "authentication_failed", "replayed"] {
        assert!(refusals.iter().any(|case| case.text("error_text") == kind), "a refusal with {kind}");
    }

    for case in vectors.array("request_refusals") {
        let context = format!("request refusal {:?}", case.text("case_text"));
        let error = itsme::ApprovalRequest::parse(&case.hex("request"), case.int("now")).expect_err(&context);
        assert_eq!(error.kind(), error_kind(case.text("error_text")), "{context}: {error}");
    }
    for case in vectors.array("enrollment_refusals") {
        let context = format!("enrollment refusal {:?}", case.text("case_text"));
        let error = itsme::verify_enrollment(case.text("service_id_text"), &case.hex("nonce"), &case.hex("enrollment"))
            .expect_err(&context);
        assert_eq!(error.kind(), error_kind(case.text("error_text")), "{context}: {error}");
    }
}

// ---------------------------------------------------------------------------
// remote.json
// ---------------------------------------------------------------------------

#[test]
fn remote_codes() {
    let remote = load("remote.json");
    let codes = remote.array("codes");
    assert!(codes.iter().any(|case| case.get("canonical_text").is_some()));
    assert!(codes.iter().any(|case| case.get("error_text").is_some()));
    for case in codes {
        let input = case.text("input_text");
        match case.get("shown_text") {
            Some(shown) => {
                let shown = shown.as_str();
                assert_eq!(itsme::check_remote_code(input).unwrap(), shown, "{input:?}");
                assert_eq!(shown.replace('-', ""), case.text("canonical_text"), "{input:?}");
            }
            None => {
                let error = itsme::check_remote_code(input).expect_err(input);
                assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{input:?}: {error}");
            }
        }
    }
}

/// Whole invite and real-time exchanges from each party's random seed:
/// the same codes, relay ID, messages and SAS.
#[test]
fn remote_exchanges() {
    let remote = load("remote.json");
    let exchanges = remote.array("exchanges");
    assert!(!exchanges.is_empty());
    for (i, vector) in exchanges.iter().enumerate() {
        let context = format!("remote exchange {i}");
        let realtime = bool_field(vector, "realtime");
        let method = if realtime { ExchangeMethod::Realtime } else { ExchangeMethod::Invite };
        let (vi, vr) = (vector.field("inviter"), vector.field("invitee"));
        let mut a = Party::new(vi, &format!("{context} inviter"));
        let mut b = Party::new(vr, &format!("{context} invitee"));

        let mut ea = Exchange::invite(&a.identity, &a.contacts, realtime, T0, Some(&mut a.rng)).unwrap();
        let invite_code = vector.text("invite_code_text");
        assert_eq!(ea.invite_code().unwrap(), invite_code, "{context}");
        assert_eq!(ea.encryption_code().unwrap(), vector.text("encryption_code_text"), "{context}");
        let relay_id = vector.text(if realtime { "room_id" } else { "invite_id" });
        assert_eq!(ea.relay_id().unwrap(), relay_id, "{context}: relay ID");
        let mut eb = Exchange::accept_invite(
            &b.identity, &b.contacts,
            &invite_code.to_lowercase(),
            vector.text("encryption_code_text"),
            realtime,
            T0,
            Some(&mut b.rng),
        )
        .unwrap();
        assert_eq!(eb.relay_id().unwrap(), relay_id, "{context}: relay ID");
        assert_eq!((ea.is_inviter().unwrap(), eb.is_inviter().unwrap()), (true, false), "{context}");

        let invite = ea.next_outgoing().unwrap();
        assert_hex(&invite, vector, "invite_message", &context);
        eb.receive(&invite, T0).unwrap();
        let accept = eb.next_outgoing().unwrap();
        assert_hex(&accept, vector, "accept_message", &context);
        ea.receive(&accept, T0).unwrap();
        let reply = ea.next_outgoing().unwrap();
        assert_hex(&reply, vector, "reply_message", &context);
        eb.receive(&reply, T0).unwrap();
        for (ex, side) in [(&ea, "inviter"), (&eb, "invitee")] {
            assert_eq!(ex.status().unwrap(), (ExchangeState::CompareSas, ExchangeFlags::empty()), "{context} {side}");
            assert_eq!(ex.method().unwrap(), method, "{context} {side}");
        }
        assert_sas_ready([(&ea, vr, "inviter"), (&eb, vi, "invitee")], vector, &context);

        // The pure derivations agree with the exchange.
        for (mine, theirs) in [(vi, vr), (vr, vi)] {
            let seed = party_seed(mine, theirs);
            assert_hex(&seed, vector, "seed", &context);
        }
        let sas = itsme::derive_sas(&vector.hex("seed"), &vector.hex("transcript_hash")).unwrap();
        assert_eq!(sas, vector.text("sas_text"), "{context}");

        // The decisions (16.3 step 5): the inviter confirms; the invitee
        // confirms or rejects as the vector says. Each message is the
        // vector's, and each side settles the other's.
        let invitee_confirms = vr.int("decision") == 1;
        let id_a = ea.confirm(T0).unwrap();
        let id_b = if invitee_confirms {
            Some(eb.confirm(T0).unwrap())
        } else {
            eb.reject().unwrap();
            None
        };
        let decision_b = eb.next_outgoing().unwrap();
        assert_hex(&decision_b, vr, "decision_message", &context);
        ea.receive(&decision_b, T0).unwrap();
        let decision_a = ea.next_outgoing().unwrap();
        assert_hex(&decision_a, vi, "decision_message", &context);
        assert_eq!(ea.settle(T0).unwrap(), if invitee_confirms { Some(id_a) } else { None }, "{context}");
        eb.receive(&decision_a, T0).unwrap();
        assert!(eb.status().unwrap().1.contains(ExchangeFlags::PEER_CONFIRMED), "{context}");
        if let Some(id_b) = id_b {
            assert_eq!(eb.settle(T0).unwrap(), Some(id_b), "{context}");
            for (contacts, id, peer) in [(&a.contacts, id_a, vr), (&b.contacts, id_b, vi)] {
                let contact = contacts.get(id).unwrap();
                assert_eq!(
                    (contact.name.as_str(), contact.state, contact.method),
                    (peer.text("name_text"), VerificationState::Verified, method),
                    "{context}"
                );
            }
        } else {
            assert_eq!((a.contacts.count().unwrap(), b.contacts.count().unwrap()), (0, 0), "{context}");
        }
    }
}

/// Messages a fresh side of the invite exchange (the first of remote.json)
/// refuses: every one but the last is accepted, the last refused with the
/// vector's result code.
#[test]
fn remote_rejections() {
    let remote = load("remote.json");
    let first = &remote.array("exchanges")[0];
    let rejections = remote.array("rejections");
    assert!(rejections.len() >= 20);
    for vector in rejections {
        let context = vector.text("case_text").to_string();
        let mut a = Party::new(first.field("inviter"), &format!("{context} inviter"));
        let mut b = Party::new(first.field("invitee"), &format!("{context} invitee"));
        let mut inviter = Exchange::invite(&a.identity, &a.contacts, false, T0, Some(&mut a.rng)).unwrap();
        let mut invitee = Exchange::accept_invite(
            &b.identity, &b.contacts,
            first.text("invite_code_text"),
            first.text("encryption_code_text"),
            false,
            T0,
            Some(&mut b.rng),
        )
        .unwrap();
        let receiver = if vector.text("receiver_text") == "inviter" { &mut inviter } else { &mut invitee };
        let messages: Vec<Vec<u8>> =
            vector.array("messages").iter().map(|m| hex_decode(m.as_str()).unwrap()).collect();
        let (last, accepted) = messages.split_last().unwrap();
        for m in accepted {
            receiver.receive(m, T0).unwrap_or_else(|e| panic!("{context}: {e}"));
        }
        let error = receiver.receive(last, T0).expect_err(&context);
        assert_eq!(error.kind(), error_kind(vector.text("result")), "{context}: {error}");
    }
}

/// Section 8.2 (reexchange.json): the same two exchange by QR twice, Bob
/// renamed between; the second finds the stored contact, keeps its id and
/// name, and both confirmations make it verified again with the new seed.
#[test]
fn reexchange() {
    let vectors = load("reexchange.json");
    let mut a = Party::new(vectors.field("a"), "reexchange a");
    let mut b = Party::new(vectors.field("b"), "reexchange b");
    let mut contact_id = None;
    for vector in vectors.array("exchanges") {
        let now = vector.int("now");
        b.identity.set_name(vector.text("b_name_text")).unwrap();
        let mut xa = Exchange::qr(&a.identity, &a.contacts, now, Some(&mut a.rng)).unwrap();
        let mut xb = Exchange::qr(&b.identity, &b.contacts, now, Some(&mut b.rng)).unwrap();
        let (pa, pb) = (xa.next_outgoing().unwrap(), xb.next_outgoing().unwrap());
        assert_eq!(String::from_utf8(pa.clone()).unwrap(), vector.text("a_payload_text"));
        assert_eq!(String::from_utf8(pb.clone()).unwrap(), vector.text("b_payload_text"));
        xa.receive(&pb, now).unwrap();
        xb.receive(&pa, now).unwrap();
        assert_eq!(xa.sas().unwrap(), vector.text("sas_text"));
        assert_eq!(xb.sas().unwrap(), vector.text("sas_text"));
        let id = xa.confirm(now).unwrap();
        xb.confirm(now).unwrap();
        assert_eq!(xa.status().unwrap().1.contains(ExchangeFlags::KNOWN_CONTACT), bool_field(vector, "known_contact"));
        assert_eq!(*contact_id.get_or_insert(id), id, "the contact keeps its id");
        let contact = a.contacts.get(id).unwrap();
        let stored = vector.field("a_stored");
        assert_eq!(
            (contact.name.as_str(), contact.state, contact.verified_at, contact.method),
            (stored.text("name_text"), VerificationState::Verified, Some(stored.int("verified_at")), ExchangeMethod::Qr)
        );
    }
    assert_eq!((a.contacts.count().unwrap(), b.contacts.count().unwrap()), (1, 1));
}

// ---------------------------------------------------------------------------
// export.json, transfer.json
// ---------------------------------------------------------------------------

/// The alphabet of generated passwords (section 16.1): value = position.
const PASSWORD_ALPHABET: &[u8; 31] = b"23456789ABCDEFGHJKMNPQRSTUVWXYZ";

/// The error kind a vector names: the result code's name in lower case
/// without `ITSME_E_` (`malformed_message`).
#[track_caller]
fn error_kind(name: &str) -> ErrorKind {
    let snake = |kind: ErrorKind| {
        let mut out = String::new();
        for (i, c) in format!("{kind:?}").chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        }
        out
    };
    (1..=itsme::sys::ITSME_E_REPLAYED)
        .map(ErrorKind::from_code)
        .find(|&kind| snake(kind) == name)
        .unwrap_or_else(|| panic!("error_text {name:?} names no result code"))
}

/// A typed generated password in canonical form: upper case, spaces and
/// `-` removed.
fn canonical_password(typed: &str) -> String {
    typed.chars().filter(|c| *c != ' ' && *c != '-').map(|c| c.to_ascii_uppercase()).collect()
}

/// `contents` (section 17) from a vector's identity fields.
fn transfer_contents(party: &Json) -> Vec<u8> {
    let name = party.text("name_text").as_bytes();
    let mut contents = party.hex("identity_seed");
    contents.extend(party.hex("contacts_key"));
    contents.extend(u16::try_from(name.len()).unwrap().to_be_bytes());
    contents.extend(name);
    contents.extend(party.text("fingerprint_text").as_bytes());
    contents
}

/// A vector's `password_kind`, a number.
fn password_kind(vector: &Json) -> PasswordKind {
    PasswordKind::try_from(u32::try_from(vector.int("password_kind")).unwrap()).unwrap()
}

/// Installs an import into a fresh memory store and checks the identity
/// that comes out against `party`.
fn assert_installs(import: &Import, party: &Json, context: &str) {
    assert_eq!(import.fingerprint().unwrap(), party.text("fingerprint_text"), "{context}: fingerprint_text");
    assert_eq!(import.name().unwrap(), party.text("name_text"), "{context}: name_text");
    let secrets = SecretStore::memory().unwrap();
    let installed = import.install(&secrets, None, false).unwrap();
    assert_hex(&installed.public_key().unwrap(), party, "identity_public", context);
    assert_eq!(installed.name().unwrap(), party.text("name_text"), "{context}");
}

#[test]
fn export_passwords() {
    let export = load("export.json");
    let passwords = export.array("passwords");
    assert!(!passwords.is_empty());
    for case in passwords {
        // Rejection sampling, by the test: bytes below 248 in order, each
        // the character at its value mod 31.
        let drawn: Vec<u8> =
            case.hex("random").into_iter().filter(|&b| b < 248).map(|b| PASSWORD_ALPHABET[usize::from(b % 31)]).collect();
        assert!(drawn.len() >= 13, "{} draws only {} characters", case.text("random"), drawn.len());
        let drawn = std::str::from_utf8(&drawn[..13]).unwrap();
        let shown = format!("{}-{}-{}", &drawn[..4], &drawn[4..8], &drawn[8..]);
        assert_eq!(shown, case.text("password_text"), "random {}", case.text("random"));
    }

    // Typed passwords: an identity without a PIN takes a well-formed
    // password and then refuses for want of a PIN; a malformed one is
    // refused before that.
    let typed = export.array("typed");
    assert!(typed.iter().any(|case| case.get("canonical_text").is_some()));
    assert!(typed.iter().any(|case| case.get("error_text").is_some()));
    let no_pin = Identity::create(&SecretStore::memory().unwrap(), "No PIN").unwrap();
    for case in typed {
        let input = case.text("input_text");
        let result = no_pin.export("123456", T0, input, PasswordKind::Generated, None);
        match case.get("canonical_text") {
            Some(canonical) => {
                assert_eq!(canonical_password(input), canonical.as_str(), "{input:?}");
                assert_eq!(result.unwrap_err().kind(), ErrorKind::NotFound, "{input:?}: accepted, then no PIN");
            }
            None => {
                assert_eq!(result.unwrap_err().kind(), error_kind(case.text("error_text")), "{input:?}");
            }
        }
    }
}

/// Each export made by the library from the vector's seeds, byte for
/// byte, and opened again with the password as typed.
#[test]
fn exports() {
    let export = load("export.json");
    let exports = export.array("exports");
    assert!(!exports.is_empty());
    for (i, vector) in exports.iter().enumerate() {
        let context = format!("export {i} ({})", vector.text("case_text"));
        let party = Party::new(vector, &context);
        let pin = vector.text("pin_text");
        party.identity.set_pin(pin).unwrap();
        let kind = password_kind(vector);
        let mut rng = DeterministicRandom::new(&vector.hex_array("export_random_seed")).unwrap();
        let blob = party.identity.export(pin, T0, vector.text("password_text"), kind, Some(&mut rng)).unwrap();
        assert_hex(&blob, vector, "export", &context);

        // The parts, as section 17.1 puts them together.
        let header = vector.hex("header");
        assert_eq!(blob[..header.len()], header[..], "{context}: the export begins with its header");
        let salt_nonce = [vector.hex("salt"), vector.hex("nonce")].concat();
        assert!(header.ends_with(&salt_nonce), "{context}: the header ends with the salt and the nonce");
        let contents = vector.hex("contents");
        assert_eq!(contents, transfer_contents(vector), "{context}: contents");
        assert_eq!(blob.len(), header.len() + contents.len() + 16, "{context}");
        let expected_password = match kind {
            PasswordKind::Generated => canonical_password(vector.text("typed_text")),
            _ => vector.text("typed_text").to_owned(),
        };
        assert_eq!(vector.hex("password_bytes"), expected_password.as_bytes(), "{context}: password_bytes");
        let parameters = |v: &Json, key: &str| u32::try_from(v.int(key)).unwrap();
        assert_eq!(
            itsme::export_header(&blob).unwrap(),
            ExportHeader {
                passes: parameters(vector, "passes"),
                memory_kib: parameters(vector, "memory_kib"),
                password_kind: kind
            },
            "{context}"
        );

        let text = itsme::export_to_text(&blob).unwrap();
        assert_eq!(text, vector.text("text"), "{context}: text");
        assert_eq!(itsme::export_from_text(&text).unwrap(), blob, "{context}");

        let secrets = SecretStore::memory().unwrap();
        let import = Import::open(&secrets, &blob, vector.text("typed_text"), T0).unwrap();
        assert_installs(&import, vector, &context);
        assert_eq!(secrets.import_status(T0).unwrap(), (0, 0), "{context}");
    }
}

#[test]
fn export_rejections() {
    let export = load("export.json");
    let rejections = export.array("rejections");
    assert!(!rejections.is_empty());
    for (i, case) in rejections.iter().enumerate() {
        let context = format!("rejection {i} ({})", case.text("case_text"));
        let kind = error_kind(case.text("error_text"));
        let secrets = SecretStore::memory().unwrap();
        let password = case.text("password_text");
        let result = match case.get("export") {
            Some(_) => Import::open(&secrets, &case.hex("export"), password, T0),
            None => itsme::export_from_text(case.text("text")).and_then(|blob| Import::open(&secrets, &blob, password, T0)),
        };
        let error = result.expect_err(&context);
        assert_eq!(error.kind(), kind, "{context}: {error}");
        let counted = u32::from(kind == ErrorKind::AuthenticationFailed);
        assert_eq!(secrets.import_status(T0).unwrap(), (counted, 0), "{context}: the attempt counter");
    }
}

/// Section 17.3: the contact store travels in chunks of 32 KiB.
const CHUNK: usize = 32_768;

/// The store an import carries, written to a new file in `dir` and read
/// back (`None` if it carries none, which writing then refuses).
fn written_store(import: &Import, dir: &TempDir, context: &str) -> Option<Vec<u8>> {
    let path = dir.path().join(format!("written-{}.db", import.fingerprint().unwrap()));
    let size = import.contacts_size().unwrap();
    if size == 0 {
        let error = import.write_contacts(&path).expect_err(context);
        assert_eq!(error.kind(), ErrorKind::NotFound, "{context}: {error}");
        assert!(!path.exists(), "{context}");
        return None;
    }
    import.write_contacts(&path).unwrap();
    let error = import.write_contacts(&path).expect_err(context);
    assert_eq!(error.kind(), ErrorKind::AlreadyExists, "{context}: {error}");
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len() as u64, size, "{context}: contacts_size");
    Some(bytes)
}

/// Each export with the contacts (format version 2): its store is a
/// stand-in, not a contact store the identity could export, so the
/// vector's blob is opened and the store it carries written out byte for
/// byte; an export of the identity's own (real) store from the vector's
/// random source has the vector's header.
#[test]
fn exports_with_contacts() {
    let export = load("export.json");
    let exports = export.array("exports_with_contacts");
    assert!(!exports.is_empty());
    for (i, vector) in exports.iter().enumerate() {
        let context = format!("export with contacts {i} ({})", vector.text("case_text"));
        let blob = vector.hex("export");
        let header = vector.hex("header");
        let store = vector.hex("store");
        assert_eq!(&header[..9], b"ITSMEXP\x02\x01", "{context}: format version 2, Argon2id");
        assert_eq!(blob[..header.len()], header[..], "{context}: the export begins with its header");
        let salt_nonce = [vector.hex("salt"), vector.hex("nonce")].concat();
        assert!(header.ends_with(&salt_nonce), "{context}: the header ends with the salt and the nonce");
        let contents = vector.hex("contents");
        assert_eq!(contents, transfer_contents(vector), "{context}: contents");
        assert!(store.starts_with(b"SQLite format 3\0"), "{context}: store");
        assert_eq!(blob.len(), header.len() + contents.len() + store.len() + 16, "{context}");
        assert!(vector.get("text").is_none(), "{context}: no text form");
        let kind = password_kind(vector);
        let parameters = |v: &Json, key: &str| u32::try_from(v.int(key)).unwrap();
        assert_eq!(
            itsme::export_header(&blob).unwrap(),
            ExportHeader {
                passes: parameters(vector, "passes"),
                memory_kib: parameters(vector, "memory_kib"),
                password_kind: kind
            },
            "{context}"
        );
        let error = itsme::export_to_text(&blob).expect_err(&context);
        assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{context}: a file only: {error}");

        let secrets = SecretStore::memory().unwrap();
        let import = Import::open(&secrets, &blob, vector.text("typed_text"), T0).unwrap();
        let dir = TempDir::new("vectors-export");
        assert_eq!(written_store(&import, &dir, &context), Some(store), "{context}: store");
        assert_installs(&import, vector, &context);
        assert_eq!(secrets.import_status(T0).unwrap(), (0, 0), "{context}");

        // The identity's own store, exported from the same random source:
        // the same header (salt and nonce), a blob of the store's size.
        let party = Party::new(vector, &context);
        let pin = vector.text("pin_text");
        party.identity.set_pin(pin).unwrap();
        let mut rng = DeterministicRandom::new(&vector.hex_array("export_random_seed")).unwrap();
        let made = party
            .identity
            .export_with_contacts(pin, T0, vector.text("password_text"), kind, &party.contacts, Some(&mut rng))
            .unwrap();
        assert_eq!(made[..header.len()], header[..], "{context}: the header of a real store's export");
        assert!(made.len() > header.len() + contents.len() + 16 + 16, "{context}");
    }
}

/// Each live transfer from the receiver's and the sender's random seeds:
/// the same offer, room, key message and SAS; the identity message is the
/// sender's when no contact store travels.  A vector's store is a stand-in
/// no sender could copy, so the receiver is given the vector's identity
/// and store messages, and its import must carry the store byte for byte.
#[test]
fn transfers() {
    let transfer = load("transfer.json");
    let transfers = transfer.array("transfers");
    assert!(!transfers.is_empty());
    assert!(
        transfers.iter().any(|v| v.array("store_messages").len() >= 3),
        "a transfer with a store of several chunks"
    );
    assert!(transfers.iter().any(|v| v.text("store").is_empty()), "a transfer without a store");
    for (i, vector) in transfers.iter().enumerate() {
        let context = format!("transfer {i} ({})", vector.text("case_text"));
        let mut receiver_rng = DeterministicRandom::new(&vector.hex_array("receiver_random_seed")).unwrap();
        let mut receiver = TransferReceiver::new(T0, Some(&mut receiver_rng)).unwrap();
        let offer_text = vector.text("offer_text");
        assert_eq!(receiver.offer().unwrap(), offer_text, "{context}: offer_text");
        assert_eq!(offer_text, format!("ITSMETR2:{}", base64url_encode(&vector.hex("offer"))), "{context}");
        assert_eq!(
            vector.text("offer"),
            format!("02{}{}", vector.text("transfer_id"), vector.text("receiver_public")),
            "{context}: offer"
        );
        assert_eq!(receiver.room().unwrap(), vector.text("room_text"), "{context}: room_text");

        let sender_vector = vector.field("sender");
        let sender_party = Party::new(sender_vector, &format!("{context} sender"));
        let pin = sender_vector.text("pin_text");
        sender_party.identity.set_pin(pin).unwrap();
        let mut sender_rng = DeterministicRandom::new(&vector.hex_array("sender_random_seed")).unwrap();
        let mut sender = TransferSender::new(&sender_party.identity, pin, offer_text, T0, Some(&mut sender_rng)).unwrap();
        assert_eq!(sender.room().unwrap(), vector.text("room_text"), "{context}");
        let key_message = sender.next_outgoing().unwrap();
        assert_hex(&key_message, vector, "key_message", &context);
        assert_eq!(hex_encode(&key_message), format!("0201{}", vector.text("sender_public")), "{context}");
        let transcript = lv_cat(&[
            b"itsme-transfer-v2",
            &vector.hex("transfer_id"),
            &vector.hex("receiver_public"),
            &vector.hex("sender_public"),
        ]);
        assert_hex(&transcript, vector, "transcript_input", &context);

        receiver.receive(&key_message, T0).unwrap();
        for (side, sas) in [("receiver", receiver.sas().unwrap()), ("sender", sender.sas().unwrap())] {
            assert_eq!(sas, vector.text("sas_text"), "{context}: {side} sas_text");
        }
        assert_eq!(i64::from(itsme::short_code_parse(vector.text("sas_text")).unwrap()), vector.int("sas_value"));
        let sas = itsme::derive_sas(&vector.hex("seed"), &vector.hex("transcript_hash")).unwrap();
        assert_eq!(sas, vector.text("sas_text"), "{context}: the SAS of seed and transcript_hash");
        let contents = vector.hex("contents");
        assert_eq!(contents, transfer_contents(sender_vector), "{context}: contents");

        // The identity message seals contents || u32(len(store)); the
        // store follows in messages of 32 KiB chunks.
        let store = vector.hex("store");
        let mut plaintext = contents.clone();
        plaintext.extend(u32::try_from(store.len()).unwrap().to_be_bytes());
        assert_hex(&plaintext, vector, "identity_plaintext", &context);
        let identity_message = vector.hex("identity_message");
        assert_eq!(&identity_message[..2], [2, 2], "{context}");
        assert_eq!(identity_message.len(), 2 + plaintext.len() + 16, "{context}");
        assert!((105..=232).contains(&identity_message.len()), "{context}");
        let store_messages: Vec<Vec<u8>> =
            vector.array("store_messages").iter().map(|m| hex_decode(m.as_str()).unwrap()).collect();
        assert_eq!(store_messages.len(), store.len().div_ceil(CHUNK), "{context}: one message per chunk");
        for (n, (message, chunk)) in store_messages.iter().zip(store.chunks(CHUNK)).enumerate() {
            assert_eq!(&message[..2], [2, 3], "{context}: store message {n}");
            assert_eq!(message.len(), 2 + chunk.len() + 16, "{context}: store message {n}");
            assert!(message.len() <= itsme::TRANSFER_MESSAGE_MAX, "{context}");
        }

        sender.confirm(T0).unwrap();
        let sent = sender.next_outgoing().unwrap();
        if store.is_empty() {
            assert_eq!(sent, identity_message, "{context}: identity_message");
        } else {
            // This sender included no store: its own contents, the same size.
            assert_eq!((&sent[..2], sent.len()), (&[2u8, 2][..], identity_message.len()), "{context}");
        }
        assert!(sender.next_outgoing().unwrap().is_empty(), "{context}: nothing more without a store");
        receiver.confirm(T0).unwrap();
        receiver.receive(&identity_message, T0).unwrap();
        for message in &store_messages {
            assert_eq!(receiver.state().unwrap(), TransferState::AwaitingIdentity, "{context}");
            receiver.receive(message, T0).unwrap();
        }
        assert_eq!(receiver.state().unwrap(), TransferState::Done, "{context}");
        let import = receiver.take_import().unwrap();
        let dir = TempDir::new("vectors-transfer");
        let expected = if store.is_empty() { None } else { Some(store) };
        assert_eq!(written_store(&import, &dir, &context), expected, "{context}: store");
        assert_installs(&import, sender_vector, &context);
    }
}

/// Each rejection's steps played against a fresh receiver of the first
/// transfer: every step but the last succeeds, the last fails as named.
#[test]
fn transfer_rejections() {
    let transfer = load("transfer.json");
    let first = &transfer.array("transfers")[0];
    let rejections = transfer.array("rejections");
    assert!(!rejections.is_empty());
    for (i, case) in rejections.iter().enumerate() {
        let context = format!("rejection {i} ({})", case.text("case_text"));
        let kind = error_kind(case.text("error_text"));
        let mut rng = DeterministicRandom::new(&first.hex_array("receiver_random_seed")).unwrap();
        let mut receiver = TransferReceiver::new(T0, Some(&mut rng)).unwrap();
        assert_eq!(receiver.offer().unwrap(), first.text("offer_text"), "{context}");
        let steps = case.array("steps");
        assert!(!steps.is_empty(), "{context}");
        for (n, step) in steps.iter().enumerate() {
            let result = match step.get("receive") {
                Some(_) => receiver.receive(&step.hex("receive"), T0),
                None => {
                    assert!(bool_field(step, "confirm"), "{context}: step {n}");
                    receiver.confirm(T0)
                }
            };
            if n + 1 < steps.len() {
                result.unwrap_or_else(|e| panic!("{context}: step {n} failed: {e}"));
            } else {
                let error = result.expect_err(&context);
                assert_eq!(error.kind(), kind, "{context}: {error}");
            }
        }
    }
}

/// Offers the sender refuses, each read by the first transfer's sender.
#[test]
fn transfer_offer_rejections() {
    let transfer = load("transfer.json");
    let first = &transfer.array("transfers")[0];
    let rejections = transfer.array("offer_rejections");
    assert!(!rejections.is_empty());
    let sender_vector = first.field("sender");
    let sender_party = Party::new(sender_vector, "offer rejections sender");
    let pin = sender_vector.text("pin_text");
    sender_party.identity.set_pin(pin).unwrap();
    for (i, case) in rejections.iter().enumerate() {
        let context = format!("offer rejection {i} ({})", case.text("case_text"));
        let mut rng = DeterministicRandom::new(&first.hex_array("sender_random_seed")).unwrap();
        let error = TransferSender::new(&sender_party.identity, pin, case.text("offer_text"), T0, Some(&mut rng))
            .map(|_| ())
            .expect_err(&context);
        assert_eq!(error.kind(), error_kind(case.text("error_text")), "{context}: {error}");
    }
}

// ---------------------------------------------------------------------------
// rollcall.json
// ---------------------------------------------------------------------------

/// The three devices of rollcall.json: each identity drawn from its
/// `identity_random_seed`, each contact added with its seed and, where the
/// vectors list them, its device secrets (a test-build function).
struct RollCallDevice {
    name: String,
    contacts: ContactStore,
    /// The contact id of each peer it holds, by name.
    ids: Vec<(String, i64)>,
    _identity: Identity,
    _secrets: SecretStore,
    _dir: TempDir,
}

fn rollcall_devices(vectors: &Json) -> Vec<RollCallDevice> {
    let t = vectors.int("now");
    let mut devices: Vec<RollCallDevice> = vectors
        .array("participants")
        .iter()
        .map(|party| {
            let name = party.text("name_text");
            let secrets = SecretStore::memory().unwrap();
            let mut rng = DeterministicRandom::new(&party.hex_array("identity_random_seed")).unwrap();
            let identity = Identity::create_with_random(&secrets, name, Some(&mut rng)).unwrap();
            assert_hex(&identity.public_key().unwrap(), party, "identity_public", name);
            let dir = TempDir::new("vectors-rollcall");
            let contacts = ContactStore::open(&identity, dir.path().join("contacts.db")).unwrap();
            RollCallDevice { name: name.to_owned(), contacts, ids: Vec::new(), _identity: identity, _secrets: secrets, _dir: dir }
        })
        .collect();
    let key_of = |name: &str| {
        vectors.array("participants").iter().find(|p| p.text("name_text") == name).expect(name).hex("identity_public")
    };
    for contact in vectors.array("contacts") {
        let (owner, peer) = (contact.text("owner_text"), contact.text("peer_text"));
        let device = devices.iter_mut().find(|d| d.name == owner).expect(owner);
        let id = device.contacts.add(peer, &key_of(peer), &contact.hex("seed"), ExchangeMethod::Qr, t - 7000).unwrap();
        let (mine, theirs) = (contact.hex("device_secret_mine"), contact.hex("device_secret_theirs"));
        if !mine.is_empty() {
            device.contacts.set_device_secrets(id, &mine, &theirs).unwrap();
        }
        device.ids.push((peer.to_owned(), id));
    }
    devices
}

fn rollcall_state(text: &str) -> RollCallState {
    match text {
        "not_yet" => RollCallState::NotYet,
        "verified" => RollCallState::Verified,
        "wrong" => RollCallState::Wrong,
        "device_changed" => RollCallState::DeviceChanged,
        "verified_tag_unchecked" => RollCallState::VerifiedTagUnchecked,
        "refused" => RollCallState::Refused,
        "unknown" => RollCallState::Unknown,
        "binding_differs" => RollCallState::BindingDiffers,
        "other_call" => RollCallState::OtherCall,
        other => panic!("state_text {other:?}"),
    }
}

fn slot_of(party: &Json) -> u16 {
    u16::try_from(party.int("slot")).expect("a slot")
}

/// The first message of type `kind` (1 HELLO, 2 SAID, 3 VIEW) that relay
/// slot `slot` sent.
fn first_sent(sent: &[(u16, Vec<u8>)], slot: u16, kind: u8) -> &[u8] {
    sent.iter().find(|(from, m)| *from == slot && m[1] == kind).map(|(_, m)| &m[..]).expect("a message of that type")
}

/// The whole roll call made again as the generator made it: each device's
/// `random_seed`, the three joining the group room one after the other
/// (slots 1, 2, 3) with every message delivered in order; the HELLOs, the
/// roster, the codes and SAIDs byte for byte; a second later each one's due
/// VIEW; then each listener's outcome for each contact's code.
#[test]
fn rollcall_vectors() {
    let vectors = load("rollcall.json");
    let t = vectors.int("now");
    let devices = rollcall_devices(&vectors);
    let people = vectors.array("participants");
    let mut sources: Vec<DeterministicRandom> =
        people.iter().map(|p| DeterministicRandom::new(&p.hex_array("random_seed")).unwrap()).collect();
    let mut room = GroupRoom::default();
    for (device, rng) in devices.iter().zip(&mut sources) {
        let call = RollCall::new(&device.contacts, vectors.text("meeting_code_text"), None, t, Some(rng)).unwrap();
        room.enter(call, t);
    }
    assert_eq!(i64::try_from(room.sent.len()).unwrap(), vectors.int("join_messages"), "messages of the joins");
    for (i, party) in people.iter().enumerate() {
        let context = format!("rollcall {}", party.text("name_text"));
        assert_eq!(room.seats[i].slot, Some(slot_of(party)), "{context}");
        assert_eq!(room.seats[i].call.room().unwrap(), vectors.text("room_id"), "{context}");
        let hello = first_sent(&room.sent, slot_of(party), 1);
        assert_hex(hello, party, "hello", &context);
        assert_hex(&hello[..hello.len() - 64], party, "hello_body", &context);
        assert_hex(&hello[3..35], party, "roll_call_key", &context);
        for tag in party.array("tags_for_contacts") {
            let tag = tag.hex("tag");
            assert!(hello[69..hello.len() - 64].chunks(16).any(|t| t == tag), "{context}: a tag for a contact");
        }
    }
    for seat in &mut room.seats {
        let call = &mut seat.call;
        let roster = call.roster().unwrap();
        assert_hex(&roster, &vectors, "roster", "rollcall");
        assert_eq!(call.head_count().unwrap(), 3);
        assert_eq!(call.phase().unwrap(), RollCallPhase::Gathering);
    }
    for (seat, rng) in room.seats.iter_mut().zip(&mut sources) {
        let roster = seat.call.roster().unwrap();
        seat.call.confirm_roster(&roster, t, Some(rng)).unwrap();
    }
    for (i, rng) in sources.iter_mut().enumerate() {
        room.call(i).confirm_said(t, Some(rng)).unwrap();
        assert_eq!(room.seats[i].call.phase().unwrap(), RollCallPhase::Said);
        assert!(room.pump(t).is_empty());
    }
    for (i, said) in vectors.array("saids").iter().enumerate() {
        let context = format!("rollcall SAID of {}", said.text("name_text"));
        assert_eq!(said.text("name_text"), people[i].text("name_text"), "{context}");
        assert_hex(first_sent(&room.sent, slot_of(&people[i]), 2), said, "said", &context);
        assert_eq!(room.seats[i].call.code().unwrap(), said.text("code_text"), "{context}");
    }
    // A second later each one's VIEW is due (it took SAIDs): the last VIEW
    // each sends says who said.
    let before = room.sent.len();
    assert!(room.tick(t + 1).is_empty());
    for view in vectors.array("views") {
        let context = format!("rollcall VIEW of {}", view.text("name_text"));
        let slot = u16::try_from(view.int("slot")).unwrap();
        let last = room.sent[before..].iter().rev().find(|(from, m)| *from == slot && m[1] == 3).expect(&context);
        assert_hex(&last.1, view, "view", &context);
    }
    let code_of = |name: &str| {
        vectors.array("saids").iter().find(|s| s.text("name_text") == name).expect(name).text("code_text")
    };
    let outcomes = vectors.array("outcomes");
    assert!(!outcomes.is_empty());
    for outcome in outcomes {
        let (listener, speaker) = (outcome.text("listener_text"), outcome.text("speaker_text"));
        let l = devices.iter().position(|d| d.name == listener).expect(listener);
        let id = devices[l].ids.iter().find(|(name, _)| name == speaker).expect(speaker).1;
        let call = room.call(l);
        let index = call.participants().unwrap().iter().find(|p| p.contact_id == Some(id)).expect(speaker).index;
        let state = call.enter_heard(index, code_of(speaker), t + 1).unwrap();
        assert_eq!(state, rollcall_state(outcome.text("state_text")), "{listener} hearing {speaker}");
    }
    // Ben and Cai share nothing: each is unknown to the other.
    for (listener, speaker) in [(1usize, 2usize), (2, 1)] {
        let seen = room.seats[listener].call.participants().unwrap();
        let other = seen.iter().find(|p| p.slot == Some(slot_of(&people[speaker]))).unwrap();
        assert_eq!((other.state, other.contact_id), (RollCallState::Unknown, None));
    }
}

/// Ana and Ben bound to one call, Cai to another (`bound`): each device's
/// HELLO from its own random seed, and what it shows of the others.
#[test]
fn rollcall_binding_vectors() {
    let vectors = load("rollcall.json");
    let t = vectors.int("now");
    let devices = rollcall_devices(&vectors);
    let bound = vectors.field("bound").array("participants");
    let mut room = GroupRoom::default();
    for (device, party) in devices.iter().zip(bound) {
        assert_eq!(device.name, party.text("name_text"));
        let mut rng = DeterministicRandom::new(&party.hex_array("random_seed")).unwrap();
        let (code, binding) = (vectors.text("meeting_code_text"), party.hex("binding"));
        let call = RollCall::new(&device.contacts, code, Some(&binding), t, Some(&mut rng)).unwrap();
        room.enter(call, t);
    }
    for (i, party) in bound.iter().enumerate() {
        let context = format!("rollcall bound {}", party.text("name_text"));
        let slot = room.seats[i].slot.unwrap();
        let hello = first_sent(&room.sent, slot, 1);
        assert_hex(hello, party, "hello", &context);
        assert_eq!(hello[2], 1, "{context}: bound");
        assert_hex(&hello[35..67], party, "bind", &context);
        let seen: Vec<(u16, RollCallState)> = room.seats[i].call.participants().unwrap()[1..]
            .iter()
            .map(|p| (p.slot.expect("a slot"), p.state))
            .collect();
        let expected: Vec<(u16, RollCallState)> = party
            .array("sees")
            .iter()
            .map(|s| (u16::try_from(s.int("slot")).unwrap(), rollcall_state(s.text("state_text"))))
            .collect();
        assert_eq!(seen, expected, "{context}");
    }
}

/// Each case's messages fed, with the slots that carried them, to a fresh
/// roll call of Ben's (the same random seed: the same key and HELLO as in
/// the roll call above) joined in slot 2 beside slots 1 and 3: all but the
/// last are accepted, the last gives `result`.
#[test]
fn rollcall_rejections() {
    let vectors = load("rollcall.json");
    let t = vectors.int("now");
    let devices = rollcall_devices(&vectors);
    let people = vectors.array("participants");
    let rejections = vectors.array("rejections");
    assert!(!rejections.is_empty());
    for case in rejections {
        let context = format!("rollcall rejection ({})", case.text("case_text"));
        let receiver = case.text("receiver_text");
        let r = devices.iter().position(|d| d.name == receiver).expect(receiver);
        let mut rng = DeterministicRandom::new(&people[r].hex_array("random_seed")).unwrap();
        let mut call =
            RollCall::new(&devices[r].contacts, vectors.text("meeting_code_text"), None, t, Some(&mut rng)).unwrap();
        call.joined(2, &[1, 3], t).unwrap();
        assert_hex(&call.next_outgoing().unwrap(), &people[r], "hello", &context);
        let messages = case.array("messages");
        for (n, message) in messages.iter().enumerate() {
            let bytes = message.hex("message");
            let slot = u16::try_from(message.int("slot")).unwrap();
            let result = call.receive(&bytes, slot, t);
            if n + 1 < messages.len() || case.text("result") == "accepted" {
                result.unwrap_or_else(|e| panic!("{context}: message {n} failed: {e}"));
            } else {
                let error = result.expect_err(&context);
                assert_eq!(error.kind(), error_kind(case.text("result")), "{context}: {error}");
            }
        }
    }
}
