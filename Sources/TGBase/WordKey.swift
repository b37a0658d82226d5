/// A hash-table key of one machine word that no client chooses: a pointer, a file descriptor, a
/// number the process made. `Set` and `Dictionary` hash it with a multiplication
/// (``hash(_:seed:)``) instead of SipHash, which cost ~100 instructions per lookup on every
/// proxied call's few lookups. Keyed by the table's per-process seed as SipHash is, but not a
/// defence against a client that picks keys to collide: only for keys no client picks.
public struct WordKey: Hashable, Sendable {
    public let word: UInt64

    public init(_ word: UInt64) { self.word = word }

    public init(_ value: Int32) { word = UInt64(UInt32(bitPattern: value)) }

    public init(_ pointer: UnsafeMutableRawPointer) { word = UInt64(UInt(bitPattern: pointer)) }

    public func hash(into hasher: inout Hasher) { hasher.combine(word) }

    /// What `Set` and `Dictionary` ask for (the standard library's hook for a cheaper hash than
    /// `hash(into:)`'s; the two need not agree, only both follow `==`).
    public func _rawHashValue(seed: Int) -> Int { Self.hash(word, seed: seed) }

    /// `word` spread over every bit of the result (a table uses the low ones): multiplied by an
    /// odd constant (2^64 over the golden ratio), whose high half, which every bit of the word
    /// reaches, is folded onto the low one.
    @inlinable
    public static func hash(_ word: UInt64, seed: Int) -> Int {
        let mixed = (word ^ UInt64(UInt(bitPattern: seed))) &* 0x9E37_79B9_7F4A_7C15
        return Int(Int64(bitPattern: mixed ^ (mixed >> 32)))
    }
}
