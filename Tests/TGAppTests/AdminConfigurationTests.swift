import Foundation
import TGApp
import Testing

/// The admin listener's configuration: the `admin` section, its environment overrides, what
/// `check-config` refuses and what it warns about.
@Suite struct AdminConfigurationTests {
    static let database = #"database: { url: "postgresql://127.0.0.1:1/unused" }"#

    static func problems(_ text: String, environment: [String: String] = [:]) throws -> [String] {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tg-admin-\(UUID().uuidString).yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            _ = try ConfigurationLoader.load(path: path, environment: environment)
            return []
        } catch {
            return error.problems.map { "\($0.key): \($0.message)" }
        }
    }

    @Test func theAdminListenerDefaultsToLoopbackPort9090WithoutAWarning() throws {
        let configuration = try AuthFlowHarness.loadConfiguration(Self.database)
        #expect(configuration.admin.host == "127.0.0.1")
        #expect(configuration.admin.port == 9090)
        #expect(ConfigurationLoader.warnings(configuration).isEmpty)
    }

    @Test func theAdminSectionTakesTOKENGATE_ADMINOverridesLikeTheServerSection() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tg-admin-\(UUID().uuidString).yaml").path
        try "\(Self.database)\nadmin: { host: 127.0.0.1, port: 9100 }".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = try ConfigurationLoader.load(
            path: path,
            environment: ["TOKENGATE_ADMIN_HOST": "::1", "TOKENGATE_ADMIN_PORT": "9200"]
        )
        #expect(configuration.admin.host == "::1")
        #expect(configuration.admin.port == 9200)
        // An unknown key, in the file or the environment, is refused like one of `server`.
        #expect(
            try Self.problems("\(Self.database)\nadmin: { bind: x }", environment: ["TOKENGATE_ADMIN_PATH": "/m"]) == [
                "admin.bind: unknown key (known: host, port)", "TOKENGATE_ADMIN_PATH: unknown setting admin.path",
            ]
        )
    }

    @Test func checkConfigRefusesAnAdminPortOutOfRangeAHostNameAndThePublicAddress() throws {
        #expect(
            try Self.problems("\(Self.database)\nadmin: { host: localhost, port: 70000 }") == [
                "admin.host: must be an IPv4 or IPv6 address", "admin.port: must be between 0 (any free port) and 65535",
            ]
        )
        #expect(try Self.problems("\(Self.database)\nadmin: { port: -1 }") == ["admin.port: must be between 0 (any free port) and 65535"])
        let clash = "admin.port: must differ from server.port: the admin listener needs an address of its own"
        // The public host and port, or the same port on a wildcard address on either side.
        for (server, admin) in [("127.0.0.1", "127.0.0.1"), ("127.0.0.1", "0.0.0.0"), ("0.0.0.0", "127.0.0.1"), ("::", "::1")] {
            let problems = try Self.problems(
                """
                \(Self.database)
                server: { host: "\(server)", port: 8080, public_base_url: "https://auth.example.com" }
                admin: { host: "\(admin)", port: 8080 }
                """
            )
            #expect(problems.count == 1 && problems[0].hasPrefix(clash), "\(server) and \(admin): \(problems)")
        }
        // Another port of the same host, the same port on another address, and port 0 are fine.
        #expect(try Self.problems("\(Self.database)\nserver: { port: 8080 }\nadmin: { port: 8081 }") == [])
        #expect(try Self.problems("\(Self.database)\nserver: { host: 127.0.0.1, port: 8080 }\nadmin: { host: 127.0.0.2, port: 8080 }") == [])
        #expect(try Self.problems("\(Self.database)\nadmin: { port: 0 }") == [])
    }

    /// Allowed (a container's Prometheus scrapes the pod's address) but said: `check-config`
    /// prints the warning on standard error, after an exit code 0.
    @Test func aNonLoopbackAdminHostIsAcceptedWithAWarningOnStandardError() async throws {
        let configuration = try AuthFlowHarness.loadConfiguration("\(Self.database)\nadmin: { host: 0.0.0.0 }")
        #expect(ConfigurationLoader.warnings(configuration).map(\.key) == ["admin.host"])
        let result = try await TokenGateProcess.run(
            ["check-config"],
            environment: ["TOKENGATE_DATABASE_URL": "postgresql://127.0.0.1/db", "TOKENGATE_ADMIN_HOST": "0.0.0.0"]
        )
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("warning: admin.host: 0.0.0.0 is not a loopback address"))
        #expect(result.stdout.contains(#""host" : "0.0.0.0""#))
        let quiet = try await TokenGateProcess.run(["check-config"], environment: ["TOKENGATE_DATABASE_URL": "postgresql://127.0.0.1/db"])
        #expect(quiet.status == 0 && !quiet.stderr.contains("warning"))
    }
}
