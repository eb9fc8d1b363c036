import Foundation
import ItsMeKit
import ItsMePrimitives

/// The profile record vectors (PROTOCOL.md 18): profile.json, built from
/// fixed inputs and checked against the documented formulas as they are
/// built.
extension VectorGenerator {
    func profileVectors() throws -> [String: Any] {
        let photo = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        let cases: [(name: String, photo: [UInt8], filename: String)] = [
            ("Alice Smith", Array(photo.prefix(64)), "alice.jpg"), ("Élodie 🌻", [], ""), ("", photo, "portrait.webp"),
        ]
        var records: [[String: Any]] = []
        var made: [ProfileRecord] = []
        let ownerSeed = fixed("itsme-vector-profile-owner")
        let owner = try Ed25519.keyPair(seed: ownerSeed).publicKey
        for (i, c) in cases.enumerated() {
            let randomSeed = fixed("itsme-vector-profile-random-\(i)")
            var mirror = DeterministicRandom(seed: randomSeed)
            let recordKey = mirror.bytes(16)
            let nonces = (0..<3).map { _ in mirror.bytes(12) }
            var rng = DeterministicRandom(seed: randomSeed)
            let record = try ProfileRecord.create(ownerKey: owner, name: c.name, photo: c.photo, photoFilename: c.filename, random: &rng)
            made.append(record)
            // The documented formulas, step by step.
            let keys = try HKDF.derive(ikm: recordKey, salt: [UInt8](), info: LV.b("itsme-profile-record-v1"), count: 96).unsafeExportedArray()
            let (k1, k2, k3) = (Array(keys[0..<32]), Array(keys[32..<64]), Array(keys[64..<96]))
            let values = [Array(c.name.utf8), c.photo, Array(c.filename.utf8)]
            var fields: [[String: Any]] = [], macs: [[UInt8]] = [], body: [UInt8] = [1]
            for (f, fieldName) in ["name", "photo", "photo-filename"].enumerated() {
                let ct = k1.withUnsafeBytes { k in values[f].withUnsafeBytes { ChaCha20.xor($0, key: k, nonce: nonces[f]) } }
                let macInput = LV.cat([1], LV.b(fieldName), nonces[f], ct)
                let mac = HMACSHA256.mac(key: k2, message: macInput)
                macs.append(mac)
                body += nonces[f] + [UInt8(ct.count >> 24), UInt8(ct.count >> 16 & 0xff), UInt8(ct.count >> 8 & 0xff), UInt8(ct.count & 0xff)]
                    + ct + mac
                fields.append([
                    "field_name_text": fieldName, "value": hex(values[f]), "nonce": hex(nonces[f]), "ciphertext": hex(ct),
                    "mac_input": hex(macInput), "mac": hex(mac),
                ])
            }
            let recordMACInput = LV.cat([[1]] + macs + [owner])
            let recordMAC = HMACSHA256.mac(key: k3, message: recordMACInput)
            body += recordMAC
            expectEqual(record.record, body)
            expectEqual(record.recordID, Array(recordMAC.prefix(16)))
            expectEqual(try record.reference().unsafeExportedArray(), Array(recordMAC.prefix(16)) + recordKey)
            var json: [String: Any] = [
                "random_seed": hex(randomSeed), "record_key": hex(recordKey), "k1": hex(k1), "k2": hex(k2), "k3": hex(k3),
                "fields": fields, "record_mac_input": hex(recordMACInput), "record_mac": hex(recordMAC),
                "record_id": hex(record.recordID), "record_name_text": record.recordName,
                "reference": hex(try record.reference().unsafeExportedArray()), "record": hex(record.record),
                "name_text": c.name, "photo_filename_text": c.filename,
            ]
            json["size"] = record.record.count
            records.append(json)
        }
        // Refusals (18.4), each of the first record unless said otherwise.
        let first = made[0], reference = try first.reference().unsafeExportedArray()
        func flipped(_ at: Int) -> [UInt8] {
            var r = first.record
            r[at] ^= 0x01
            return r
        }
        let photoField = 1 + (12 + 4 + first.name.utf8.count + 32)
        var otherOwner = owner
        otherOwner[0] ^= 0x01
        let otherOwnerKey = try Ed25519.keyPair(seed: fixed("itsme-vector-profile-other-owner")).publicKey
        var wrongKey = reference
        wrongKey[20] ^= 0x01
        var wrongID = reference
        wrongID[0] ^= 0x01
        // A record whose MACs are good but whose values break 18.1: a
        // filename with no photo.
        var badRandom = DeterministicRandom(seed: fixed("itsme-vector-profile-random-bad"))
        let badKey = try SecretBytes(randomCount: 16, using: &badRandom)
        let badNonces = (0..<3).map { _ in badRandom.bytes(12) }
        let bad = try ProfileRecord.seal(ownerKey: owner, name: "Alice", photo: [], photoFilename: "a.jpg", recordKey: badKey, nonces: badNonces)
        var refusals: [[String: Any]] = []
        func refusal(_ name: String, _ record: [UInt8], _ ref: [UInt8], _ ownerKey: [UInt8], _ kind: ItsMeError.Kind, zeros: Int? = nil) {
            let bytes = zeros.map { [UInt8](repeating: 0, count: $0) } ?? record
            expectEqual(errorKind { _ = try ProfileRecord.open(record: bytes, reference: ref, ownerKey: ownerKey) }, kind, name)
            var j: [String: Any] = ["case_text": name, "reference": hex(ref), "owner_public": hex(ownerKey), "error_text": Self.errorName(kind)]
            if let zeros { j["record_zero_bytes"] = zeros } else { j["record"] = hex(record) }
            refusals.append(j)
        }
        refusal("tampered name ciphertext", flipped(1 + 12 + 4), reference, owner, .authenticationFailed)
        refusal("tampered photo nonce", flipped(photoField), reference, owner, .authenticationFailed)
        refusal("tampered photo field MAC", flipped(photoField + 12 + 4 + first.photo.count), reference, owner, .authenticationFailed)
        refusal("tampered record MAC", flipped(first.record.count - 1), reference, owner, .authenticationFailed)
        refusal("tampered length", flipped(1 + 12 + 3), reference, owner, .malformedMessage)
        refusal("another record under this ID", made[1].record, reference, owner, .authenticationFailed)
        refusal("wrong record ID", first.record, wrongID, owner, .authenticationFailed)
        refusal("wrong record key", first.record, wrongKey, owner, .authenticationFailed)
        refusal("another owner", first.record, reference, otherOwnerKey, .authenticationFailed)
        refusal("owner key off by one bit", first.record, reference, otherOwner, .authenticationFailed)
        refusal("truncated", Array(first.record.dropLast()), reference, owner, .malformedMessage)
        refusal("trailing byte", first.record + [0], reference, owner, .malformedMessage)
        refusal("unknown version", [2] + first.record.dropFirst(), reference, owner, .malformedMessage)
        refusal("larger than the limit", [], reference, owner, .malformedMessage, zeros: ProfileRecord.maxRecordBytes + 1)
        refusal(
            "filename without a photo", bad.record, try bad.reference().unsafeExportedArray(), owner, .malformedMessage)
        return [
            "owner_seed": hex(ownerSeed), "owner_public": hex(owner), "max_record_bytes": ProfileRecord.maxRecordBytes,
            "records": records, "refusals": refusals,
        ]
    }
}
