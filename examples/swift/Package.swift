// swift-tools-version: 6.0
// A Swift program on ItsMeKit: two people exchange contacts by QR code and
// then verify each other by voice. It depends on this repository's package
// by path and uses only ItsMeKit's public API.
import PackageDescription

let package = Package(
    name: "itsme-swift-example",
    dependencies: [
        .package(name: "itsme", path: "../.."),
    ],
    targets: [
        .executableTarget(
            name: "ItsMeKitExample",
            dependencies: [.product(name: "ItsMeKit", package: "itsme")]
        ),
    ]
)
