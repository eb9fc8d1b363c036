import Foundation
import Hummingbird
import ItsMeRelayProtocol

/// A refusal: error kind (docs/PROTOCOL.md 15.1), status (the kind's
/// unless told) and a message for a person.
struct RelayError: Error {
    let kind: RelayErrorKind
    let status: HTTPResponse.Status
    let message: String
    var headers: HTTPFields = [:]

    init(_ kind: RelayErrorKind, status: HTTPResponse.Status? = nil, message: String, headers: HTTPFields = [:]) {
        self.kind = kind
        self.status = status ?? HTTPResponse.Status(code: kind.status)
        self.message = message
        self.headers = headers
    }

    static func badID(_ what: String) -> RelayError {
        RelayError(.badID, message: "\(what) IDs are 32 lower-case hex characters")
    }
    static func badRequest(_ message: String) -> RelayError { RelayError(.badRequest, message: message) }
    static let notFoundInvite = RelayError(.notFound, message: "no such invite")
    static let unauthorized = RelayError(.unauthorized, message: "this needs an Authorization: Bearer token of 43 base64url characters")
    static func tooLarge(_ limit: Int) -> RelayError {
        RelayError(.tooLarge, message: "the body is larger than \(limit) bytes", headers: [.connection: "close"])
    }
    static func rateLimited(_ seconds: Int) -> RelayError {
        RelayError(.rateLimited, message: "too many requests from this address; retry in \(seconds) s",
            headers: [.retryAfter: String(seconds)])
    }

    func response() -> Response {
        var headers = headers
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }

    /// The same answer as a head and a body, for a connection answered
    /// outside the responder and then closed (a refused room upgrade).
    func closingAnswer() -> (head: HTTPResponse, body: ByteBuffer) {
        let body = body
        var headers = headers
        headers[.contentType] = "application/json"
        headers[.contentLength] = String(body.readableBytes)
        headers[.connection] = "close"
        return (HTTPResponse(status: status, headerFields: headers), body)
    }

    /// `{"error": kind, "message": message}` (15.1).
    private var body: ByteBuffer { ByteBuffer(string: kind.body(message: message)) }
}

/// JSON bodies.
enum JSON {
    static func buffer(_ object: [String: Any]) -> ByteBuffer {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return ByteBuffer(bytes: data)
    }

    static func response(_ status: HTTPResponse.Status, _ object: [String: Any]) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: buffer(object)))
    }

    /// A record's PUT answer, as ItsMeRelayProtocol writes it.
    static func response(_ status: HTTPResponse.Status, _ stored: RecordStored) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: stored.json)))
    }
}
