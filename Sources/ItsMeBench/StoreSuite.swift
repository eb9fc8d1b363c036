// The `store` suite: the encrypted contact store at 1,000, 10,000 and
// 100,000 contacts (the tiers small, medium and large of the JSON keys;
// 100, 300 and 1,000 in a quick run), against one save of the source app's
// whole-blob scheme (every contact serialised, sealed with AES-256-GCM,
// written and fsync'd).
//
//   swift run -c release itsme-bench store [--quick]
#if canImport(Glibc)
import Glibc
#endif
import ItsMeKit
import ItsMePrimitives

func median(_ samples: [Double]) -> Double {
    let sorted = samples.sorted()
    return sorted[sorted.count / 2]
}

func percentile(_ samples: [Double], _ p: Double) -> Double {
    let sorted = samples.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

/// A contact of a fixed, realistic size without a photo: a 20-character
/// name, a random 32-byte identity key and seed, a 40-character note. The
/// fingerprint and hex forms are computed once, as an app holding its
/// contacts in memory would have them.
struct SyntheticContact {
    let name: String
    let key: [UInt8]
    let seed: [UInt8]
    let note: String
    let fingerprint: String
    let keyHex: String
    let seedHex: String

    init(_ i: Int, random: inout SystemRandom) {
        name = "Contact " + String(i).leftPadded(to: 12)  // 20 characters
        key = random.bytes(32)
        seed = random.bytes(32)
        note = "met at the market, number " + String(i).leftPadded(to: 14)  // 40 characters
        fingerprint = Fingerprint.of(publicKey: key)
        keyHex = Hex.encodeUpper(key)
        seedHex = Hex.encodeUpper(seed)
    }

    static func make(_ n: Int) -> [SyntheticContact] {
        var random = SystemRandom()
        return (0..<n).map { SyntheticContact($0, random: &random) }
    }
}

extension String {
    func leftPadded(to n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
}

/// Writes all of `bytes` to a new file at `path` and fsyncs it.
func writeSynced(_ bytes: [UInt8], path: String) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    guard fd >= 0 else { throw ItsMeError(.internal, "cannot create \(path)") }
    defer { close(fd) }
    var done = 0
    while done < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, bytes.count - done) }
        guard n > 0 else { throw ItsMeError(.internal, "cannot write \(path)") }
        done += n
    }
    guard fsync(fd) == 0 else { throw ItsMeError(.internal, "cannot fsync \(path)") }
}

/// The source app's scheme, one save: every contact serialised as JSON
/// text, the whole sealed with AES-256-GCM, written and fsync'd. Returns
/// the seconds spent serialising, sealing, and writing with fsync.
func wholeBlobSave(
    _ contacts: [SyntheticContact], key: borrowing SecretBytes, path: String
) throws -> (serialize: Double, seal: Double, write: Double, bytes: Int) {
    let t0 = nowSeconds()
    var json = "["
    json.reserveCapacity(contacts.count * 320)
    for (i, c) in contacts.enumerated() {
        if i > 0 { json += "," }
        json += "{\"name\":\"" + c.name + "\",\"fingerprint\":\"" + c.fingerprint + "\",\"publicKey\":\"" + c.keyHex
        json += "\",\"seed\":\"" + c.seedHex + "\",\"state\":\"verified\",\"method\":\"qr\",\"created\":1800000000"
        json += ",\"verified\":1800000000,\"note\":\"" + c.note + "\"}"
    }
    json += "]"
    let plaintext = Array(json.utf8)
    let t1 = nowSeconds()
    var rng = SystemRandom()
    let nonce = rng.bytes(AEAD.nonceCount)
    let blob = nonce + (try AEAD.seal(.aes256GCM, key: key, nonce: nonce, plaintext: plaintext, aad: [UInt8]()))
    let t2 = nowSeconds()
    try writeSynced(blob, path: path)
    let t3 = nowSeconds()
    return (t1 - t0, t2 - t1, t3 - t2, blob.count)
}

/// The cost of one small durable append on this file system: 64 bytes
/// written, then fsync, as a WAL commit does. Median seconds.
func fsyncAppendMedian(path: String, count: Int) throws -> Double {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0o600)
    guard fd >= 0 else { throw ItsMeError(.internal, "cannot create \(path)") }
    defer { close(fd) }
    let bytes = [UInt8](repeating: 0x5a, count: 64)
    var samples: [Double] = []
    for _ in 0..<count {
        let t = nowSeconds()
        guard write(fd, bytes, bytes.count) == bytes.count, fsync(fd) == 0 else {
            throw ItsMeError(.internal, "cannot write \(path)")
        }
        samples.append(nowSeconds() - t)
    }
    return median(samples)
}

