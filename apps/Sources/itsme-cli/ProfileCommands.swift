import ArgumentParser
import Foundation
import ItsMeKit
import ItsMePrimitives
import RelayClient

#if canImport(Glibc)
    import Glibc
#endif

// Profile records (docs/PROTOCOL.md 18): the person's name and photo,
// sealed, published on the relay (`profile set`), and shared with a contact
// inside an Online Verify session (`online-verify`), who fetches, opens and
// may apply it once the SAS is confirmed.

// MARK: The saved profile

/// What `profile set` keeps in the data directory (`profile.json`, mode
/// 0600): where the record is, the reference that opens it (a secret: it
/// is never printed), the delete token, and what it holds, for `show`.
struct SavedProfile: Codable {
    var version = 1
    /// The relay the record is on.
    var relay: String
    /// The record ID as the relay names it (32 lowercase hex digits).
    var record: String
    /// record ID || record key, 64 hex digits.
    var reference: String
    /// nil if the relay gave none (the same bytes were already there).
    var deleteToken: String?
    var name: String
    var photoBytes: Int
    var photoFilename: String?

    /// The reference's bytes; nil if the file does not hold a valid one
    /// (64 hex digits, of which the first 32 are the record's name).
    var referenceBytes: [UInt8]? {
        guard let bytes = Hex.decode(reference), bytes.count == ProfileRecord.referenceCount,
            Hex.encodeUpper(bytes.prefix(ProfileRecord.recordIDCount)).lowercased() == record
        else { return nil }
        return bytes
    }
}

extension Profile {
    var profileRecordPath: String { directory + "/profile.json" }

    private static var profileAdvice: String { "remove it and run \(suggest("profile", "set")) again" }

    /// The saved profile, nil if none; a damaged file is an error that says
    /// so.
    func savedProfile() throws -> SavedProfile? {
        try savedProfileData().map(decodeSavedProfile)
    }

    /// The bytes of `profile.json`, nil if there is none; anything else
    /// than a regular file in its place is an error (it is never replaced).
    func savedProfileData() throws -> Data? {
        try readDataFile(profileRecordPath, advice: Self.profileAdvice)
    }

    func decodeSavedProfile(_ data: Data) throws -> SavedProfile {
        guard let saved = try? JSONDecoder().decode(SavedProfile.self, from: data), saved.version == 1, saved.referenceBytes != nil
        else {
            throw CLIError("\(profileRecordPath) is damaged: \(Self.profileAdvice)")
        }
        return saved
    }

    func saveProfile(_ saved: SavedProfile) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try writePrivateFile(profileRecordPath, try encoder.encode(saved))
    }

    func removeSavedProfile() {
        unlink(profileRecordPath)
    }
}

/// "name "Alice", photo 5000 bytes": what a profile holds, for a person.
func profileSummary(name: String, photoBytes: Int) -> String {
    var parts: [String] = []
    if !name.isEmpty { parts.append("name \"\(name)\"") }
    if photoBytes > 0 { parts.append("photo \(photoBytes) bytes") }
    return parts.joined(separator: ", ")
}

// MARK: profile set|show|clear

