import Foundation
import ItsMeKit
import NIOCore
import NIOPosix
import NIOSSL

extension RelayURL {
    /// The TLS context of this relay's connections: `tlsConfiguration`,
    /// whose trust roots are the certificates of `$SSL_CERT_FILE` in place of
    /// the system's when that is set (as OpenSSL and Python read it), plus
    /// any added with `addTrustRoots`. Throws `ItsMeError` (invalid
    /// argument) for an `SSL_CERT_FILE` that holds no certificate, and a
    /// `RelayError` if TLS cannot be set up.
    func makeSSLContext(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> NIOSSLContext {
        var configuration = tlsConfiguration
        if let file = environment["SSL_CERT_FILE"], !file.isEmpty {
            configuration.trustRoots = .certificates(try Self.pemCertificates(file, named: "SSL_CERT_FILE=\(file)"))
        }
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw RelayError("cannot set up TLS for the relay at \(host):\(port) (\(TLSFailure.reason(error)))", kind: "connection")
        }
    }

    /// The certificates of a PEM file, or an error naming it (`what`) and
    /// saying why: missing, unreadable, or holding no certificate.
    static func pemCertificates(_ path: String, named what: String) throws -> [NIOSSLCertificate] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ItsMeError(.invalidArgument, "\(what): cannot read the file (\(Self.readFailure(path)))")
        }
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMBytes(Array(data))
        } catch {
            throw ItsMeError(.invalidArgument, "\(what) is not a PEM certificate file")
        }
        guard !certificates.isEmpty else { throw ItsMeError(.invalidArgument, "\(what) holds no PEM certificate") }
        return certificates
    }

    private static func readFailure(_ path: String) -> String {
        var status = stat()
        if stat(path, &status) != 0 { return String(cString: strerror(errno)) }
        if status.st_mode & S_IFMT == S_IFDIR { return "it is a directory" }
        return access(path, R_OK) == 0 ? "unreadable" : String(cString: strerror(EACCES))
    }
}

/// A failed TLS handshake with the relay, told in one line: which relay,
/// and why (its certificate is from an authority this client does not
/// trust, has expired, is for another name; the relay refused the
/// handshake or does not speak TLS there) rather than BoringSSL's error
/// stack, which carries the library's source paths.
enum TLSFailure {
    /// The one-line account of `error` if it is a TLS failure, else nil.
    /// A certificate that did not verify is looked at again (a second
    /// handshake that records it and goes no further) to say why.
    static func explain(
        _ error: any Error, url: RelayURL, context: NIOSSLContext?, group: any EventLoopGroup, timeout: Double
    ) async -> String? {
        guard let reason = classify(error) else { return nil }
        let relay = "TLS with the relay at \(url.place) failed"
        switch reason {
        case .untrusted:
            guard let context else { return "\(relay): its certificate is not trusted" }
            let chain = await presentedChain(url: url, context: context, group: group, timeout: min(timeout, 5))
            return "\(relay): \(untrusted(chain))"
        case .wrongName:
            return "\(relay): its certificate is not for \(url.host) (wrong name)"
        case .other(let text):
            return "\(relay): \(text)"
        }
    }

    enum Reason: Equatable {
        case untrusted
        case wrongName
        case other(String)
    }

    static func classify(_ error: any Error) -> Reason? {
        if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname { return .wrongName }
        if let ssl = error as? NIOSSLError {
            switch ssl {
            case .handshakeFailed(let boring):
                let names = reasonNames(boring)
                if names.contains("CERTIFICATE_VERIFY_FAILED") { return .untrusted }
                if names.contains(where: { $0 == "WRONG_VERSION_NUMBER" || $0 == "PACKET_LENGTH_TOO_LONG" || $0 == "HTTP_REQUEST" }) {
                    return .other("the relay does not speak TLS on this port (an http:// URL?)")
                }
                if let alert = names.first(where: { $0.contains("ALERT") }) {
                    return .other("the relay refused the TLS handshake (\(alert.lowercased()))")
                }
                if case .sslError(let stack) = boring, stack.contains(.eofDuringHandshake) {
                    return .other("the relay closed the connection during the TLS handshake")
                }
                return .other("the TLS handshake failed (\(names.first?.lowercased() ?? "no reason given"))")
            case .uncleanShutdown:
                return .other("the relay closed the connection during the TLS handshake")
            case .noCertificateToValidate, .unableToValidateCertificate:
                return .other("the relay presented no usable certificate")
            default:
                return .other("\(ssl)")
            }
        }
        if error is BoringSSLError { return .other("the TLS handshake failed (\(reason(error)))") }
        return nil
    }

