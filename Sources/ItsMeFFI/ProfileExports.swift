// Exported functions for profile records (and contact photos), in the
// order of include/itsme.h.
import CItsMe
import ItsMeKit
import ItsMePrimitives

/// Box of an `itsme_profile`: immutable, so it needs no lock.
final class ProfileHandle: Sendable {
    let profile: ProfileRecord
    init(_ profile: ProfileRecord) { self.profile = profile }
}

/// Reads a profile; the getters keep no last-error message of their own.
private func onProfile(_ p: UnsafeRawPointer?, _ body: (ProfileRecord) throws -> Void) -> itsme_result {
    guarded(ThreadLastError.set) {
        guard let handle = unbox(p, as: ProfileHandle.self) else { throw invalid("profile is NULL") }
        try body(handle.profile)
    }
}

@c(itsme_profile_create)
public func ffiProfileCreate(
    _ identity: UnsafePointer<itsme_identity>?, _ name: UnsafePointer<CChar>?, _ photo: UnsafePointer<UInt8>?, _ photoLen: UInt,
    _ photoFilename: UnsafePointer<CChar>?, _ rng: UnsafeMutablePointer<itsme_random>?,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_profile>?>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        guard let handle = unbox(identity, as: IdentityHandle.self) else { throw invalid("identity is NULL") }
        let out = try required(out, "out")
        let (name, filename) = (try optionalText(name, "name"), try optionalText(photoFilename, "photo_filename"))
        guard photoLen <= UInt(ProfileRecord.maxRecordBytes) else {
            throw invalid("a photo of \(photoLen) bytes cannot fit a profile record of at most \(ProfileRecord.maxRecordBytes) bytes")
        }
        let photo = try optionalBytes(photo, photoLen, "photo")
        let owner = try handle.locked { $0.publicKey }
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        let made = try ProfileRecord.create(ownerKey: owner, name: name, photo: photo, photoFilename: filename, random: &random)
        out.pointee = box(ProfileHandle(made), as: itsme_profile.self)
    }
}

@c(itsme_profile_open)
public func ffiProfileOpen(
    _ record: UnsafePointer<UInt8>?, _ recordLen: UInt, _ reference: UnsafePointer<UInt8>?, _ referenceLen: UInt,
    _ ownerKey: UnsafePointer<UInt8>?, _ keyLen: UInt, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_profile>?>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        _ = try required(record, "record")
        let out = try required(out, "out")
        guard referenceLen == UInt(ProfileRecord.referenceCount) else {
            throw invalid("a profile reference is \(ProfileRecord.referenceCount) bytes, not \(referenceLen)")
        }
        let reference = try SecretBytes(copying: UnsafeRawBufferPointer(start: try required(reference, "reference"), count: Int(referenceLen)))
        let key = try bytes(ownerKey, keyLen, "owner_key")
        // Refused by its size alone, before anything is copied.
        guard recordLen <= UInt(ProfileRecord.maxRecordBytes) else {
            throw ItsMeError(.malformedMessage, "the profile record is \(recordLen) bytes, larger than the limit of \(ProfileRecord.maxRecordBytes)")
        }
        let opened = try ProfileRecord.open(record: try bytes(record, recordLen, "record"), reference: reference, ownerKey: key)
        out.pointee = box(ProfileHandle(opened), as: itsme_profile.self)
    }
}

@c(itsme_profile_free)
public func ffiProfileFree(_ profile: UnsafeMutablePointer<itsme_profile>?) {
    release(profile, as: ProfileHandle.self)
}

@c(itsme_profile_name)
public func ffiProfileName(
    _ profile: UnsafePointer<itsme_profile>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onProfile(profile) { try writeText($0.name, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_profile_photo)
public func ffiProfilePhoto(
    _ profile: UnsafePointer<itsme_profile>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onProfile(profile) { p in try p.photo.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) } }
}

@c(itsme_profile_photo_filename)
public func ffiProfilePhotoFilename(
    _ profile: UnsafePointer<itsme_profile>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onProfile(profile) { try writeText($0.photoFilename, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_profile_record)
public func ffiProfileRecord(
    _ profile: UnsafePointer<itsme_profile>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onProfile(profile) { p in try p.record.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) } }
}

@c(itsme_profile_record_id)
public func ffiProfileRecordID(
    _ profile: UnsafePointer<itsme_profile>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onProfile(profile) { p in try p.recordID.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) } }
}

@c(itsme_profile_record_name)
public func ffiProfileRecordName(
    _ profile: UnsafePointer<itsme_profile>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onProfile(profile) { try writeText($0.recordName, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_profile_reference)
public func ffiProfileReference(
    _ profile: UnsafePointer<itsme_profile>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onProfile(profile) { p in
        try checkOutput(out, cap, outLen)
        try p.reference().withBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_store_apply_profile)
public func ffiStoreApplyProfile(
    _ store: UnsafeMutablePointer<itsme_store>?, _ id: Int64, _ profile: UnsafePointer<itsme_profile>?
) -> itsme_result {
    onContactStore(store) { s in
        guard let handle = unbox(profile, as: ProfileHandle.self) else { throw invalid("profile is NULL") }
        try s.applyProfile(id: id, handle.profile)
    }
}

@c(itsme_store_set_photo)
public func ffiStoreSetPhoto(
    _ store: UnsafeMutablePointer<itsme_store>?, _ id: Int64, _ photo: UnsafePointer<UInt8>?, _ photoLen: UInt,
    _ filename: UnsafePointer<CChar>?
) -> itsme_result {
    onContactStore(store) { s in
        guard photoLen <= UInt(ContactStore.maxPhotoBytes) else {
            throw invalid("a photo is at most \(ContactStore.maxPhotoBytes) bytes")
        }
        try s.setPhoto(id: id, photo: try optionalBytes(photo, photoLen, "photo"), filename: try optionalText(filename, "filename"))
    }
}

@c(itsme_store_photo)
public func ffiStorePhoto(
    _ store: UnsafeMutablePointer<itsme_store>?, _ id: Int64, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onContactStore(store) { s in
        try checkOutput(out, cap, outLen)
        try s.photo(id: id).photo.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_store_photo_filename)
public func ffiStorePhotoFilename(
    _ store: UnsafeMutablePointer<itsme_store>?, _ id: Int64, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onContactStore(store) { s in
        try checkOutput(out, cap, outLen)
        try writeText(try s.photo(id: id).filename, to: out, cap: cap, outLen: outLen)
    }
}
