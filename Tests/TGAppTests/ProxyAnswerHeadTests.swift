import Foundation
import TGAppTesting
import TGTesting
import Testing

/// An API's answer whose header fields do not fit the connection's memory beside the request's
/// own: libmicrohttpd would close the connection without a word after the access log said 200.
/// Over real sockets (a request made up in the process has no such limit).
@Suite struct ProxyAnswerHeadTests {
    static func fields(_ count: Int, of size: Int, _ fill: Character) -> [(String, String)] {
        [("Content-Type", "application/json")] + (0..<count).map { ("X-Big-\($0)", String(repeating: fill, count: size)) }
    }

    /// On the first call's path (the session loaded) and the event loop's alike: a 9 KB head is
    /// relayed whole, a 17.5 KB one is 502 `upstream_head_too_large`, and a request whose own
    /// head is 6 KB larger leaves too little room for the 9 KB one.
    @Test func anAPIsHeadTooLargeToSendBackIs502AndOneThatFitsIsRelayedWhole() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, transport: .sockets) { h in
            let token = try #require(try await h.logIn()["access_token"] as? String)
            h.graph!.serve("/fits", fields: Self.fields(3, of: 3000, "f"), body: Array("{}".utf8))
            h.graph!.serve("/large", fields: Self.fields(5, of: 3500, "t"), body: Array("{}".utf8))
            func call(_ path: String, _ extra: [String] = []) async throws -> TestResponse {
                TestResponse(try await curl(["-i", h.baseURL + "/api/graph" + path, "-H", "Authorization: Bearer \(token)"] + extra))
            }
            for path in ["the first call's", "the event loop's"] {
                let fitted = try await call("/fits")
                #expect(fitted.status == 200, "\(path)")
                #expect(fitted.header("X-Big-2") == String(repeating: "f", count: 3000), "\(path)")
                #expect(fitted.body == "{}", "\(path)")
                let refused = try await call("/large")
                #expect(refused.status == 502, "\(path)")
                #expect(refused.json["code"] as? String == "upstream_head_too_large", "\(path): \(refused.body)")
                #expect((refused.json["detail"] as? String)?.contains("17") == true, "\(path): \(refused.body)")
            }
            let crowded = try await call("/fits", ["-H", "X-Pad: " + String(repeating: "p", count: 6000)])
            #expect(crowded.status == 502)
            #expect(crowded.json["code"] as? String == "upstream_head_too_large")
            // The connection is fine afterwards: the next call is answered.
            #expect(try await call("/fits").status == 200)
        }
    }
}
