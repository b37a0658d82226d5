import TGBase
import Testing

@Suite struct WordKeyTests {
    /// A table takes a hash's low bits: keys that differ only in their high bits (aligned
    /// pointers, which all end in zeros) must still land apart there.
    @Test func keysThatDifferOnlyInTheirHighBitsLandInDifferentBuckets() {
        let seed = 0x1234_5678
        let aligned = (1...1024).map { UInt64($0) << 16 }
        let buckets = Set(aligned.map { WordKey.hash($0, seed: seed) & 1023 })
        #expect(buckets.count > 600, "\(buckets.count) of 1024 buckets used")
        let small = Set((0..<1024).map { WordKey.hash(UInt64($0), seed: seed) & 1023 })
        #expect(small.count > 600, "\(small.count) of 1024 buckets used")
    }

    @Test func theSeedChangesEveryHash() {
        let words: [UInt64] = [0, 1, 42, 1 << 40, .max]
        for word in words { #expect(WordKey.hash(word, seed: 1) != WordKey.hash(word, seed: 2), "\(word)") }
    }

    @Test func setsAndDictionariesFindWhatWasPutIn() {
        var set = Set<WordKey>()
        var table: [WordKey: Int] = [:]
        for number in 0..<5000 {
            set.insert(WordKey(UInt64(number) << 4))
            table[WordKey(Int32(number))] = number
        }
        #expect(set.count == 5000)
        #expect((0..<5000).allSatisfy { set.contains(WordKey(UInt64($0) << 4)) && table[WordKey(Int32($0))] == $0 })
        #expect(!set.contains(WordKey(UInt64(3))))
        #expect(table[WordKey(Int32(-1))] == nil)
        #expect(WordKey(Int32(-1)).word == 0xFFFF_FFFF)
    }
}
