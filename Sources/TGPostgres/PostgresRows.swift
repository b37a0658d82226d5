public import Foundation

/// The rows a statement returned, in PostgreSQL's text format, plus the affected-row count.
public struct PostgresRows: Sendable {
    public let columns: [String]
    let values: [[String?]]
    /// Rows affected by INSERT/UPDATE/DELETE (or returned by SELECT).
    public let affectedRows: Int

    init(columns: [String], values: [[String?]], affectedRows: Int) {
        self.columns = columns
        self.values = values
        self.affectedRows = affectedRows
    }

    public var count: Int { values.count }
    public var isEmpty: Bool { values.isEmpty }

    public subscript(index: Int) -> PostgresRow { PostgresRow(columns: columns, values: values[index]) }

    public var first: PostgresRow? { values.isEmpty ? nil : self[0] }

    public var rows: [PostgresRow] { values.map { PostgresRow(columns: columns, values: $0) } }
}

/// One row. Values are decoded on demand by column name or index.
public struct PostgresRow: Sendable {
    let columns: [String]
    let values: [String?]

    /// The raw text of column `name`, nil for NULL (or an unknown column).
    public subscript(name: String) -> String? {
        guard let index = columns.firstIndex(of: name) else { return nil }
        return values[index]
    }

    /// Decodes column `name` as `type`; throws if the column is missing, NULL or malformed.
    public func decode<T: PostgresDecodable>(_ type: T.Type, _ name: String) throws -> T {
        guard let index = columns.firstIndex(of: name) else {
            throw PostgresError(.decoding, detail: "no column \(name)")
        }
        return try decode(type, at: index)
    }

    /// Decodes column `name` as `type`, nil for NULL.
    public func decode<T: PostgresDecodable>(_ type: T?.Type, _ name: String) throws -> T? {
        guard let index = columns.firstIndex(of: name) else {
            throw PostgresError(.decoding, detail: "no column \(name)")
        }
        guard values[index] != nil else { return nil }
        return try decode(T.self, at: index)
    }

    public func decode<T: PostgresDecodable>(_ type: T.Type, at index: Int) throws -> T {
        guard index < values.count, let text = values[index] else {
            throw PostgresError(.decoding, detail: "NULL or missing value in column \(index)")
        }
        guard let value = T(postgresText: text) else {
            throw PostgresError(.decoding, detail: "column \(index) is not a \(T.self)")
        }
        return value
    }
}

/// A Swift value that can be read from PostgreSQL's text format.
public protocol PostgresDecodable: Sendable {
    init?(postgresText: String)
}

extension String: PostgresDecodable {
    public init?(postgresText: String) { self = postgresText }
}

extension Int: PostgresDecodable {
    public init?(postgresText: String) { self.init(postgresText) }
}

extension Int64: PostgresDecodable {
    public init?(postgresText: String) { self.init(postgresText) }
}

extension Int32: PostgresDecodable {
    public init?(postgresText: String) { self.init(postgresText) }
}

extension Bool: PostgresDecodable {
    public init?(postgresText: String) {
        switch postgresText {
        case "t": self = true
        case "f": self = false
        default: return nil
        }
    }
}

extension Double: PostgresDecodable {
    public init?(postgresText: String) { self.init(postgresText) }
}

extension UUID: PostgresDecodable {
    public init?(postgresText: String) { self.init(uuidString: postgresText) }
}

/// `uuid[]`, one-dimensional: `{a,b}` (a UUID's text is never quoted).
extension Array: PostgresDecodable where Element == UUID {
    public init?(postgresText: String) {
        guard postgresText.hasPrefix("{"), postgresText.hasSuffix("}") else { return nil }
        let inner = postgresText.dropFirst().dropLast()
        guard !inner.isEmpty else {
            self = []
            return
        }
        var ids: [UUID] = []
        for part in inner.split(separator: ",", omittingEmptySubsequences: false) {
            guard let id = UUID(uuidString: String(part)) else { return nil }
            ids.append(id)
        }
        self = ids
    }
}

