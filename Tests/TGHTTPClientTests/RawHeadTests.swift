import Testing

@testable import TGHTTPClient

/// An answer's head as libcurl hands it over is read line by line without building fields: the
/// same fields and the same `Content-Length` as the spelled-out rules give.
@Suite struct RawHeadTests {
    func head(_ lines: [String]) -> RawHead {
        RawHead(status: 200, bytes: Array(lines.joined().utf8))
    }

    func fields(_ head: RawHead) -> [String] {
        var out: [String] = []
        head.forEachField { name, value in
            out.append(String(decoding: name, as: UTF8.self) + "=" + String(decoding: value, as: UTF8.self))
        }
        return out
    }

    @Test func fieldsAreTheColonLinesWithTrimmedValues() {
        let raw = head(["Content-Type: text/plain\r\n", "X-Blank:\r\n", "no colon here\r\n", "X-Pad: \t a b \t\r\n", "Last:x\n"])
        #expect(fields(raw) == ["Content-Type=text/plain", "X-Blank=", "X-Pad=a b", "Last=x"])
        #expect(fields(head([])) == [])
        #expect(fields(head(["X-No-End: 1"])) == ["X-No-End=1"])
    }

    @Test func contentLengthIsTheFirstWellFormedAnnouncementInAnyCase() {
        #expect(head(["Content-Length: 42\r\n"]).contentLength == 42)
        #expect(head(["X-A: 1\r\n", "content-LENGTH:\t7 \r\n", "Content-Length: 9\r\n"]).contentLength == 7)
        #expect(head(["Content-Length: 0\r\n"]).contentLength == 0)
        for refused in ["Content-Length: 4x\r\n", "Content-Length: \r\n", "Content-Length: -1\r\n", "Content-Length: 1234567890123456789\r\n"] {
            #expect(head([refused]).contentLength == nil, "\(refused)")
        }
        #expect(head(["X-Content-Length: 5\r\n", "Content-Type: a\r\n"]).contentLength == nil)
        #expect(head(["Content-Length : 5\r\n"]).contentLength == nil)
    }

    @Test func aConnectionLineThatNamesFieldsIsNoticedInAnyCase() {
        #expect(head(["Content-Type: a\r\n", "connection: X-Private\r\n"]).connectionNamesFields)
        #expect(head(["CONNECTION:keep-alive, x-a\r\n"]).connectionNamesFields)
        #expect(head(["Connection: close,\tTE \r\n"]).connectionNamesFields)
        for other in [
            "Connection: keep-alive\r\n", "Connection: close\r\n", "connection: Keep-Alive , CLOSE,,\r\n", "Connection:\r\n",
            "X-Connection: a\r\n", "Connection-Id: 1\r\n", "Connection : a\r\n", "Keep-Alive: 5\r\n",
        ] {
            #expect(!head([other]).connectionNamesFields, "\(other)")
        }
    }

    @Test func listItemsAreTheTrimmedNonEmptyCommaSeparatedParts() {
        func items(_ value: String) -> [String] {
            var out: [String] = []
            Array(value.utf8).withUnsafeBufferPointer { bytes in
                RawHead.forEachListItem(bytes) { out.append(String(decoding: $0, as: UTF8.self)) }
            }
            return out
        }
        #expect(items(" a, ,b ,\tc d,,") == ["a", "b", "c d"])
        #expect(items("keep-alive") == ["keep-alive"])
        #expect(items("").isEmpty && items(" , ,\t").isEmpty)
    }

    /// The client gathers the facts line by line as libcurl delivers them (each line with its
    /// line break, which it strips): the same as reading the whole head once.
    @Test func factsGatheredLineByLineAreThoseOfTheWholeHead() {
        let heads: [[String]] = [
            ["Content-Length: 42\r\n", "Connection: close\r\n"], ["content-LENGTH:\t7 \r\n", "Content-Length: 9\r\n"],
            ["Content-Length: \r\n", "Content-Length: 3\r\n"], ["Content-Length: 4x\r\n", "Content-Length: 5\r\n"],
            ["X-A: 1\n", "connection: a, b\n"], ["Connection: keep-alive\r\n", "Connection: x\r\n"], [],
        ]
        for lines in heads {
            var facts = RawHead.Facts()
            for line in lines {
                var bytes = Array(line.utf8)
                while let last = bytes.last, last == 0x0D || last == 0x0A { bytes.removeLast() }
                bytes.withUnsafeBufferPointer { facts.add($0) }
            }
            let whole = head(lines)
            let gathered = RawHead(status: 200, bytes: whole.bytes, facts: facts)
            #expect(gathered.contentLength == whole.contentLength, "\(lines)")
            #expect(gathered.connectionNamesFields == whole.connectionNamesFields, "\(lines)")
        }
    }

    /// The names are compared eight bytes at a time with the case bits of their letters: a byte
    /// one case bit away from a dash or a colon is not taken for it, and every spelling of the
    /// letters' cases is.
    @Test func onlyTheLettersOfTheNamesMatchInAnyCase() {
        for spelling in ["content-length: 5", "CONTENT-LENGTH: 5", "cOnTeNt-LeNgTh: 5", "Content-Length:5"] {
            #expect(head([spelling + "\r\n"]).contentLength == 5, "\(spelling)")
        }
        // 0x0D and 0x1A are a dash and a colon without the case bit (0x2D, 0x3A): a bytewise
        // `| 0x20` would take them for those.
        for near in ["Content\rLength: 5", "Content-Length\u{1A} 5", "Content-Length\u{1A}5", "Content_Length: 5"] {
            #expect(head([near + "\r\n"]).contentLength == nil, "\(near.debugDescription)")
        }
        for spelling in ["connection: x-a", "CONNECTION: x-a", "ConNecTion:x-a"] {
            #expect(head([spelling + "\r\n"]).connectionNamesFields, "\(spelling)")
        }
        for near in ["Connection\u{1A} x-a", "Connection;x-a", "Connectiom: x-a"] {
            #expect(!head([near + "\r\n"]).connectionNamesFields, "\(near.debugDescription)")
        }
    }
}