/// A new directory under /tmp, `/tmp/itsme-bench-NAME-XXXXXX`.
func makeTemporaryDirectory(_ name: String = "store") throws -> String {
    var template = Array("/tmp/itsme-bench-\(name)-XXXXXX".utf8CString)
    let path = template.withUnsafeMutableBufferPointer { buffer in
        mkdtemp(buffer.baseAddress!).map { String(cString: $0) }
    }
    guard let path else { throw ItsMeError(.internal, "cannot create a temporary directory") }
    return path
}

/// Removes a flat directory: its files, then itself.
func removeDirectory(_ path: String) {
    if let dir = opendir(path) {
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name != "." && name != ".." { unlink(path + "/" + name) }
        }
        closedir(dir)
    }
    rmdir(path)
}

func fileExists(_ path: String) -> Bool { access(path, F_OK) == 0 }

func storeSuite(_ scale: Scale) throws -> Figures {
    var figures = Figures()
    let directory = try makeTemporaryDirectory()
    defer { removeDirectory(directory) }
    let identity = try Identity.create(store: MemorySecretStore(), name: "Bench")
    var rng = SystemRandom()
    let blobKey = try SecretBytes(randomCount: AEAD.keyCount, using: &rng)
    let samples = scale.count(1_000, quick: 50)
    let now: Int64 = 1_800_000_000
    let tiers = [("small", scale.count(1_000, quick: 100)), ("medium", scale.count(10_000, quick: 300)),
                 ("large", scale.count(100_000, quick: 1_000))]

    print("store suite: journal_mode=WAL, synchronous=FULL (each commit fsyncs the WAL); in \(directory)")
    print("  contacts: 20-character name, random 32-byte key and seed, 40-character note, no photo")

    // The cost of one fsync'd append on this file system: the floor under
    // every committed change.
    let probes = scale.count(200, quick: 20)
    let fsyncCost = try fsyncAppendMedian(path: "\(directory)/fsync-probe", count: probes)
    print("  one 64-byte append + fsync on this file system: median \(format(fsyncCost)) (\(probes) runs)")
    figures.add("fsync_append_median_ms", fsyncCost * 1e3)

    // The parts an add or update is made of, alone: a guarded allocation
    // (sodium_malloc + sodium_free) for the record plaintext, the seal of a
    // record-sized plaintext, one HMAC for an index column.
    let recordSize = 171  // this suite's contact record: version, 11 fields, seed
    var allocSamples: [Double] = [], sealSamples: [Double] = [], hmacSamples: [Double] = []
    let plain = rng.bytes(recordSize), nonce = rng.bytes(AEAD.nonceCount), message = rng.bytes(44)
    for _ in 0..<samples {
        var t = nowSeconds()
        _ = try SecretBytes(count: recordSize)
        allocSamples.append(nowSeconds() - t)
        t = nowSeconds()
        _ = try AEAD.seal(.aes256GCM, key: blobKey, nonce: nonce, plaintext: plain, aad: message)
        sealSamples.append(nowSeconds() - t)
        t = nowSeconds()
        _ = HMACSHA256.mac(key: blobKey, message: message)
        hmacSamples.append(nowSeconds() - t)
    }
    print(
        "  parts, median of \(samples): guarded allocation \(format(median(allocSamples))), "
            + "AES-256-GCM seal of \(recordSize) bytes \(format(median(sealSamples))), HMAC-SHA256 \(format(median(hmacSamples)))")
    figures.add("guarded_alloc_median_us", median(allocSamples) * 1e6)
    figures.add("record_seal_median_us", median(sealSamples) * 1e6)
    figures.add("hmac_median_us", median(hmacSamples) * 1e6)

    // ContactStore.add: one write transaction, so one fsync, per contact.
    let single = SyntheticContact.make(scale.count(1_000, quick: 50))
    // One guarded buffer holds each seed in turn, so the figures carry the
    // store's own allocations and not the caller's.
    var seed = try SecretBytes(count: 32)
    let singleTime: Double
    do {
        let store = try ContactStore(path: "\(directory)/single-add.db", identity: identity)
        let start = nowSeconds()
        for c in single {
            seed.withMutableBytes { $0.copyBytes(from: c.seed) }
            _ = try store.add(name: c.name, publicKey: c.key, seed: seed, method: .qr, now: now, note: c.note)
        }
        singleTime = (nowSeconds() - start) / Double(single.count)
    }
    print(
        "  add, one transaction per contact, \(grouped(single.count)) contacts: \(format(singleTime)) per contact, "
            + "\(Int(1 / singleTime)) per second (100,000 this way: ~\(Int((singleTime * 1e5).rounded())) s)")
    figures.add("single_add_per_contact_ms", singleTime * 1e3)
    figures.add("single_add_per_second", 1 / singleTime)

    // Each commit also raises the store's mark in the identity's secret store
    // (docs/STORAGE.md, "Commits and rollback"). Above, the identity is in
    // memory; here in the built-in file store, where that is a write, an
    // fsync, a rename and a directory fsync per commit.
    do {
        let secretsDirectory = try makeTemporaryDirectory()
        defer {
            removeDirectory(secretsDirectory + "/secrets")
            removeDirectory(secretsDirectory)
        }
        let owner = try Identity.create(store: try FileSecretStore(directory: secretsDirectory + "/secrets"), name: "Bench")
        let store = try ContactStore(path: "\(directory)/file-secret-store.db", identity: owner)
        var ids: [Int64] = []
        try store.batch { batch in
            for c in SyntheticContact.make(tiers[0].1) {
                seed.withMutableBytes { $0.copyBytes(from: c.seed) }
                ids.append(try batch.add(name: c.name, publicKey: c.key, seed: seed, method: .qr, now: now, note: c.note))
            }
        }
        var updateSamples: [Double] = []
        let updates = scale.count(200, quick: 20)
        for i in 0..<updates {
            var c = try store.contact(id: ids[Int.random(in: 0..<ids.count)])
            c.note = "changed note " + String(i).leftPadded(to: 27)
            let t = nowSeconds()
            try store.update(c)
            updateSamples.append(nowSeconds() - t)
        }
        print(
            "  update, identity in the file secret store (mark written and fsync'd each commit), \(grouped(ids.count)) contacts: "
                + "median \(format(median(updateSamples))) (\(updates) updates)")
        figures.add("file_secret_store_update_median_ms", median(updateSamples) * 1e3)
    }

    // A burst of commits with the identity in the file secret store, at
    // 100,000 contacts (docs/STORAGE.md, "When the mark is raised"): before,
    // the mark was raised at most every 2 s, by the committing thread; now at
    // least every ContactStore.markInterval while commits wait, by a thread
    // of the library. Two handles on one file, one each way, take turns:
    // commits per second and p99 per commit of each.
    do {
        /// The file secret store as a host's store is: called only on the
        /// threads that call the library, so marks are raised as before.
        final class CallersThreadsOnly: SecretStore {
            let inner: FileSecretStore
            init(_ inner: FileSecretStore) { self.inner = inner }
            func get(_ name: String) throws -> SecretBytes? { try inner.get(name) }
            func put(_ name: String, _ value: UnsafeRawBufferPointer, accessibility: Accessibility) throws {
                try inner.put(name, value, accessibility: accessibility)
            }
            func remove(_ name: String) throws -> Bool { try inner.remove(name) }
            func withExclusiveAccess<R: ~Copyable>(_ body: () throws -> R) throws -> R { try inner.withExclusiveAccess(body) }
        }
        let n = scale.count(100_000, quick: 1_000)
        let commits = scale.count(3_000, quick: 100)
        let rounds = scale.count(3, quick: 1)
        let secretsDirectory = try makeTemporaryDirectory()
        defer {
            removeDirectory(secretsDirectory + "/secrets")
            removeDirectory(secretsDirectory)
        }
        let fileStore = try FileSecretStore(directory: secretsDirectory + "/secrets")
        let owner = try Identity.create(store: fileStore, name: "Bench")
        let path = "\(directory)/burst.db"
        let current = try ContactStore(path: path, identity: owner)
        let contacts = SyntheticContact.make(n)
        var ids: [Int64] = []
        ids.reserveCapacity(n)
        for first in stride(from: 0, to: n, by: 1_000) {
            try current.batch { batch in
                for c in contacts[first..<min(first + 1_000, n)] {
                    seed.withMutableBytes { $0.copyBytes(from: c.seed) }
                    ids.append(try batch.add(name: c.name, publicKey: c.key, seed: seed, method: .qr, now: now, note: c.note))
                }
            }
        }
        let previous = try ContactStore(path: path, identity: try Identity.load(store: CallersThreadsOnly(fileStore)))
        previous.markInterval = .seconds(2)
        var rates: [[Double]] = [[], []], p99s: [[Double]] = [[], []]
        for round in 0..<rounds {
            for (way, store) in [previous, current].enumerated() {
                var samples: [Double] = []
                samples.reserveCapacity(commits)
                for i in 0..<commits {
                    var c = try store.contact(id: ids[Int.random(in: 0..<ids.count)])
                    c.note = "burst \(round) \(way) " + String(i).leftPadded(to: 20)
                    let t = nowSeconds()
                    try store.update(c)
                    samples.append(nowSeconds() - t)
                }
                rates[way].append(Double(commits) / samples.reduce(0, +))
                p99s[way].append(percentile(samples, 0.99))
            }
        }
        let old = (rate: median(rates[0]), p99: median(p99s[0])), new = (rate: median(rates[1]), p99: median(p99s[1]))
        let interval = ContactStore.markInterval.components
        let intervalMs = Double(interval.seconds) * 1e3 + Double(interval.attoseconds) / 1e15
        print(
            "  burst of \(grouped(commits)) commits, identity in the file secret store, \(grouped(n)) contacts, "
                + "median of \(rounds) rounds taking turns:")
        print("    before (mark at most every 2 s, by the committing thread): \(Int(old.rate)) commits/s, p99 \(format(old.p99)) per commit")
        print(
            "    now (mark at least every \(Int(intervalMs)) ms while commits wait, by the library's thread): \(Int(new.rate)) commits/s "
                + "(\(Int((new.rate / old.rate * 100).rounded())) %), p99 \(format(new.p99)) per commit (\(Int((new.p99 / old.p99 * 100).rounded())) %)")
        figures.add("burst_contacts", Double(n))
        figures.add("burst_mark_interval_ms", intervalMs)
        figures.add("burst_commits_per_second_before", old.rate)
        figures.add("burst_commits_per_second", new.rate)
        figures.add("burst_p99_ms_before", old.p99 * 1e3)
        figures.add("burst_p99_ms", new.p99 * 1e3)
        figures.add("burst_throughput_ratio", new.rate / old.rate)
        figures.add("burst_p99_ratio", new.p99 / old.p99)
    }

    var at100k: (update: Double, get: Double, list: Double, ratio: Double)?
    for (tier, n) in tiers {
        let path = "\(directory)/contacts-\(n).db"
        let contacts = SyntheticContact.make(n)

        // Bulk add: ContactStore.batch, 1,000 contacts per transaction.
        var ids: [Int64] = []
        ids.reserveCapacity(n)
        let chunk = 1_000
        let addStart = nowSeconds()
        do {
            let store = try ContactStore(path: path, identity: identity)
            for first in stride(from: 0, to: n, by: chunk) {
                try store.batch { batch in
                    for c in contacts[first..<min(first + chunk, n)] {
                        seed.withMutableBytes { $0.copyBytes(from: c.seed) }
                        ids.append(
                            try batch.add(name: c.name, publicKey: c.key, seed: seed, method: .qr, now: now, note: c.note))
                    }
                }
            }
        }
        let addTime = nowSeconds() - addStart

        let openStart = nowSeconds()
        let store = try ContactStore(path: path, identity: identity)
        let openTime = nowSeconds() - openStart
        let walPresent = fileExists(path + "-wal")

        var getSamples: [Double] = []
        for _ in 0..<samples {
            let c = contacts[Int.random(in: 0..<n)]
            let t = nowSeconds()
            let found = try store.contacts(fingerprint: c.fingerprint)
            getSamples.append(nowSeconds() - t)
            guard found.count == 1, found[0].publicKey == c.key else {
                throw ItsMeError(.internal, "lookup found \(found.count) contacts")
            }
        }

        // Reading by id is the decrypting half of an update, without the commit.
        var readSamples: [Double] = []
        var updateSamples: [Double] = []
        for i in 0..<samples {
            let id = ids[Int.random(in: 0..<n)]
            let t0 = nowSeconds()
            var c = try store.contact(id: id)
            let t1 = nowSeconds()
            c.note = "changed note " + String(i).leftPadded(to: 27)  // 40 characters
            try store.update(c)
            let t2 = nowSeconds()
            readSamples.append(t1 - t0)
            updateSamples.append(t2 - t1)
        }

        let listStart = nowSeconds()
        let all = try store.list()
        let listTime = nowSeconds() - listStart
        guard all.count == n else { throw ItsMeError(.internal, "list returned \(all.count) of \(n)") }

        let saves = n >= 100_000 ? 3 : 5
        let blobRuns = try (0..<saves).map { _ in try wholeBlobSave(contacts, key: blobKey, path: "\(directory)/blob-\(n)") }
        let blob = median(blobRuns.map { $0.serialize + $0.seal + $0.write })
        let update = median(updateSamples), get = median(getSamples), read = median(readSamples)
        let ratio = blob / update

        print("  \(grouped(n)) contacts (\(tier)):")
        print(
            "    bulk add (batch, \(chunk) per transaction): \(format(addTime)) in all, \(format(addTime / Double(n))) "
                + "per contact, \(Int(Double(n) / addTime)) per second")
        print("    open the existing store: \(format(openTime)) (WAL file present: \(walPresent ? "yes" : "no"))")
        print("    get by fingerprint: median \(format(get)), p99 \(format(percentile(getSamples, 0.99))) (\(samples) lookups)")
        print(
            "    update one contact: median \(format(update)), p99 \(format(percentile(updateSamples, 0.99))) "
                + "(\(samples) updates, each one committed transaction)")
        print("    read one contact by id (no commit): median \(format(read))")
        print("    list all \(n) with decryption: \(format(listTime)) (\(format(listTime / Double(n))) per contact)")
        print(
            "    whole-blob save (source scheme, \(blobRuns[0].bytes / 1024) KiB): median \(format(blob)) of \(saves): "
                + "serialise \(format(median(blobRuns.map(\.serialize)))), seal \(format(median(blobRuns.map(\.seal)))), "
                + "write+fsync \(format(median(blobRuns.map(\.write))))")
        print("    whole-blob save / our update median: \(Int(ratio.rounded()))x")

        let prefix = tier + "_"
        figures.add(prefix + "contacts", Double(n))
        figures.add(prefix + "bulk_add_ms", addTime * 1e3)
        figures.add(prefix + "bulk_add_per_second", Double(n) / addTime)
        figures.add(prefix + "open_ms", openTime * 1e3)
        figures.add(prefix + "get_by_fingerprint_median_ms", get * 1e3)
        figures.add(prefix + "update_median_ms", update * 1e3)
        figures.add(prefix + "update_p99_ms", percentile(updateSamples, 0.99) * 1e3)
        figures.add(prefix + "read_by_id_median_ms", read * 1e3)
        figures.add(prefix + "list_all_ms", listTime * 1e3)
        figures.add(prefix + "whole_blob_save_median_ms", blob * 1e3)
        figures.add(prefix + "whole_blob_write_fsync_median_ms", median(blobRuns.map(\.write)) * 1e3)
        figures.add(prefix + "whole_blob_bytes", Double(blobRuns[0].bytes))
        figures.add(prefix + "blob_over_update", ratio)
        if n == 100_000 { at100k = (update, get, listTime, ratio) }
    }

    // The targets hold at 100,000 contacts: a quick run does not judge
    // them (its figures are null).
    let r = at100k
    let targets: [(key: String, target: String, value: String?, met: Bool?)] = [
        ("update_median", "update median <= 1 ms", r.map { format($0.update) }, r.map { $0.update <= 1e-3 }),
        ("blob_over_update", "whole-blob / update >= 100", r.map { "\(Int($0.ratio.rounded()))x" }, r.map { $0.ratio >= 100 }),
        ("get_by_fingerprint", "get by fingerprint median <= 0.5 ms", r.map { format($0.get) }, r.map { $0.get <= 0.5e-3 }),
        ("list_all", "list all <= 1000 ms", r.map { format($0.list) }, r.map { $0.list <= 1 }),
    ]
    print(r == nil ? "  targets at 100,000 contacts: not judged in a quick run" : "  targets at 100,000 contacts:")
    for (key, target, value, met) in targets {
        if let value, let met { print("    \(target): \(value), \(met ? "met" : "MISSED")") }
        figures.add("target_\(key)_met", met.map { $0 ? 1 : 0 })
    }
    return figures
}
