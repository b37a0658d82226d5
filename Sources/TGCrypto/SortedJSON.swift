import Foundation

/// Small JSON documents with their keys sorted (JWS payloads, RFC 7638 thumbprints, the
/// gateway's error bodies), written by `JSONEncoder`. `JSONSerialization`'s `.sortedKeys`
/// compares keys through CoreFoundation with ICU's collator, which loads 1.5 MiB of ICU's data
/// the first time and costs ~20 000 instructions per document (docs/architecture.md, "Memory
/// under a burst"); `JSONEncoder` sorts them in Swift.
public enum SortedJSON {
    /// `object` (dictionaries with string keys, arrays, strings, booleans, integers, doubles,
    /// `NSNull`) as compact JSON without escaped slashes; nil for anything else.
    public static func data(_ object: Any) -> [UInt8]? {
        guard let value = Value(object) else { return nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { Array($0) }
    }

    /// The same as text.
    public static func string(_ object: Any) -> String? {
        data(object).map { String(decoding: $0, as: UTF8.self) }
    }

    enum Value: Encodable {
        case string(String)
        case bool(Bool)
        case int(Int)
        case double(Double)
        case null
        case array([Value])
        case object([String: Value])

        init?(_ any: Any) {
            // Exact types first: a Swift `Bool` or `Int` in an `Any` is not an `NSNumber`, and
            // an `NSNumber` (from `JSONSerialization`) says itself whether it is a boolean.
            switch any {
            case let text as String: self = .string(text)
            case let flag as Bool where type(of: any) == Bool.self: self = .bool(flag)
            case let number as Int where type(of: any) == Int.self: self = .int(number)
            case let number as Double where type(of: any) == Double.self: self = .double(number)
            case let number as NSNumber: self = Self(number)
            case is NSNull: self = .null
            case let items as [Any]:
                var values: [Value] = []
                values.reserveCapacity(items.count)
                for item in items {
                    guard let value = Value(item) else { return nil }
                    values.append(value)
                }
                self = .array(values)
            case let members as [String: Any]:
                var values: [String: Value] = [:]
                values.reserveCapacity(members.count)
                for (key, member) in members {
                    guard let value = Value(member) else { return nil }
                    values[key] = value
                }
                self = .object(values)
            default: return nil
            }
        }

        /// A number `JSONSerialization` parsed: its C type tells a boolean (`c`) and a double
        /// from an integer.
        private init(_ number: NSNumber) {
            switch String(cString: number.objCType) {
            case "c", "B": self = .bool(number.boolValue)
            case "f", "d": self = .double(number.doubleValue)
            default: self = .int(number.intValue)
            }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .string(let text): try container.encode(text)
            case .bool(let flag): try container.encode(flag)
            case .int(let number): try container.encode(number)
            case .double(let number): try container.encode(number)
            case .null: try container.encodeNil()
            case .array(let values): try container.encode(values)
            case .object(let values): try container.encode(values)
            }
        }
    }
}
