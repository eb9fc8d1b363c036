import CSodium
import ItsMePrimitives

/// SHA-512 (FIPS 180-4), the hash of the CPace suite.
package enum SHA512 {
    package static let byteCount = 64

    package static func hash<B: ByteView & ~Copyable>(_ data: borrowing B) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: byteCount)
        data.withBytes { d in
            withNonNilPointer(d) { dp in _ = crypto_hash_sha512(&out, dp, UInt64(d.count)) }
        }
        return out
    }
}

/// CPace, suite CPACE-RISTR255-SHA512 of the CFRG draft
/// (draft-irtf-cfrg-cpace, sections "CPace group objects G_Ristretto255"
/// and "transcript_ir"), built from libsodium's ristretto255 functions.
/// Only the initiator-responder transcript is implemented: ItsMe always
/// knows who started (PROTOCOL.md 16.2).
package enum CPace {
    package static let pointCount = 32
    package static let scalarCount = 32
    package static let iskCount = SHA512.byteCount
    static let dsi = Array("CPaceRistretto255".utf8)
    static let dsiISK = Array("CPaceRistretto255_ISK".utf8)
    /// SHA-512's input block size (H.s_in_bytes).
    static let hashBlockCount = 128

    /// generator_string(DSI, PRS, CI, sid, s_in_bytes): the zero padding
    /// makes DSI and PRS fill the hash's first block.
    package static func generatorString<P: ByteView & ~Copyable>(prs: borrowing P, ci: [UInt8], sid: [UInt8]) -> SecretBytes? {
        let prsCount = prs.withBytes { $0.count }
        let zpad = max(0, hashBlockCount - 1 - (LV.lengthPrefix(prsCount).count + prsCount) - (LV.lengthPrefix(dsi.count).count + dsi.count))
        let head = LV.lengthPrefix(dsi.count) + dsi + LV.lengthPrefix(prsCount)
        let tail = LV.lengthPrefix(zpad) + [UInt8](repeating: 0, count: zpad) + LV.cat(ci, sid)
        guard var out = try? SecretBytes(count: head.count + prsCount + tail.count) else { return nil }
        out.withMutableBytes { o in
            o.copyBytes(from: head)
            prs.withBytes { UnsafeMutableRawBufferPointer(rebasing: o[head.count...]).copyMemory(from: $0) }
            UnsafeMutableRawBufferPointer(rebasing: o[(head.count + prsCount)...]).copyBytes(from: tail)
        }
        return out
    }

    /// The encoded generator g = from_hash(SHA-512(generator_string)).
    /// It is derived from the password, so it is kept out of logs like one.
    package static func generator<P: ByteView & ~Copyable>(prs: borrowing P, ci: [UInt8], sid: [UInt8]) throws -> SecretBytes {
        guard let gen = generatorString(prs: prs, ci: ci, sid: sid) else { throw ItsMeError(.outOfMemory, "no memory for CPace") }
        var h = try SecretBytes(count: SHA512.byteCount)
        gen.withBytes { g in
            h.withMutableBytes { o in
                _ = crypto_hash_sha512(o.bindMemory(to: UInt8.self).baseAddress!, g.bindMemory(to: UInt8.self).baseAddress!, UInt64(g.count))
            }
        }
        var point = try SecretBytes(count: pointCount)
        h.withBytes { hb in
            point.withMutableBytes { p in
                _ = crypto_core_ristretto255_from_hash(p.bindMemory(to: UInt8.self).baseAddress!, hb.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
        return point
    }

    /// sample_scalar() as the draft recommends: 32 random bytes with the
    /// bits above 252 cleared, read little-endian.
    package static func sampleScalar<R: RandomSource>(into out: UnsafeMutableRawBufferPointer, using rng: inout R) {
        precondition(out.count == scalarCount)
        rng.fill(out)
        out[31] &= 0x0f
    }

    /// scalar_mult_vfy(y, X): nil when X is not the canonical encoding of a
    /// ristretto255 element or when the result is the identity (both
    /// "abort" in the draft). libsodium's scalar multiplication checks both,
    /// except that libsodium 1.0.18 ignores the encoding's top bit, which RFC
    /// 9496 requires to be zero: that check is made here.
    package static func scalarMult(scalar: UnsafeRawBufferPointer, point: UnsafeRawBufferPointer) -> [UInt8]? {
        guard scalar.count == scalarCount, point.count == pointCount, point[31] & 0x80 == 0 else { return nil }
        var out = [UInt8](repeating: 0, count: pointCount)
        let rc = crypto_scalarmult_ristretto255(
            &out, scalar.bindMemory(to: UInt8.self).baseAddress!, point.bindMemory(to: UInt8.self).baseAddress!)
        guard rc == 0 else {
            wipe(&out)
            return nil
        }
        return out
    }

    /// ISK = SHA-512(lv_cat(DSI || "_ISK", sid, K) || transcript_ir(Ya, ADa, Yb, ADb)).
    package static func isk(sid: [UInt8], k: [UInt8], ya: [UInt8], ada: [UInt8], yb: [UInt8], adb: [UInt8]) throws -> SecretBytes {
        var input = LV.cat(dsiISK, sid, k) + LV.cat(ya, ada) + LV.cat(yb, adb)
        defer { wipe(&input) }
        var out = try SecretBytes(count: iskCount)
        input.withUnsafeBytes { i in
            out.withMutableBytes { o in
                _ = crypto_hash_sha512(o.bindMemory(to: UInt8.self).baseAddress!, i.bindMemory(to: UInt8.self).baseAddress!, UInt64(i.count))
            }
        }
        return out
    }
}
