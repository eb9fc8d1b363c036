import ItsMeCore

/// A stored item as a plain array (XCTest's helpers need copyable values).
func stored(_ store: any SecretStore, _ name: String) throws -> [UInt8]? {
    guard let item = try store.get(name) else { return nil }
    return item.unsafeExportedArray()
}