extension Date: PostgresDecodable {
    public init?(postgresText: String) {
        guard let date = PostgresTimestamp.parse(postgresText) else { return nil }
        self = date
    }
}

extension PostgresBytes: PostgresDecodable {
    public init?(postgresText: String) {
        let text = Array(postgresText.utf8)
        guard text.count >= 2, text[0] == UInt8(ascii: "\\"), text[1] == UInt8(ascii: "x"), text.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity((text.count - 2) / 2)
        var index = 2
        while index < text.count {
            guard let high = Self.nibble(text[index]), let low = Self.nibble(text[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        self.init(bytes)
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension PostgresTextArray: PostgresDecodable {
    /// Parses a one-dimensional array literal such as `{a,"b c","d\"e"}`.
    public init?(postgresText: String) {
        let characters = Array(postgresText)
        guard characters.first == "{", characters.last == "}" else { return nil }
        var elements: [String] = []
        var index = 1
        let end = characters.count - 1
        while index < end {
            var element = ""
            if characters[index] == "\"" {
                index += 1
                while index < end, characters[index] != "\"" {
                    if characters[index] == "\\" { index += 1 }
                    guard index < end else { return nil }
                    element.append(characters[index])
                    index += 1
                }
                index += 1
            } else {
                while index < end, characters[index] != "," {
                    element.append(characters[index])
                    index += 1
                }
                if element == "NULL" { return nil }
            }
            elements.append(element)
            if index < end {
                guard characters[index] == "," else { return nil }
                index += 1
            }
        }
        self.init(elements)
    }
}

/// timestamptz text in the session's ISO style with UTC (`2026-11-22 23:05:01.123456+00`).
enum PostgresTimestamp {
    static func format(_ date: Date) -> String {
        let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        var seconds = Int(micros.floorDivided(by: 1_000_000))
        let fraction = Int(micros - Int64(seconds) * 1_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(
            format: "%04d-%02d-%02d %02d:%02d:%02d.%06d+00",
            parts.tm_year + 1900,
            parts.tm_mon + 1,
            parts.tm_mday,
            parts.tm_hour,
            parts.tm_min,
            parts.tm_sec,
            fraction
        )
    }

    static func parse(_ text: String) -> Date? {
        // YYYY-MM-DD HH:MM:SS[.ffffff]+HH[:MM]
        let utf8 = Array(text.utf8)
        guard utf8.count >= 22 else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= utf8.count else { return nil }
            var value = 0
            for byte in utf8[range] {
                guard (0x30...0x39).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19)
        else { return nil }
        var index = 19
        var micros = 0
        if index < utf8.count, utf8[index] == UInt8(ascii: ".") {
            index += 1
            var digits = 0
            while index < utf8.count, (0x30...0x39).contains(utf8[index]) {
                if digits < 6 { micros = micros * 10 + Int(utf8[index] - 0x30) }
                digits += 1
                index += 1
            }
            for _ in digits..<max(digits, 6) { micros *= 10 }
        }
        guard index < utf8.count, utf8[index] == UInt8(ascii: "+") || utf8[index] == UInt8(ascii: "-") else { return nil }
        let sign = utf8[index] == UInt8(ascii: "+") ? 1 : -1
        guard let offsetHours = number(index + 1..<index + 3) else { return nil }
        var offsetMinutes = 0
        if index + 6 <= utf8.count, utf8[index + 3] == UInt8(ascii: ":"), let minutes = number(index + 4..<index + 6) {
            offsetMinutes = minutes
        }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let epoch = timegm(&parts) - sign * (offsetHours * 3600 + offsetMinutes * 60)
        return Date(timeIntervalSince1970: TimeInterval(epoch) + TimeInterval(micros) / 1_000_000)
    }
}

extension Int64 {
    fileprivate func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
