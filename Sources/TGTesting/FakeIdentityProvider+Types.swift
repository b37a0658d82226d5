public import Foundation
public import HTTPTypes
public import TGCrypto

extension FakeIdentityProvider {
    /// Everything about the provider's behaviour a test may change at any time (read per request).
    /// Change it with ``FakeIdentityProvider/configure(_:)`` or by assigning
    /// ``FakeIdentityProvider/settings``.
    public struct Settings: Sendable {
        /// The subject logged in at `/authorize` when the request has no `login_hint`.
        public var fakeUser = "alice"
        /// How ID tokens are signed: `.rs256` (the RSA key, default) or `.es256` (the EC key).
        /// Any other algorithm has no key, and token requests answer 500.
        public var signingAlgorithm: JWSAlgorithm = .rs256
        /// ID token `exp` is `iat` plus this.
        public var idTokenLifetime: Duration = .seconds(3600)
        /// Access tokens expire (for `/userinfo`) this long after issue; sent as `expires_in`.
        public var accessTokenLifetime: Duration = .seconds(3600)
        /// When set, refresh tokens expire this long after issue, and token responses carry
        /// `refresh_token_expires_in`. Default: refresh tokens never expire, nothing is announced.
        public var refreshTokenLifetime: Duration?
        /// Authorization codes expire this long after the redirect.
        public var authorizationCodeLifetime: Duration = .seconds(600)
        /// Whether token responses carry a `refresh_token`.
        public var issuesRefreshTokens = true
        /// When set, only a login whose authorization request's `prompt` included this value gets
        /// a refresh token, as providers that hold to OIDC Core §11 give offline access only with
        /// `consent`; others get an access and ID token only.
        public var refreshTokenPrompt: String?
        /// Whether a refresh answers with a new refresh token and kills the old one (default). When
        /// false, the same refresh token stays valid and the response carries none.
        public var rotatesRefreshTokens = true
        /// Whether presenting a rotated refresh token again revokes the whole grant (reuse
        /// detection, as some providers do), not just fails with `invalid_grant`.
        public var revokesGrantOnRefreshTokenReuse = false
        /// When set, a refresh token or code the provider does not honour (revoked, expired,
        /// rotated away) is answered with this status and an empty body, as glewlwyd does, instead
        /// of `invalid_grant` JSON.
        public var rejectedGrantEmptyBodyStatus: Int?
        /// When set, `/token` answers a client that does not authenticate (a wrong secret) with
        /// this status and an empty body, as glewlwyd 2.7 does, instead of 401 `invalid_client`;
        /// `/revoke` still answers 401, so only a call there tells the two apart.
        public var refusedClientEmptyBodyStatus: Int?
        /// When set, `/logout` enforces registration as real providers do: a
        /// `post_logout_redirect_uri` must be one of these and come with an `id_token_hint`, or
        /// the answer is 400 and nobody is sent anywhere.
        public var registeredPostLogoutRedirectURIs: [String]?
        /// Whether ID tokens carry `nbf` (equal to `iat`).
        public var includesNotBefore = false
        /// Whether ID tokens carry `sid`, the login's session at the provider (OpenID Connect
        /// Back-Channel Logout 1.0 §2.1): each authorization is a session of its own.
        public var includesSessionID = true
        /// Audiences added to the ID token's `aud` after the client ID; when non-empty `aud` is an
        /// array and `azp` (the client ID) is included.
        public var extraAudiences: [String] = []
        /// Whether ID tokens carry `azp` even with a single audience.
        public var includesAuthorizedParty = false
        /// Claims added to every ID token and UserInfo answer (`tid`, `email`, `name`, `groups`…).
        /// Values must be JSON-serializable (String, Int, Double, Bool, arrays and dictionaries of
        /// them). They never replace a claim the fake sets itself; use
        /// ``TokenMisbehaviour/idTokenClaims(_:)`` for that.
        public var extraClaims: [String: any Sendable] = [:]
        /// Claims only `/userinfo` answers with, never the ID token (LemonLDAP::NG puts `name`
        /// and `email` there by default); `extraClaims` win over them.
        public var userInfoOnlyClaims: [String: any Sendable] = [:]
        /// The `iss` parameter of authorization responses (RFC 9207).
        public var authorizationResponseIssuer: AuthorizationResponseIssuer = .issuer
        /// When set, `/authorize` redirects with this error (and the request's `state`) instead of
        /// a code.
        public var authorizationError: OAuthErrorDescription?
        /// Top-level members of the discovery document replaced (a value) or removed (`nil`).
        /// Assign a literal (`["revocation_endpoint": nil]`) or use
        /// ``FakeIdentityProvider/removeDiscoveryMember(_:)``: `overrides[key] = nil` on a
        /// dictionary deletes the entry instead of storing the removal.
        public var discoveryOverrides: [String: (any Sendable)?] = [:]
        /// When set, discovery answers with this instead of the document (fetches still counted).
        public var discoveryFailure: EndpointFailure?
        /// When set, `/jwks` answers with this instead of the keys (fetches still counted).
        public var jwksFailure: EndpointFailure?
        /// When set, `/userinfo` answers with this, whatever the access token.
        public var userInfoFailure: EndpointFailure?
        /// When set, `/revoke` answers with this (after recording the request, revoking nothing).
        public var revocationFailure: EndpointFailure?
        /// When set, `/userinfo` reports this `sub` instead of the token's subject (the
        /// substitution OIDC Core §5.3.2 tells clients to detect).
        public var userInfoSubject: String?

