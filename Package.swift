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
        // The protocol core for Swift programs of this project; not a public API.
        .library(name: "ItsMeCore", targets: ["ItsMeCore"]),
        // The primitives under it, all the relay server links: libsodium's
        // hashes, AEADs and signatures, secrets that wipe themselves,
        // constant-time comparison, base64, the SQLite wrapper, the error type.
        .library(name: "ItsMePrimitives", targets: ["ItsMePrimitives"]),
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
        // The protocol core: no Foundation, no C exports.
        .target(name: "ItsMeCore", dependencies: ["ItsMePrimitives", "CSodium", "CSQLite"]),
        // Every exported C function, and nothing else.
        .target(name: "ItsMeFFI", dependencies: ["ItsMeCore", "CItsMe"]),
        // The functions only the test build exports.
        .target(name: "ItsMeTestingFFI", dependencies: ["ItsMeFFI", "ItsMeCore", "CItsMe"]),
        .executableTarget(name: "ItsMeBench", dependencies: ["ItsMeCore", "ItsMeFFI", "ItsMeTestingFFI", "CItsMe", "CSodium"]),
        .executableTarget(name: "VectorGen", dependencies: ["ItsMeCore"]),
        .testTarget(
            name: "ItsMeCoreTests",
            dependencies: ["ItsMeCore", "CSodium", "CSQLite"],
            exclude: ["Vectors"]
        ),
        .testTarget(name: "ItsMeFFITests", dependencies: ["ItsMeFFI", "ItsMeTestingFFI", "ItsMeCore", "CItsMe"]),
    ]
)
