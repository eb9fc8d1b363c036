// Exported functions of the exchange at a distance (invite and real-time,
// docs/PROTOCOL.md 16), in the order of include/itsme.h. The exchange
// itself is an itsme_exchange: every other itsme_exchange_* call applies.
import CItsMe
import ItsMeKit
import ItsMePrimitives

@c(itsme_remote_code_check)
public func ffiRemoteCodeCheck(
    _ text: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let code = try RemoteCode(parsing: try ItsMeFFI.text(text, "text", max: TextLimit.typedCode))
        try writeText(code.text, to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_exchange_new_invite)
public func ffiExchangeNewInvite(
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ store: UnsafeMutablePointer<itsme_store>?, _ realtime: Bool,
    _ rng: UnsafeMutablePointer<itsme_random>?, _ now: Int64, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_exchange>?>?
) -> itsme_result {
    newExchange(identity, store, out) { id, store in
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        return try Exchange.invite(identity: id, store: store, realtime: realtime, now: now, random: &random)
    }
}

@c(itsme_exchange_accept_invite)
public func ffiExchangeAcceptInvite(
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ store: UnsafeMutablePointer<itsme_store>?, _ inviteCode: UnsafePointer<CChar>?,
    _ encryptionCode: UnsafePointer<CChar>?, _ realtime: Bool, _ rng: UnsafeMutablePointer<itsme_random>?, _ now: Int64,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_exchange>?>?
) -> itsme_result {
    newExchange(identity, store, out) { id, store in
        let invite = try text(inviteCode, "invite_code", max: TextLimit.typedCode)
        let encryption = try text(encryptionCode, "encryption_code", max: TextLimit.typedCode)
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        return try Exchange.acceptInvite(
            identity: id, store: store, inviteCode: invite, encryptionCode: encryption, realtime: realtime, now: now, random: &random)
    }
}

private func remoteCode(_ ex: Exchange, _ pick: (Exchange) -> RemoteCode?) throws -> RemoteCode {
    guard let code = pick(ex) else { throw ItsMeError(.invalidState, "only an invite or real-time exchange has codes") }
    return code
}

@c(itsme_exchange_invite_code)
public func ffiExchangeInviteCode(
    _ exchange: UnsafePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onExchange(exchange) { ex in try writeText(try remoteCode(ex, { $0.inviteCode }).text, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_exchange_encryption_code)
public func ffiExchangeEncryptionCode(
    _ exchange: UnsafePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onExchange(exchange) { ex in
        try writeText(try remoteCode(ex, { $0.encryptionCode }).text, to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_exchange_relay_id)
public func ffiExchangeRelayID(
    _ exchange: UnsafePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onExchange(exchange) { ex in
        guard let id = ex.relayID else { throw ItsMeError(.invalidState, "only an invite or real-time exchange uses the relay") }
        try writeText(Hex.encodeUpper(id).lowercased(), to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_exchange_is_inviter)
public func ffiExchangeIsInviter(_ exchange: UnsafePointer<itsme_exchange>?, _ outInviter: UnsafeMutablePointer<Bool>?) -> itsme_result {
    onExchange(exchange) { ex in
        guard ex.method == .invite || ex.method == .realtime else {
            throw ItsMeError(.invalidState, "only an invite or real-time exchange has an inviter")
        }
        try required(outInviter, "out_inviter").pointee = ex.isInviter
    }
}
