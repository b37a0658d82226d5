import Foundation

/// A JSON value that can cross concurrency domains: claims, provider metadata members, error
/// bodies. Parsed strictly: the text must be a single JSON value in UTF-8.
public enum JSONValue: Sendable, Hashable, Encodable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([String: JSONValue])

    /// Parses `bytes`; nil when they are not JSON.
    public init?(parsing bytes: [UInt8]) {
        guard !bytes.isEmpty,
            let any = try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
        else { return nil }
        self.init(foundation: any)
    }

    /// `any` as `JSONSerialization` gives it, or as Swift code writes it (dictionaries with string
    /// keys, arrays, strings, booleans, integers, doubles, `NSNull`); nil for anything else.
    public init?(foundation any: Any) {
        // Exact types first: a Swift `Bool` or `Int` in an `Any` is not an `NSNumber`.
        switch any {
        case let text as String:
            self = .string(text)
        case let flag as Bool where type(of: any) == Bool.self:
            self = .bool(flag)
        case let number as Int where type(of: any) == Int.self:
            self = .number(Double(number))
        case let number as Double where type(of: any) == Double.self:
            self = .number(number)
        case let number as NSNumber:
            // JSONSerialization gives booleans as NSNumber too; tell them apart by their type.
            if ["c", "B"].contains(String(cString: number.objCType)) {
                self = .bool(number.boolValue)
            } else {
                self = .number(number.doubleValue)
            }
        case is NSNull:
            self = .null
        case let array as [Any]:
            var values: [JSONValue] = []
            values.reserveCapacity(array.count)
            for element in array {
                guard let value = JSONValue(foundation: element) else { return nil }
                values.append(value)
            }
            self = .array(values)
        case let dictionary as [String: Any]:
            var members: [String: JSONValue] = [:]
            for (key, element) in dictionary {
                guard let value = JSONValue(foundation: element) else { return nil }
                members[key] = value
            }
            self = .object(members)
        default:
            return nil
        }
    }

    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// A whole number, from a JSON number or (as some providers send `expires_in`) a string of digits.
    public var integerValue: Int? {
        switch self {
        case .number(let number):
            guard number.rounded() == number, abs(number) < 1e15 else { return nil }
            return Int(number)
        case .string(let text):
            return Int(text)
        default:
            return nil
        }
    }

    public var boolValue: Bool? {
        if case .bool(let flag) = self { return flag }
        return nil
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let values) = self { return values }
        return nil
    }

    /// A string or an array of strings as a list (`aud`, `amr`); nil for anything else.
    public var stringList: [String]? {
        switch self {
        case .string(let text): return [text]
        case .array(let values):
            var result: [String] = []
            for value in values {
                guard let text = value.stringValue else { return nil }
                result.append(text)
            }
            return result
        default: return nil
        }
    }

    public subscript(member: String) -> JSONValue? {
        objectValue?[member]
    }

    /// Whole numbers within ±2^53 are written without a fraction (`42`, not `42.0`).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let text): try container.encode(text)
        case .bool(let flag): try container.encode(flag)
        case .number(let number):
            if number.rounded() == number, abs(number) <= 9_007_199_254_740_992 {
                try container.encode(Int64(number))
            } else {
                try container.encode(number)
            }
        case .null: try container.encodeNil()
        case .array(let values): try container.encode(values)
        case .object(let members): try container.encode(members)
        }
    }
}
