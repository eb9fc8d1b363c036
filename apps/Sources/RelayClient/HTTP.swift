import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// A deadline in real time, for timeouts given in seconds.
struct Deadline {
    let end: NIODeadline

    init(seconds: Double) {
        end = .now() + Self.amount(seconds)
    }

    /// Seconds left, 0 once passed.
    var remaining: Double {
        let left = (end - .now()).nanoseconds
        return left > 0 ? Double(left) / 1e9 : 0
    }

    var hasPassed: Bool { end <= .now() }

    static func amount(_ seconds: Double) -> TimeAmount {
        guard seconds.isFinite, seconds > 0 else { return .zero }
        return .nanoseconds(Int64(min(seconds, Checks.maxSeconds) * 1e9))
    }
}

/// A flag set from one thread and read from another.
final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false

    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

/// One answer of the relay.
struct HTTPAnswer {
    let status: Int
    let headers: HTTPHeaders
    let body: [UInt8]
}

/// One HTTP/1.1 request on a connection of its own (`Connection: close`),
/// over TLS for an https:// relay. The whole exchange (connecting, the TLS
/// handshake, the request and the answer) is bounded by `timeout` seconds;
/// an answer's body is bounded by `maxBody` bytes. Cancelling the task
/// closes the connection.
enum HTTPRequester {
    static let maxBody = 1 << 20

    static func send(
        _ url: RelayURL, sslContext: NIOSSLContext?, method: HTTPMethod, path: String, headers extra: [(String, String)],
        body: [UInt8]?, timeout: Double, group: any EventLoopGroup
    ) async throws -> HTTPAnswer {
        let deadline = Deadline(seconds: timeout)
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: url.hostHeader)
        headers.add(name: "User-Agent", value: "itsme-relay-client")
        headers.add(name: "Connection", value: "close")
        for (name, value) in extra { headers.add(name: name, value: value) }
        if let body {
            headers.add(name: "Content-Length", value: String(body.count))
        } else if method == .POST || method == .PUT {
            headers.add(name: "Content-Length", value: "0")
        }
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: url.pathPrefix + path, headers: headers)
        let serverName = url.serverName

        let channel: NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>
        do {
            channel = try await ClientBootstrap(group: group)
                .connectTimeout(Deadline.amount(max(deadline.remaining, 0.001)))
                .connect(host: url.host, port: url.port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let sslContext {
                            let tls = try NIOSSLClientHandler(context: sslContext, serverHostname: serverName)
                            try channel.pipeline.syncOperations.addHandler(tls)
                        }
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(
                            wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            throw connectError(error, url)
        }

        let timedOut = LockedFlag()
        let raw = channel.channel
        let timer = raw.eventLoop.scheduleTask(deadline: deadline.end) {
            timedOut.set()
            raw.close(promise: nil)
        }
        defer { timer.cancel() }
        do {
            return try await withTaskCancellationHandler {
                try await channel.executeThenClose { inbound, outbound in
                    // The whole request in one write: the relay may answer and
                    // close as soon as it has the head, and a failed write is
                    // not the end (the answer may be there to read).
                    var parts: [HTTPClientRequestPart] = [.head(head)]
                    if let body, !body.isEmpty { parts.append(.body(.byteBuffer(ByteBuffer(bytes: body)))) }
                    parts.append(.end(nil))
                    var writeError: (any Error)?
                    do { try await outbound.write(contentsOf: parts) } catch { writeError = error }
                    var answerHead: HTTPResponseHead?
                    var received: [UInt8] = []
                    for try await part in inbound {
                        switch part {
                        case .head(let h):
                            // An informational answer (1xx) is followed by the real one.
                            if h.status.code >= 200 { answerHead = h }
                        case .body(let buffer):
                            guard answerHead != nil else { continue }
                            guard received.count + buffer.readableBytes <= maxBody else {
                                throw RelayError.badResponse("the relay's answer is larger than \(maxBody) bytes")
                            }
                            received += buffer.readableBytesView
                        case .end:
                            guard let h = answerHead else { continue }
                            return HTTPAnswer(status: Int(h.status.code), headers: h.headers, body: received)
                        }
                    }
                    if answerHead == nil, let writeError { throw writeError }
                    throw RelayError.connection(
                        answerHead == nil
                            ? "the relay at \(url.place) closed the connection without answering"
                            : "the relay at \(url.place) closed the connection before its answer was complete")
                }
            } onCancel: {
                raw.close(promise: nil)
            }
        } catch {
            if timedOut.isSet { throw RelayError.timeout("the relay at \(url.place) did not answer in time") }
            if let relay = error as? RelayError { throw relay }
            if error is CancellationError || Task.isCancelled { throw CancellationError() }
            if let tls = await TLSFailure.explain(error, url: url, context: sslContext, group: group, timeout: deadline.remaining) {
                throw RelayError(tls, kind: "connection")
            }
            throw RelayError.connection("the connection to the relay at \(url.place) failed (\(describe(error)))")
        }
    }

    /// A failure to connect: a timeout, or the relay unreachable.
    static func connectError(_ error: any Error, _ url: RelayURL) -> RelayError {
        if let channelError = error as? ChannelError, case .connectTimeout = channelError {
            return .timeout("the relay at \(url.place) did not accept the connection in time")
        }
        return .connection("cannot reach the relay at \(url.place) (\(describe(error)))")
    }

    /// A short, person-readable account of a network error.
    static func describe(_ error: any Error) -> String {
        if let e = error as? NIOConnectionError {
            if let first = e.connectionErrors.first { return describe(first.error) }
            if e.dnsAError != nil || e.dnsAAAAError != nil { return "the host name could not be resolved" }
            return "no address to connect to"
        }
        if let e = error as? IOError {
            return String(cString: strerror(e.errnoCode))
        }
        if case .other(let text)? = TLSFailure.classify(error) { return "TLS: \(text)" }
        if TLSFailure.classify(error) == .untrusted { return "TLS: the relay's certificate is not trusted" }
        if TLSFailure.classify(error) == .wrongName { return "TLS: the relay's certificate is for another name" }
        if let e = error as? ChannelError {
            switch e {
            case .connectTimeout: return "timed out"
            case .ioOnClosedChannel, .alreadyClosed, .eof, .outputClosed, .inputClosed: return "the connection closed"
            default: return "\(e)"
            }
        }
        let text = "\(error)"
        return text.count > 200 ? String(text.prefix(200)) + "..." : text
    }
}
