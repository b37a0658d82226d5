import Foundation
import Logging
import TGApp
import TGHTTPServer

/// Keeps every log line for assertions (e.g. that no secret was logged).
final class CapturingLogSink: LogSink, @unchecked Sendable {
    // Invariant: `captured` is only accessed with `lock` held.
    private let lock = NSLock()
    private var captured: [String] = []

    func write(line: String) { lock.withLock { captured.append(line) } }

    var lines: [String] { lock.withLock { captured } }
}

func capturingLogger(_ sink: CapturingLogSink, level: Logger.Level = .info) -> Logger {
    Logger(label: "tokengate.test") { label in JSONLogHandler(label: label, level: level, sink: sink) }
}

/// Serves `app` on a free loopback port; the caller shuts the server down.
func serve(_ app: Application) throws -> HTTPServer {
    var configuration = HTTPServer.Configuration()
    configuration.threads = 2
    let server = HTTPServer(configuration: configuration, handler: app.makeHandler())
    try server.start()
    return server
}

extension HTTPServer {
    var baseURL: String { "http://127.0.0.1:\(port)" }
}

func decodeJSON(_ text: String) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
}
