import TGBase

/// Response header fields kept as checked bytes (`name\0value\0` pairs) and handed to
/// libmicrohttpd as they are: what a proxy relays from an upstream's answer without building an
/// `HTTPFields` (every field of every proxied answer comes through here).
///
/// The rules are `HTTPField`'s: a name is a non-empty token (RFC 9110 §5.1), a value has no NUL,
/// CR or LF and loses leading and trailing spaces and tabs. `Content-Length`,
/// `Transfer-Encoding` and `Connection` are the server's own and are refused, as
/// ``ServerResponse/headerFields`` ignores them.
public struct RawHeaderFields: Sendable, Equatable {
    private(set) var storage: [UInt8] = []
    /// How many fields there are.
    public private(set) var count = 0

    public init() {}

    public var isEmpty: Bool { storage.isEmpty }

    /// The fields' size as `Name: value` lines (each is kept as name, NUL, value, NUL).
    public var lineBytes: Int { storage.count + 2 * count }

    /// Appends a field; false (and nothing appended) when it breaks the rules above.
    @discardableResult
    public mutating func append(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) -> Bool {
        guard !name.isEmpty, Self.isToken(name), !Self.isManaged(name) else { return false }
        var start = value.startIndex
        var end = value.endIndex
        while start < end, value[start] == 0x20 || value[start] == 0x09 { start += 1 }
        while end > start, value[end - 1] == 0x20 || value[end - 1] == 0x09 { end -= 1 }
        let trimmed = UnsafeBufferPointer(rebasing: value[start..<end])
        guard Self.isSafeValue(trimmed) else { return false }
        // One buffer for a typical answer's fields (an exact reserve per field would copy each time).
        if storage.capacity == 0 { storage.reserveCapacity(512) }
        storage.appendField(UnsafeRawBufferPointer(name), separator: "\0", UnsafeRawBufferPointer(trimmed))
        count += 1
        return true
    }

    /// Appends a field given as strings (same rules).
    @discardableResult
    public mutating func append(name: String, value: String) -> Bool {
        var name = name
        var value = value
        return name.withUTF8 { name in value.withUTF8 { value in append(name: name, value: value) } }
    }

    /// Each field as NUL-terminated name and value.
    public func forEachField(_ body: (UnsafePointer<CChar>, UnsafePointer<CChar>) -> Void) {
        storage.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { text in
                guard let base = text.baseAddress else { return }
                var index = 0
                while index < text.count {
                    let name = index
                    while text[index] != 0 { index += 1 }
                    index += 1
                    let value = index
                    while text[index] != 0 { index += 1 }
                    index += 1
                    body(base + name, base + value)
                }
            }
        }
    }

    /// Every byte a tchar (a plain loop: every relayed field's name is checked here).
    static func isToken(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        while index < name.count {
            guard isTokenByte(name[index]) else { return false }
            index += 1
        }
        return true
    }

    /// No NUL, CR or LF (eight bytes at a time).
    static func isSafeValue(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        !FieldBytes.containsLineBreakOrNUL(UnsafeRawBufferPointer(value))
    }

    /// tchar: `!#$%&'*+-.^_`|~`, digits and letters.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        // RFC 9110 §5.6.2 tchar: digits, letters and ! # $ % & ' * + - . ^ _ ` | ~, as one bit per
        // byte (every field name of every request and answer is checked here).
        let low: UInt64 = 0x03FF_6CFA_0000_0000  // bytes 0-63
        let high: UInt64 = 0x57FF_FFFF_C7FF_FFFE  // bytes 64-127
        return byte < 64 ? low >> byte & 1 == 1 : byte < 128 && high >> (byte - 64) & 1 == 1
    }

    static func isManaged(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        equalsIgnoringCase(name, "content-length") || equalsIgnoringCase(name, "transfer-encoding")
            || equalsIgnoringCase(name, "connection")
    }

    /// `bytes` spell `lowercase` (ASCII, lowercase) in any case.
    public static func equalsIgnoringCase(_ bytes: UnsafeBufferPointer<UInt8>, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        let expected = lowercase.utf8Start
        for index in 0..<bytes.count {
            let byte = bytes[index]
            let folded = (0x41...0x5A).contains(byte) ? byte | 0x20 : byte
            if folded != expected[index] { return false }
        }
        return true
    }
}