    /// BoringSSL's reason names in an error (`CERTIFICATE_VERIFY_FAILED`),
    /// without its source paths.
    static func reasonNames(_ error: BoringSSLError) -> [String] {
        let stack: NIOBoringSSLErrorStack
        switch error {
        case .sslError(let s), .unknownError(let s), .invalidSNIName(let s), .failedToSetALPN(let s): stack = s
        default: return []
        }
        return stack.compactMap { entry in
            let text = entry.description
            guard let range = text.range(of: "OPENSSL_internal:") else { return nil }
            return String(text[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "_" })
        }
    }

    /// A short reason for any TLS setup error, without source paths.
    static func reason(_ error: any Error) -> String {
        if let boring = error as? BoringSSLError, let first = reasonNames(boring).first { return first.lowercased() }
        if let ssl = error as? NIOSSLError, case .handshakeFailed(let boring) = ssl, let first = reasonNames(boring).first {
            return first.lowercased()
        }
        let text = "\(error)"
        return text.contains(" at /") ? String(text.prefix { $0 != "/" }).trimmingCharacters(in: .whitespaces) : text
    }

    /// Why a chain did not verify: out of its dates, or from an authority
    /// this client does not trust.
    static func untrusted(_ chain: [NIOSSLCertificate]?) -> String {
        guard let leaf = chain?.first else {
            return "its certificate is not trusted (an unknown authority, or out of its dates)"
        }
        let now = time(nil)
        if leaf.notValidAfter < now { return "its certificate expired on \(day(leaf.notValidAfter))" }
        if leaf.notValidBefore > now { return "its certificate is not valid before \(day(leaf.notValidBefore))" }
        for certificate in chain ?? [] where certificate.notValidAfter < now {
            return "a certificate of its chain expired on \(day(certificate.notValidAfter))"
        }
        return "its certificate is signed by an authority this client does not trust (unknown CA)"
    }

    private static func day(_ time: time_t) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(time)))
    }

    /// The chain the relay presents, read by a handshake that accepts
    /// nothing: it ends as soon as the chain has arrived.
    static func presentedChain(
        url: RelayURL, context: NIOSSLContext, group: any EventLoopGroup, timeout: Double
    ) async -> [NIOSSLCertificate]? {
        let seen = ChainBox()
        let serverName = url.serverName
        do {
            let channel = try await ClientBootstrap(group: group)
                .connectTimeout(Deadline.amount(max(timeout, 0.001)))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let handler = try NIOSSLClientHandler(
                            context: context, serverHostname: serverName,
                            customVerificationCallback: { certificates, promise in
                                seen.set(certificates)
                                promise.succeed(.failed)
                            })
                        try channel.pipeline.syncOperations.addHandler(handler)
                    }
                }
                .connect(host: url.host, port: url.port).get()
            let closer = channel.eventLoop.scheduleTask(in: Deadline.amount(timeout)) { channel.close(promise: nil) }
            try? await channel.closeFuture.get()
            closer.cancel()
        } catch {}
        return seen.value
    }
}

/// The chain a diagnostic handshake saw, set on an event loop and read after.
private final class ChainBox: @unchecked Sendable {
    private let lock = NSLock()
    private var chain: [NIOSSLCertificate]?

    func set(_ value: [NIOSSLCertificate]) { lock.withLock { chain = value } }
    var value: [NIOSSLCertificate]? { lock.withLock { chain } }
}
