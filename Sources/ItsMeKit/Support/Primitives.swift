// The core is built on ItsMePrimitives (libsodium wrappers, secrets, base64,
// SQLite, the error type); a program that imports the core sees them too.
@_exported import ItsMePrimitives
