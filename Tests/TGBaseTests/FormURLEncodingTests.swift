import TGBase
import Testing

@Suite struct FormURLEncodingTests {
    @Test func decodesPlusPercentEscapesAndEmptyValues() {
        let pairs = FormURLEncoding.decode("a=1&b=x+y&c=%2Fz%3F&d&&e=")
        #expect(pairs.map(\.name) == ["a", "b", "c", "d", "e"])
        #expect(pairs.map(\.value) == ["1", "x y", "/z?", "", ""])
    }

    @Test func dropsPairsWithMalformedEscapesOrInvalidUTF8() {
        let pairs = FormURLEncoding.decode("ok=1&bad=%zz&cut=%4&bytes=%ff%fe")
        #expect(pairs.map(\.name) == ["ok"])
    }

    @Test func encodesOnlyUnreservedCharactersLiterally() {
        #expect(FormURLEncoding.encode([("redirect_uri", "com.example:/a b"), ("x", "~-._")]) == "redirect_uri=com.example%3A%2Fa%20b&x=~-._")
    }
}
