import TGBase

/// A request's header lines as libcurl takes them (`Name: value`, NUL-terminated), checked as
/// they are added: what a caller on a loop builds instead of `HTTPFields` when every call counts
/// (the proxy's cached path). The rules are `HTTPField`'s: a name is a non-empty token, a value
/// has no NUL, CR or LF. `Content-Length` and `Transfer-Encoding` are the client's own (it sets
/// them from the body) and are refused; so is `Expect`, which the client clears.
public struct HeaderLines: Sendable {
    private(set) var storage: [UInt8] = []
    /// A `Content-Type` line is among them.
    private(set) var hasContentType = false
    private(set) var lineCount = 0

    public init() {
        storage.reserveCapacity(512)
    }

    /// Empty, with room for `capacity` bytes of lines.
    public init(capacity: Int) {
        storage.reserveCapacity(capacity)
    }

    /// Appends `Authorization: Bearer <token>` (the token is not copied into a string first);
    /// false (and nothing appended) when the token holds NUL, CR or LF.
    @discardableResult
    public mutating func appendBearer(_ token: String) -> Bool {
        var token = token
        return token.withUTF8 { token in
            guard Self.isSafeValue(token) else { return false }
            appendLine("Authorization: Bearer ", UnsafeBufferPointer(start: nil, count: 0), token)
            return true
        }
    }

    /// Appends `name: value` for a name the caller spells itself (a field of the caller's own,
    /// such as `X-Request-ID`, known to be a token and none of the refused ones); false (and
    /// nothing appended) when the value holds NUL, CR or LF.
    @discardableResult
    public mutating func append(_ name: StaticString, value: String) -> Bool {
        name.withUTF8Buffer { name in
            assert(
                !name.isEmpty && name.allSatisfy(Self.isTokenByte) && !Self.named(name, "content-length")
                    && !Self.named(name, "transfer-encoding") && !Self.named(name, "expect"),
                "a caller's own field name is a token the client does not set itself"
            )
        }
        var value = value
        return value.withUTF8 { value in
            guard Self.isSafeValue(value) else { return false }
            name.withUTF8Buffer { appendLine("", $0, value, separator: ": ") }
            return true
        }
    }

    /// Appends `other`'s lines (lines that are the same on every call, built once).
    public mutating func append(contentsOf other: HeaderLines) {
        storage.append(contentsOf: other.storage)
        lineCount += other.lineCount
        hasContentType = hasContentType || other.hasContentType
    }

    /// No NUL (it would end libcurl's C string) and no CR or LF (a line break smuggles a field).
    private static func isSafeValue(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        !FieldBytes.containsLineBreakOrNUL(UnsafeRawBufferPointer(value))
    }

    /// Appends `name: value`; false (and nothing appended) when it breaks the rules above.
    @discardableResult
    public mutating func append(name: String, value: String) -> Bool {
        // Native strings lend their bytes in place; only others are copied first.
        let appended = name.utf8.withContiguousStorageIfAvailable { name in
            value.utf8.withContiguousStorageIfAvailable { value in append(name: name, value: value) }
        }
        if case .some(.some(let appended)) = appended { return appended }
        var name = name
        var value = value
        return name.withUTF8 { name in value.withUTF8 { value in append(name: name, value: value) } }
    }

    @discardableResult
    public mutating func append(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) -> Bool {
        guard !name.isEmpty, name.allSatisfy(Self.isTokenByte),
            Self.isSafeValue(value),
            !Self.named(name, "content-length"), !Self.named(name, "transfer-encoding"), !Self.named(name, "expect")
        else { return false }
        if Self.named(name, "content-type") { hasContentType = true }
        appendLine("", name, value, separator: ": ")
        return true
    }

    /// `prefix`, `name`, `separator`, `value` and a NUL as one line, assembled on the stack and
    /// copied in once (five appends checked capacity and uniqueness five times, for every line of
    /// every proxied call).
    private mutating func appendLine(
        _ prefix: StaticString,
        _ name: UnsafeBufferPointer<UInt8>,
        _ value: UnsafeBufferPointer<UInt8>,
        separator: StaticString = ""
    ) {
        let total = prefix.utf8CodeUnitCount + name.count + separator.utf8CodeUnitCount + value.count + 1
        withUnsafeTemporaryAllocation(byteCount: total, alignment: 1) { line in
            guard let base = line.baseAddress else { return }
            var at = 0
            func copy(_ source: UnsafeRawPointer?, _ count: Int) {
                if let source, count > 0 { (base + at).copyMemory(from: source, byteCount: count) }
                at += count
            }
            copy(prefix.utf8Start, prefix.utf8CodeUnitCount)
            copy(name.baseAddress, name.count)
            copy(separator.utf8Start, separator.utf8CodeUnitCount)
            copy(value.baseAddress, value.count)
            line[at] = 0
            storage.append(contentsOf: UnsafeRawBufferPointer(line))
        }
        lineCount += 1
    }

    /// Each line as a C string.
    func forEachLine(_ body: (UnsafePointer<CChar>) -> Void) {
        storage.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { text in
                guard let base = text.baseAddress else { return }
                var start = 0
                for index in 0..<text.count where text[index] == 0 {
                    body(base + start)
                    start = index + 1
                }
            }
        }
    }

    /// tchar (RFC 9110 §5.6.2), one bit per byte (as `RawHeaderFields.isTokenByte` in the server).
    static func isTokenByte(_ byte: UInt8) -> Bool {
        let low: UInt64 = 0x03FF_6CFA_0000_0000  // bytes 0-63
        let high: UInt64 = 0x57FF_FFFF_C7FF_FFFE  // bytes 64-127
        return byte < 64 ? low >> byte & 1 == 1 : byte < 128 && high >> (byte - 64) & 1 == 1
    }

    static func named(_ bytes: UnsafeBufferPointer<UInt8>, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        for index in 0..<bytes.count {
            let byte = bytes[index]
            if ((0x41...0x5A).contains(byte) ? byte | 0x20 : byte) != lowercase.utf8Start[index] { return false }
        }
        return true
    }
}

/// A request for ``HTTPClient/startOnLoop(_:body:headTimeout:idleTimeout:wholeBodyUpTo:)``: the
/// method, the URL's parts (checked like any request's) and the header lines.
public struct LoopRequest: ~Copyable, Sendable {
    public var method: String
    public var scheme: String
    public var authority: String
    /// Path and query, as sent.
    public var path: String
    public var headers: HeaderLines
    /// Lines sent after `headers`, shared with other requests (an API's access token): linked
    /// to, not copied, so a call in flight does not keep its own copy of them.
    public var sharedHeaders: SharedHeaderLines?

    public init(method: String, scheme: String, authority: String, path: String, headers: HeaderLines, sharedHeaders: SharedHeaderLines? = nil) {
        self.method = method
        self.scheme = scheme
        self.authority = authority
        self.path = path
        self.headers = headers
        self.sharedHeaders = sharedHeaders
    }
}