struct ProfileCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profile",
        abstract: "Share your name and photo with your contacts, through the relay.",
        discussion: """
            `itsme profile set` seals your name (and a photo) in a record only your contacts can open, and \
            publishes it on the relay. At each `itsme online-verify`, the session carries the record's key, \
            encrypted, to the contact, who may apply the name and photo once you both confirmed the SAS.
            """,
        subcommands: [SetProfile.self, ShowProfile.self, ClearProfile.self], defaultSubcommand: ShowProfile.self)

    struct SetProfile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Publish a new profile record (it replaces the previous one, which is deleted from the relay).",
            discussion: """
                The name defaults to your identity's name; without --photo the profile has no photo. The record \
                (at most 262,144 bytes, so a photo of about 256 KiB) goes to the relay; the data directory keeps \
                its key and its delete token (profile.json, mode 0600).
                """)
        @OptionGroup var global: GlobalOptions
        @OptionGroup var relay: RelayOption
        @Option(help: "The name your contacts will see (default: your identity's name).") var name: String?
        @Option(help: ArgumentHelp("A photo to share (any image format; its file name goes along).", valueName: "file"))
        var photo: String?

        func run() async throws {
            try await execute(global) { profile in
                let url = try profile.relayURL(relay.relay, ca: relay.relayCA)
                let identity = try profile.identity()
                let name = try self.name.map { try DisplayName.validated($0) } ?? identity.name
                let (photoBytes, filename) = try photo.map(readPhoto) ?? ([], "")
                try profile.unlock()
                var previous: SavedProfile?
                // A profile.json that is not a regular file stops here; one
                // whose content is damaged is replaced.
                let previousData = try profile.savedProfileData()
                do {
                    previous = try previousData.map(profile.decodeSavedProfile)
                } catch {
                    profile.output.warn("warning: \(explain(error).0); it is replaced (its record stays on the relay)")
                }

                var random = SystemRandom()
                let record = try ProfileRecord.create(
                    ownerKey: identity.publicKey, name: name, photo: photoBytes, photoFilename: filename, random: &random)
                let token = try await RecordStore(url).put(id: record.recordName, bytes: record.record)
                let reference = try record.reference()
                let saved = SavedProfile(
                    relay: url.text, record: record.recordName, reference: reference.withBytes { Hex.encodeUpper($0).lowercased() },
                    deleteToken: token, name: name, photoBytes: photoBytes.count, photoFilename: filename.isEmpty ? nil : filename)
                try profile.saveProfile(saved)
                profile.output.line("Published your profile: \(profileSummary(name: name, photoBytes: photoBytes.count)).")
                profile.output.line("Record: \(record.recordName) on \(url.text)")
                profile.output.line("Your contacts receive it at your next \(suggest("online-verify", blank: "NAME")) with them.")
                if token == nil {
                    profile.output.warn("warning: the relay held this record already and gave no delete token: `itsme profile clear` cannot delete it")
                }

                var deleted: String?
                if let previous, previous.record != saved.record {
                    // On the relay just used, with the roots it was reached with.
                    let previousRelay = previous.relay == url.text ? url : try? profile.savedRelayURL(previous.relay)
                    if await deleteRecord(previous, on: previousRelay, profile.output, what: "the previous profile record") {
                        deleted = previous.record
                        profile.output.line("Deleted the previous record \(previous.record) from the relay.")
                    }
                }
                var document: [String: Any] = [
                    "record": saved.record, "relay": saved.relay, "name": name, "photoBytes": photoBytes.count,
                ]
                if let deleted { document["deletedRecord"] = deleted }
                profile.output.document(document)
                return .ok
            }
        }

        /// The photo's bytes and file name, checked before it is read.
        private func readPhoto(_ path: String) throws -> ([UInt8], String) {
            let limit = ProfileRecord.maxRecordBytes - ProfileRecord.overhead
            let bytes: [UInt8]
            do {
                guard let read = try RegularFile.contents(of: path, followLinks: true, limit: limit) else {
                    throw CLIError("cannot read the photo \(path): \(String(cString: strerror(ENOENT)))")
                }
                bytes = read
            } catch let error as RegularFileError {
                if case .tooLarge(let size, _) = error.problem {
                    throw CLIError(
                        "the photo \(path) is \(size.map { "\($0) bytes" } ?? "larger"): a profile record holds at most about \(limit) (use a smaller photo)")
                }
                throw CLIError("the photo \(error.description)")
            }
            guard !bytes.isEmpty else { throw CLIError("the photo \(path) is empty") }
            return (bytes, URL(fileURLWithPath: path).lastPathComponent)
        }
    }

    struct ShowProfile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show", abstract: "Show the profile you share: its record, name and photo size.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await execute(global) { profile in
                try profile.unlock()
                guard let saved = try profile.savedProfile() else {
                    profile.output.line("No profile set (\(suggest("profile", "set"))).")
                    profile.output.document(["set": false])
                    return .ok
                }
                profile.output.line("Record: \(saved.record)")
                profile.output.line("Name:   \(saved.name.isEmpty ? "(none)" : saved.name)")
                profile.output.line(
                    "Photo:  \(saved.photoBytes == 0 ? "none" : "\(saved.photoBytes) bytes\(saved.photoFilename.map { " (\($0))" } ?? "")")")
                profile.output.line("Relay:  \(saved.relay)")
                var document: [String: Any] = [
                    "set": true, "record": saved.record, "name": saved.name, "photoBytes": saved.photoBytes, "relay": saved.relay,
                ]
                if let filename = saved.photoFilename { document["photoFilename"] = filename }
                profile.output.document(document)
                return .ok
            }
        }
    }

    struct ClearProfile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "clear",
            abstract: "Stop sharing a profile: delete the record from the relay, and the saved profile.",
            discussion: """
                Contacts keep what they applied. If the relay cannot be reached nothing is removed (exit 4): run it \
                again later.
                """)
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await execute(global) { profile in
                try profile.unlock()
                guard let saved = try profile.savedProfile() else { throw CLIError("no profile set: nothing to clear") }
                if let token = saved.deleteToken {
                    let url: RelayURL
                    do { url = try profile.savedRelayURL(saved.relay) } catch { throw CLIError("the saved relay \(saved.relay) is not usable: \(explain(error).0)") }
                    do {
                        try await RecordStore(url).delete(id: saved.record, token: token)
                        profile.output.line("Deleted your profile record \(saved.record) from the relay.")
                    } catch let error as RelayError where error.status == 404 {
                        profile.output.line("Your profile record \(saved.record) was no longer on the relay.")
                    } catch let error as RelayError where error.status == 403 {
                        profile.output.warn("warning: the relay refuses the saved delete token; the record \(saved.record) stays there")
                    }
                } else {
                    profile.output.warn("warning: no delete token was saved; the record \(saved.record) stays on the relay")
                }
                profile.removeSavedProfile()
                profile.output.line("Removed the saved profile. Contacts keep what they applied.")
                profile.output.document(["cleared": saved.record])
                return .ok
            }
        }
    }
}