        public init() {}
    }

    /// What `/authorize` puts in the `iss` parameter of its answer.
    public enum AuthorizationResponseIssuer: Sendable, Equatable {
        /// The provider's issuer (RFC 9207), the default.
        case issuer
        /// No `iss` parameter at all.
        case omitted
        /// Another value, to simulate a mix-up attack.
        case value(String)
    }

    /// An OAuth error: `error`, `error_description`, and the HTTP status where one applies.
    public struct OAuthErrorDescription: Sendable, Equatable {
        public var code: String
        public var description: String?
        public var status: Int

        public init(code: String, description: String? = nil, status: Int = 400) {
            self.code = code
            self.description = description
            self.status = status
        }
    }

    /// A broken answer for discovery, JWKS, UserInfo or revocation.
    public enum EndpointFailure: Sendable, Equatable {
        /// This status with a small JSON error body (`Retry-After` when given).
        case status(Int, retryAfter: Int? = nil)
        /// 200 with a body that is not JSON (`{"issuer":`).
        case malformedJSON
        /// Exactly this status, content type and body.
        case raw(status: Int, contentType: String, body: String)
    }

    /// A deviation of `/token` from correct behaviour, applied by
    /// ``FakeIdentityProvider/misbehave(_:_:grantType:)``.
    ///
    /// Answer replacements (`error`, `serverError`, `tooManyRequests`, `serviceUnavailable`,
    /// `malformedJSON`, `raw`) are decided before the grant is looked at, so a code or refresh token
    /// sent with such a request stays usable. The others change a normal answer.
    public enum TokenMisbehaviour: Sendable {
        /// An OAuth error response: `{"error": code, "error_description": description}`.
        case error(code: String, description: String? = nil, status: Int = 400)
        /// 500 with an OAuth `server_error`.
        case serverError
        /// 429 with `Retry-After: <seconds>`.
        case tooManyRequests(retryAfter: Int)
        /// 503 with an OAuth `temporarily_unavailable`, and `Retry-After` when given.
        case serviceUnavailable(retryAfter: Int? = nil)
        /// 200 with a body that is cut off (`{"access_token":` by default).
        case malformedJSON(String = #"{"access_token":"#)
        /// Exactly this status, content type and body.
        case raw(status: Int, contentType: String, body: String)
        /// Waits this long before answering (inside an async reply; no server thread blocks).
        /// Past 30 seconds the server's request timeout answers 503 first.
        case delay(Duration)
        /// Answers once the test opens `gate` (inside an async reply; no server thread blocks):
        /// the test looks at what happens while the answer is held, then releases it.
        case held(TestGate)
        /// A 200 answer without `access_token`.
        case missingAccessToken
        /// A 200 answer whose `token_type` is this (e.g. `"mac"`).
        case tokenType(String)
        /// A 200 answer without `id_token`.
        case withoutIDToken
        /// Top-level members of a 200 answer replaced (a value) or removed (`nil`).
        case responseMembers([String: (any Sendable)?])
        /// The ID token signed by a key not in the JWKS, with header `kid` `keyID`, or the kid of
        /// the published key it should have been signed with when `nil`.
        case idTokenSignedWithUnpublishedKey(keyID: String? = nil)
        /// The ID token's `aud` is this instead.
        case idTokenAudience(String)
        /// The ID token expired an hour ago (`iat` two hours ago).
        case expiredIDToken
        /// The ID token unsigned: header `{"alg":"none"}`, `header.payload.` (RFC 7519 §6).
        case unsignedIDToken
        /// The ID token HS256-signed with the published RSA JWK's bytes (`JWK.json()`) as the
        /// HMAC secret and that key's `kid`: the key-confusion forgery.
        case idTokenHMACSignedWithPublicKey
        /// The ID token carries this `nonce` (e.g. one from an earlier login: a replay).
        case idTokenNonce(String)
        /// The ID token's `iss` is this.
        case idTokenIssuer(String)
        /// ID token claims replaced (a value) or removed (`nil`).
        case idTokenClaims([String: (any Sendable)?])
    }

