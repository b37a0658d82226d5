import Foundation
import TGApp
import TGAppTesting
import TGAuth
import TGCrypto
import TGPostgres
import TGStore
import TGTesting
import Testing

/// `tokengate keys rotate` re-encrypts everything under the newest key while sessions go on.
@Suite struct KeyRotationTests {
    static let k1 = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
    static let k2 = "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY="

    func writeConfiguration(_ h: AuthFlowHarness, keys: String, current: String) throws -> String {
        let text = """
            database: { url: "\(h.databaseURL)" }
            encryption: { current_key_id: \(current), keys: [\(keys)] }
            """
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tg-keys-\(UUID().uuidString).yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func rotateReencryptsGrantsAndPendingLoginsUnderTheNewKeyWithoutLoggingAnyoneOut() async throws {
        try await AuthFlowHarness.run { h in
            let tokens = try await h.logIn(as: "alice")
            _ = try await h.authorizationURL(AuthFlowHarness.AppLogin())  // a pending login under k1
            let before = try await h.database.query("SELECT refresh_token, account_id FROM upstream_grants").first!
            let account = try before.decode(UUID.self, "account_id")
            let both = try writeConfiguration(h, keys: "{ id: k1, secret: \(Self.k1) }, { id: k2, secret: \(Self.k2) }", current: "k2")
            defer { try? FileManager.default.removeItem(atPath: both) }
            let result = try await TokenGateProcess.run(["keys", "rotate", "--config", both])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("upstream_grants=1"))
            #expect(result.stdout.contains("pending_logins=1"))
            #expect(result.stdout.contains("remaining=0"))
            #expect(try await h.count("SELECT count(*) AS n FROM upstream_grants WHERE key_id = 'k2'") == 1)
            #expect(try await h.count("SELECT count(*) AS n FROM pending_logins WHERE key_id = 'k2'") == 1)
            // The grant now opens with k2 alone and is the same provider token as before.
            let after = try #require(try await h.database.query("SELECT refresh_token FROM upstream_grants").first)
            let onlyK2 = TokenVault(
                keyRing: try KeyRing(currentKeyID: "k2", keys: ["k2": SymmetricKey(base64URL: Self.k2.replacingOccurrences(of: "=", with: ""))])
            )
            let context = "grant:\(account.uuidString.lowercased())"
            let upstream = try onlyK2.open(try after.decode(SealedBlob.self, "refresh_token"), context: context)
            #expect(upstream == (try h.vault().open(try before.decode(SealedBlob.self, "refresh_token"), context: context)))
            #expect(h.fake.isRefreshTokenActive(upstream))
            // TokenGate's own tokens are hashes: the session goes on.
            #expect(try await h.refresh(try #require(tokens["refresh_token"] as? String)).status == 200)
            // Running it again finds nothing to do.
            let again = try await TokenGateProcess.run(["keys", "rotate", "--config", both])
            #expect(again.stdout.contains("upstream_grants=0"))
        }
    }

    @Test func sweepCommandReportsWhatItRemoved() async throws {
        try await AuthFlowHarness.run { h in
            _ = try await h.authorizationURL(AuthFlowHarness.AppLogin())
            try await h.database.query("UPDATE pending_logins SET expires_at = now() - interval '1 minute'")
            let path = try writeConfiguration(h, keys: "{ id: k1, secret: \(Self.k1) }", current: "k1")
            defer { try? FileManager.default.removeItem(atPath: path) }
            let result = try await TokenGateProcess.run(["sweep", "--config", path])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("pending_logins=1"))
            #expect(try await h.count("SELECT count(*) AS n FROM pending_logins") == 0)
        }
    }
}