/// Deletes `saved`'s record from `relay` (nil: its saved relay URL is no
/// longer usable); a failure is a warning. True if it is gone (deleted, or
/// no longer there).
private func deleteRecord(_ saved: SavedProfile, on relay: RelayURL?, _ output: Output, what: String) async -> Bool {
    guard let token = saved.deleteToken else {
        output.warn("warning: no delete token for \(what) \(saved.record): it stays on the relay")
        return false
    }
    guard let relay else {
        output.warn("warning: the relay \(saved.relay) of \(what) \(saved.record) is not usable; it stays readable there")
        return false
    }
    do {
        try await RecordStore(relay).delete(id: saved.record, token: token)
        return true
    } catch let error as RelayError where error.status == 404 {
        return true
    } catch {
        output.warn("warning: could not delete \(what) \(saved.record) from the relay (\(explain(error).0)); it stays readable there")
        return false
    }
}

// MARK: Online Verify

/// The reference of the saved profile, to share in an Online Verify
/// session; nil (with a warning for a damaged file) if there is none.
func profileToShare(_ profile: Profile) -> [UInt8]? {
    do {
        return try profile.savedProfile()?.referenceBytes
    } catch {
        profile.output.warn("warning: your profile is not shared: \(explain(error).0)")
        return nil
    }
}

/// After a confirmed SAS: the profile the contact shared, if any, fetched
/// from `url`, opened with the contact's identity key, shown, and applied
/// if the person (or `apply`) says so. Every failure is a warning: the
/// verification stands.
func offerPeerProfile(
    _ session: OnlineVerify, contact c: Contact, url: RelayURL, store: ContactStore, apply: Bool?, output: Output
) async {
    let reference: SecretBytes
    do {
        reference = try session.peerProfileReference()
    } catch let error as ItsMeError where error.kind == .notFound {
        return
    } catch {
        output.warn("warning: \(c.name)'s profile cannot be read: \(explain(error).0)")
        return
    }
    guard let ownerKey = c.publicKey else {
        output.warn(
            "warning: \(c.name) shares a profile, but this contact was added in the old format, without its identity key: "
                + "the profile cannot be checked and is ignored")
        return
    }
    let recordName = reference.withBytes { Hex.encodeUpper($0.prefix(ProfileRecord.recordIDCount)).lowercased() }
    let bytes: [UInt8]
    do {
        bytes = try await RecordStore(url).get(id: recordName)
    } catch {
        output.warn("warning: could not fetch \(c.name)'s profile from the relay (\(explain(error).0)); the verification stands")
        return
    }
    let record: ProfileRecord
    do {
        record = try ProfileRecord.open(record: bytes, reference: reference, ownerKey: ownerKey)
    } catch {
        output.warn("warning: \(c.name)'s profile record does not open (\(explain(error).0)): it is ignored; the verification stands")
        return
    }
    print("\(c.name) shares a profile: \(profileSummary(name: record.name, photoBytes: record.photo.count))")
    let yes: Bool
    if let apply {
        yes = apply
    } else {
        do {
            yes = try Input.confirmDefaultNo("Apply to your contact?")
        } catch {
            yes = false
        }
    }
    guard yes else {
        print("Profile not applied.")
        return
    }
    do {
        try store.applyProfile(id: c.id, record)
        var what: [String] = []
        if !record.name.isEmpty { what.append("#\(c.id) is now \(record.name)") }
        if !record.photo.isEmpty { what.append("photo saved (\(record.photo.count) bytes)") }
        print("Applied: \(what.joined(separator: "; ")).")
    } catch {
        output.warn("warning: the profile could not be applied: \(explain(error).0)")
    }
}
