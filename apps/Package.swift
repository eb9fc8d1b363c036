// swift-tools-version: 6.0
// The programs around the library: itsme-relay, the relay server
// (docs/PROTOCOL.md section 15); itsme-cli, the command-line client
// (installed as `itsme`) and its relay client; and the relay's load
// generator. A package of its own so that the library's builds (release,
// sanitizers) never compile the network stack.
import PackageDescription

let package = Package(
    name: "itsme-apps",
    products: [
        .executable(name: "itsme-relay", targets: ["itsme-relay"]),
        .executable(name: "itsme-relay-load", targets: ["RelayLoad"]),
        // A library and an executable cannot share the name `itsme`: the
        // install step names this one `itsme`.
        .executable(name: "itsme-cli", targets: ["itsme-cli"]),
    ],
    dependencies: [
        .package(name: "itsme", path: ".."),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        // The server: routes, storage, rooms, limits, metrics.
        .target(
            name: "RelayServer",
            dependencies: [
                .product(name: "ItsMePrimitives", package: "itsme"),
                .product(name: "ItsMeRelayProtocol", package: "itsme"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The client side of a WebSocket on the wire (the upgrade and its
        // check, frame headers, masking), without I/O: the one implementation
        // both the relay client and the load generator use.
        .target(
            name: "WebSocketWire",
            dependencies: [.product(name: "NIOCore", package: "swift-nio")]
        ),
        .testTarget(
            name: "WebSocketWireTests",
            dependencies: ["WebSocketWire", .product(name: "NIOCore", package: "swift-nio")]
        ),
        // The relay client of the CLI: the invite mailbox over HTTP/1.1, rooms
        // over WebSocketWire (both on NIO, with TLS), and the drivers that
        // carry an exchange or an Online Verify session through them.
        .target(
            name: "RelayClient",
            dependencies: [
                "WebSocketWire",
                .product(name: "ItsMeKit", package: "itsme"),
                .product(name: "ItsMePrimitives", package: "itsme"),
                .product(name: "ItsMeRelayProtocol", package: "itsme"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // libqrencode, to make QR codes.
        .systemLibrary(name: "CQRencode", pkgConfig: "libqrencode", providers: [.apt(["libqrencode-dev"])]),
        // Images of QR codes in C: PNG and JPEG files loaded as grey (libpng,
        // libjpeg, whose errors longjmp and so must not cross Swift frames),
        // PNG files written, and QR codes found in an image (zbar).
        .target(
            name: "CQRImage",
            linkerSettings: [.linkedLibrary("zbar"), .linkedLibrary("png16"), .linkedLibrary("jpeg")]
        ),
        // QR codes for the CLI: drawn in the terminal on any theme, written
        // as PNG images, read from photos and screenshots.
        .target(
            name: "QRCode",
            dependencies: ["CQRencode", "CQRImage", .product(name: "ItsMePrimitives", package: "itsme")]
        ),
        .testTarget(name: "QRCodeTests", dependencies: ["QRCode", .product(name: "ItsMePrimitives", package: "itsme")]),
        // epoll and timerfd, which Glibc's module leaves out (Linux only).
        .systemLibrary(name: "CEpoll"),
        // The unlock agent's Unix-socket plumbing: descriptors passed with
        // SCM_RIGHTS, SO_PEERCRED, PR_SET_DUMPABLE, a detached spawn.
        .target(name: "CUnlockAgent"),
        .executableTarget(
            name: "itsme-cli",
            dependencies: [
                "RelayClient", "RelayServer", "QRCode", "CUnlockAgent",
                .product(name: "ItsMeKit", package: "itsme"),
                .product(name: "ItsMePrimitives", package: "itsme"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "RelayClientTests",
            dependencies: [
                "RelayClient", "RelayServer",
                .product(name: "ItsMeKit", package: "itsme"),
                .product(name: "ItsMePrimitives", package: "itsme"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The PostgreSQL backend, for several relays sharing one database: a
        // target of its own so that only itsme-relay compiles PostgresNIO,
        // never the CLI.
        .target(
            name: "RelayServerPostgres",
            dependencies: [
                "RelayServer",
                .product(name: "ItsMePrimitives", package: "itsme"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "itsme-relay",
            dependencies: [
                "RelayServer", "RelayServerPostgres", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The load generator of `itsme-bench relay`: a separate process from
        // the relay it measures.
        .executableTarget(
            name: "RelayLoad",
            dependencies: [
                "CEpoll", "WebSocketWire", "RelayClient",
                .product(name: "ItsMeKit", package: "itsme"),
                .product(name: "ItsMeRelayProtocol", package: "itsme"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
    ]
)
