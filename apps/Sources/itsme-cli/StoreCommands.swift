import ArgumentParser
import Foundation
import ItsMeKit

// MARK: contacts accept-loss

extension Contacts {
    /// The person's way out when the contact store is refused as rolled
    /// back, emptied, replaced or missing rows (docs/STORAGE.md, "Commits
    /// and rollback").
    struct AcceptLoss: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "accept-loss",
            abstract: "Use a contact store that was rolled back, emptied, replaced or damaged, as it is.",
            discussion: """
                itsme refuses to open contacts.db when it is behind the last change this device saw, is not the \
                store this device last used there, or lacks contacts, photos or device secrets its last change \
                counted: an older copy put back, the file deleted or emptied, or changes lost with a -wal file \
                after a crash. This command shows what was refused and, once you agree, makes the file the \
                store as it is and says what was lost. Put a newer copy back first if you have one.
                """)
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Do not ask for confirmation.") var yes = false

        func run() async throws {
            try await execute(global) { profile in
                try profile.unlockAgain()
                let identity = try profile.identity()
                do {
                    _ = try ContactStore(path: profile.contactsPath, identity: identity)
                    profile.output.line("The contact store opens normally: there is no loss to accept.")
                    profile.output.document(["accepted": false])
                    return .ok
                } catch let e as ItsMeError where e.kind == .rolledBack || e.kind == .corruptData {
                    profile.output.notice("The contact store was refused: \(e.message)")
                }
                if !yes {
                    guard try Input.confirm("Accept the loss and use the contact store as it is now?") else {
                        profile.output.line("Nothing changed.")
                        return .ok
                    }
                }
                let loss = try ContactStore.acceptLoss(path: profile.contactsPath, identity: identity)
                profile.output.line("Accepted: \(loss). The contact store opens again.")
                profile.output.document([
                    "accepted": true, "replaced": loss.replaced, "commitsLost": loss.commitsLost,
                    "contactsBefore": loss.contactsBefore, "contactsNow": loss.contactsNow,
                    "missing": [
                        "contacts": loss.missing.contacts, "photos": loss.missing.photos,
                        "deviceSecrets": loss.missing.deviceSecrets,
                    ],
                    "contactsWithoutTheirPhoto": loss.photosMissing,
                ])
                return .ok
            }
        }
    }
}

/// What to add to an error that refused the contact store, so the person
/// knows the way out.
func storeLossHint(_ error: Error) -> String {
    guard let e = error as? ItsMeError,
        e.kind == .rolledBack || (e.kind == .corruptData && e.message.contains("lacks rows"))
    else { return "" }
    return " (\(suggest("contacts", "accept-loss")) shows the loss and asks before accepting it)"
}
