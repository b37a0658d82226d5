import Testing

@testable import TGHTTPClient

/// Header lines built for the loop's client follow `HTTPField`'s rules: nothing that could end a
/// line or smuggle another field reaches libcurl, and the client's own fields stay its own.
@Suite struct HeaderLinesTests {
    func lines(_ headers: HeaderLines) -> [String] {
        var out: [String] = []
        headers.forEachLine { out.append(String(cString: $0)) }
        return out
    }

    @Test func keepsTokenNamesAndPlainValuesAndRefusesTheRest() {
        var headers = HeaderLines()
        let kept = [
            headers.append(name: "Accept", value: "application/json"), headers.append(name: "X-Empty", value: ""),
            headers.append(name: "Content-Type", value: "text/plain"),
        ]
        #expect(kept == [true, true, true])
        for (name, value) in [
            ("X-Split", "a\r\nX-Injected: 1"), ("X-LF", "a\nb"), ("X-NUL", "a\u{0}b"), ("Bad Name", "x"), ("", "x"), ("X:Colon", "x"),
            ("Content-Length", "5"), ("TRANSFER-ENCODING", "chunked"), ("Expect", "100-continue"),
        ] {
            let accepted = headers.append(name: name, value: value)
            #expect(!accepted, "\(name) accepted")
        }
        #expect(lines(headers) == ["Accept: application/json", "X-Empty: ", "Content-Type: text/plain"])
        #expect(headers.hasContentType)
        #expect(!HeaderLines().hasContentType)
    }

    @Test func theBearerLineCarriesTheTokenAndRefusesALineBreakInIt() {
        var headers = HeaderLines(capacity: 64)
        let accepted = [headers.appendBearer("abc.def-ghi"), headers.appendBearer("abc\r\nX-Injected: 1"), headers.appendBearer("a\u{0}b")]
        #expect(accepted == [true, false, false])
        #expect(lines(headers) == ["Authorization: Bearer abc.def-ghi"])
    }

    @Test func nameBytesAreExactlyTheTokenCharactersOfRFC9110() {
        let tchar = Set(Array("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8))
        for byte in UInt8.min...UInt8.max {
            #expect(HeaderLines.isTokenByte(byte) == tchar.contains(byte), "byte \(byte)")
        }
    }
}
