import Foundation
import TGBase
import Testing

/// JSON with sorted keys written in Swift, without `JSONSerialization`'s ICU collation.
@Suite struct SortedJSONTests {
    @Test func writesNestedDocumentsWithSortedKeysAndUnescapedSlashes() throws {
        let object: [String: Any] = [
            "z": [1, true, "a/b", NSNull()] as [Any], "a": ["y": 2.5, "x": "quote \" and \\ and \n"] as [String: Any], "m": false,
        ]
        let text = try #require(SortedJSON.string(object))
        #expect(text == #"{"a":{"x":"quote \" and \\ and \n","y":2.5},"m":false,"z":[1,true,"a/b",null]}"#)
    }

    @Test func numbersParsedByJSONSerializationKeepTheirKind() throws {
        let parsed = try JSONSerialization.jsonObject(with: Data(#"{"b":true,"i":42,"d":0.5,"n":null}"#.utf8))
        #expect(SortedJSON.string(parsed) == #"{"b":true,"d":0.5,"i":42,"n":null}"#)
    }

    @Test func refusesWhatJSONCannotHold() {
        #expect(SortedJSON.data(["date": Date()]) == nil)
        #expect(SortedJSON.data([1: "integer key"]) == nil)
    }

    /// The same bytes as `JSONSerialization` with sorted keys, which the JWS payloads and the
    /// error bodies were written with before.
    @Test func agreesWithJSONSerializationOnTheGatewaysDocuments() throws {
        let documents: [[String: Any]] = [
            ["error": "invalid_grant", "error_description": "The code is unknown. Log in again."],
            ["iss": "client", "sub": "client", "aud": "https://idp.example/token", "jti": "abc", "iat": 1_700_000_000, "exp": 1_700_000_120],
            ["kty": "EC", "crv": "P-256", "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"],
        ]
        for document in documents {
            let reference = try JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes])
            #expect(SortedJSON.data(document) == Array(reference))
        }
    }
}
