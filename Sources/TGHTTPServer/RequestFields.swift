public import HTTPTypes

#if canImport(Glibc)
import Glibc
import TGBase
#endif

/// A request's header fields as bytes, in the order received: what the server keeps of a head
/// instead of an `HTTPFields` (building one checks, lowercases and copies every field of every
/// request, and most requests read two fields at most). ``httpFields`` builds one on demand.
///
/// The rules are `HTTPField`'s, applied as fields are added: a field whose name is not a token
/// (RFC 9110 §5.6.2) is dropped; a value loses leading and trailing spaces and tabs, and any other
/// control byte in it becomes a space. So a name or value never holds NUL, CR or LF.
public struct RequestFields: Sendable, Equatable {
    /// `name\0value\0` per field; names as sent.
    private var storage: [UInt8] = []
    public private(set) var count = 0
    /// A `Connection` field is among them: noted as fields are added, so that the proxy, which
    /// drops the fields it names, asks no walk of the requests that have none (most).
    public private(set) var hasConnectionField = false
    /// A `Cookie` field is among them (libmicrohttpd parses each cookie into a record of its own).
    public private(set) var hasCookieField = false
    /// Where the first `Authorization`, `X-Request-ID` and `Transfer-Encoding` start in `storage`,
    /// noted as fields are added, so the names read on every call are found without a walk: 0 none, `offset + 1`,
    /// or ``walkForIt`` for a field too far into a very large head. Two bytes each, in the
    /// padding after the flags: a request's context keeps within its size class
    /// (``RequestContext``).
    private var firstAuthorization: UInt16 = 0
    private var firstRequestID: UInt16 = 0
    private var firstTransferEncoding: UInt16 = 0
    private static let walkForIt = UInt16.max

    public init() {}

    /// The fields of `fields`, in order.
    public init(_ fields: HTTPFields) {
        for field in fields {
            var name = field.name.rawName
            var value = field.value
            _ = name.withUTF8 { name in value.withUTF8 { value in append(name: UnsafeRawBufferPointer(name), value: UnsafeRawBufferPointer(value)) } }
        }
    }

    public var isEmpty: Bool { count == 0 }

    /// Appends a field under the rules above; false (and nothing appended) for a bad name.
    @discardableResult
    mutating func append(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool {
        guard !name.isEmpty, name.allSatisfy(RawHeaderFields.isTokenByte) else { return false }
        var start = value.startIndex
        var end = value.endIndex
        while start < end, value[start] == 0x20 || value[start] == 0x09 { start += 1 }
        while end > start, value[end - 1] == 0x20 || value[end - 1] == 0x09 { end -= 1 }
        // Room for a typical head at once (growing field by field would copy each time): 224
        // bytes, with the array's header one 256-byte allocation (a size class; the fields live
        // as long as their call, thousands at once under a burst).
        if storage.capacity == 0 { storage.reserveCapacity(224) }
        let trimmed = UnsafeRawBufferPointer(rebasing: value[start..<end])
        let mark = storage.count < Int(Self.walkForIt) - 1 ? UInt16(storage.count + 1) : Self.walkForIt
        if FieldBytes.containsControl(trimmed) {
            storage.appendField(name, separator: "\0", trimmed) { bytes in
                for index in bytes.indices where FieldBytes.isControl(bytes[index]) {
                    bytes[index] = 0x20
                }
            }
        } else {
            storage.appendField(name, separator: "\0", trimmed)
        }
        count += 1
        note(name, mark)
        return true
    }

    /// Notes what the fields above keep of a field (`mark`: its place): the flags, and the first
    /// field of each name found without a walk by ``first(_:)``, ``withFirst(_:_:)`` and
    /// ``contains(_:)`` (what every request, its id, every proxied call, its bearer token, and
    /// every request's end, a chunked body, reads). By length first: most names are none of them.
    private mutating func note(_ name: UnsafeRawBufferPointer, _ mark: UInt16) {
        switch name.count {
        case 6 where Self.equalsIgnoringCase(name, "cookie"): hasCookieField = true
        case 10 where Self.equalsIgnoringCase(name, "connection"): hasConnectionField = true
        case 13 where firstAuthorization == 0 && Self.equalsIgnoringCase(name, "authorization"): firstAuthorization = mark
        case 12 where firstRequestID == 0 && Self.equalsIgnoringCase(name, "x-request-id"): firstRequestID = mark
        case 17 where firstTransferEncoding == 0 && Self.equalsIgnoringCase(name, "transfer-encoding"): firstTransferEncoding = mark
        default: break
        }
    }

    /// For an indexed name: where its first field starts (nil: there is none); `.none` for any
    /// other name, or one whose first field lies too far in (the fields must be walked).
    private func indexedStart(_ name: HTTPField.Name) -> Int?? {
        // By length first: most names asked for are told apart without comparing strings.
        let mark: UInt16
        let canonical = name.canonicalName
        switch canonical.utf8.count {
        case 13 where canonical == "authorization": mark = firstAuthorization
        case 12 where canonical == "x-request-id": mark = firstRequestID
        case 17 where canonical == "transfer-encoding": mark = firstTransferEncoding
        default: return .none
        }
        if mark == Self.walkForIt { return .none }
        return .some(mark == 0 ? nil : Int(mark) - 1)
    }

    /// The value of the field starting at `start` in place.
    private func withValue<R>(at start: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try storage.withUnsafeBufferPointer { bytes in
            // A noted field lies within the bytes, its name and value each ending in a NUL.
            let base = bytes.baseAddress!
            let text = UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self)
            let valueStart = start + strlen(text + start) + 1
            return try body(UnsafeBufferPointer(start: base + valueStart, count: strlen(text + valueStart)))
        }
    }

