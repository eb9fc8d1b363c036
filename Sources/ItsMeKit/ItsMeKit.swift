// The umbrella module: a program that imports ItsMeKit sees the three
// layers of the core, and from ItsMePrimitives only the types their API
// speaks in. The rest of ItsMePrimitives (SQLite, hashing, encodings,
// Argon2id's internals) is the low-level tier: a program that wants it
// imports ItsMePrimitives by name.
@_exported import ItsMeBase
@_exported import ItsMeStore
@_exported import ItsMeFlows
@_exported import struct ItsMePrimitives.ItsMeError
@_exported import struct ItsMePrimitives.SecretBytes
@_exported import protocol ItsMePrimitives.ByteView
@_exported import protocol ItsMePrimitives.RandomSource
@_exported import struct ItsMePrimitives.SystemRandom
@_exported import enum ItsMePrimitives.Sodium
@_exported import enum ItsMePrimitives.Argon2id
@_exported import func ItsMePrimitives.wipe
