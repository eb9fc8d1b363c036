// The `store` suite: the encrypted contact store at 1,000, 10,000 and
// 100,000 contacts, against one save of the source app's whole-blob scheme
// (every contact serialised, sealed with AES-256-GCM, written and fsync'd).
#if canImport(Glibc)
import Glibc
#endif
import ItsMeCore

func median(_ samples: [Double]) -> Double {
    let sorted = samples.sorted()
    return sorted[sorted.count / 2]
}

/// Contacts of a fixed, realistic size without photos: a 20-character
/// name, a 32-byte key and seed, a 40-character note.
struct SyntheticContact {
    let name: String
    let key: [UInt8]
    let seed: [UInt8]
    let note: String

    init(_ i: Int) {
        name = "Contact \(String(i).leftPadded(to: 12))"
        key = SHA256.hash(Array("key \(i)".utf8))
        seed = SHA256.hash(Array("seed \(i)".utf8))
        note = "met at the market, number \(String(i).leftPadded(to: 13))"
    }
}

extension String {
    func leftPadded(to n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
}

/// The source app's scheme: all contacts as one JSON text, sealed and
/// written with fsync on every save.
func wholeBlobSave(_ contacts: [SyntheticContact], path: String) throws -> Double {
    let start = nowSeconds()
    var json = "["
    for (i, c) in contacts.enumerated() {
        if i > 0 { json += "," }
        json += "{\"name\":\"\(c.name)\",\"fingerprint\":\"\(Fingerprint.of(publicKey: c.key))\","
        json += "\"publicKey\":\"\(Hex.encodeUpper(c.key))\",\"seed\":\"\(Hex.encodeUpper(c.seed))\","
        json += "\"state\":\"verified\",\"method\":\"qr\",\"created\":1800000000,\"note\":\"\(c.note)\"}"
    }
    json += "]"
    var rng = SystemRandom()
    let key = try SecretBytes(randomCount: 32, using: &rng)
    let nonce = rng.bytes(12)
    let sealed = try AEAD.seal(.aes256GCM, key: key, nonce: nonce, plaintext: Array(json.utf8), aad: [UInt8]())
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    guard fd >= 0 else { throw ItsMeError(.internal, "cannot write \(path)") }
    let blob = nonce + sealed
    var done = 0
    while done < blob.count {
        let n = blob.withUnsafeBytes { write(fd, $0.baseAddress! + done, blob.count - done) }
        guard n > 0 else { close(fd); throw ItsMeError(.internal, "write failed") }
        done += n
    }
    fsync(fd)
    close(fd)
    return nowSeconds() - start
}

func storeSuite(iterations: Int) throws -> Figures {
    var figures = Figures()
    var template = Array("/tmp/itsme-bench-XXXXXX".utf8CString)
    guard let dirPointer = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw ItsMeError(.internal, "cannot create a temporary directory")
    }
    let directory = String(cString: dirPointer)
    defer { _ = system("rm -rf '\(directory)'") }
    let identity = try Identity.create(store: MemorySecretStore(), name: "Bench")
    print("store suite: WAL journal, synchronous=FULL (every commit fsync'd); contacts of ~20-byte name, 40-byte note, no photo")
    var at100k: (update: Double, get: Double, list: Double, ratio: Double)?

    for n in [1_000, 10_000, 100_000] {
        let path = "\(directory)/contacts-\(n).db"
        let contacts = (0..<n).map(SyntheticContact.init)
        var ids: [Int64] = []
        ids.reserveCapacity(n)
        let addStart = nowSeconds()
        do {
            let store = try ContactStore(path: path, identity: identity)
            // Bulk import in transactions of 1,000 (one fsync each).
            for chunk in stride(from: 0, to: n, by: 1_000) {
                try store.batch { batch in
                    for c in contacts[chunk..<min(chunk + 1_000, n)] {
                        ids.append(
                            try batch.add(
                                name: c.name, publicKey: c.key, seed: try SecretBytes(copying: c.seed), method: .qr,
                                now: 1_800_000_000, note: c.note))
                    }
                }
            }
        }
        let addTime = nowSeconds() - addStart

        let openStart = nowSeconds()
        let store = try ContactStore(path: path, identity: identity)
        let openTime = nowSeconds() - openStart

        let lookups = 1_000
        var getSamples: [Double] = []
        for _ in 0..<lookups {
            let c = contacts[Int.random(in: 0..<n)]
            let fingerprint = Fingerprint.of(publicKey: c.key)
            let t = nowSeconds()
            let found = try store.contacts(fingerprint: fingerprint)
            getSamples.append(nowSeconds() - t)
            guard found.count == 1 else { throw ItsMeError(.internal, "lookup found \(found.count)") }
        }

        var updateSamples: [Double] = []
        for i in 0..<lookups {
            var c = try store.contact(id: ids[Int.random(in: 0..<n)])
            c.note = "updated note \(i)"
            let t = nowSeconds()
            try store.update(c)
            updateSamples.append(nowSeconds() - t)
        }

        let listStart = nowSeconds()
        let all = try store.list()
        let listTime = nowSeconds() - listStart
        guard all.count == n else { throw ItsMeError(.internal, "list returned \(all.count)") }

        let saves = n >= 100_000 ? 3 : 5
        let blob = median(try (0..<saves).map { _ in try wholeBlobSave(contacts, path: "\(directory)/blob-\(n)") })
        let update = median(updateSamples), get = median(getSamples)

        print("  \(n) contacts:")
        print("    bulk add (transactions of 1,000): \(format(addTime / Double(n))) per contact, \(Int(Double(n) / addTime)) per second")
        print("    open: \(format(openTime))")
        print("    get by fingerprint: median \(format(get)) (\(lookups) lookups)")
        print("    update one contact: median \(format(update)) (\(lookups) updates, each committed with fsync)")
        print("    list all with decryption: \(format(listTime))")
        print("    whole-blob save (source scheme): median \(format(blob)); whole-blob / our update = \(Int(blob / update))x")
        let prefix = "n\(n)_"
        figures.add(prefix + "add_per_contact_us", addTime / Double(n) * 1e6)
        figures.add(prefix + "open_ms", openTime * 1e3)
        figures.add(prefix + "get_by_fingerprint_median_ms", get * 1e3)
        figures.add(prefix + "update_median_ms", update * 1e3)
        figures.add(prefix + "list_all_ms", listTime * 1e3)
        figures.add(prefix + "whole_blob_save_ms", blob * 1e3)
        figures.add(prefix + "blob_over_update", blob / update)
        if n == 100_000 { at100k = (update, get, listTime, blob / update) }
    }
    if let r = at100k {
        func verdict(_ ok: Bool) -> String { ok ? "met" : "MISSED" }
        print("  targets at 100,000 contacts:")
        print("    update median <= 1 ms: \(format(r.update)) \(verdict(r.update <= 1e-3))")
        print("    whole-blob / update >= 100: \(Int(r.ratio))x \(verdict(r.ratio >= 100))")
        print("    get by fingerprint median <= 0.5 ms: \(format(r.get)) \(verdict(r.get <= 0.5e-3))")
        print("    list all <= 1 s: \(format(r.list)) \(verdict(r.list <= 1))")
    }
    return figures
}
