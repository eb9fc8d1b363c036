import Foundation
import XCTest

import ItsMeKit
import ItsMePrimitives

/// Loading and bookkeeping for the Wycheproof vectors in Vectors/wycheproof.
///
/// The target excludes the Vectors folder from its resources, so the files
/// are found next to this source file rather than through a bundle.
enum Wycheproof {
    /// A test group: its own fields (ivSize, tagSize, publicKey, ...) and
    /// its tests.
    struct Group {
        let fields: [String: Any]
        let tests: [Case]

        func int(_ key: String, file: StaticString = #filePath, line: UInt = #line) throws -> Int {
            try Wycheproof.int(fields[key], "group field \(key)", file: file, line: line)
        }
    }

    /// One test case. Hex fields are decoded on demand.
    struct Case {
        let fields: [String: Any]

        var tcId: Int { (try? Wycheproof.int(fields["tcId"], "tcId")) ?? -1 }
        var comment: String { fields["comment"] as? String ?? "" }
        var flags: [String] { fields["flags"] as? [String] ?? [] }
        var result: Result {
            switch fields["result"] as? String {
            case "valid": return .valid
            case "invalid": return .invalid
            case "acceptable": return .acceptable
            default: return .unknown
            }
        }

        /// Bytes of a hex field, failing the test when it is missing or malformed.
        func bytes(_ key: String, file: StaticString = #filePath, line: UInt = #line) throws -> [UInt8] {
            guard let text = fields[key] as? String else {
                XCTFail("tcId \(tcId): missing string field \(key)", file: file, line: line)
                throw Failure.malformed
            }
            guard let decoded = Hex.decode(text) else {
                XCTFail("tcId \(tcId): field \(key) is not hex", file: file, line: line)
                throw Failure.malformed
            }
            return decoded
        }

        func int(_ key: String, file: StaticString = #filePath, line: UInt = #line) throws -> Int {
            try Wycheproof.int(fields[key], "tcId \(tcId) field \(key)", file: file, line: line)
        }

        /// "tcId 12 (comment) [flags]", for failure messages.
        var label: String { "tcId \(tcId) (\(comment)) \(flags)" }
    }

    enum Result { case valid, invalid, acceptable, unknown }

    enum Failure: Error { case malformed }

    struct File {
        let name: String
        let numberOfTests: Int
        let groups: [Group]

        var allTests: [Case] { groups.flatMap(\.tests) }
    }

    static var directory: URL {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()
            .appendingPathComponent("Vectors", isDirectory: true)
            .appendingPathComponent("wycheproof", isDirectory: true)
    }

    /// Loads `<name>_test.json`.
    static func load(_ name: String, file: StaticString = #filePath, line: UInt = #line) throws -> File {
        let url = directory.appendingPathComponent("\(name)_test.json")
        let data = try Data(contentsOf: url)
        guard let root = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let groups = root["testGroups"] as? [[String: Any]]
        else {
            XCTFail("\(url.path): not a Wycheproof test file", file: file, line: line)
            throw Failure.malformed
        }
        let parsed = groups.map { g in
            Group(fields: g, tests: (g["tests"] as? [[String: Any]] ?? []).map(Case.init(fields:)))
        }
        let declared = try int(root["numberOfTests"], "\(name) numberOfTests", file: file, line: line)
        return File(name: name, numberOfTests: declared, groups: parsed)
    }

    /// JSON numbers arrive as Int or NSNumber depending on the Foundation.
    static func int(_ value: Any?, _ what: String, file: StaticString = #filePath, line: UInt = #line) throws -> Int {
        if let i = value as? Int { return i }
        if let n = value as? NSNumber { return n.intValue }
        XCTFail("\(what) is not an integer", file: file, line: line)
        throw Failure.malformed
    }
}

/// What happened to each vector of one file. Every test of the file ends up
/// in exactly one bucket, so nothing can be dropped without the totals
/// noticing.
struct WycheproofTally {
    let name: String
    var validPassed = 0
    var validFailed = 0
    var invalidRejected = 0
    var invalidAccepted = 0
    var acceptableAccepted = 0
    var acceptableRejected = 0
    var notApplicable = 0
    /// Free-form extra counters printed after the main numbers.
    var notes: [(String, Int)] = []

    init(_ name: String) { self.name = name }

    var applicable: Int {
        validPassed + validFailed + invalidRejected + invalidAccepted + acceptableAccepted + acceptableRejected
    }
    var total: Int { applicable + notApplicable }

    mutating func note(_ key: String) {
        if let i = notes.firstIndex(where: { $0.0 == key }) {
            notes[i].1 += 1
        } else {
            notes.append((key, 1))
        }
    }

