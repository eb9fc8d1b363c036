import Foundation

/// itsme-vectors: computes every file of Tests/ProtocolVectors and writes
/// them, or with --check compares them with the files on disk.
let usage = """
    usage: itsme-vectors [--check] [DIRECTORY]

    Computes the protocol test vectors (docs/PROTOCOL.md) and writes them as
    DIRECTORY/<name>.json (default: Tests/ProtocolVectors, from the current
    directory). With --check, writes nothing: exits with 1 and names each file
    and entry that differs from what the library computes.

    """

func standardError(_ text: String) { FileHandle.standardError.write(Data((text + "\n").utf8)) }

/// The file's bytes: the JSON as the vector files are written.
func encoded(_ content: Any) throws -> Data {
    try JSONSerialization.data(withJSONObject: content, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        + Data("\n".utf8)
}

/// A value that is neither an object nor a list, as JSON text.
func leaf(_ value: Any) -> String {
    (try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed])).map { String(decoding: $0, as: UTF8.self) }
        ?? "\(value)"
}

/// The paths at which `disk` and `fresh` differ, at most `limit` of them.
func differences(_ disk: Any, _ fresh: Any, at path: String, limit: Int, into out: inout [String]) {
    guard out.count < limit else { return }
    if let d = disk as? [String: Any], let f = fresh as? [String: Any] {
        for key in Set(d.keys).union(f.keys).sorted() {
            let sub = path.isEmpty ? key : path + "." + key
            switch (d[key], f[key]) {
            case (nil, _?): out.append("\(sub): missing from the file")
            case (_?, nil): out.append("\(sub): in the file, not computed")
            case (let x?, let y?): differences(x, y, at: sub, limit: limit, into: &out)
            default: break
            }
            if out.count >= limit { return }
        }
    } else if let d = disk as? [Any], let f = fresh as? [Any] {
        if d.count != f.count { out.append("\(path.isEmpty ? "(top)" : path): \(d.count) entries in the file, \(f.count) computed") }
        for i in 0..<min(d.count, f.count) { differences(d[i], f[i], at: "\(path)[\(i)]", limit: limit, into: &out) }
    } else if leaf(disk) != leaf(fresh) {
        out.append("\(path.isEmpty ? "(top)" : path): the file has \(leaf(disk)), the library gives \(leaf(fresh))")
    }
}

func run(_ arguments: [String]) -> Int32 {
    var check = false
    var directory: String?
    for argument in arguments {
        switch argument {
        case "--check": check = true
        case "-h", "--help":
            print(usage, terminator: "")
            return 0
        case _ where argument.hasPrefix("-"):
            standardError("itsme-vectors: unknown option \(argument)\n" + usage)
            return 2
        default:
            guard directory == nil else {
                standardError("itsme-vectors: one directory at most\n" + usage)
                return 2
            }
            directory = argument
        }
    }
    let dir = URL(fileURLWithPath: directory ?? "Tests/ProtocolVectors")
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: dir.path, isDirectory: &isDirectory), isDirectory.boolValue else {
        standardError("itsme-vectors: \(dir.path) is not a directory (run from the repository's root, or give the directory)")
        return 2
    }
    let generator: VectorGenerator
    let files: [(name: String, content: Any)]
    do {
        generator = try VectorGenerator()
        files = try generator.withIntermediates(try generator.files())
    } catch {
        standardError("itsme-vectors: building the vectors failed: \(error)")
        return 1
    }
    guard generator.failures.isEmpty else {
        standardError("itsme-vectors: the library disagrees with the documented formulas; nothing written:")
        for f in generator.failures { standardError("  " + f) }
        return 1
    }
    var differing = 0
    for (name, content) in files {
        let url = dir.appendingPathComponent(name + ".json")
        let data: Data
        do { data = try encoded(content) } catch {
            standardError("itsme-vectors: \(name).json: \(error)")
            return 1
        }
        if !check {
            do { try data.write(to: url) } catch {
                standardError("itsme-vectors: cannot write \(url.path): \(error)")
                return 1
            }
            continue
        }
        guard let disk = FileManager.default.contents(atPath: url.path) else {
            standardError("\(name).json: missing")
            differing += 1
            continue
        }
        if disk == data { continue }
        differing += 1
        guard let stored = try? JSONSerialization.jsonObject(with: disk) else {
            standardError("\(name).json: not valid JSON")
            continue
        }
        var out: [String] = []
        differences(stored, (try? JSONSerialization.jsonObject(with: data)) ?? content, at: "", limit: 20, into: &out)
        if out.isEmpty { out = ["the same values, laid out otherwise (rewrite it with itsme-vectors)"] }
        standardError("\(name).json differs from what the library computes:")
        for line in out { standardError("  " + line) }
    }
    if check {
        let known = Set(files.map { $0.name + ".json" })
        let present = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        for extra in present.filter({ $0.hasSuffix(".json") && !known.contains($0) }).sorted() {
            standardError("\(extra): not a file the generator makes")
            differing += 1
        }
        if differing > 0 {
            standardError("itsme-vectors: \(differing) file(s) differ; `make vectors` rewrites them")
            return 1
        }
        print("itsme-vectors: the \(files.count) files of \(dir.relativePath) are current")
    } else {
        print("itsme-vectors: wrote \(files.count) files to \(dir.relativePath)")
    }
    return 0
}

exit(run(Array(CommandLine.arguments.dropFirst())))
