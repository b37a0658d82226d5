public import Foundation
import TGBase

/// A statement and its parameters. Built by string interpolation, where every interpolated value
/// becomes a bound parameter (`$1`, `$2`, …), never SQL text:
///
///     let query: PostgresQuery = "SELECT id FROM accounts WHERE subject = \(subject) AND provider = \(provider)"
///
/// SQL that is not a literal (identifiers, generated statements) needs ``init(unsafeSQL:binds:)``:
/// danger wears its name.
public struct PostgresQuery: Sendable, ExpressibleByStringInterpolation {
    public private(set) var sql: String
    public private(set) var binds: [PostgresBind]

    public init(stringLiteral value: String) {
        sql = value
        binds = []
    }

    public init(stringInterpolation: StringInterpolation) {
        sql = stringInterpolation.sql
        binds = stringInterpolation.binds
    }

    /// SQL taken as is. Never build `sql` from input; bind values instead.
    public init(unsafeSQL sql: String, binds: [PostgresBind] = []) {
        self.sql = sql
        self.binds = binds
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        var sql = ""
        var binds: [PostgresBind] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            sql.reserveCapacity(literalCapacity + interpolationCount * 3)
            binds.reserveCapacity(interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) { sql += literal }

        public mutating func appendInterpolation<Value: PostgresEncodable>(_ value: Value) {
            binds.append(PostgresBind(value))
            sql += "$\(binds.count)"
        }

        /// Splices another query (a condition, a subquery) in, its parameters renumbered after
        /// this one's: still nothing but bound values from the outside.
        public mutating func appendInterpolation(fragment: PostgresQuery) {
            let offset = binds.count
            binds += fragment.binds
            var bytes = Array(fragment.sql.utf8)[...]
            while let dollar = bytes.firstIndex(of: UInt8(ascii: "$")) {
                sql += String(decoding: bytes[..<dollar], as: UTF8.self)
                let digits = bytes[(dollar + 1)...].prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
                if let number = Int(String(decoding: digits, as: UTF8.self)) {
                    sql += "$\(number + offset)"
                } else {
                    sql += "$"
                }
                bytes = bytes[(dollar + 1 + digits.count)...]
            }
            sql += String(decoding: bytes, as: UTF8.self)
        }

        public mutating func appendInterpolation<Value: PostgresEncodable>(_ value: Value?) {
            binds.append(value.map(PostgresBind.init) ?? PostgresBind(null: Value.postgresTypeOID))
            sql += "$\(binds.count)"
        }
    }
}

/// One bound parameter in PostgreSQL's text format, with its type.
public struct PostgresBind: Sendable {
    public var text: String?
    public var typeOID: UInt32

    public init<Value: PostgresEncodable>(_ value: Value) {
        text = value.postgresText
        typeOID = Value.postgresTypeOID
    }

    public init(null typeOID: UInt32) {
        text = nil
        self.typeOID = typeOID
    }
}

/// A Swift value that can be bound as a parameter (in text format).
public protocol PostgresEncodable: Sendable {
    static var postgresTypeOID: UInt32 { get }
    var postgresText: String { get }
}

extension String: PostgresEncodable {
    public static var postgresTypeOID: UInt32 { 25 }  // text
    public var postgresText: String { self }
}

extension Int: PostgresEncodable {
    public static var postgresTypeOID: UInt32 { 20 }  // int8
    public var postgresText: String { String(self) }
}

extension Int64: PostgresEncodable {
    public static var postgresTypeOID: UInt32 { 20 }  // int8
    public var postgresText: String { String(self) }
}

extension Int32: PostgresEncodable {
    public static var postgresTypeOID: UInt32 { 23 }  // int4
    public var postgresText: String { String(self) }
}

extension Bool: PostgresEncodable {
    public static var postgresTypeOID: UInt32 { 16 }  // bool
    public var postgresText: String { self ? "t" : "f" }
}

extension Double: PostgresEncodable {
    public static var postgresTypeOID: UInt32 { 701 }  // float8
    public var postgresText: String {
        if isNaN { return "NaN" }
        if isInfinite { return self > 0 ? "Infinity" : "-Infinity" }
        return String(self)
    }
}

extension UUID: PostgresEncodable {
    public static var postgresTypeOID: UInt32 { 2950 }  // uuid
    public var postgresText: String { uuidString.lowercased() }
}

extension Date: PostgresEncodable {
    public static var postgresTypeOID: UInt32 { 1184 }  // timestamptz
    /// Microseconds since the epoch, rendered in UTC as `YYYY-MM-DD HH:MM:SS.ffffff+00`.
    public var postgresText: String { PostgresTimestamp.format(self) }
}

/// `bytea`, sent in hex format (`\x…`).
public struct PostgresBytes: PostgresEncodable, Equatable, Hashable {
    public var bytes: [UInt8]
    public init(_ bytes: [UInt8]) { self.bytes = bytes }
    public static var postgresTypeOID: UInt32 { 17 }  // bytea

    // The bytes in one piece: a token hash is a cache key looked up on every proxied call, and
    // the synthesized conformance would feed the hasher byte by byte.
    public func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    public static func == (lhs: PostgresBytes, rhs: PostgresBytes) -> Bool {
        lhs.bytes.withUnsafeBytes { left in
            rhs.bytes.withUnsafeBytes { right in
                left.count == right.count && (left.isEmpty || memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0)
            }
        }
    }

    public var postgresText: String {
        "\\x" + Hex.lowercase(bytes)
    }
}

/// `text[]`, as an array literal with every element quoted.
public struct PostgresTextArray: PostgresEncodable, Equatable {
    public var elements: [String]
    public init(_ elements: [String]) { self.elements = elements }
    public static var postgresTypeOID: UInt32 { 1009 }  // text[]
    public var postgresText: String {
        let quoted = elements.map { element in
            "\"" + element.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        return "{" + quoted.joined(separator: ",") + "}"
    }
}

/// `uuid[]` (for `= ANY(…)`).
extension Array: PostgresEncodable where Element == UUID {
    public static var postgresTypeOID: UInt32 { 2951 }  // uuid[]
    public var postgresText: String { "{" + map { $0.uuidString.lowercased() }.joined(separator: ",") + "}" }
}
