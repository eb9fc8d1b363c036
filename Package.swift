// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "itsme",
    products: [
        // libitsme.so: the C ABI declared in include/itsme.h.
        .library(name: "itsme", type: .dynamic, targets: ["ItsMeFFI"]),
        // The test build of libitsme: the same, and include/itsme_testing.h's
        // functions (a deterministic random source, the pure derivations).
        .library(name: "itsme-testing", type: .dynamic, targets: ["ItsMeFFI", "ItsMeTestingFFI"]),
        .executable(name: "itsme-bench", targets: ["ItsMeBench"]),
        // Writes Tests/ProtocolVectors/*.json, or checks them (--check).
        .executable(name: "itsme-vectors", targets: ["VectorGen"]),
        // The core's Swift API: identity, secret and contact stores,
        // exchanges, verification, transfer, profiles, approvals. Named
        // ItsMeKit, not ItsMe: the command-line client's root command is a
        // type of that name. Its public declarations are the API (each one
        // documented, scripts/check-docs); the rest is `package`, which no
        // other package can reach.
        .library(name: "ItsMeKit", targets: ["ItsMeKit"]),
        // The primitives under it, all the relay server links: SHA-256,
        // secrets that wipe themselves, constant-time comparison, base64, the
        // SQLite wrapper, the error type.
        .library(name: "ItsMePrimitives", targets: ["ItsMePrimitives"]),
        // The relay's contract as data (docs/PROTOCOL.md 15): IDs, tokens,
        // paths, headers, error kinds and statuses, room events, close
        // codes. The relay server, the core, the relay client and the load
        // generator all read it from here.
        .library(name: "ItsMeRelayProtocol", targets: ["ItsMeRelayProtocol"]),
    ],
    targets: [
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // The hand-written public header, imported by the export layer so
        // that the exported signatures use the header's own types.
        .systemLibrary(name: "CItsMe", path: "Sources/CItsMe"),
        // Primitives without protocol rules: no Foundation, no C exports.
        .target(name: "ItsMePrimitives", dependencies: ["CSodium", "CSQLite"]),
        // The relay's contract, and the small JSON reader and writer: no
        // dependency at all.
        .target(name: "ItsMeRelayProtocol"),
        // The protocol core: no Foundation, no C exports.
        .target(name: "ItsMeKit", dependencies: ["ItsMePrimitives", "ItsMeRelayProtocol", "CSodium", "CSQLite"]),
        // Every exported C function, and nothing else.
        .target(name: "ItsMeFFI", dependencies: ["ItsMeKit", "ItsMeRelayProtocol", "CItsMe"]),
        // The functions only the test build exports.
        .target(name: "ItsMeTestingFFI", dependencies: ["ItsMeFFI", "ItsMeKit", "CItsMe"]),
        .executableTarget(name: "ItsMeBench", dependencies: ["ItsMeKit", "ItsMeFFI", "ItsMeTestingFFI", "CItsMe", "CSodium"]),
        .executableTarget(name: "VectorGen", dependencies: ["ItsMeKit"]),
        .testTarget(
            name: "ItsMeCoreTests",
            dependencies: ["ItsMeKit", "CSodium", "CSQLite"],
            exclude: ["Vectors"]
        ),
        .testTarget(name: "ItsMeRelayProtocolTests", dependencies: ["ItsMeRelayProtocol"]),
        .testTarget(name: "ItsMeFFITests", dependencies: ["ItsMeFFI", "ItsMeTestingFFI", "ItsMeKit", "CItsMe"]),
    ]
)
