import Testing

@testable import TGHTTPServer

/// Fields relayed as bytes follow `HTTPField`'s rules: nothing that could split a header or
/// smuggle a second one reaches libmicrohttpd.
@Suite struct RawHeaderFieldsTests {
    func fields(_ fields: RawHeaderFields) -> [String] {
        var out: [String] = []
        fields.forEachField { name, value in out.append(String(cString: name) + "=" + String(cString: value)) }
        return out
    }

    @Test func keepsTokensAndTrimmedValuesAndRefusesWhatCouldSplitAHeader() {
        var raw = RawHeaderFields()
        let kept = [
            raw.append(name: "ETag", value: " \t\"v1\" \t"), raw.append(name: "X-Empty", value: ""),
            raw.append(name: "x-odd!#$%&'*+-.^_`|~9", value: "ünïcode bytes"),
        ]
        #expect(kept == [true, true, true])
        for (name, value) in [
            ("X-Split", "a\r\nSet-Cookie: stolen=1"), ("X-LF", "a\nb"), ("X-NUL", "a\u{0}b"), ("Bad Name", "x"), ("", "x"),
            ("X:Colon", "x"), ("Content-Length", "5"), ("transfer-encoding", "chunked"), ("CONNECTION", "close"), ("X(", "x"),
        ] {
            let accepted = raw.append(name: name, value: value)
            #expect(!accepted, "\(name) accepted")
        }
        #expect(fields(raw) == ["ETag=\"v1\"", "X-Empty=", "x-odd!#$%&'*+-.^_`|~9=ünïcode bytes"])
    }

    @Test func comparesNamesInAnyCase() {
        for (name, expected) in [("Set-Cookie", true), ("SET-COOKIE", true), ("set-cookie", true), ("set-cookies", false), ("set-cooki", false)] {
            let matched = Array(name.utf8).withUnsafeBufferPointer { RawHeaderFields.equalsIgnoringCase($0, "set-cookie") }
            #expect(matched == expected, "\(name)")
        }
    }

    @Test func nameBytesAreExactlyTheTokenCharactersOfRFC9110() {
        let tchar = Set(Array("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8))
        for byte in UInt8.min...UInt8.max {
            #expect(RawHeaderFields.isTokenByte(byte) == tchar.contains(byte), "byte \(byte)")
        }
    }
}
