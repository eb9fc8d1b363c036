// Alice and Bob, each with an identity and a contact store of their own,
// add each other by QR code, verify each other by voice, then replace
// their device secrets with a Security PIN Update side by side. Both
// devices run in this one process, so what would cross a screen or a
// phone call is handed from one side to the other here. Any mismatch
// ends the program with a non-zero status.
import Foundation
import ItsMeKit

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("example: \(message)\n".utf8))
    exit(1)
}

func check(_ condition: Bool, _ message: String) {
    if !condition { fail(message) }
}

do {
    // libsodium first: every other call needs it.
    try Sodium.initialize()
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("itsme-swift-example-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
    defer { try? FileManager.default.removeItem(atPath: directory) }

    // 1. Identities. A MemorySecretStore keeps the identity key for the
    //    life of the process; an app keeps it in a persistent store.
    let alice = try Identity.create(store: MemorySecretStore(), name: "Alice")
    let bob = try Identity.create(store: MemorySecretStore(), name: "Bob")
    print("Alice: \(alice.fingerprint)")
    print("Bob:   \(bob.fingerprint)")
    let aliceContacts = try ContactStore(path: directory + "/alice.db", identity: alice)
    let bobContacts = try ContactStore(path: directory + "/bob.db", identity: bob)

    // 2. A QR exchange: each screen shows its payload, each camera reads
    //    the other's.
    //    Randomness comes from the system (SystemRandom); tests pass a
    //    deterministic source instead.
    var random = SystemRandom()
    let now = Int64(Date().timeIntervalSince1970)
    let aliceExchange = try Exchange.qr(identity: alice, store: aliceContacts, now: now, random: &random)
    let bobExchange = try Exchange.qr(identity: bob, store: bobContacts, now: now, random: &random)
    let aliceQR = aliceExchange.outgoingText, bobQR = bobExchange.outgoingText
    print("Alice's QR code holds \(aliceQR.utf8.count) characters: \(aliceQR.prefix(24))...")
    try aliceExchange.receive(Array(bobQR.utf8), now: now)
    try bobExchange.receive(Array(aliceQR.utf8), now: now)

    // Both people read the short code on their screens aloud and see that
    // they match, then both confirm.
    guard let aliceSAS = aliceExchange.sas, let bobSAS = bobExchange.sas else {
        fail("no short authentication string after both scans")
    }
    print("short codes: Alice sees \(aliceSAS), Bob sees \(bobSAS)")
    check(aliceSAS == bobSAS, "the short codes differ")
    check(aliceExchange.peer?.fingerprint == bob.fingerprint, "Alice's exchange names someone else")
    check(bobExchange.peer?.fingerprint == alice.fingerprint, "Bob's exchange names someone else")
    let bobAtAlice = try aliceExchange.confirm(now: now)
    let aliceAtBob = try bobExchange.confirm(now: now)
    for (owner, store, id) in [("Alice", aliceContacts, bobAtAlice), ("Bob", bobContacts, aliceAtBob)] {
        let contact = try store.contact(id: id)
        print("\(owner)'s contacts: \(contact.name), \(contact.state)")
        check(contact.state == .verified, "\(owner)'s new contact is not verified")
    }

    // 3. A voice verification, later, over a call. Both sides plan a
    //    session for the same window, start when it begins, take turns
    //    choosing a word from their list (the listener selects the word it
    //    heard), then each reads out its code and tag and checks the
    //    other's.
    let later = now + 3600
    let aliceVoice = try VoiceSession(store: aliceContacts, contactID: bobAtAlice, now: later)
    let bobVoice = try VoiceSession(store: bobContacts, contactID: aliceAtBob, now: later)
    check(aliceVoice.sessionIDText == bobVoice.sessionIDText, "the two sessions name different calls")
    let start = later + max(aliceVoice.startsIn(now: later), 0)
    // The program does not wait: it passes the times the calls would be
    // made at.
    print("voice session \(aliceVoice.sessionIDText) starts in \(aliceVoice.startsIn(now: later)) s")
    try aliceVoice.start(now: start)
    try bobVoice.start(now: start)
    for _ in 0..<2 {
        let (speaker, listener) = aliceVoice.turn == .mine ? (aliceVoice, bobVoice) : (bobVoice, aliceVoice)
        let word = speaker.myWords[0]
        try speaker.select(word, now: start + 5)
        try listener.select(word, now: start + 5)
    }
    guard let aliceCode = aliceVoice.yourCode, let aliceTag = aliceVoice.yourTag,
        let bobCode = bobVoice.yourCode, let bobTag = bobVoice.yourTag
    else { fail("a voice session has no code after both selections") }
    print("Alice says \"\(VoiceProtocol.codeText(aliceCode)), tag \(aliceTag)\"")
    print("Bob says   \"\(VoiceProtocol.codeText(bobCode)), tag \(bobTag)\"")
    let atAlice = try aliceVoice.check(
        heardCode: VoiceProtocol.codeText(bobCode), heardTag: bobTag, now: start + 10)
    let atBob = try bobVoice.check(
        heardCode: VoiceProtocol.codeText(aliceCode), heardTag: aliceTag, now: start + 10)
    print("voice verification: Alice \(atAlice), Bob \(atBob)")
    check(atAlice == .verified && atBob == .verified, "the voice verification did not verify both sides")

    // 4. A Security PIN Update, side by side: the two devices replace the
    //    device secrets of the contact over the host's Bluetooth link (here
    //    the frames are handed across in the process). Both screens show
    //    the same session code.
    let meeting = start + 60
    let window = VoiceProtocol.window(meeting)
    let aliceUpdate = try PinUpdate(store: aliceContacts, contactID: bobAtAlice, window: window, now: meeting, random: &random)
    let bobUpdate = try PinUpdate(store: bobContacts, contactID: aliceAtBob, window: window, now: meeting, random: &random)
    check(aliceUpdate.sessionCode == bobUpdate.sessionCode, "the two updates show different session codes")
    var moved = true
    while moved {
        moved = false
        for (from, to) in [(aliceUpdate, bobUpdate), (bobUpdate, aliceUpdate)] {
            while let frame = from.peekOutgoing() {
                from.markSent()
                try to.receive(frame, now: meeting)
                moved = true
            }
        }
    }
    print("PIN update \(aliceUpdate.sessionCode): Alice \(aliceUpdate.state), Bob \(bobUpdate.state)")
    check(aliceUpdate.state == .done && bobUpdate.state == .done, "the PIN update did not complete on both sides")
    print("done: Alice and Bob verified each other")
} catch {
    fail("\(error)")
}
