import ArgumentParser
import Foundation

// MARK: lock, unlock-time

struct Lock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "End the unlock window: the next command asks for the PIN again.",
        discussion: """
            After a correct PIN typed at a terminal, this data directory stays unlocked for a while \
            (`itsme unlock-time`), in the terminal where it was typed. `itsme lock` ends that now, in every \
            terminal (`--all`: for every data directory); a command already running finishes.
            """)
    @OptionGroup var global: GlobalOptions
    @Flag(help: "End the unlock windows of every data directory of yours.") var all = false

    func run() async throws {
        try await execute(global, unlockAgent: false) { profile in
            if all {
                let count = UnlockAgent.lockAll()
                profile.output.line(
                    count == 0 ? "Nothing to lock: no data directory of yours is unlocked." : "Locked \(count) unlock window\(count == 1 ? "" : "s").")
                profile.output.document(["locked": count])
                return .ok
            }
            let locked = UnlockAgent.lock(profile.directory)
            profile.output.line(
                locked == 0
                    ? "Nothing to lock: \(profile.directory) is not unlocked."
                    : "Locked\(locked == 1 ? "" : " in \(locked) terminal sessions"): the next command asks for the PIN.")
            profile.output.document(["locked": locked])
            return .ok
        }
    }
}

struct UnlockTime: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock-time",
        abstract: "Show or set how long a correct PIN keeps this data directory unlocked.",
        discussion: """
            Without arguments: the setting, and whether the directory is unlocked now. `itsme unlock-time 10m 1h` \
            keeps it unlocked until 10 minutes pass without a command, and 1 hour after the PIN at most; \
            `off` asks for the PIN in every command; `default` is 5m 30m. Times are seconds, or a number \
            followed by s, m or h (12h at most). A change ends the window open now. docs/CLI.md, "The unlock \
            window", says what it protects and what it does not.
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("The idle time, `off` or `default`.", valueName: "idle")) var idle: String?
    @Argument(help: ArgumentHelp("The longest time after the PIN (default: 30m, or the idle time if longer).", valueName: "most"))
    var most: String?

    /// Seconds from "90", "90s", "5m" or "1h"; nil for anything else.
    static func seconds(_ text: String) -> Int? {
        var digits = Substring(text.lowercased())
        var unit = 1
        switch digits.last {
        case "s": digits.removeLast()
        case "m": digits.removeLast(); unit = 60
        case "h": digits.removeLast(); unit = 3600
        default: break
        }
        guard !digits.isEmpty, digits.count <= 6, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(digits) else {
            return nil
        }
        return value * unit
    }

    /// The setting for --json: `off`, and the two times when on.
    static func document(_ window: UnlockAgent.Window?) -> [String: Any] {
        guard let window else { return ["off": true] }
        return ["off": false, "idle": window.idle, "absolute": window.absolute]
    }

    func run() async throws {
        try await execute(global, unlockAgent: false) { profile in
            var config = try profile.config()
            guard let idle else {
                let window = config.unlockWindow
                let custom = config.unlockIdle != nil || config.unlockAbsolute != nil
                profile.output.line("Unlock time: \(window.map { $0.text + (custom ? "" : " (the default)") } ?? "off: every command asks for the PIN")")
                var document = Self.document(window)
                if UnlockAgent.TerminalSession.current() == nil {
                    profile.output.line("No terminal: every command here asks for the PIN (a window belongs to one terminal).")
                    document["unlocked"] = false
                } else if let (connection, greeting) = UnlockAgent.attach(profile.directory) {
                    close(connection.fd)
                    profile.output.line(
                        "Unlocked now for \(greeting.name): \(duration(Int64(max(0, greeting.idleLeft)))) more without a command, \(duration(Int64(max(0, greeting.absoluteLeft)))) at most (\(suggest("lock")) ends it).")
                    document["unlocked"] = true
                    document["idle_left"] = greeting.idleLeft
                    document["absolute_left"] = greeting.absoluteLeft
                } else {
                    profile.output.line("Not unlocked now.")
                    document["unlocked"] = false
                }
                profile.output.document(document)
                return .ok
            }
            switch idle.lowercased() {
            case "off":
                guard most == nil else { throw CLIError("`off` takes no second time") }
                config.unlockOff = true
                config.unlockIdle = nil
                config.unlockAbsolute = nil
            case "default":
                guard most == nil else { throw CLIError("`default` takes no second time") }
                config.unlockOff = nil
                config.unlockIdle = nil
                config.unlockAbsolute = nil
            default:
                guard let idleSeconds = Self.seconds(idle), idleSeconds > 0 else {
                    throw CLIError("\(idle) is not a time: give seconds, or a number followed by s, m or h (5m), or off, or default")
                }
                let mostSeconds: Int
                if let most {
                    guard let value = Self.seconds(most), value > 0 else {
                        throw CLIError("\(most) is not a time: give seconds, or a number followed by s, m or h (30m)")
                    }
                    mostSeconds = value
                } else {
                    mostSeconds = max(idleSeconds, UnlockAgent.Window.standard.absolute)
                }
                let longest = UnlockAgent.Window.longest
                guard idleSeconds <= longest, mostSeconds <= longest else {
                    throw CLIError("the longest unlock time is \(duration(Int64(longest)))")
                }
                guard mostSeconds >= idleSeconds else {
                    throw CLIError("the longest time (\(duration(Int64(mostSeconds)))) is shorter than the idle time (\(duration(Int64(idleSeconds))))")
                }
                config.unlockOff = nil
                config.unlockIdle = idleSeconds
                config.unlockAbsolute = mostSeconds
            }
            try profile.saveConfig(config)
            let ended = UnlockAgent.lock(profile.directory) > 0
            let window = config.unlockWindow
            profile.output.line(
                "Unlock time: \(window.map { $0.text } ?? "off: every command asks for the PIN")"
                    + (ended ? " (the window open until now has ended)." : "."))
            var document = Self.document(window)
            document["ended"] = ended
            profile.output.document(document)
            return .ok
        }
    }
}
