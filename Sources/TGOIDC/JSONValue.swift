import Foundation

/// A JSON value that can cross concurrency domains: claims, provider metadata members, error
/// bodies. Parsed strictly: the text must be a single JSON value in UTF-8.
public enum JSONValue: Sendable, Hashable {
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

    init?(foundation any: Any) {
        switch any {
        case let text as String:
            self = .string(text)
        case let number as NSNumber:
            // JSONSerialization gives booleans as NSNumber too; tell them apart by their type.
            if String(cString: number.objCType) == "c" {
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
}
