// The contact store's exported functions, in the order of include/itsme.h.
import CItsMe
import ItsMeKit
import ItsMePrimitives

private func seedArgument(_ p: UnsafePointer<UInt8>?, _ count: UInt) throws -> SecretBytes {
    let p = try required(p, "seed")
    guard count == UInt(ITSME_SEED_BYTES) else { throw invalid("a seed is \(ITSME_SEED_BYTES) bytes, got \(count)") }
    return try SecretBytes(copying: UnsafeRawBufferPointer(start: p, count: Int(count)))
}

private func method(_ m: itsme_exchange_method) throws -> Contact.ExchangeMethod {
    guard m <= UInt32(UInt8.max), let method = Contact.ExchangeMethod(rawValue: UInt8(m)) else {
        throw invalid("unknown exchange method \(m)")
    }
    return method
}

private func outContact(_ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_contact>?>?, _ contact: () throws -> Contact)
    throws
{
    let out = try required(out, "out")
    out.pointee = box(ContactHandle(try contact()), as: itsme_contact.self)
}

private func outList(
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_contact_list>?>?, _ contacts: () throws -> [Contact]
) throws {
    let out = try required(out, "out")
    out.pointee = box(ContactListHandle(try contacts()), as: itsme_contact_list.self)
}

@c(itsme_store_open)
public func ffiStoreOpen(
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ path: UnsafePointer<CChar>?,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_store>?>?
) -> itsme_result {
    onIdentity(identity) { id in
        let path = try text(path, "path")
        guard !path.isEmpty else { throw invalid("path is empty") }
        let out = try required(out, "out")
        out.pointee = box(ContactStoreHandle(try ContactStore(path: path, identity: id)), as: itsme_store.self)
    }
}

@c(itsme_store_accept_loss)
public func ffiStoreAcceptLoss(
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ path: UnsafePointer<CChar>?,
    _ outLoss: UnsafeMutablePointer<itsme_store_loss>?
) -> itsme_result {
    onIdentity(identity) { id in
        let path = try text(path, "path")
        guard !path.isEmpty else { throw invalid("path is empty") }
        let out = try required(outLoss, "out_loss")
        try checkStructSize(out, "out_loss")
        let loss = try ContactStore.acceptLoss(path: path, identity: id)
        out.pointee = itsme_store_loss(
            size: out.pointee.size, replaced: loss.replaced, commits_lost: loss.commitsLost, contacts_before: loss.contactsBefore,
            contacts_now: loss.contactsNow, contacts_missing: loss.missing.contacts, photos_missing: loss.missing.photos,
            device_secrets_missing: loss.missing.deviceSecrets, contacts_without_their_photo: loss.photosMissing)
    }
}

@c(itsme_store_free)
public func ffiStoreFree(_ store: UnsafeMutablePointer<itsme_store>?) {
    release(store, as: ContactStoreHandle.self)
}

@c(itsme_store_last_error)
public func ffiStoreLastError(
    _ store: UnsafePointer<itsme_store>?, _ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guard let handle = unbox(store, as: ContactStoreHandle.self) else { return ITSME_E_INVALID_ARGUMENT }
    return copyLastError(handle.lastError.get(), buf, cap, outLen)
}

@c(itsme_store_add)
public func ffiStoreAdd(
    _ store: UnsafeMutablePointer<itsme_store>?, _ name: UnsafePointer<CChar>?, _ publicKey: UnsafePointer<UInt8>?,
    _ keyLen: UInt, _ seed: UnsafePointer<UInt8>?, _ seedLen: UInt, _ exchange: itsme_exchange_method, _ now: Int64,
    _ outID: UnsafeMutablePointer<Int64>?
) -> itsme_result {
    onContactStore(store) { s in
        let name = try text(name, "name")
        let key = try bytes(publicKey, keyLen, "public_key")
        let seed = try seedArgument(seed, seedLen)
        let method = try method(exchange)
        let out = try required(outID, "out_id")
        out.pointee = try s.add(name: name, publicKey: key, seed: seed, method: method, now: now)
    }
}

@c(itsme_store_add_unauthenticated)
public func ffiStoreAddUnauthenticated(
    _ store: UnsafeMutablePointer<itsme_store>?, _ name: UnsafePointer<CChar>?, _ fingerprint: UnsafePointer<CChar>?,
    _ seed: UnsafePointer<UInt8>?, _ seedLen: UInt, _ exchange: itsme_exchange_method, _ now: Int64,
    _ outID: UnsafeMutablePointer<Int64>?
) -> itsme_result {
    onContactStore(store) { s in
        let name = try text(name, "name")
        let fingerprint = try text(fingerprint, "fingerprint")
        let seed = try seedArgument(seed, seedLen)
        let method = try method(exchange)
        let out = try required(outID, "out_id")
        out.pointee = try s.addUnauthenticated(name: name, fingerprint: fingerprint, seed: seed, method: method, now: now)
    }
}

