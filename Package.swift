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
        // type of that name. An umbrella over the core's three layers
        // (ItsMeBase, ItsMeStore, ItsMeFlows, below). Their public
        // declarations are the API (each one documented, scripts/check-docs);
        // the rest is `package`, which no other package can reach.
        .library(name: "ItsMeKit", targets: ["ItsMeKit"]),
        // The primitives under it, all the relay server links: SHA-256,
        // secrets that wipe themselves, constant-time comparison, base64, the
        // SQLite wrapper, the error type. The low-level tier: ItsMeKit
        // re-exports only the few types its API speaks in.
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
        // The protocol core, in layers: no Foundation, no C exports. Each
        // layer depends only on those below it, so a reference upward does
        // not compile (scripts/check-layers tries one).
        // 1. Encodings, records, typed codes, files, CPace.
        .target(name: "ItsMeBase", dependencies: ["ItsMePrimitives"]),
        // 2. What a person keeps: the identity, the secret store, the
        //    contact store, profiles, and what the flows write to them.
        .target(name: "ItsMeStore", dependencies: ["ItsMeBase", "ItsMePrimitives", "ItsMeRelayProtocol", "CSodium", "CSQLite"]),
        // 3. The flows: exchanges, verification, transfer, approvals, the
        //    roll call, and their drivers through the relay.
        .target(name: "ItsMeFlows", dependencies: ["ItsMeStore", "ItsMeBase", "ItsMePrimitives", "ItsMeRelayProtocol"]),
        // The umbrella a program imports: the three layers, and the few
        // primitives their API speaks in (the rest of ItsMePrimitives is
        // the low-level tier, imported by name).
        .target(name: "ItsMeKit", dependencies: ["ItsMeFlows", "ItsMeStore", "ItsMeBase", "ItsMePrimitives"]),
        // The fuzz targets' bodies (fuzz/, the corpus replays of the Swift
        // tests): not part of the library.
        .target(name: "ItsMeFuzzing", dependencies: ["ItsMeKit", "ItsMeFlows", "ItsMeStore", "ItsMeBase", "ItsMePrimitives"]),
        // Every exported C function, and nothing else.
        .target(name: "ItsMeFFI", dependencies: ["ItsMeKit", "ItsMePrimitives", "ItsMeRelayProtocol", "CItsMe"]),
        // The functions only the test build exports.
        .target(name: "ItsMeTestingFFI", dependencies: ["ItsMeFFI", "ItsMeKit", "ItsMePrimitives", "CItsMe"]),
        .executableTarget(name: "ItsMeBench", dependencies: ["ItsMeKit", "ItsMePrimitives", "ItsMeFFI", "ItsMeTestingFFI", "CItsMe", "CSodium"]),
        .executableTarget(name: "VectorGen", dependencies: ["ItsMeKit", "ItsMePrimitives"]),
        .testTarget(
            name: "ItsMeCoreTests",
            dependencies: [
                "ItsMeKit", "ItsMeFlows", "ItsMeStore", "ItsMeBase", "ItsMeFuzzing", "ItsMePrimitives", "ItsMeRelayProtocol", "CSodium",
                "CSQLite",
            ],
            exclude: ["Vectors"]
        ),
        .testTarget(name: "ItsMeRelayProtocolTests", dependencies: ["ItsMeRelayProtocol"]),
        .testTarget(name: "ItsMeFFITests", dependencies: ["ItsMeFFI", "ItsMeTestingFFI", "ItsMeKit", "ItsMePrimitives", "CItsMe"]),
    ]
)
