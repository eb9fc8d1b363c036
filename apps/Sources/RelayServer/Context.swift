import Hummingbird
import NIOCore

/// The request context: Hummingbird's, plus the TCP peer.
public struct RelayContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    let peer: String

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peer = source.channel.remoteAddress?.ipAddress ?? "unknown"
    }
}
