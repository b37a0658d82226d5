import CCurl
import Testing

@testable import TGHTTPClient

/// A client's origins are parsed by libcurl once and kept for every later transfer; past the
/// cache's capacity a request still gets its origin, parsed per transfer.
@Suite struct OriginsTests {
    /// libcurl's reading of a kept origin, part by part.
    func part(_ origin: Origins.Origin, _ which: CURLUPart) -> String? {
        guard let parsed = origin.parsed else { return nil }
        var text: UnsafeMutablePointer<CChar>?
        guard curl_url_get(parsed, which, &text, 0) == CURLUE_OK, let text else { return nil }
        defer { curl_free(text) }
        return String(cString: text)
    }

    @Test func anOriginIsParsedOnceAndTheSameOneIsGivenAgain() {
        let origins = Origins()
        let first = origins.origin(authority: "127.0.0.1:8443", secure: true)
        #expect(first.url == "https://127.0.0.1:8443/")
        #expect(part(first, CURLUPART_SCHEME) == "https")
        #expect(part(first, CURLUPART_HOST) == "127.0.0.1")
        #expect(part(first, CURLUPART_PORT) == "8443")
        #expect(origins.origin(authority: "127.0.0.1:8443", secure: true) === first)
        // The scheme is part of the origin.
        let plain = origins.origin(authority: "127.0.0.1:8443", secure: false)
        #expect(plain !== first)
        #expect(plain.url == "http://127.0.0.1:8443/")
    }

    @Test func pastItsCapacityAnOriginIsGivenUnparsedAndTheKeptOnesStay() {
        let origins = Origins(capacity: 2)
        let kept = [origins.origin(authority: "a.example", secure: true), origins.origin(authority: "b.example", secure: true)]
        let extra = origins.origin(authority: "c.example", secure: true)
        #expect(extra.url == "https://c.example/")
        #expect(extra.parsed == nil)
        #expect(origins.origin(authority: "c.example", secure: true) !== extra)
        #expect(origins.origin(authority: "a.example", secure: true) === kept[0])
        #expect(origins.origin(authority: "b.example", secure: true) === kept[1])
        #expect(kept.allSatisfy { $0.parsed != nil })
    }
}