@c(itsme_store_get)
public func ffiStoreGet(
    _ store: UnsafeMutablePointer<itsme_store>?, _ id: Int64, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_contact>?>?
) -> itsme_result {
    onContactStore(store) { s in try outContact(out) { try s.contact(id: id) } }
}

@c(itsme_store_get_by_key)
public func ffiStoreGetByKey(
    _ store: UnsafeMutablePointer<itsme_store>?, _ publicKey: UnsafePointer<UInt8>?, _ keyLen: UInt,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_contact>?>?
) -> itsme_result {
    onContactStore(store) { s in
        let key = try bytes(publicKey, keyLen, "public_key")
        try outContact(out) { try s.contact(publicKey: key) }
    }
}

@c(itsme_store_find_fingerprint)
public func ffiStoreFindFingerprint(
    _ store: UnsafeMutablePointer<itsme_store>?, _ fingerprint: UnsafePointer<CChar>?,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_contact_list>?>?
) -> itsme_result {
    onContactStore(store) { s in
        let fingerprint = try text(fingerprint, "fingerprint")
        try outList(out) { try s.contacts(fingerprint: fingerprint) }
    }
}

@c(itsme_store_list)
public func ffiStoreList(
    _ store: UnsafeMutablePointer<itsme_store>?, _ afterID: Int64, _ limit: UInt,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_contact_list>?>?
) -> itsme_result {
    onContactStore(store) { s in
        try outList(out) { try s.list(afterID: afterID, limit: limit == 0 ? Int.max : Int(clamping: limit)) }
    }
}

@c(itsme_store_count)
public func ffiStoreCount(_ store: UnsafeMutablePointer<itsme_store>?, _ outCount: UnsafeMutablePointer<UInt64>?)
    -> itsme_result
{
    onContactStore(store) { s in
        let out = try required(outCount, "out_count")
        out.pointee = UInt64(try s.count())
    }
}

@c(itsme_store_expire_awaiting)
public func ffiStoreExpireAwaiting(
    _ store: UnsafeMutablePointer<itsme_store>?, _ now: Int64, _ outDeleted: UnsafeMutablePointer<UInt64>?
) -> itsme_result {
    onContactStore(store) { s in
        let deleted = try s.expireAwaiting(now: now)
        outDeleted?.pointee = UInt64(deleted)
    }
}

@c(itsme_store_set_name)
public func ffiStoreSetName(_ store: UnsafeMutablePointer<itsme_store>?, _ id: Int64, _ name: UnsafePointer<CChar>?)
    -> itsme_result
{
    onContactStore(store) { s in
        try s.setName(id: id, try text(name, "name"))
    }
}

@c(itsme_store_set_note)
public func ffiStoreSetNote(_ store: UnsafeMutablePointer<itsme_store>?, _ id: Int64, _ note: UnsafePointer<CChar>?)
    -> itsme_result
{
    onContactStore(store) { s in
        try s.setNote(id: id, try text(note, "note"))
    }
}

@c(itsme_store_set_state)
public func ffiStoreSetState(
    _ store: UnsafeMutablePointer<itsme_store>?, _ id: Int64, _ state: itsme_verification_state, _ acknowledged: Bool,
    _ now: Int64
) -> itsme_result {
    onContactStore(store) { s in
        guard state <= UInt32(UInt8.max), let state = Contact.State(rawValue: UInt8(state)) else {
            throw invalid("unknown contact state \(state)")
        }
        try s.setState(id: id, state, acknowledged: acknowledged, now: now)
    }
}

@c(itsme_store_use_window)
public func ffiStoreUseWindow(_ store: UnsafeMutablePointer<itsme_store>?, _ id: Int64, _ window: Int64) -> itsme_result {
    onContactStore(store) { s in try s.useWindow(id: id, window: window) }
}

@c(itsme_store_delete)
public func ffiStoreDelete(_ store: UnsafeMutablePointer<itsme_store>?, _ id: Int64) -> itsme_result {
    onContactStore(store) { s in try s.delete(id: id) }
}

@c(itsme_store_backup)
public func ffiStoreBackup(_ store: UnsafeMutablePointer<itsme_store>?, _ path: UnsafePointer<CChar>?) -> itsme_result {
    onContactStore(store) { s in try s.backup(to: try text(path, "path")) }
}

// MARK: - Contact snapshots

@c(itsme_contact_free)
public func ffiContactFree(_ contact: UnsafeMutablePointer<itsme_contact>?) {
    release(contact, as: ContactHandle.self)
}

