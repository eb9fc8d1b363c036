import Dispatch
import Foundation
import Logging
import NIOSSL
import Synchronization

/// The relay's TLS certificate and key, reloaded from their files on
/// SIGHUP (or `reload()`), so that a renewed certificate takes effect
/// without a restart: each connection takes `context` when it is accepted,
/// and a connection already open keeps the context it started with.
///
/// A reload that fails (a file missing, half written, or a key that is not
/// the certificate's) keeps the context in use: the relay goes on serving
/// with the old certificate, and the failure is logged.
public final class TLSReloader: Sendable {
    public let certificatePath: String
    public let keyPath: String
    private let logger: Logger
    private let current: Mutex<NIOSSLContext>
    /// Held so that the signal source lives as long as the reloader.
    private let signalSource = Mutex<(any DispatchSourceSignal)?>(nil)

    /// Reads both files and checks them: readable, PEM, a certificate chain
    /// and an unencrypted private key that belongs to its first certificate.
    /// Throws `TLSFileError` naming the file and what is wrong.
    public init(certificatePath: String, keyPath: String, logger: Logger) throws {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
        self.logger = logger
        let loaded = try Self.load(certificatePath: certificatePath, keyPath: keyPath)
        current = Mutex(loaded.context)
        if loaded.expires < Date() {
            logger.warning(
                "the TLS certificate has expired", metadata: ["certificate": "\(certificatePath)", "expires": "\(Self.day(loaded.expires))"])
        }
    }

    /// The context for a connection accepted now.
    public var context: NIOSSLContext {
        current.withLock { $0 }
    }

    /// Reads both files again and, if they are good, serves new connections
    /// with them. On failure the context in use stays, the failure is
    /// logged, and the error thrown.
    public func reload() throws {
        let loaded: (context: NIOSSLContext, expires: Date)
        do {
            loaded = try Self.load(certificatePath: certificatePath, keyPath: keyPath)
        } catch {
            logger.error("TLS reload failed; the previous certificate stays in use", metadata: ["error": "\(error)"])
            throw error
        }
        current.withLock { $0 = loaded.context }
        let expired = loaded.expires < Date()
        logger.log(
            level: expired ? .warning : .notice,
            expired ? "TLS certificate reloaded, and it has expired" : "TLS certificate reloaded",
            metadata: ["certificate": "\(certificatePath)", "expires": "\(Self.day(loaded.expires))"])
    }

    /// Reloads on every SIGHUP, whose default action (ending the process)
    /// is turned off. Call once; later calls do nothing.
    public func watchSIGHUP() {
        signalSource.withLock { source in
            guard source == nil else { return }
            signal(SIGHUP, SIG_IGN)
            let watcher = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "itsme-relay.sighup"))
            watcher.setEventHandler { [weak self] in
                guard let self else { return }
                self.logger.notice("SIGHUP: reloading the TLS certificate and key")
                // A failure is logged by reload(), and the old context stays.
                try? self.reload()
            }
            watcher.resume()
            source = watcher
        }
    }

    deinit {
        signalSource.withLock { $0?.cancel() }
    }

    // MARK: Reading the files

    /// The largest certificate chain or key file read: far above any real
    /// one, and a bound on a path given by mistake (a log, a device).
    static let maxFileSize = 1 << 20

    private static func load(certificatePath: String, keyPath: String) throws -> (context: NIOSSLContext, expires: Date) {
        let certificateBytes = try read(certificatePath)
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMBytes(certificateBytes)
        } catch {
            throw TLSFileError(path: certificatePath, reason: "is not a PEM certificate chain")
        }
        guard let leaf = chain.first else {
            throw TLSFileError(path: certificatePath, reason: "holds no PEM certificate")
        }
        let keyBytes = try read(keyPath)
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(bytes: keyBytes, format: .pem)
        } catch {
            throw TLSFileError(path: keyPath, reason: "is not an unencrypted PEM private key")
        }
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: configuration)
        } catch {
            throw TLSFileError(path: keyPath, reason: "is not the private key of the certificate in \(certificatePath)")
        }
        return (context, Date(timeIntervalSince1970: TimeInterval(leaf.notValidAfter)))
    }

    /// A file's bytes, or an error that says why it cannot be read.
    private static func read(_ path: String) throws -> [UInt8] {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw TLSFileError(path: path, reason: "cannot be read (\(String(cString: strerror(errno))))")
        }
        guard status.st_mode & S_IFMT == S_IFREG else { throw TLSFileError(path: path, reason: "is not a regular file") }
        guard status.st_size <= maxFileSize else { throw TLSFileError(path: path, reason: "is larger than \(maxFileSize) bytes") }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw TLSFileError(path: path, reason: "cannot be read (\(String(cString: strerror(errno))))")
        }
        defer { try? handle.close() }
        let data: Data
        do {
            data = try handle.read(upToCount: maxFileSize + 1) ?? Data()
        } catch {
            throw TLSFileError(path: path, reason: "cannot be read (\(error.localizedDescription))")
        }
        guard !data.isEmpty else { throw TLSFileError(path: path, reason: "is empty") }
        guard data.count <= maxFileSize else { throw TLSFileError(path: path, reason: "is larger than \(maxFileSize) bytes") }
        return Array(data)
    }

    /// A date as the logs write it: `2027-02-24T12:00:00Z`.
    static func day(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }
}

/// A TLS certificate or key file that cannot be used: which file, and why.
public struct TLSFileError: Error, CustomStringConvertible, Sendable {
    public let path: String
    public let reason: String

    public var description: String { "TLS file \(path) \(reason)" }
}
