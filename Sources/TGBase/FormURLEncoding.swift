/// `application/x-www-form-urlencoded` decoding (WHATWG URL standard), used for query strings and
/// form bodies.
public enum FormURLEncoding {
    /// Splits on `&`, then on the first `=`; decodes `+` and percent escapes. Empty pairs are skipped;
    /// a name without `=` has an empty value. Pairs whose bytes are not valid UTF-8 are dropped.
    public static func decode<S: StringProtocol>(_ text: S) -> [(name: String, value: String)] {
        decode(text, strict: false) ?? []
    }

    /// Like ``decode(_:)``, but nil when any pair does not decode (a bad percent-encoding, or
    /// bytes that are not UTF-8): for forms where a dropped pair would be misread as a missing one.
    public static func decodeAll<S: StringProtocol>(_ text: S) -> [(name: String, value: String)]? {
        decode(text, strict: true)
    }

    private static func decode<S: StringProtocol>(_ text: S, strict: Bool) -> [(name: String, value: String)]? {
        var result: [(name: String, value: String)] = []
        for pair in text.utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let equals = pair.firstIndex(of: UInt8(ascii: "="))
            let rawName = equals.map { pair[..<$0] } ?? pair[...]
            let rawValue = equals.map { pair[pair.index(after: $0)...] } ?? pair[pair.endIndex...]
            guard let name = percentDecode(rawName, plusAsSpace: true),
                let value = percentDecode(rawValue, plusAsSpace: true)
            else {
                if strict { return nil }
                continue
            }
            result.append((name, value))
        }
        return result
    }

    /// `url` with `pairs` appended to its query (its own query kept).
    public static func url(_ url: String, adding pairs: [(name: String, value: String)]) -> String {
        guard !pairs.isEmpty else { return url }
        return url + (url.contains("?") ? "&" : "?") + encode(pairs)
    }

    /// Encodes pairs as `application/x-www-form-urlencoded`.
    public static func encode(_ pairs: [(name: String, value: String)]) -> String {
        pairs.map { "\(escape($0.name))=\(escape($0.value))" }.joined(separator: "&")
    }

    /// Percent-decodes bytes; nil when an escape is malformed or the result is not UTF-8.
    public static func percentDecode<C: Collection>(_ bytes: C, plusAsSpace: Bool) -> String?
    where C.Element == UInt8 {
        // Nothing to decode (a route parameter such as an API's name): no buffer.
        if !bytes.contains(where: { $0 == UInt8(ascii: "%") || (plusAsSpace && $0 == UInt8(ascii: "+")) }) {
            return String(validating: bytes, as: UTF8.self)
        }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                let high = bytes.index(after: index)
                guard high != bytes.endIndex else { return nil }
                let low = bytes.index(after: high)
                guard low != bytes.endIndex, let h = hexValue(bytes[high]), let l = hexValue(bytes[low]) else {
                    return nil
                }
                out.append(h << 4 | l)
                index = bytes.index(after: low)
                continue
            }
            out.append(plusAsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            index = bytes.index(after: index)
        }
        return String(validating: out, as: UTF8.self)
    }

    /// Escapes everything but the unreserved characters of RFC 3986 (space becomes `%20`).
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let digits = Hex.digits(byte, uppercase: true)
                out.unicodeScalars.append("%")
                out.unicodeScalars.append(Unicode.Scalar(digits.high))
                out.unicodeScalars.append(Unicode.Scalar(digits.low))
            }
        }
        return out
    }

    /// The value of a hexadecimal digit in either case; nil for any other byte.
    public static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
