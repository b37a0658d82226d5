import Synchronization

/// The bounds of the numeric settings, declared where each is decoded:
///
///     connectionLimit = try c.value(.connectionLimit, default: 4096, in: 1...)
///
/// The decoding records each declaration here, and each value outside its bounds as a problem
/// with the setting's key path, which ``ConfigurationValidator`` reports beside its rules that
/// involve more than one value. A test walks the declarations (`SettingsTests`), so a new bounded
/// setting is refused just below and just above its bounds without a test of its own.
/// ``ConfigurationLoader`` passes one per load in the decoder's user info (``CodingUserInfoKey/settingBounds``).
final class SettingBounds: Sendable {
    /// One numeric setting's declaration.
    struct Bound: Sendable {
        /// Where: `server.connection_limit`, `upstreams[0].max_body_bytes`.
        let key: String
        /// The values allowed (`Int.max` as the upper bound: no upper bound).
        let range: ClosedRange<Int>
        /// The value when the key is absent; nil for a setting that may be left out.
        let defaultValue: Int?
        /// What the refusal says: `must be between 1 and 65535`.
        let message: String
    }

    private let state = Mutex<(declared: [Bound], problems: [ConfigurationError.Problem])>(([], []))

    /// Every bound declared by the decoding, in decoding order.
    var declared: [Bound] { state.withLock { $0.declared } }
    /// Every value found outside its bounds, in decoding order.
    var problems: [ConfigurationError.Problem] { state.withLock { $0.problems } }

    func record(_ bound: Bound, value: Int?) {
        state.withLock { state in
            state.declared.append(bound)
            if let value, !bound.range.contains(value) { state.problems.append(.init(key: bound.key, message: bound.message)) }
        }
    }
}

extension CodingUserInfoKey {
    /// The ``SettingBounds`` a configuration's decoding records into.
    static let settingBounds = CodingUserInfoKey(rawValue: "tokengate.settingBounds")!
}

extension Decoder {
    /// A keyed container whose numeric settings declare their bounds (``SettingsContainer``).
    func settings<Key: CodingKey>(keyedBy type: Key.Type) throws -> SettingsContainer<Key> {
        SettingsContainer(container: try container(keyedBy: type), bounds: userInfo[.settingBounds] as? SettingBounds)
    }
}

/// A section's keyed container, with the ``SettingBounds`` of the decoder it came from (none
/// outside ``ConfigurationLoader``: then the bounds are not recorded).
struct SettingsContainer<Key: CodingKey> {
    let container: KeyedDecodingContainer<Key>
    let bounds: SettingBounds?

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try container.decode(type, forKey: key) }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { try container.decodeIfPresent(type, forKey: key) }

    /// The value at `key`, or `fallback` when the key is absent or null.
    func value<T: Decodable>(_ key: Key, default fallback: @autoclosure () throws -> T) throws -> T {
        try container.value(key, default: fallback())
    }

    /// A whole number from `range`, or `fallback` when absent. Refused outside it with `must be
    /// between 1 and 60`; `zero` says what 0 means (`must be between 0 (off) and 20`), `note`
    /// explains a bound (`must be between 60 and 31536000 (a year)`).
    func value(_ key: Key, default fallback: Int, in range: ClosedRange<Int>, zero: String? = nil, note: String? = nil) throws -> Int {
        try value(key, default: fallback, in: range, message: Self.message(range, zero: zero, note: note))
    }

    /// A whole number from `range`, or `fallback` when absent. Refused below it with `must be
    /// positive` (from 1), `must be 0 (no limit) or more` (from 0, `zero` saying what 0 means).
    func value(_ key: Key, default fallback: Int, in range: PartialRangeFrom<Int>, zero: String? = nil) throws -> Int {
        try value(key, default: fallback, in: range.lowerBound...Int.max, message: Self.message(range, zero: zero))
    }

    /// A whole number from `range`, or `fallback` when absent; refused outside it with `message`.
    func value(_ key: Key, default fallback: Int, in range: ClosedRange<Int>, message: String) throws -> Int {
        let value = try container.decodeIfPresent(Int.self, forKey: key) ?? fallback
        bounds?.record(.init(key: path(key), range: range, defaultValue: fallback, message: message), value: value)
        return value
    }

    /// A whole number from `range`, or nil when absent; refused outside it with `must be between
    /// 1 and 1024`, `note` explaining a bound.
    func valueIfPresent(_ key: Key, in range: ClosedRange<Int>, note: String? = nil) throws -> Int? {
        let value = try container.decodeIfPresent(Int.self, forKey: key)
        bounds?.record(.init(key: path(key), range: range, defaultValue: nil, message: Self.message(range, note: note)), value: value)
        return value
    }

    /// A whole number from `range`, or nil when absent (the setting then has no value at all).
    func valueIfPresent(_ key: Key, in range: PartialRangeFrom<Int>) throws -> Int? {
        let value = try container.decodeIfPresent(Int.self, forKey: key)
        bounds?.record(.init(key: path(key), range: range.lowerBound...Int.max, defaultValue: nil, message: Self.message(range)), value: value)
        return value
    }

    /// `must be between 1 and 60`, with what 0 means after the low bound and `note` at the end.
    private static func message(_ range: ClosedRange<Int>, zero: String? = nil, note: String? = nil) -> String {
        let low = zero.map { "\(range.lowerBound) (\($0))" } ?? "\(range.lowerBound)"
        return "must be between \(low) and \(range.upperBound)" + (note.map { " (\($0))" } ?? "")
    }

    private static func message(_ range: PartialRangeFrom<Int>, zero: String? = nil) -> String {
        if let zero { return "must be \(range.lowerBound) (\(zero)) or more" }
        return range.lowerBound == 1 ? "must be positive" : "must be \(range.lowerBound) or more"
    }

    private func path(_ key: Key) -> String { ConfigurationLoader.keyPath(container.codingPath + [key]) }
}
