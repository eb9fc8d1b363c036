//! Profile records through the safe Rust API (docs/PROTOCOL.md section 18):
//! made by the owner, opened by a contact with the reference and the
//! owner's key, applied to the contact; every refusal with its error kind;
//! contact photos.

mod common;

use common::assert_kind;
use common::people::befriended;
use itsme::{
    DeterministicRandom, ErrorKind, Identity, Profile, ProfileReference, SecretStore, NAME_MAX_BYTES,
    PHOTO_FILENAME_MAX_BYTES, PROFILE_RECORD_MAX, PROFILE_RECORD_OVERHEAD, PROFILE_REFERENCE_BYTES, RECORD_ID_BYTES,
};

const NAME: &str = "Alice Smith";
const FILENAME: &str = "alice.jpg";
/// The largest photo a contact may hold.
const CONTACT_PHOTO_MAX: usize = 524_288;

fn photo(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + 3) as u8).collect()
}

fn identity(tag: u8) -> Identity {
    let store = SecretStore::memory().unwrap();
    Identity::create_with_random(&store, "Owner", Some(&mut common::rng(tag))).unwrap()
}

/// A record made by `owner`, its reference and the owner's key.
struct Made {
    record: Vec<u8>,
    reference: ProfileReference,
    owner_key: [u8; 32],
}

