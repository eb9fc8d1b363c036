import Foundation
import ItsMeKit
import ItsMePrimitives

/// Intermediate values the other generators do not write: the HKDF-Extract
/// output `prk` of 7.3, 10.3 and 11.3, and the HMAC messages of 9.2, 9.4,
/// 10.1, 10.2, 10.3 (the session code) and 11.1 (the room). Each is computed
/// from the documented formula over the entry's own inputs, and checked to
/// give that entry's outputs, which the library computed.
extension VectorGenerator {
    /// `files` with the intermediates added to the entries that lack them.
    func withIntermediates(_ files: [(name: String, content: Any)]) throws -> [(name: String, content: Any)] {
        try files.map { file in
            guard var content = file.content as? [String: Any] else { return file }
            switch file.name {
            case "bluetooth":
                content["exchanges"] = try entries(content["exchanges"]).map(bluetoothIntermediates)
            case "pin-update":
                content["sessions"] = try entries(content["sessions"]).map(pinUpdateIntermediates)
            case "online-verify":
                for key in ["sessions", "bound_sessions"] {
                    content[key] = try entries(content[key]).map(onlineVerifyIntermediates)
                }
            case "voice":
                content["sessions"] = try entries(content["sessions"]).map(voiceIntermediates)
                content["degradation"] = try entries(content["degradation"]).map(degradationIntermediates)
            default:
                return file
            }
            return (file.name, content)
        }
    }

    private func entries(_ value: Any?) throws -> [[String: Any]] {
        try unwrap(value as? [[String: Any]], "a list of entries")
    }

    private func entryBytes(_ entry: [String: Any], _ key: String) throws -> [UInt8] {
        try unwrap((entry[key] as? String).flatMap { Hex.decode($0) }, key)
    }

    private func entryInt(_ entry: [String: Any], _ key: String) throws -> Int64 {
        try unwrap((entry[key] as? NSNumber).map { $0.int64Value }, key)
    }

    /// HKDF-Extract(salt, shared), checked against the entry's two direction keys.
    private func prk(salt: [UInt8], shared: [UInt8], label: String, keys: (i: [UInt8], r: [UInt8])) throws -> [UInt8] {
        let prk = try HKDF.extract(salt: salt, ikm: shared)
        for (role, key) in [("initiator", keys.i), ("responder", keys.r)] {
            expectEqual(try HKDF.expand(prk: prk, info: LV.cat(LV.b(label), LV.b(role)), count: 32).unsafeExportedArray(), key, role)
        }
        return prk.unsafeExportedArray()
    }

    private func value(_ mac: [UInt8], modulo m: UInt64) -> Int {
        Int(mac.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % m)
    }

    func bluetoothIntermediates(_ e: [String: Any]) throws -> [String: Any] {
        var e = e
        e["prk"] = hex(
            try prk(
                salt: entryBytes(e, "th1"), shared: entryBytes(e, "shared"), label: "itsme-bluetooth-key-v1",
                keys: (try entryBytes(e, "key_initiator"), try entryBytes(e, "key_responder"))))
        return e
    }

    func pinUpdateIntermediates(_ e: [String: Any]) throws -> [String: Any] {
        var e = e
        let input = LV.cat(LV.b("itsme-pin-update-code-v1"), VoiceProtocol.u64(try entryInt(e, "window")))
        expectEqual(value(HMACSHA256.mac(key: try entryBytes(e, "seed"), message: input), modulo: 260_000), Int(try entryInt(e, "session_code_value")))
        e["session_code_input"] = hex(input)
        e["prk"] = hex(
            try prk(
                salt: entryBytes(e, "salt"), shared: entryBytes(e, "shared"), label: "itsme-pin-update-key-v1",
                keys: (try entryBytes(e, "k_i"), try entryBytes(e, "k_r"))))
        return e
    }

    func onlineVerifyIntermediates(_ e: [String: Any]) throws -> [String: Any] {
        var e = e
        let input = LV.cat(LV.b("itsme-room-id-v1"), VoiceProtocol.u64(try entryInt(e, "window")))
        expectEqual(Array(HMACSHA256.mac(key: try entryBytes(e, "seed"), message: input).prefix(16)), try entryBytes(e, "room"))
        e["room_input"] = hex(input)
        e["prk"] = hex(
            try prk(
                salt: entryBytes(e, "salt"), shared: entryBytes(e, "shared"), label: "itsme-ov-key-v1", keys: (try entryBytes(e, "k_i"), try entryBytes(e, "k_r"))))
        return e
    }

    func voiceIntermediates(_ e: [String: Any]) throws -> [String: Any] {
        var e = e
        let seed = try entryBytes(e, "seed"), w = VoiceProtocol.u64(try entryInt(e, "window"))
        let sessionID = LV.cat(LV.b("itsme-session-id-v1"), w)
        expectEqual(value(HMACSHA256.mac(key: seed, message: sessionID), modulo: 2600), Int(try entryInt(e, "session_id_value")))
        e["session_id_input"] = hex(sessionID)
        let first = LV.cat(LV.b("itsme-first-selector-v1"), w)
        expectEqual(HMACSHA256.mac(key: seed, message: first), try entryBytes(e, "first_selector_hmac"))
        e["first_selector_input"] = hex(first)
        let tagKey = try entryBytes(e, "tag_key")
        for side in ["a", "b"] {
            let input = LV.cat(try entryBytes(e, side + "_pid"), w, try entryBytes(e, side + "_device_secret"))
            expectEqual(value(HMACSHA256.mac(key: tagKey, message: input), modulo: 100), Int(try entryInt(e, side + "_tag")), side)
            e[side + "_tag_input"] = hex(input)
        }
        return e
    }

    func degradationIntermediates(_ e: [String: Any]) throws -> [String: Any] {
        var e = e
        let input = LV.cat(try entryBytes(e, "pid"), try entryBytes(e, "secret"))
        expectEqual(Array(HMACSHA256.mac(key: try entryBytes(e, "key"), message: input).prefix(5)), try entryBytes(e, "mac"))
        e["mac_input"] = hex(input)
        return e
    }
}
