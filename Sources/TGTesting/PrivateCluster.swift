import Foundation

/// A PostgreSQL cluster of this test's own (so restarting it disturbs no other suite), driven by
/// the project's scripts/pg.sh.
public struct PrivateCluster: Sendable {
    public let directory: String
    public let port: Int
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../scripts/pg.sh").standardized.path

    /// Starts a new cluster on a random port below Linux's ephemeral range (32768 and up), where
    /// no client socket of a concurrently running test can be holding it; tries another port if
    /// one is taken all the same.
    public static func start() async throws -> (PrivateCluster, String) {
        var lastError: any Error = ScriptFailed(command: "start")
        for _ in 0..<3 {
            let base = FileManager.default.temporaryDirectory.appendingPathComponent("tg-restart-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            let cluster = PrivateCluster(directory: base + "/pg", port: 20000 + Int.random(in: 0..<10000))
            do {
                let url = try await cluster.run("start").trimmingCharacters(in: .whitespacesAndNewlines)
                return (cluster, url)
            } catch {
                lastError = error
                _ = try? await cluster.run("stop")
                cluster.remove()
            }
        }
        throw lastError
    }

    /// Runs `body` with a new cluster and its URL; the cluster is stopped and removed afterwards,
    /// whether `body` succeeded or not.
    public static func with(_ body: (PrivateCluster, String) async throws -> Void) async throws {
        let (cluster, url) = try await start()
        do {
            try await body(cluster, url)
        } catch {
            _ = try? await cluster.run("stop")
            cluster.remove()
            throw error
        }
        try await cluster.run("stop")
        cluster.remove()
    }

    /// `scripts/pg.sh <command>` for this cluster (start, stop); its output.
    @discardableResult
    public func run(_ command: String) async throws -> String {
        let (directory, port) = (self.directory, self.port)
        return try await offPool {
            // Output goes to a file, not a pipe: the server daemon would inherit the pipe and keep it open.
            let outputPath = directory + ".out"
            _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
            let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = [PrivateCluster.script, command, directory, String(port)]
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            try output.close()
            let data = FileManager.default.contents(atPath: outputPath) ?? Data()
            guard process.terminationStatus == 0 else { throw ScriptFailed(command: command) }
            return String(decoding: data, as: UTF8.self)
        }
    }

    public func remove() {
        try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent)
    }
}

public struct ScriptFailed: Error {
    public var command: String
}