fn made(owner: &Identity, name: &str, photo: &[u8], filename: &str) -> Made {
    let profile = Profile::create(owner, name, photo, filename, Some(&mut common::rng(42))).unwrap();
    Made { record: profile.record().unwrap(), reference: profile.reference().unwrap(), owner_key: owner.public_key().unwrap() }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_record_opens_to_the_same_values() {
    let owner = identity(1);
    let picture = photo(300);
    let mine = Profile::create(&owner, NAME, &picture, FILENAME, Some(&mut common::rng(7))).unwrap();
    assert_eq!(mine.name().unwrap(), NAME);
    assert_eq!(mine.photo().unwrap(), picture);
    assert_eq!(mine.photo_filename().unwrap(), FILENAME);
    let record = mine.record().unwrap();
    assert_eq!(record.len(), PROFILE_RECORD_OVERHEAD + NAME.len() + picture.len() + FILENAME.len());
    assert_eq!(record[0], 1, "format version 1");
    let reference = mine.reference().unwrap();
    assert_eq!(reference.len(), PROFILE_REFERENCE_BYTES);
    // The reference is the record ID and the record key; the ID is the
    // first half of the record MAC, at the end of the record.
    let id = mine.record_id().unwrap();
    assert_eq!(reference.record_id(), id);
    assert_eq!(id[..], record[record.len() - 32..record.len() - 32 + RECORD_ID_BYTES]);
    assert_eq!(mine.record_name().unwrap(), hex(&id));
    assert_eq!(reference.record_name(), hex(&id));

    let theirs = Profile::open(&record, &reference, &owner.public_key().unwrap()).unwrap();
    assert_eq!(theirs.name().unwrap(), NAME);
    assert_eq!(theirs.photo().unwrap(), picture);
    assert_eq!(theirs.photo_filename().unwrap(), FILENAME);
    assert_eq!(theirs.record().unwrap(), record);
    assert_eq!(theirs.record_id().unwrap(), id);
    assert_eq!(theirs.record_name().unwrap(), mine.record_name().unwrap());
    assert_eq!(theirs.reference().unwrap(), reference);
    // The reference also passes as a plain byte slice.
    let bytes = reference.as_bytes().to_vec();
    assert_eq!(Profile::open(&record, &bytes, &owner.public_key().unwrap()).unwrap().name().unwrap(), NAME);
}

#[test]
fn records_hold_a_name_or_a_photo_or_both() {
    let owner = identity(2);
    let key = owner.public_key().unwrap();
    let picture = photo(64);
    for (name, picture, filename) in [
        ("Élodie 🌻", &[][..], ""),
        ("", &picture[..], "portrait.webp"),
        ("", &picture[..], ""),
        ("Bob", &picture[..], ""),
    ] {
        let made = made(&owner, name, picture, filename);
        assert_eq!(made.record.len(), PROFILE_RECORD_OVERHEAD + name.len() + picture.len() + filename.len());
        let opened = Profile::open(&made.record, &made.reference, &key).unwrap();
        assert_eq!(opened.name().unwrap(), name);
        assert_eq!(opened.photo().unwrap(), picture);
        assert_eq!(opened.photo_filename().unwrap(), filename);
    }
}

#[test]
fn records_are_fresh_unless_the_random_source_repeats() {
    let owner = identity(3);
    let one = Profile::create(&owner, NAME, &[], "", Some(&mut common::rng(9))).unwrap();
    let two = Profile::create(&owner, NAME, &[], "", Some(&mut common::rng(9))).unwrap();
    let three = Profile::create(&owner, NAME, &[], "", None).unwrap();
    assert_eq!(one.record().unwrap(), two.record().unwrap());
    assert_eq!(one.reference().unwrap(), two.reference().unwrap());
    assert_ne!(one.record().unwrap(), three.record().unwrap());
    assert_ne!(one.record_id().unwrap(), three.record_id().unwrap());
    assert_ne!(one.reference().unwrap(), three.reference().unwrap());
    // Another owner, the same random source: another record MAC and ID.
    let other = Profile::create(&identity(4), NAME, &[], "", Some(&mut common::rng(9))).unwrap();
    assert_ne!(one.record_id().unwrap(), other.record_id().unwrap());
}

#[test]
fn create_refuses_what_the_format_does_not_allow() {
    let owner = identity(5);
    let picture = photo(10);
    let long_name = "n".repeat(NAME_MAX_BYTES + 1);
    let long_filename = "f".repeat(PHOTO_FILENAME_MAX_BYTES + 1);
    let cases: [(&str, &[u8], &str, &str); 11] = [
        ("", &[], "", "neither a name nor a photo"),
        ("", &[], "a.jpg", "a filename without a photo"),
        ("Alice", &[], "a.jpg", "a filename without a photo, with a name"),
        ("Al\nice", &[], "", "a control character in the name"),
        (&long_name, &[], "", "a name too long"),
        ("Alice", &picture, &long_filename, "a filename too long"),
        ("Alice", &picture, "a/b.jpg", "a slash in the filename"),
        ("Alice", &picture, "a\\b.jpg", "a backslash in the filename"),
        ("Alice", &picture, "..", "the filename .."),
        ("Alice", &picture, "a\tb", "a control character in the filename"),
        ("Ali\0ce", &[], "", "a NUL in the name"),
    ];
    for (name, picture, filename, what) in cases {
        let error = assert_kind(Profile::create(&owner, name, picture, filename, None), ErrorKind::InvalidArgument);
        assert!(!error.detail.is_empty(), "{what}: a detail");
    }
    let max = NAME_MAX_BYTES;
    let name = "m".repeat(max);
    let filename = "f".repeat(PHOTO_FILENAME_MAX_BYTES);
    assert_eq!(Profile::create(&owner, &name, &picture, &filename, None).unwrap().name().unwrap(), name);
    // The whole record must fit in PROFILE_RECORD_MAX: a photo filling it
    // exactly is taken, one byte more is not.
    let room = PROFILE_RECORD_MAX - PROFILE_RECORD_OVERHEAD - NAME.len() - FILENAME.len();
    let full = Profile::create(&owner, NAME, &photo(room), FILENAME, None).unwrap();
    let record = full.record().unwrap();
    assert_eq!(record.len(), PROFILE_RECORD_MAX);
    let opened = Profile::open(&record, &full.reference().unwrap(), &owner.public_key().unwrap()).unwrap();
    assert_eq!(opened.photo().unwrap().len(), room);
    assert_kind(Profile::create(&owner, NAME, &photo(room + 1), FILENAME, None), ErrorKind::InvalidArgument);
}

/// Flips one bit of `record` at `at`.
fn flipped(record: &[u8], at: usize) -> Vec<u8> {
    let mut changed = record.to_vec();
    changed[at] ^= 0x01;
    changed
}

#[test]
fn open_refuses_every_tampering_with_its_kind() {
    let owner = identity(6);
    let picture = photo(64);
    let Made { record, reference, owner_key } = made(&owner, NAME, &picture, FILENAME);
    let name_ct = 1 + 12 + 4;
    let name_mac = name_ct + NAME.len();
    let photo_field = name_mac + 32;
    let photo_mac = photo_field + 12 + 4 + picture.len();
    let record_mac = record.len() - 32;
    let open = |record: &[u8], reference: &[u8], key: &[u8]| Profile::open(record, reference, key);

    // A tampered field, nonce, field MAC or record MAC: the MACs fail.
    for (at, what) in [
        (name_ct, "the name's ciphertext"),
        (1, "the name's nonce"),
        (photo_field, "the photo's nonce"),
        (photo_field + 12 + 4 + 10, "the photo's ciphertext"),
        (name_mac, "the name's field MAC"),
        (photo_mac + 31, "the photo's field MAC"),
        (record_mac, "the record MAC (its ID half)"),
        (record.len() - 1, "the record MAC"),
    ] {
        let error = assert_kind(open(&flipped(&record, at), &reference, &owner_key), ErrorKind::AuthenticationFailed);
        assert!(!error.detail.is_empty(), "{what}: a detail");
    }
    // A wrong record ID or key in the reference.
    let mut wrong_id = reference.as_bytes().to_vec();
    wrong_id[0] ^= 0x01;
    assert_kind(open(&record, &wrong_id, &owner_key), ErrorKind::AuthenticationFailed);
    let mut wrong_key = reference.as_bytes().to_vec();
    wrong_key[RECORD_ID_BYTES + 3] ^= 0x80;
    assert_kind(open(&record, &wrong_key, &owner_key), ErrorKind::AuthenticationFailed);
    // Another record under this reference.
    let other = made(&owner, "Someone Else", &[], "");
    assert_kind(open(&other.record, &reference, &owner_key), ErrorKind::AuthenticationFailed);
    // Another owner: a record read as someone else's.
    let stranger = identity(7).public_key().unwrap();
    assert_kind(open(&record, &reference, &stranger), ErrorKind::AuthenticationFailed);
    assert_kind(open(&record, &reference, &flipped(&owner_key, 31)), ErrorKind::AuthenticationFailed);

    // The shape: a length that does not fit, truncated, a trailing byte,
    // another version, nothing at all.
    assert_kind(open(&flipped(&record, 1 + 12 + 3), &reference, &owner_key), ErrorKind::MalformedMessage);
    assert_kind(open(&record[..record.len() - 1], &reference, &owner_key), ErrorKind::MalformedMessage);
    assert_kind(open(&[&record[..], &[0]].concat(), &reference, &owner_key), ErrorKind::MalformedMessage);
    assert_kind(open(&[&[2u8][..], &record[1..]].concat(), &reference, &owner_key), ErrorKind::MalformedMessage);
    assert_kind(open(&[], &reference, &owner_key), ErrorKind::MalformedMessage);
    // Larger than the limit, refused before anything is read.
    let error = assert_kind(open(&vec![0u8; PROFILE_RECORD_MAX + 1], &reference, &owner_key), ErrorKind::MalformedMessage);
    assert!(error.detail.contains("larger") || error.detail.contains("limit"), "{}", error.detail);

    // A reference or key of the wrong size.
    for length in [0usize, 16, 31, 33] {
        assert_kind(open(&record, &vec![1u8; length], &owner_key), ErrorKind::InvalidArgument);
        assert_kind(open(&record, &reference, &vec![1u8; length]), ErrorKind::InvalidArgument);
    }

    // Every single flipped bit is refused, one way or the other.
    for at in 0..record.len() {
        let error = Profile::open(&flipped(&record, at), &reference, &owner_key).map(|_| ()).unwrap_err();
        assert!(matches!(error.kind(), ErrorKind::AuthenticationFailed | ErrorKind::MalformedMessage), "byte {at}: {error}");
    }
    // And the untouched record still opens.
    assert_eq!(open(&record, &reference, &owner_key).unwrap().name().unwrap(), NAME);
}

#[test]
fn an_oversize_record_is_malformed_even_when_it_starts_with_a_good_one() {
    let owner = identity(8);
    let room = PROFILE_RECORD_MAX - PROFILE_RECORD_OVERHEAD - NAME.len();
    let Made { record, reference, owner_key } = made(&owner, NAME, &photo(room), "");
    assert_eq!(record.len(), PROFILE_RECORD_MAX);
    Profile::open(&record, &reference, &owner_key).unwrap();
    let longer = [&record[..], &[0]].concat();
    assert_eq!(longer.len(), PROFILE_RECORD_MAX + 1);
    assert_kind(Profile::open(&longer, &reference, &owner_key), ErrorKind::MalformedMessage);
}

#[test]
fn a_profile_applies_to_a_contact_in_one_step() {
    let (alice, bob) = befriended();
    let picture = photo(500);
    let alice_profile = Profile::create(&alice.identity, NAME, &picture, FILENAME, None).unwrap();
    // Bob opens it with Alice's key as his contact holds it.
    let key = bob.contact().public_key.unwrap();
    let opened = Profile::open(&alice_profile.record().unwrap(), &alice_profile.reference().unwrap(), &key).unwrap();
    assert_eq!(bob.contact().name, "Alice");
    assert_kind(bob.contacts.photo(bob.peer), ErrorKind::NotFound);
    bob.contacts.apply_profile(bob.peer, &opened).unwrap();
    assert_eq!(bob.contact().name, NAME);
    assert_eq!(bob.contacts.photo(bob.peer).unwrap(), (picture.clone(), FILENAME.to_owned()));

    // A name-only profile changes the name and keeps the photo.
    let renamed = Profile::create(&alice.identity, "Alice S.", &[], "", None).unwrap();
    let renamed = Profile::open(&renamed.record().unwrap(), &renamed.reference().unwrap(), &key).unwrap();
    bob.contacts.apply_profile(bob.peer, &renamed).unwrap();
    assert_eq!(bob.contact().name, "Alice S.");
    assert_eq!(bob.contacts.photo(bob.peer).unwrap(), (picture.clone(), FILENAME.to_owned()));
    // A photo-only profile changes the photo and keeps the name.
    let new_picture = photo(77);
    let pictured = Profile::create(&alice.identity, "", &new_picture, "", None).unwrap();
    bob.contacts.apply_profile(bob.peer, &pictured).unwrap();
    assert_eq!(bob.contact().name, "Alice S.");
    assert_eq!(bob.contacts.photo(bob.peer).unwrap(), (new_picture, String::new()));

    // No such contact.
    let error = assert_kind(bob.contacts.apply_profile(bob.peer + 100, &opened), ErrorKind::NotFound);
    assert!(!error.detail.is_empty(), "the store's detail");
    // Deleting the contact deletes its photo.
    bob.contacts.delete(bob.peer).unwrap();
    assert_kind(bob.contacts.photo(bob.peer), ErrorKind::NotFound);
}

#[test]
fn contact_photos_are_set_read_and_removed() {
    let (alice, _bob) = befriended();
    let id = alice.peer;
    assert_kind(alice.contacts.photo(id), ErrorKind::NotFound);
    let picture = photo(1000);
    alice.contacts.set_photo(id, &picture, "bob.png").unwrap();
    assert_eq!(alice.contacts.photo(id).unwrap(), (picture.clone(), "bob.png".to_owned()));
    // Without a filename.
    alice.contacts.set_photo(id, &picture[..10], "").unwrap();
    assert_eq!(alice.contacts.photo(id).unwrap(), (picture[..10].to_vec(), String::new()));
    // The largest photo a contact holds, and one byte more.
    let largest = photo(CONTACT_PHOTO_MAX);
    alice.contacts.set_photo(id, &largest, "big.jpg").unwrap();
    assert_eq!(alice.contacts.photo(id).unwrap().0, largest);
    assert_kind(alice.contacts.set_photo(id, &photo(CONTACT_PHOTO_MAX + 1), ""), ErrorKind::InvalidArgument);
    assert_kind(alice.contacts.set_photo(id, &picture, &"f".repeat(PHOTO_FILENAME_MAX_BYTES + 1)), ErrorKind::InvalidArgument);
    assert_kind(alice.contacts.set_photo(id, &picture, "a\0b"), ErrorKind::InvalidArgument);
    assert_eq!(alice.contacts.photo(id).unwrap().0, largest, "unchanged by the refusals");
    // No such contact.
    assert_kind(alice.contacts.set_photo(id + 100, &picture, ""), ErrorKind::NotFound);
    assert_kind(alice.contacts.photo(id + 100), ErrorKind::NotFound);
    // An empty photo and filename remove it.
    alice.contacts.set_photo(id, &[], "").unwrap();
    assert_kind(alice.contacts.photo(id), ErrorKind::NotFound);
    // The contact itself is untouched.
    assert_eq!(alice.contact().name, "Bob");
}

#[test]
fn profiles_show_nothing_in_debug_and_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Profile>();
    check::<ProfileReference>();
    let owner = identity(9);
    let mut rng = DeterministicRandom::new(&[1; 32]).unwrap();
    let profile = Profile::create(&owner, NAME, b"secret photo", FILENAME, Some(&mut rng)).unwrap();
    let reference = profile.reference().unwrap();
    let shown = format!("{profile:?} {reference:?}");
    assert!(!shown.contains(NAME) && !shown.contains(FILENAME), "{shown}");
    assert!(!shown.contains(&hex(&reference[RECORD_ID_BYTES..])), "{shown}");
    assert!(!shown.contains(&hex(&reference[..RECORD_ID_BYTES])), "{shown}");
    // Shared between threads.
    let profile = std::sync::Arc::new(profile);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let profile = profile.clone();
            std::thread::spawn(move || profile.name().unwrap())
        })
        .collect();
    for thread in threads {
        assert_eq!(thread.join().unwrap(), NAME);
    }
}
