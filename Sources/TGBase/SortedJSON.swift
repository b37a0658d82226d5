import Foundation

/// Small JSON documents with their keys sorted (JWS payloads, RFC 7638 thumbprints, the
/// gateway's error bodies), written by `JSONEncoder`. `JSONSerialization`'s `.sortedKeys`
/// compares keys through CoreFoundation with ICU's collator, which loads 1.5 MiB of ICU's data
/// the first time and costs ~20 000 instructions per document (docs/architecture.md, "Memory
/// under a burst"); `JSONEncoder` sorts them in Swift.
public enum SortedJSON {
    /// `object` (see ``JSONValue/init(foundation:)``) as compact JSON without escaped slashes;
    /// nil for anything else.
    public static func data(_ object: Any) -> [UInt8]? {
        JSONValue(foundation: object).flatMap(data)
    }

    /// `value` as compact JSON with sorted keys and without escaped slashes.
    public static func data(_ value: JSONValue) -> [UInt8]? {
        try? encode(value)
    }

    /// Any `Encodable` value (a `Codable` document, or ``JSONValue`` for open-ended members),
    /// encoded once: compact, keys sorted, slashes not escaped.
    public static func encode(_ value: some Encodable) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(value))
    }

    /// The same as text.
    public static func string(_ object: Any) -> String? {
        data(object).map { String(decoding: $0, as: UTF8.self) }
    }
}
