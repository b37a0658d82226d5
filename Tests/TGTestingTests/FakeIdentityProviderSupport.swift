import Foundation
import HTTPTypes
import TGCrypto
import TGHTTPClient
import TGTesting
import Testing

let clientID = "tokengate"
let clientSecret = "s3cret"
let redirectURI = "https://app.example/callback"

/// A response as the tests look at it.
struct Reply {
    var status: Int
    var headerFields: HTTPFields
    var body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }

    /// The body as a JSON object; a test failure (and an empty object) when it is not one.
    var json: [String: Any] {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            Issue.record("not a JSON object: \(text)")
            return [:]
        }
        return object
    }

    func header(_ name: String) -> String? { HTTPField.Name(name).flatMap { headerFields[$0] } }
}

/// HTTP for the tests, over TGHTTPClient (plain HTTP to loopback allowed).
struct TestHTTP {
    let client: HTTPClient

    init() {
        var configuration = HTTPClient.Configuration()
        configuration.allowPlainHTTPToLoopbackForTesting = true
        client = HTTPClient(configuration: configuration)
    }

    func get(_ url: String, headers: HTTPFields = [:]) async throws -> Reply {
        try await send(.get, url, headers: headers, body: nil)
    }

    func postForm(_ url: String, _ form: [(name: String, value: String)], headers: HTTPFields = [:]) async throws -> Reply {
        var fields = headers
        fields[.contentType] = "application/x-www-form-urlencoded"
        return try await send(.post, url, headers: fields, body: Array(formEncode(form).utf8))
    }

    func send(_ method: HTTPRequest.Method, _ url: String, headers: HTTPFields = [:], body: [UInt8]?) async throws -> Reply {
        let components = try #require(URLComponents(string: url))
        let authority = try #require(components.host) + (components.port.map { ":\($0)" } ?? "")
        let target = components.percentEncodedPath + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
        var request = HTTPRequest(method: method, scheme: components.scheme, authority: authority, path: target)
        request.headerFields = headers
        let response = try await client.send(request, body: body, timeout: .seconds(10))
        return Reply(status: response.head.status.code, headerFields: response.head.headerFields, body: response.body)
    }
}

/// Escapes everything but RFC 3986's unreserved characters, as `application/x-www-form-urlencoded`
/// allows.
func formEscape(_ text: String) -> String {
    text.addingPercentEncoding(
        withAllowedCharacters: CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
    )
        ?? ""
}

/// `name=value&…`, escaped.
func formEncode(_ pairs: [(name: String, value: String)]) -> String {
    pairs.map { formEscape($0.name) + "=" + formEscape($0.value) }.joined(separator: "&")
}

/// Runs `body` against a fresh provider with the default client registered, then stops both.
func withProvider(
    pathPrefix: String = "",
    _ body: (FakeIdentityProvider, TestHTTP) async throws -> Void
) async throws {
    let idp = try FakeIdentityProvider.start(pathPrefix: pathPrefix)
    idp.registerClient(id: clientID, secret: clientSecret)
    let http = TestHTTP()
    do {
        try await body(idp, http)
    } catch {
        await idp.stop()
        http.client.shutdown()
        throw error
    }
    await idp.stop()
    http.client.shutdown()
}

/// A PKCE pair (RFC 7636): a random verifier and its S256 challenge.
struct PKCE {
    var verifier = SecureRandom.token()
    var challenge: String { Base64URL.encode(Digest.sha256(Array(verifier.utf8))) }
}

/// `Authorization: Basic` for `id` and `secret`, form-urlencoded first (RFC 6749 §2.3.1).
func basicAuthorization(_ id: String = clientID, _ secret: String = clientSecret) -> HTTPFields {
    let pair = formEscape(id) + ":" + formEscape(secret)
    return [.authorization: "Basic " + Data(pair.utf8).base64EncodedString()]
}

/// An authorization URL with every parameter the fake requires, plus `extra`.
func authorizationURL(
    _ idp: FakeIdentityProvider,
    pkce: PKCE,
    state: String = "st-1",
    nonce: String? = "n-1",
    extra: [(name: String, value: String)] = []
) -> String {
    var query: [(name: String, value: String)] = [
        ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI), ("scope", "openid profile"),
        ("state", state), ("code_challenge", pkce.challenge), ("code_challenge_method", "S256"),
    ]
    if let nonce { query.append(("nonce", nonce)) }
    return idp.authorizationEndpoint + "?" + formEncode(query + extra)
}

/// Runs the browser step and returns the code.
func authorizationCode(_ idp: FakeIdentityProvider, pkce: PKCE, extra: [(name: String, value: String)] = []) async throws -> String {
    let result = try await idp.followAuthorization(authorizationURL(idp, pkce: pkce, extra: extra))
    return try #require(result.parameters["code"])
}

/// Redeems `code` with Basic authentication.
func redeem(_ http: TestHTTP, _ idp: FakeIdentityProvider, code: String, verifier: String) async throws -> Reply {
    try await http.postForm(
        idp.tokenEndpoint,
        [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI), ("code_verifier", verifier)],
        headers: basicAuthorization()
    )
}

/// A whole login: the token response's JSON.
func login(_ http: TestHTTP, _ idp: FakeIdentityProvider) async throws -> [String: Any] {
    let pkce = PKCE()
    let code = try await authorizationCode(idp, pkce: pkce)
    let reply = try await redeem(http, idp, code: code, verifier: pkce.verifier)
    #expect(reply.status == 200)
    return reply.json
}

func refresh(_ http: TestHTTP, _ idp: FakeIdentityProvider, _ refreshToken: String) async throws -> Reply {
    try await http.postForm(idp.tokenEndpoint, [("grant_type", "refresh_token"), ("refresh_token", refreshToken)], headers: basicAuthorization())
}

/// The claims of a JWT, unverified.
func claims(of token: String) throws -> [String: Any] {
    let jws = try JWS(compactSerialization: token)
    return try #require(try JSONSerialization.jsonObject(with: Data(jws.payload)) as? [String: Any])
}

/// The header JSON of a compact JWS-like token, even one TGCrypto would not parse (`alg: none`).
func header(of token: String) throws -> [String: Any] {
    let first = try #require(token.split(separator: ".", omittingEmptySubsequences: false).first)
    return try #require(try JSONSerialization.jsonObject(with: Data(Base64URL.decode(first))) as? [String: Any])
}

/// Verifies `token` with the JWKS key its `kid` names, as a client would.
func verifyWithJWKS(_ token: String, _ http: TestHTTP, _ idp: FakeIdentityProvider) async throws {
    let keys = try JWKSet(json: try await http.get(idp.jwksURI).body)
    let jws = try JWS(compactSerialization: token)
    let keyID = try #require(jws.header.keyID)
    let jwk = try #require(keys.keys(withID: keyID).first)
    try jws.verify(using: PublicKey(jwk: jwk))
}
