import HTTPTypes
import Testing

@testable import TGHTTPServer

/// A request's fields kept as bytes read as `HTTPFields` would: the same fields, the same values,
/// nothing that could split a header when forwarded.
@Suite struct RequestFieldsTests {
    func made(_ pairs: [(String, String)]) -> RequestFields {
        var fields = RequestFields()
        for (name, value) in pairs {
            var name = name
            var value = value
            name.withUTF8 { name in
                value.withUTF8 { value in
                    _ = fields.append(name: UnsafeRawBufferPointer(name), value: UnsafeRawBufferPointer(value))
                }
            }
        }
        return fields
    }

    func pairs(_ fields: RequestFields) -> [String] {
        var out: [String] = []
        fields.forEachField { name, value in out.append(String(decoding: name, as: UTF8.self) + "=" + String(decoding: value, as: UTF8.self)) }
        return out
    }

    @Test func dropsNamesThatAreNotTokensAndCleansValuesLikeHTTPField() {
        let fields = made([
            ("Host", "api.example"), ("Bad Name", "x"), ("", "x"), ("X:Colon", "x"), ("X-Trim", " \t padded \t "),
            ("X-Split", "a\r\nSet-Cookie: stolen=1"), ("X-NUL", "a\u{0}b"), ("X-Del", "a\u{7F}b"), ("X-Tab", "a\tb"),
            ("X-Empty", ""),
        ])
        #expect(fields.count == 7)
        #expect(
            pairs(fields) == [
                "Host=api.example", "X-Trim=padded", "X-Split=a  Set-Cookie: stolen=1", "X-NUL=a b", "X-Del=a b", "X-Tab=a\tb",
                "X-Empty=",
            ]
        )
        // What HTTPTypes makes of the same values.
        for (name, value) in [("X-Split", "a\r\nSet-Cookie: stolen=1"), ("X-NUL", "a\u{0}b"), ("X-Trim", " \t padded \t ")] {
            #expect(fields.first(HTTPField.Name(name)!) == HTTPField(name: HTTPField.Name(name)!, value: value).value)
        }
    }

    @Test func findsFieldsByNameInAnyCaseInOrder() {
        let fields = made([("x-request-id", "one"), ("Cookie", "a=1"), ("COOKIE", "b=2"), ("Authorization", "Bearer t")])
        #expect(fields.first(HTTPField.Name("X-Request-ID")!) == "one")
        #expect(fields.first(.authorization) == "Bearer t")
        #expect(fields.first(.accept) == nil)
        #expect(fields.contains(.cookie))
        #expect(!fields.contains(.contentType))
        #expect(fields.values(.cookie) == ["a=1", "b=2"])
        #expect(fields.values(.accept) == [])
    }

    @Test func convertsToAndFromHTTPFieldsWithoutLosingAField() {
        let fields: HTTPFields = [.accept: "application/json", .cookie: "a=1", .userAgent: "app/1.0", .contentType: "text/plain"]
        let raw = RequestFields(fields)
        #expect(raw.httpFields == fields)
        #expect(RequestFields(raw.httpFields) == raw)
        #expect(RequestFields().httpFields.isEmpty)
    }

    @Test func aRequestMadeFromAHeadGivesTheSameHeadBack() {
        let head = HTTPRequest(
            method: .post,
            scheme: "http",
            authority: "api.example",
            path: "/a/b?c=d",
            headerFields: [.contentType: "application/json", .cookie: "s=1"]
        )
        var request = ServerRequest(head: head)
        #expect(request.head == head)
        #expect(request.method == .post)
        #expect(request.target == "/a/b?c=d")
        #expect(request.path == "/a/b")
        #expect(request.rawQuery == "c=d")
        #expect(request.fields.first(.cookie) == "s=1")
        request.head.headerFields[.accept] = "text/plain"
        #expect(request.fields.first(.accept) == "text/plain")
        #expect(request.fields.count == 3)
    }

    @Test func withFirstLendsTheFirstValueOfANameInAnyCaseAndSaysWhenThereIsNone() {
        let fields = made([("X-Other", "o"), ("authorization", "Bearer first"), ("Authorization", "Bearer second")])
        var seen: [String] = []
        #expect(fields.withFirst(.authorization) { seen.append(String(decoding: $0, as: UTF8.self)) })
        #expect(seen == ["Bearer first"])
        #expect(!fields.withFirst(.cookie) { _ in Issue.record("no cookie field was sent") })
        struct Refused: Error {}
        #expect(throws: Refused.self) { try fields.withFirst(.authorization) { _ in throw Refused() } }
    }

    @Test func aConnectionFieldIsNotedInAnyCaseAsItIsAdded() {
        #expect(!made([("Host", "a"), ("Authorization", "Bearer x"), ("Connectionx", "y")]).hasConnectionField)
        #expect(made([("Host", "a"), ("cONNECTION", "close, X-Private")]).hasConnectionField)
        #expect(RequestFields([.connection: "keep-alive"]).hasConnectionField)
        #expect(!RequestFields().hasConnectionField)
    }

    @Test func aCookieFieldIsNotedInAnyCaseAsItIsAdded() {
        #expect(!made([("Host", "a"), ("Cookies", "a=1"), ("Set-Cookie", "b=2")]).hasCookieField)
        #expect(made([("Host", "a"), ("cOOKIE", "a=1; b=2")]).hasCookieField)
        #expect(RequestFields([.cookie: "a=1"]).hasCookieField)
        #expect(!RequestFields().hasCookieField)
    }

    /// What a walk would find, for a name's first field: the indexed names answer without one.
    func walked(_ fields: RequestFields, _ name: String) -> String? {
        var found: String?
        fields.forEachField { fieldName, value in
            if found == nil, String(decoding: fieldName, as: UTF8.self).lowercased() == name.lowercased() {
                found = String(decoding: value, as: UTF8.self)
            }
        }
        return found
    }

    @Test func theFirstFieldOfAnIndexedNameIsTheOneAWalkFindsWhateverItsCaseItsPlaceAndItsRepeats() {
        // The three names found without a walk, and two others found by one.
        let names = ["Authorization", "X-Request-ID", "Transfer-Encoding", "Host", "Cookie"]
        let cases: [[(String, String)]] = [
            [],
            [("Host", "a"), ("authorization", "Bearer one"), ("AUTHORIZATION", "Bearer two"), ("x-request-id", " id-1 ")],
            [("X-Request-Id", "first"), ("Transfer-Encoding", "chunked"), ("cookie", "a=1"), ("X-Request-ID", "second"), ("Authorization", "")],
            [("Bad Name", "x"), ("Authorizatio", "near"), ("Authorizationn", "near"), ("Transfer-Encoding", "a\u{0}b")],
        ]
        for pairs in cases {
            let fields = made(pairs)
            for name in names {
                let fieldName = HTTPField.Name(name)!
                #expect(fields.first(fieldName) == walked(fields, name), "\(name) in \(pairs)")
                #expect(fields.contains(fieldName) == (walked(fields, name) != nil))
                var inPlace: String?
                let found = fields.withFirst(fieldName) { inPlace = String(decoding: $0, as: UTF8.self) }
                #expect(found == (inPlace != nil) && inPlace == walked(fields, name))
            }
        }
    }

    @Test func anIndexedFieldFarIntoAVeryLargeHeadIsFoundByAWalk() {
        // Past the two-byte places the fields note: found as any other field is.
        let filler = (0..<70).map { ("X-Filler-\($0)", String(repeating: "v", count: 1000)) }
        let fields = made(filler + [("Authorization", "Bearer late"), ("X-Request-ID", "late")])
        #expect(fields.first(.authorization) == "Bearer late")
        #expect(fields.first(HTTPField.Name("X-Request-ID")!) == "late")
        #expect(!fields.contains(.transferEncoding))
    }
}
