import ItsMeRelayProtocol
import Testing

@Suite struct RelayProtocolTests {
    @Test func idsAre32LowerCaseHexCharacters() {
        #expect(RelayProtocol.isID(String(repeating: "0a", count: 16)))
        #expect(!RelayProtocol.isID(String(repeating: "0A", count: 16)))
        #expect(!RelayProtocol.isID(String(repeating: "0a", count: 15)))
        #expect(!RelayProtocol.isID(String(repeating: "0a", count: 16) + "0"))
        #expect(!RelayProtocol.isID(String(repeating: "g0", count: 16)))
        #expect(RelayProtocol.id(of: [UInt8](0..<16)) == "000102030405060708090a0b0c0d0e0f")
        #expect(RelayProtocol.id(of: [UInt8](0..<15)) == nil)
        #expect(RelayProtocol.shortID("000102030405060708090a0b0c0d0e0f") == "00010203")
    }

    @Test func tokensHaveOneSpelling() {
        let token = String(repeating: "A", count: 42) + "E"
        #expect(RelayProtocol.isToken(token))
        // The last character's two low bits carry nothing: "B" sets one.
        #expect(!RelayProtocol.isToken(String(repeating: "A", count: 42) + "B"))
        #expect(!RelayProtocol.isToken(String(repeating: "A", count: 42)))
        #expect(!RelayProtocol.isToken(String(repeating: "A", count: 42) + "=")) // padded
        #expect(!RelayProtocol.isToken(String(repeating: "+", count: 43))) // not url-safe
        #expect(RelayProtocol.authorization(token: token) == "Bearer " + token)
        #expect(RelayProtocol.token(fromAuthorization: "Bearer " + token) == Substring(token))
        #expect(RelayProtocol.token(fromAuthorization: "bearer " + token) == nil)
        #expect(RelayProtocol.token(fromAuthorization: "Bearer  " + token) == nil)
    }

    @Test func pathsReadBackAsWritten() {
        let id = "00112233445566778899aabbccddeeff"
        let all: [RelayPath] = [.invite(id), .inviteAccept(id), .inviteMessages(id), .room(id), .group(id), .record(id), .health, .metrics]
        for path in all {
            #expect(RelayPath(path.text) == path, "\(path.text)")
        }
        #expect(Set(all.map(\.text)).count == all.count)
        #expect(RelayPath.fetch(id, after: 3, wait: 30) == "/v1/invites/\(id)/messages?after=3&wait=30")
        #expect(RelayPath("/v1/rooms/\(id)/") == nil)
        #expect(RelayPath("/v1/other/\(id)") == nil)
        #expect(RelayPath("v1/rooms/\(id)") == nil)
        #expect(RelayPath("/v2/rooms/\(id)") == nil)
        #expect(RelayPath("/v1/invites/\(id)/reject") == nil)
        // The ID stands as given: the relay answers bad-id for it.
        #expect(RelayPath("/v1/rooms/XYZ") == .room("XYZ"))
        #expect(RelayPath("/v1/rooms/XYZ")?.id == "XYZ")
    }

    @Test func errorKindsCarryTheirStatusAndReadBack() {
        #expect(RelayErrorKind.allCases.count == 13)
        #expect(RelayErrorKind.notFound.status == 404)
        #expect(RelayErrorKind.limit.status == 409)
        #expect(RelayErrorKind.unavailable.status == 503)
        for kind in RelayErrorKind.allCases {
            let body = kind.body(message: "one \"line\"")
            #expect(RelayErrorKind(body: Array(body.utf8)) == kind, "\(body)")
        }
        #expect(RelayErrorKind.badID.body(message: "m") == #"{"error":"bad-id","message":"m"}"#)
        #expect(RelayErrorKind(body: Array(#"{"error":"teapot"}"#.utf8)) == nil)
        #expect(RelayErrorKind(body: [0xFF, 0xFE]) == nil)
    }

    @Test func eventsReadBackAsTheRelayWritesThem() {
        let events: [RoomEvent] = [
            .waiting, .peerJoined(slot: nil), .peerLeft(slot: nil), .refused(reason: RoomEvent.noPeer),
            .joined(slot: 3, peers: [1, 2]), .joined(slot: 1, peers: []), .peerJoined(slot: 7), .peerLeft(slot: 65_535),
        ]
        for event in events {
            #expect(RoomEvent(json: Array(event.json.utf8)) == event, "\(event.json)")
        }
        #expect(RoomEvent.waiting.json == #"{"type":"waiting"}"#)
        #expect(RoomEvent.refused(reason: "no-peer").json == #"{"type":"refused","reason":"no-peer"}"#)
        #expect(RoomEvent.joined(slot: 3, peers: [1, 2]).json == #"{"type":"joined","slot":3,"peers":[1,2]}"#)
        // As any JSON writer may space it.
        #expect(RoomEvent(json: Array(#" { "type" : "peer-left" , "slot" : 2 } "#.utf8)) == .peerLeft(slot: 2))
    }

    @Test func malformedEventsAreNotEvents() {
        for text in [
            "", "[]", "\"waiting\"", #"{"type":1}"#, #"{"kind":"waiting"}"#, #"{"type":"peer-left","slot":0}"#,
            #"{"type":"peer-left","slot":65536}"#, #"{"type":"peer-left","slot":"2"}"#, #"{"type":"joined","slot":1}"#,
            #"{"type":"joined","slot":1,"peers":[0]}"#, #"{"type":"joined","peers":[]}"#, #"{"type":"waiting""#,
        ] {
            #expect(RoomEvent(json: Array(text.utf8)) == nil, "\(text)")
        }
        #expect(RoomEvent(json: [0x7B, 0xFF, 0x7D]) == nil)
        #expect(RoomEvent(json: Array(#"{"type":"refused"}"#.utf8)) == .refused(reason: "no reason given"))
        let long = String(repeating: "x", count: 100)
        #expect(RoomEvent(json: Array(#"{"type":"\#(long)"}"#.utf8)) == .other(type: String(repeating: "x", count: 64)))
    }

    @Test func aRecordsPutAnswerReadsBackAsTheRelayWritesIt() {
        let token = String(repeating: "A", count: 43)
        for stored in [RecordStored.created(deleteToken: token), .alreadyStored] {
            #expect(RecordStored(json: Array(stored.json.utf8)) == stored)
        }
        #expect(RecordStored.alreadyStored.json == "{}")
        // With the spaces another writer puts in.
        #expect(RecordStored(json: Array("{ \"delete_token\" : \"\(token)\" }".utf8)) == .created(deleteToken: token))
        for junk in [
            "", "[]", "null", "{\"delete_token\":\"\(token.dropLast())\"}", "{\"delete_token\":\"\(token.dropLast())B\"}",
            "{\"delete_token\":43}", "{\"token\":\"\(token)\"}", "{\"delete_token\":\"\(token)\",\"more\":1}",
        ] {
            #expect(RecordStored(json: Array(junk.utf8)) == nil, "\(junk)")
        }
        #expect(RecordStored(json: [UInt8](repeating: 0x20, count: 2000) + Array("{}".utf8)) == nil, "longer than any answer")
    }
}

