import Foundation
public import Logging
import Synchronization

/// Where log lines go: standard output by default, a capturing sink in tests.
public protocol LogSink: Sendable {
    /// Writes one complete line (without its newline).
    func write(line: String)
    /// Writes complete lines, each ending with a newline, as one piece if the sink can
    /// (``AccessLog``'s buffers). By default, line by line through ``write(line:)``.
    func write(lines: UnsafeRawBufferPointer)
}

extension LogSink {
    public func write(lines: UnsafeRawBufferPointer) {
        for line in lines.split(separator: UInt8(ascii: "\n")) {
            write(line: String(decoding: line, as: UTF8.self))
        }
    }
}

/// Writes each line, or each batch of whole lines, to a file descriptor with one `write(2)` (more
/// only if the descriptor takes part of it), one writer of the process at a time, so lines never
/// interleave; nothing waits in a user-space buffer of its own.
public struct FileDescriptorLogSink: LogSink {
    public let fileDescriptor: Int32
    /// One write of the process at a time: a pipe may split a write larger than `PIPE_BUF`.
    private static let writing = Mutex(())

    public init(fileDescriptor: Int32 = 1) { self.fileDescriptor = fileDescriptor }

    public func write(line: String) {
        var bytes = Array(line.utf8)
        bytes.append(UInt8(ascii: "\n"))
        bytes.withUnsafeBytes { write(lines: $0) }
    }

    public func write(lines raw: UnsafeRawBufferPointer) {
        guard raw.count > 0 else { return }
        Self.writing.withLock { _ in
            var offset = 0
            while offset < raw.count {
                let written = Foundation.write(fileDescriptor, raw.baseAddress! + offset, raw.count - offset)
                if written < 0, errno == EINTR { continue }
                if written <= 0 { return }
                offset += written
            }
        }
    }
}

/// A swift-log handler printing one JSON object per line:
/// `{"time":…,"level":…,"label":…,"message":…,<metadata>}`.
///
/// Metadata whose key names a credential (`token`, `code`, `secret`, `password`, `cookie`,
/// `authorization`, `verifier`, `assertion`) is printed as `<redacted>` whatever its value: the
/// code never logs such values, and this catches a mistake before it reaches a log store.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public var logLevel: Logger.Level
    let label: String
    let sink: any LogSink

    public init(label: String, level: Logger.Level = .info, sink: any LogSink = FileDescriptorLogSink()) {
        self.label = label
        self.logLevel = level
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        var line = "{\"time\":\"\(Self.timestamp())\",\"level\":\"\(event.level.rawValue)\",\"label\":"
        Self.appendQuoted(label, to: &line)
        line += ",\"message\":"
        Self.appendQuoted(event.message.description, to: &line)
        for key in merged.keys.sorted() where !["time", "level", "label", "message"].contains(key) {
            line += ","
            Self.appendQuoted(key, to: &line)
            line += ":"
            Self.append(Self.isSensitive(key) ? .string("<redacted>") : merged[key]!, to: &line)
        }
        line += "}"
        sink.write(line: line)
    }

    static let sensitiveWords = ["token", "code", "secret", "password", "cookie", "authorization", "verifier", "assertion"]

    static func isSensitive(_ key: String) -> Bool {
        let lowered = key.lowercased()
        // `status_code` and the like describe a result, not a credential.
        if lowered.hasSuffix("status") || lowered == "status_code" || lowered == "error_code" { return false }
        return sensitiveWords.contains { lowered.contains($0) }
    }

    private static func append(_ value: Logger.MetadataValue, to line: inout String) {
        switch value {
        case .string(let text): appendQuoted(text, to: &line)
        case .stringConvertible(let convertible):
            if let number = convertible as? any BinaryInteger {
                line += "\(number)"
            } else if let number = convertible as? Double, number.isFinite {
                line += "\(number)"
            } else if let flag = convertible as? Bool {
                line += flag ? "true" : "false"
            } else {
                appendQuoted(convertible.description, to: &line)
            }
        case .array(let values):
            line += "["
            for (index, element) in values.enumerated() {
                if index > 0 { line += "," }
                append(element, to: &line)
            }
            line += "]"
        case .dictionary(let entries):
            line += "{"
            for (index, key) in entries.keys.sorted().enumerated() {
                if index > 0 { line += "," }
                appendQuoted(key, to: &line)
                line += ":"
                append(isSensitive(key) ? .string("<redacted>") : entries[key]!, to: &line)
            }
            line += "}"
        }
    }

    /// Appends `text` as a JSON string literal (RFC 8259 escaping).
    static func appendQuoted(_ text: String, to line: inout String) {
        line.unicodeScalars.append("\"")
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": line += "\\\""
            case "\\": line += "\\\\"
            case "\n": line += "\\n"
            case "\r": line += "\\r"
            case "\t": line += "\\t"
            case _ where scalar.value < 0x20:
                line += "\\u00" + String(scalar.value, radix: 16).leftPadded(to: 2)
            default: line.unicodeScalars.append(scalar)
            }
        }
        line.unicodeScalars.append("\"")
    }

    private static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let millis = now.tv_nsec / 1_000_000
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
            parts.tm_year + 1900,
            parts.tm_mon + 1,
            parts.tm_mday,
            parts.tm_hour,
            parts.tm_min,
            parts.tm_sec,
            millis
        )
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
