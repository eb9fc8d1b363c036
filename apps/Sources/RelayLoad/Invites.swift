// Invite lifecycles over keep-alive HTTP/1.1: each runner is an inviter and
// an invitee, each on its own connection, going through create, accept, one
// 64-byte message each way, a fetch each way and the delete, again and
// again until the deadline.
import NIOCore
import NIOHTTP1
import NIOPosix
import ItsMeRelayProtocol

final class HTTPConn: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private var context: ChannelHandlerContext?
    private var status = 0
    private var body: ByteBuffer?
    private var onResponse: ((Int, ByteBuffer?) -> Void)?
    private let host: String
    let onFailure: (String) -> Void

    init(host: String, onFailure: @escaping (String) -> Void) {
        self.host = host
        self.onFailure = onFailure
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func channelInactive(context: ChannelHandlerContext) {
        self.context = nil
        if onResponse != nil {
            onResponse = nil
            onFailure("connection closed during a request")
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        onFailure("\(error)")
        context.close(promise: nil)
    }

    func request(_ method: HTTPMethod, _ uri: String, token: String? = nil, body: ByteBuffer? = nil,
                 then: @escaping (Int, ByteBuffer?) -> Void) {
        guard let context else { return onFailure("not connected") }
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: host)
        if let token { headers.add(name: RelayProtocol.authorizationHeader, value: RelayProtocol.authorization(token: token)) }
        if let body {
            headers.add(name: RelayProtocol.contentTypeHeader, value: RelayProtocol.bytesContentType)
            headers.add(name: "Content-Length", value: String(body.readableBytes))
        } else if method == .POST || method == .PUT {
            headers.add(name: "Content-Length", value: "0")
        }
        onResponse = then
        status = 0
        self.body = nil
        context.write(wrapOutboundOut(.head(HTTPRequestHead(version: .http1_1, method: method, uri: uri, headers: headers))), promise: nil)
        if let body { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = Int(head.status.code)
        case .body(var part):
            if body == nil { body = part } else { body!.writeBuffer(&part) }
        case .end:
            let callback = onResponse
            onResponse = nil
            callback?(status, body)
        }
    }

    func close() { context?.close(promise: nil) }
}

final class InviteRunner: @unchecked Sendable {
    let loop: EventLoop
    let port: Int
    var inviter: HTTPConn!
    var invitee: HTTPConn!
    var deadline: UInt64 = 0
    var done: EventLoopPromise<Void>!
    var histogram = Histogram()
    var lifecycles = 0
    var failures = 0
    var firstFailure: String?
    private var running = false
    private let message: ByteBuffer

    init(loop: EventLoop, port: Int) {
        self.loop = loop
        self.port = port
        var buffer = ByteBufferAllocator().buffer(capacity: 64)
        buffer.writeBytes(systemRandom(64))
        message = buffer
    }

    private func fail(_ why: String) {
        failures += 1
        if firstFailure == nil { firstFailure = why }
        finish()
    }

    private func finish() {
        if running {
            running = false
            inviter?.close()
            invitee?.close()
            done.succeed(())
        }
    }

    /// Connects both sides; the future completes when both are connected.
    func connect() -> EventLoopFuture<Void> {
        let host = "127.0.0.1:\(port)"
        let address = try! SocketAddress(ipAddress: "127.0.0.1", port: port)
        func open() -> EventLoopFuture<HTTPConn> {
            let conn = HTTPConn(host: host, onFailure: { [unowned self] in self.fail($0) })
            return ClientBootstrap(group: loop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(conn)
                    }
                }
                .connect(to: address)
                .map { _ in conn }
        }
        return open().and(open()).map { pair in
            self.inviter = pair.0
            self.invitee = pair.1
        }
    }

    /// Runs lifecycles until `deadline` (monotonic ns); completes when the
    /// last one has ended.
    func run(until deadline: UInt64) -> EventLoopFuture<Void> {
        loop.submit {
            self.deadline = deadline
            self.done = self.loop.makePromise()
            self.running = true
            self.lifecycle()
            return self.done.futureResult
        }.flatMap { $0 }
    }

    private func expect(_ step: String, _ status: Int, _ wanted: Int) -> Bool {
        if status == wanted { return true }
        fail("\(step) answered \(status), expected \(wanted)")
        return false
    }

    private func lifecycle() {
        guard running else { return }
        let id = randomID()
        let invite = RelayPath.invite(id).text, accept = RelayPath.inviteAccept(id).text
        let messages = RelayPath.inviteMessages(id).text, fetch = RelayPath.fetch(id, after: 0, wait: 0)
        let start = monoNanos()
        inviter.request(.POST, invite) { [self] status, body in
            guard expect("create", status, RelayStatus.created), let inviterToken = token(body) else { return fail("create: no token") }
            invitee.request(.POST, accept) { [self] status, body in
                guard expect("accept", status, RelayStatus.ok), let inviteeToken = token(body) else { return fail("accept: no token") }
                inviter.request(.POST, messages, token: inviterToken, body: message) { [self] status, _ in
                    guard expect("inviter post", status, RelayStatus.created) else { return }
                    invitee.request(.POST, messages, token: inviteeToken, body: message) { [self] status, _ in
                        guard expect("invitee post", status, RelayStatus.created) else { return }
                        invitee.request(.GET, fetch, token: inviteeToken) { [self] status, body in
                            guard expect("invitee fetch", status, RelayStatus.ok) else { return }
                            guard hasMessage(body) else { return fail("invitee fetch: no message") }
                            inviter.request(.GET, fetch, token: inviterToken) { [self] status, body in
                                guard expect("inviter fetch", status, RelayStatus.ok) else { return }
                                guard hasMessage(body) else { return fail("inviter fetch: no message") }
                                inviter.request(.DELETE, invite, token: inviterToken) { [self] status, _ in
                                    guard expect("delete", status, RelayStatus.noContent) else { return }
                                    let now = monoNanos()
                                    histogram.record(now - start)
                                    lifecycles += 1
                                    if now < deadline { lifecycle() } else { finish() }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

private func token(_ body: ByteBuffer?) -> String? {
    guard let body else { return nil }
    return body.withUnsafeReadableBytes { raw in
        let text = UnsafeBufferPointer(start: raw.baseAddress?.assumingMemoryBound(to: UInt8.self), count: raw.count)
        return jsonString(text, "token").map { String(decoding: $0, as: UTF8.self) }
    }
}

private func hasMessage(_ body: ByteBuffer?) -> Bool {
    guard let body else { return false }
    return body.withUnsafeReadableBytes { raw in
        let text = UnsafeBufferPointer(start: raw.baseAddress?.assumingMemoryBound(to: UInt8.self), count: raw.count)
        return jsonString(text, "body").map { $0.count > 0 } ?? false
    }
}