    /// Files one vector's outcome and fails the test where the primitive is
    /// wrong. `accepted`: the primitive took the input (produced an output,
    /// or verified). `correct`: that output is the expected one.
    mutating func record(
        _ t: Wycheproof.Case, accepted: Bool, correct: Bool = true, file: StaticString = #filePath, line: UInt = #line
    ) {
        switch t.result {
        case .valid:
            if accepted && correct {
                validPassed += 1
            } else {
                validFailed += 1
                XCTFail("\(name) valid vector \(accepted ? "gave a wrong output" : "refused"): \(t.label)", file: file, line: line)
            }
        case .invalid:
            if accepted {
                invalidAccepted += 1
                XCTFail("\(name) invalid vector accepted: \(t.label)", file: file, line: line)
            } else {
                invalidRejected += 1
            }
        case .acceptable:
            if accepted {
                acceptableAccepted += 1
                XCTAssertTrue(correct, "\(name) acceptable vector gave a wrong output: \(t.label)", file: file, line: line)
            } else {
                acceptableRejected += 1
            }
        case .unknown:
            XCTFail("\(name): unknown result in \(t.label)", file: file, line: line)
        }
    }

    func noteCount(_ key: String) -> Int { notes.first(where: { $0.0 == key })?.1 ?? 0 }

    var summary: String {
        var parts = ["\(validPassed) valid passed", "\(invalidRejected) invalid rejected"]
        if acceptableAccepted + acceptableRejected > 0 {
            parts.append(
                "\(acceptableAccepted + acceptableRejected) acceptable: \(acceptableAccepted) accepted, \(acceptableRejected) rejected")
        }
        if validFailed > 0 { parts.append("\(validFailed) VALID FAILED") }
        if invalidAccepted > 0 { parts.append("\(invalidAccepted) INVALID ACCEPTED") }
        var line = "wycheproof \(name): \(applicable) applicable (\(parts.joined(separator: ", "))), \(notApplicable) not applicable"
        if !notes.isEmpty {
            line += "; " + notes.map { "\($0.0): \($0.1)" }.joined(separator: ", ")
        }
        return line
    }

    struct Expected {
        var valid = 0
        var invalid = 0
        var acceptableAccepted = 0
        var acceptableRejected = 0
        var notApplicable = 0
    }

    /// Prints the summary line and checks the counts: no valid vector
    /// refused, no invalid one accepted, every test of the file accounted
    /// for, and the observed numbers unchanged.
    func check(against file: Wycheproof.File, expected: Expected, sourceFile: StaticString = #filePath, line: UInt = #line) {
        print(summary)
        XCTAssertEqual(validFailed, 0, "\(name): valid vectors refused or mis-computed", file: sourceFile, line: line)
        XCTAssertEqual(invalidAccepted, 0, "\(name): invalid vectors accepted", file: sourceFile, line: line)
        XCTAssertGreaterThan(applicable, 0, "\(name): no applicable vectors", file: sourceFile, line: line)
        XCTAssertEqual(total, file.numberOfTests, "\(name): tests unaccounted for", file: sourceFile, line: line)
        XCTAssertEqual(file.allTests.count, file.numberOfTests, "\(name): numberOfTests disagrees with the file", file: sourceFile, line: line)
        XCTAssertEqual(validPassed, expected.valid, "\(name): valid count", file: sourceFile, line: line)
        XCTAssertEqual(invalidRejected, expected.invalid, "\(name): invalid count", file: sourceFile, line: line)
        XCTAssertEqual(acceptableAccepted, expected.acceptableAccepted, "\(name): acceptable accepted", file: sourceFile, line: line)
        XCTAssertEqual(acceptableRejected, expected.acceptableRejected, "\(name): acceptable rejected", file: sourceFile, line: line)
        XCTAssertEqual(notApplicable, expected.notApplicable, "\(name): not applicable", file: sourceFile, line: line)
        XCTAssertEqual(
            applicable, expected.valid + expected.invalid + expected.acceptableAccepted + expected.acceptableRejected,
            "\(name): applicable count", file: sourceFile, line: line)
    }
}

/// The kind of an `ItsMeError`, or nil for any other error.
func itsMeKind(_ error: Error) -> ItsMeError.Kind? {
    (error as? ItsMeError)?.kind
}

/// Runs `body` and returns the kind of the `ItsMeError` it threw, nil if it
/// returned normally. Any other error fails the test.
func thrownKind(
    _ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line
) -> ItsMeError.Kind? {
    do {
        try body()
        return nil
    } catch let e as ItsMeError {
        return e.kind
    } catch {
        XCTFail("unexpected error \(error)", file: file, line: line)
        return .internal
    }
}
