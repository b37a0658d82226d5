import Testing

@testable import TGStore

/// A token hash is a cache key found by its first eight bytes' hash: keys that share those bytes
/// are still told apart by all of theirs.
@Suite struct TokenHashTests {
    @Test func hashesThatShareTheirFirstEightBytesAreDifferentKeys() {
        let prefix: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        let one = TokenHash(prefix + [UInt8](repeating: 0, count: 24))
        let other = TokenHash(prefix + [UInt8](repeating: 0, count: 23) + [1])
        #expect(one.hashValue == other.hashValue)
        #expect(one != other)
        let keys: [TokenHash: String] = [one: "one", other: "other"]
        #expect(keys[one] == "one" && keys[other] == "other")
        #expect(keys[TokenHash(prefix + [UInt8](repeating: 0, count: 24))] == "one")
    }

    @Test func aShortHashIsHashedWhole() {
        #expect(TokenHash([1, 2]) != TokenHash([1, 3]))
        #expect(Set([TokenHash([1, 2]), TokenHash([1, 3]), TokenHash([])]).count == 3)
    }
}
