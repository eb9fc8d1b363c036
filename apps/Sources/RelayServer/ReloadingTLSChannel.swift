import HummingbirdCore
import Logging
import NIOCore
import NIOSSL

/// TLS in front of `base`, with the context `reloader` holds when the
/// connection is accepted: after a reload (SIGHUP), new connections get the
/// new certificate, and connections already open keep the one they began
/// with.
struct ReloadingTLSChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base
    let reloader: TLSReloader

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let context = reloader.context
        let base = base
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

extension ReloadingTLSChannel: HTTPChannelHandler where Base: HTTPChannelHandler {
    var responder: HTTPChannelHandler.Responder { base.responder }
}
