import Foundation
import TGAppTesting
import TGTesting
import Testing

/// A keep-alive connection remembers the hash of the token its last request presented, so a
/// client's next call with the same token is not hashed again (Sources/TGApp/Proxy/ProxyRoutes.swift).
/// Only the hash is remembered, compared byte for byte: another token on the same connection is
/// answered as its own, an unknown or malformed one is refused, and a session ended meanwhile is
/// ended for the connection too.
@Suite struct ProxyConnectionMemoTests {
    static let paths = #", path_prefixes: ["/echo"]"#

    /// One curl process, one connection: each transfer's status, how many connections it opened,
    /// and the subject the API saw (nil when the API was not reached). A transfer is a token for
    /// `GET /api/graph/echo`, or `logout:` and a token for `POST /auth/logout`.
    static func calls(_ harness: AuthFlowHarness, _ transfers: [String]) async throws -> [(status: Int, connects: Int, subject: String?)] {
        var arguments: [String] = []
        for (index, transfer) in transfers.enumerated() {
            if index > 0 { arguments.append("--next") }
            let logout = transfer.hasPrefix("logout:")
            let token = logout ? String(transfer.dropFirst("logout:".count)) : transfer
            arguments += ["--silent", "--write-out", "\n%{http_code} %{num_connects}\n", "-H", "Authorization: Bearer \(token)"]
            arguments += logout ? ["-X", "POST", "--data", "", harness.baseURL + "/auth/logout"] : [harness.baseURL + "/api/graph/echo"]
        }
        let result = try await curl(arguments)
        var answers: [(status: Int, connects: Int, subject: String?)] = []
        var subject: String?
        for line in result.stdout.split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2, parts[0].count == 3, let status = Int(parts[0]), let connects = Int(parts[1]) {
                answers.append((status, connects, subject))
                subject = nil
            } else if let json = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let headers = json["headers"] as? [String: String], let authorization = headers["authorization"]
            {
                subject = harness.fake.subject(ofAccessToken: String(authorization.dropFirst("Bearer ".count)))
            }
        }
        return answers
    }

    @Test func aConnectionRemembersOnlyAHashAndAnswersEachTokenAsItsOwn() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.paths, transport: .sockets) { harness in
            let alice = try #require(try await harness.logIn(as: "alice")["access_token"] as? String)
            let bob = try #require(try await harness.logIn(as: "bob")["access_token"] as? String)
            let unknown = String(alice.dropLast()) + (alice.hasSuffix("A") ? "B" : "A")
            let answers = try await Self.calls(harness, [alice, alice, bob, unknown, "not a token", alice])
            #expect(answers.map(\.status) == [200, 200, 200, 401, 401, 200], "\(answers)")
            #expect(answers.map(\.subject) == ["alice", "alice", "bob", nil, nil, "alice"])
            #expect(answers.dropFirst().allSatisfy { $0.connects == 0 }, "every call after the first went on the same connection")
        }
    }

    @Test func aSessionEndedWhileItsConnectionRemembersTheTokenIsRefused() async throws {
        try await AuthFlowHarness.run(withGraphAPI: true, upstreamOptions: Self.paths, transport: .sockets) { harness in
            let alice = try #require(try await harness.logIn(as: "alice")["access_token"] as? String)
            let answers = try await Self.calls(harness, [alice, alice, "logout:\(alice)", alice])
            #expect(answers.map(\.status) == [200, 200, 200, 401], "\(answers)")
            #expect(answers.dropFirst().allSatisfy { $0.connects == 0 }, "every call after the first went on the same connection")
        }
    }
}
