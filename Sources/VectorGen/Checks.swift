import Foundation
import ItsMeKit
import ItsMePrimitives

/// The checks the generator makes while it builds the vectors. Each failed
/// check is recorded with its line; a thrown error counts as a failure.
extension VectorGenerator {
    struct Unwrapped: Error, CustomStringConvertible {
        let description: String
    }

    func expectEqual<T: Equatable>(
        _ a: @autoclosure () throws -> T, _ b: @autoclosure () throws -> T, _ message: @autoclosure () -> String = "",
        line: UInt = #line
    ) {
        do {
            let (x, y) = (try a(), try b())
            if x != y { fail("\(x) is not \(y) \(message())", line) }
        } catch { fail("threw \(error) \(message())", line) }
    }

    func expectNotEqual<T: Equatable>(
        _ a: @autoclosure () throws -> T, _ b: @autoclosure () throws -> T, _ message: @autoclosure () -> String = "",
        line: UInt = #line
    ) {
        do {
            let (x, y) = (try a(), try b())
            if x == y { fail("both are \(x) \(message())", line) }
        } catch { fail("threw \(error) \(message())", line) }
    }

    func expectTrue(_ a: @autoclosure () throws -> Bool, _ message: @autoclosure () -> String = "", line: UInt = #line) {
        expectEqual(try a(), true, message(), line: line)
    }

    func expectFalse(_ a: @autoclosure () throws -> Bool, _ message: @autoclosure () -> String = "", line: UInt = #line) {
        expectEqual(try a(), false, message(), line: line)
    }

    func expectNil<T>(_ a: @autoclosure () throws -> T?, _ message: @autoclosure () -> String = "", line: UInt = #line) {
        do {
            if let x = try a() { fail("\(x) is not nil \(message())", line) }
        } catch { fail("threw \(error) \(message())", line) }
    }

    func expectNoThrow<T>(_ a: @autoclosure () throws -> T, _ message: @autoclosure () -> String = "", line: UInt = #line) {
        do { _ = try a() } catch { fail("threw \(error) \(message())", line) }
    }

    func expectThrows<T>(_ a: @autoclosure () throws -> T, _ message: @autoclosure () -> String = "", line: UInt = #line) {
        do {
            _ = try a()
            fail("did not throw \(message())", line)
        } catch {}
    }

    func unwrap<T>(_ a: T?, _ message: @autoclosure () -> String = "", line: UInt = #line) throws -> T {
        guard let x = a else { throw Unwrapped(description: "line \(line): nil \(message())") }
        return x
    }
}

/// The kind of error `body` throws, or nil.
func errorKind(_ body: () throws -> Void) -> ItsMeError.Kind? {
    do {
        try body()
        return nil
    } catch { return (error as? ItsMeError)?.kind }
}

/// A stored item as a plain array.
func stored(_ store: any SecretStore, _ name: String) throws -> [UInt8]? {
    guard let item = try store.get(name) else { return nil }
    return item.unsafeExportedArray()
}

/// One side of a pair of people who hold each other as a contact.
struct PairSide {
    let identity: Identity
    let store: ContactStore
    let contactID: Int64
}

/// Runs both voice sessions to the codes: each selector picks the first of
/// their five words; the listener enters the same.
func voiceCodes(_ a: PairSide, _ b: PairSide, now: Int64) throws -> (VoiceSession, VoiceSession) {
    let va = try VoiceSession(store: a.store, contactID: a.contactID, now: now)
    let vb = try VoiceSession(store: b.store, contactID: b.contactID, now: now)
    let start = va.window * 30
    try va.start(now: start)
    try vb.start(now: start)
    for _ in 0..<2 {
        let (selector, listener) = va.turn == .mine ? (va, vb) : (vb, va)
        guard listener.turn == .theirs else { throw VectorGenerator.Unwrapped(description: "both sides select a word") }
        let word = selector.myWords[0]
        try selector.select(word, now: start + 5)
        try listener.select(word, now: start + 5)
    }
    return (va, vb)
}