    /// Each field's name (as sent) and value, in order; the buffers live for the call only.
    public func forEachField(_ body: (_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) -> Void) {
        walk { name, value in
            body(name, value)
            return true
        }
    }

    /// The value of the first field named `name`, as `HTTPField.value` reads it.
    public func first(_ name: HTTPField.Name) -> String? {
        if case .some(let start) = indexedStart(name) {
            return start.map { withValue(at: $0) { String(decoding: $0, as: UTF8.self) } }
        }
        var found: String?
        forValues(of: name) { value in
            found = String(decoding: value, as: UTF8.self)
            return false
        }
        return found
    }

    /// `body` given the first field named `name`'s value in place; false when there is none. For
    /// a value read on every call, such as the proxied call's `Authorization`, without a string
    /// (not generic: the caller keeps what it reads, without a generic call across modules).
    @discardableResult
    public func withFirst(_ name: HTTPField.Name, _ body: (UnsafeBufferPointer<UInt8>) throws -> Void) rethrows -> Bool {
        if case .some(let start) = indexedStart(name) {
            guard let start else { return false }
            try withValue(at: start, body)
            return true
        }
        var found = false
        try forValues(of: name) { value in
            found = true
            try body(value)
            return false
        }
        return found
    }

    /// Whether a field named `name` is there.
    public func contains(_ name: HTTPField.Name) -> Bool {
        if case .some(let start) = indexedStart(name) { return start != nil }
        var found = false
        forValues(of: name) { _ in
            found = true
            return false
        }
        return found
    }

    /// The values of every field named `name`, in order.
    public func values(_ name: HTTPField.Name) -> [String] {
        var values: [String] = []
        forValues(of: name) { value in
            values.append(String(decoding: value, as: UTF8.self))
            return true
        }
        return values
    }

    /// The fields as `HTTPFields` (built on each call).
    public var httpFields: HTTPFields {
        var fields = HTTPFields()
        fields.reserveCapacity(count)
        forEachField { name, value in
            guard let name = HTTPField.Name(String(decoding: name, as: UTF8.self)) else { return }
            fields.append(HTTPField(name: name, value: String(decoding: value, as: UTF8.self)))
        }
        return fields
    }

    /// The values of the fields named `name`, in order, until `body` returns false.
    private func forValues(of name: HTTPField.Name, _ body: (UnsafeBufferPointer<UInt8>) throws -> Bool) rethrows {
        try name.canonicalName.withUTF8Bytes { canonical in
            try walk { fieldName, value in try Self.equalsIgnoringCase(fieldName, canonical) ? body(value) : true }
        }
    }

    /// Each field's name and value, in order, until `body` returns false.
    private func walk(_ body: (_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) throws -> Bool) rethrows {
        try storage.withUnsafeBufferPointer { bytes in
            // Every name and value ends in a NUL (and holds none): `strlen` finds each end.
            guard let base = bytes.baseAddress else { return }
            let text = UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self)
            var index = 0
            while index < bytes.count {
                let nameLength = strlen(text + index)
                let name = UnsafeBufferPointer(start: base + index, count: nameLength)
                index += nameLength + 1
                let valueLength = strlen(text + index)
                let value = UnsafeBufferPointer(start: base + index, count: valueLength)
                index += valueLength + 1
                guard try body(name, value) else { return }
            }
        }
    }

    /// `bytes` spell `lowercase` (ASCII lowercase) in any case.
    static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ lowercase: StaticString) -> Bool {
        let start = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
        return RawHeaderFields.equalsIgnoringCase(UnsafeBufferPointer(start: start, count: bytes.count), lowercase)
    }

    /// `bytes` spell `lowercase` (ASCII lowercase) in any case.
    static func equalsIgnoringCase(_ bytes: UnsafeBufferPointer<UInt8>, _ lowercase: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count == lowercase.count else { return false }
        for index in 0..<bytes.count {
            let byte = bytes[index]
            if ((0x41...0x5A).contains(byte) ? byte | 0x20 : byte) != lowercase[index] { return false }
        }
        return true
    }
}