    /// How long a misbehaviour lasts.
    public enum Repetition: Sendable, Equatable {
        /// The next `n` token responses it applies to.
        case next(Int)
        /// Until ``FakeIdentityProvider/resetMisbehaviours()``.
        case untilReset
    }

    /// How a client authenticated at the token or revocation endpoint.
    public enum ClientAuthenticationMethod: String, Sendable, Hashable, CaseIterable {
        case clientSecretBasic = "client_secret_basic"
        case clientSecretPost = "client_secret_post"
        case privateKeyJWT = "private_key_jwt"
        /// A public client: `client_id` only.
        case none
    }

    /// One request as the fake received it.
    public struct RecordedRequest: Sendable {
        /// `GET`, `POST`, …
        public var method: String
        /// The full path as sent (percent-encoded, without the query).
        public var path: String
        /// The path below the issuer (`/token`), or nil for a path outside it.
        public var endpoint: String?
        /// The decoded query parameters.
        public var query: [(name: String, value: String)]
        /// The decoded form parameters when the body is `application/x-www-form-urlencoded`.
        public var form: [(name: String, value: String)]
        /// The request header fields.
        public var headerFields: HTTPFields
        /// The fake's clock when the request arrived.
        public var receivedAt: Date

        /// The first value of query parameter `name`.
        public func queryValue(_ name: String) -> String? { query.first { $0.name == name }?.value }
        /// The first value of form parameter `name`.
        public func formValue(_ name: String) -> String? { form.first { $0.name == name }?.value }
        /// The value of header `name` (several joined by `, `), case-insensitively.
        public func header(_ name: String) -> String? {
            HTTPField.Name(name).flatMap { headerFields[$0] }
        }
    }

    /// Where `/authorize` sent the browser, as ``FakeIdentityProvider/followAuthorization(_:)``
    /// saw it.
    public struct AuthorizationResult: Sendable {
        /// The HTTP status (302 for a redirect, 200 for `form_post`, 400 for a refused request).
        public var status: Int
        /// The `Location` of a redirect, or the `action` of a `form_post` page.
        public var destination: String?
        /// The parameters of the redirect's query or the form's fields (`code`, `state`, `iss`,
        /// `error`…).
        public var parameters: [String: String]
        /// The body (the form page, or an error JSON).
        public var body: String
    }
}
