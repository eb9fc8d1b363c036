import Foundation
import ItsMeRelayProtocol
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Wraps the server's child channel with `ConnectionGuard`, first in the
/// pipeline (after TLS, which wraps this), the way HummingbirdTLS wraps it.
struct GuardedChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base
    let limits: ConnectionLimits

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let connectionGuard = ConnectionGuard(limits: limits)
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(connectionGuard)
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }.flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try pipeline.addHandler(HandshakeCheck(), position: .after(decoder))
            try pipeline.addHandler(ParseErrorAnswer(connectionGuard: connectionGuard, metrics: limits.metrics), position: .last)
            try pipeline.addHandler(UpgradeWatcher(metrics: limits.metrics), position: .last)
            return value
        }
    }

    func handle(value: Base.Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
        // Bytes that are not HTTP fail the upgrade negotiation without an
        // answer: the connection ends here rather than hanging open.
        try? await value.channel.close()
    }
}

extension GuardedChannel: HTTPChannelHandler where Base: HTTPChannelHandler {
    var responder: HTTPChannelHandler.Responder { base.responder }
}

/// What the connection guards share.
struct ConnectionLimits: Sendable {
    let counter: ConnectionCounter
    let metrics: RelayMetrics
    let requestTimeout: TimeAmount
}

/// Connection limits and the first request's deadline (docs/PROTOCOL.md
/// 15.5), on raw bytes: a connection beyond a limit gets `503 busy` and is
/// closed; a first request whose head has not arrived whole within the
/// request timeout (slowloris) is closed. Later requests on the connection
/// are timed by `RequestTimer`, once HTTP decoding is in place.
final class ConnectionGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let limits: ConnectionLimits
    private var address = "unknown"
    private var refused = false
    private var counted = false
    private var headDone = false
    /// The last bytes seen while looking for the end of the first head.
    private var tail: [UInt8] = []
    private var timer: Scheduled<Void>?

    init(limits: ConnectionLimits) { self.limits = limits }

    func handlerAdded(context: ChannelHandlerContext) {
        address = context.channel.remoteAddress?.ipAddress ?? "unknown"
        if limits.counter.open(address) {
            counted = true
            limits.metrics.connectionsOpen.increment()
            let counter = limits.counter, metrics = limits.metrics, address = address
            context.channel.closeFuture.whenComplete { _ in
                counter.close(address)
                metrics.connectionsOpen.decrement()
            }
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            timer = context.eventLoop.scheduleTask(in: limits.requestTimeout) { [weak self] in
                guard let self, !self.headDone else { return }
                self.limits.metrics.reject(.slowRequest)
                loopBound.value.close(promise: nil)
            }
        } else {
            refused = true
            limits.metrics.reject(.busy)
            if context.channel.isActive { refuse(context) }
        }
    }

    func channelActive(context: ChannelHandlerContext) {
        if refused { refuse(context) }
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
    }

    private var refusing = false

    /// `503 busy`, then the output is shut and the connection closed.
    private func refuse(_ context: ChannelHandlerContext) {
        answer(
            context, status: "503 Service Unavailable", headers: "\(RelayProtocol.retryAfterHeader): 5\r\n",
            error: .busy, message: "too many connections; try again later")
    }

    /// Answers with a JSON error on the raw connection (ahead of HTTP
    /// encoding, which may hold a broken request), then shuts the output and
    /// closes the connection; nothing the client sends after is read.
    /// `context` is this handler's.
    func answer(_ context: ChannelHandlerContext, status: String, headers: String = "", error: RelayErrorKind, message: String) {
        refused = true
        guard !refusing else { return }
        refusing = true
        let body = error.body(message: message)
        let text =
            "HTTP/1.1 \(status)\r\nContent-Type: \(RelayProtocol.jsonContentType)\r\n\(headers)"
            + "Connection: close\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: text))).whenComplete { _ in
            let context = loopBound.value
            context.close(mode: .output, promise: nil)
            // Whatever the client still sends is read and dropped for a
            // moment, so that it sees the answer rather than a reset.
            context.eventLoop.scheduleTask(in: .seconds(1)) { loopBound.value.close(promise: nil) }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if refused { return }
        if !headDone {
            let buffer = unwrapInboundIn(data)
            let bytes = buffer.readableBytesView
            tail.append(contentsOf: bytes.suffix(4096))
            let crlf2: [UInt8] = [13, 10, 13, 10]
            if tail.count >= 4, tail.indices.dropLast(3).contains(where: { tail[$0..<($0 + 4)].elementsEqual(crlf2) }) {
                headDone = true
                timer?.cancel()
                tail = []
            } else if tail.count > 3 {
                tail = Array(tail.suffix(3))
            }
        }
        context.fireChannelRead(data)
    }
}

/// Times every HTTP request after the first (and the first one's body): a
/// request must arrive whole within the request timeout of the previous
/// response, or the connection is closed. A request being answered (a held
/// fetch) is not timed.
final class RequestTimer: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private enum State { case idle, reading, answering }
    private var state = State.reading
    /// No request is being read or answered: the previous response is out.
    var isIdle: Bool { state == .idle }
    private var timer: Scheduled<Void>?
    private let limits: ConnectionLimits

    init(limits: ConnectionLimits) { self.limits = limits }

    func handlerAdded(context: ChannelHandlerContext) { arm(context) }

    func handlerRemoved(context: ChannelHandlerContext) { timer?.cancel() }

    private func arm(_ context: ChannelHandlerContext) {
        timer?.cancel()
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: limits.requestTimeout) { [weak self] in
            guard let self, self.state != .answering else { return }
            if self.state == .reading { self.limits.metrics.reject(.slowRequest) }
            loopBound.value.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            state = .reading
        case .body:
            break
        case .end:
            // A request answered early (413) stays answered: its tail does
            // not stop the clock.
            if state == .reading {
                state = .answering
                timer?.cancel()
            }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            state = .idle
            arm(context)
        }
        context.write(data, promise: promise)
    }
}

/// Bytes that are not HTTP: the decoder reports an error that nothing else
/// answers while the upgrade is being negotiated. It is answered here, on the
/// raw connection, unless a response is under way (a request's head was
/// already handed on): `431 too-large` for a head beyond the decoder's limits
/// (docs/PROTOCOL.md 15.5), `400 bad-request` for anything else; then the
/// connection is closed. Everything else passes through untouched.
final class ParseErrorAnswer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    private let connectionGuard: ConnectionGuard
    private let metrics: RelayMetrics

    init(connectionGuard: ConnectionGuard, metrics: RelayMetrics) {
        self.connectionGuard = connectionGuard
        self.metrics = metrics
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? HTTPParserError {
            let tooLarge = error == .headerOverflow
            metrics.reject(tooLarge ? RelayRejection.tooLarge : .badRequest)
            let pipeline = context.pipeline.syncOperations
            let timer = try? pipeline.handler(type: RequestTimer.self)
            if timer?.isIdle ?? true, let guardContext = try? pipeline.context(handler: connectionGuard) {
                if tooLarge {
                    connectionGuard.answer(
                        guardContext, status: "431 Request Header Fields Too Large", error: .tooLarge,
                        message: "the request head is larger than the relay reads")
                } else {
                    connectionGuard.answer(
                        guardContext, status: "400 Bad Request", error: .badRequest, message: "this is not an HTTP/1.1 request")
                }
            } else {
                context.close(promise: nil)
            }
        }
        context.fireErrorCaught(error)
    }
}