@c(itsme_contact_id)
public func ffiContactID(_ contact: UnsafePointer<itsme_contact>?, _ outID: UnsafeMutablePointer<Int64>?) -> itsme_result {
    onContact(contact) { c in try required(outID, "out_id").pointee = c.id }
}

@c(itsme_contact_name)
public func ffiContactName(
    _ contact: UnsafePointer<itsme_contact>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onContact(contact) { c in try writeText(c.name, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_contact_fingerprint)
public func ffiContactFingerprint(
    _ contact: UnsafePointer<itsme_contact>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onContact(contact) { c in try writeText(c.fingerprint, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_contact_public_key)
public func ffiContactPublicKey(
    _ contact: UnsafePointer<itsme_contact>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onContact(contact) { c in
        guard let key = c.publicKey else { throw ItsMeError(.notFound, "an unauthenticated contact has no key") }
        try key.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_contact_is_authenticated)
public func ffiContactIsAuthenticated(_ contact: UnsafePointer<itsme_contact>?, _ out: UnsafeMutablePointer<Bool>?)
    -> itsme_result
{
    onContact(contact) { c in try required(out, "out_authenticated").pointee = c.isAuthenticated }
}

@c(itsme_contact_state)
public func ffiContactState(
    _ contact: UnsafePointer<itsme_contact>?, _ outState: UnsafeMutablePointer<itsme_verification_state>?,
    _ outAcknowledged: UnsafeMutablePointer<Bool>?
) -> itsme_result {
    onContact(contact) { c in
        let state = try required(outState, "out_state")
        let acknowledged = try required(outAcknowledged, "out_acknowledged")
        state.pointee = itsme_verification_state(c.state.rawValue)
        acknowledged.pointee = c.degradationAcknowledged
    }
}

@c(itsme_contact_exchange_method)
public func ffiContactExchangeMethod(
    _ contact: UnsafePointer<itsme_contact>?, _ out: UnsafeMutablePointer<itsme_exchange_method>?
) -> itsme_result {
    onContact(contact) { c in try required(out, "out_method").pointee = itsme_exchange_method(c.exchangeMethod.rawValue) }
}

@c(itsme_contact_created_at)
public func ffiContactCreatedAt(_ contact: UnsafePointer<itsme_contact>?, _ out: UnsafeMutablePointer<Int64>?)
    -> itsme_result
{
    onContact(contact) { c in try required(out, "out_time").pointee = c.createdAt }
}

@c(itsme_contact_verified_at)
public func ffiContactVerifiedAt(_ contact: UnsafePointer<itsme_contact>?, _ out: UnsafeMutablePointer<Int64>?)
    -> itsme_result
{
    onContact(contact) { c in
        let out = try required(out, "out_time")
        guard let t = c.verifiedAt else { throw ItsMeError(.notFound, "never verified") }
        out.pointee = t
    }
}

@c(itsme_contact_last_window)
public func ffiContactLastWindow(_ contact: UnsafePointer<itsme_contact>?, _ out: UnsafeMutablePointer<Int64>?)
    -> itsme_result
{
    onContact(contact) { c in
        let out = try required(out, "out_window")
        guard let w = c.lastWindow else { throw ItsMeError(.notFound, "no window used yet") }
        out.pointee = w
    }
}

@c(itsme_contact_note)
public func ffiContactNote(
    _ contact: UnsafePointer<itsme_contact>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onContact(contact) { c in try writeText(c.note, to: out, cap: cap, outLen: outLen) }
}

// MARK: - Contact lists

@c(itsme_contact_list_free)
public func ffiContactListFree(_ list: UnsafeMutablePointer<itsme_contact_list>?) {
    release(list, as: ContactListHandle.self)
}

@c(itsme_contact_list_count)
public func ffiContactListCount(_ list: UnsafePointer<itsme_contact_list>?, _ out: UnsafeMutablePointer<UInt>?)
    -> itsme_result
{
    guarded(ThreadLastError.set) {
        guard let handle = unbox(list, as: ContactListHandle.self) else { throw invalid("list is NULL") }
        try required(out, "out_count").pointee = UInt(handle.contacts.count)
    }
}

@c(itsme_contact_list_get)
public func ffiContactListGet(
    _ list: UnsafePointer<itsme_contact_list>?, _ index: UInt, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_contact>?>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        guard let handle = unbox(list, as: ContactListHandle.self) else { throw invalid("list is NULL") }
        guard index < UInt(handle.contacts.count) else {
            throw invalid("index \(index) is out of range (\(handle.contacts.count) contacts)")
        }
        try outContact(out) { handle.contacts[Int(index)] }
    }
}
