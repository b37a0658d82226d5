import Foundation
import HTTPTypes
import TGBase
public import TGCrypto
public import TGHTTPClient

/// OpenID Connect Back-Channel Logout 1.0 on the provider's side: logout tokens signed with the
/// provider's keys (or forged in the ways a client must refuse), and the POST a provider makes to
/// a client's `backchannel_logout_uri` when a user's sessions end.
extension FakeIdentityProvider {
    /// How a logout token is signed.
    public enum LogoutTokenSigning: Sendable {
        /// With the published key of `algorithm` (`.rs256` or `.es256`).
        case published(JWSAlgorithm = .rs256)
        /// Unsigned: header `alg: none` and an empty signature.
        case unsigned
        /// HS256 keyed with the published RSA JWK's bytes, under that key's `kid`: key confusion.
        case hmacWithPublishedKey
        /// With a key the JWKS does not publish, under `kid` `keyID` (the published key's when nil).
        case unpublishedKey(keyID: String? = nil)
    }

    /// A logout token (§2.4): `iss`, `aud` (`audience`), `iat` now, `exp` two minutes later, a
    /// fresh `jti`, the back-channel logout event, and `sub` and/or `sid` when given; header `typ`
    /// `type` (none when nil). `claims` then replaces (a value) or removes (nil) members, for the
    /// invalid variants; values must be JSON-serializable.
    public func logoutToken(
        subject: String? = nil,
        sessionID: String? = nil,
        audience: String = "tokengate",
        type: String? = "logout+jwt",
        signing: LogoutTokenSigning = .published(),
        claims changes: [String: (any Sendable)?] = [:]
    ) throws -> String {
        let now = Int(now.timeIntervalSince1970)
        var claims: [String: Any] = [
            "iss": issuer, "aud": audience, "iat": now, "exp": now + 120, "jti": SecureRandom.token(byteCount: 16),
            "events": [LogoutTokenEvent.name: [String: Any]()],
        ]
        if let subject { claims["sub"] = subject }
        if let sessionID { claims["sid"] = sessionID }
        for (name, value) in changes {
            if let value { claims[name] = value } else { claims.removeValue(forKey: name) }
        }
        let payload = Array(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys, .withoutEscapingSlashes]))
        return try sign(payload, type: type, signing: signing)
    }

    /// The provider session ids (`sid`) of `subject`'s logins, oldest first (their grants
    /// revoked or not).
    public func sessionIDs(of subject: String) -> [String] {
        endpoints.state.withLock { state in
            state.grants.sorted { $0.key < $1.key }.filter { $0.value.subject == subject }.map(\.value.sessionID)
        }
    }

    /// Registers where the logout tokens of client `id` go: its `backchannel_logout_uri`.
    public func registerBackChannelLogoutURI(_ uri: String, forClient id: String) {
        endpoints.state.withLock { $0.backChannelLogoutURIs[id] = uri }
    }

    /// What a provider does when `subject` signs out there (the session `sessionID` only) or an
    /// administrator ends all their sessions (`sessionID` nil): the grants of those sessions are
    /// revoked, and each client with a registered back-channel logout URI gets one logout token
    /// per session it had (`sub` and `sid`), POSTed form-encoded (§2.5). Returns each answer's
    /// status, in the order sent.
    @discardableResult
    public func endSessions(of subject: String, sessionID: String? = nil, using client: HTTPClient) async throws -> [Int] {
        let notices: [(uri: String, clientID: String, sessionID: String)] = endpoints.state.withLock { state in
            var notices: [(uri: String, clientID: String, sessionID: String)] = []
            for (id, grant) in state.grants.sorted(by: { $0.key < $1.key })
            where grant.subject == subject && (sessionID == nil || grant.sessionID == sessionID) {
                state.grants[id]?.revoked = true
                guard let uri = state.backChannelLogoutURIs[grant.clientID],
                    !notices.contains(where: { $0.clientID == grant.clientID && $0.sessionID == grant.sessionID })
                else { continue }
                notices.append((uri, grant.clientID, grant.sessionID))
            }
            return notices
        }
        var statuses: [Int] = []
        for notice in notices {
            let token = try logoutToken(subject: subject, sessionID: notice.sessionID, audience: notice.clientID)
            statuses.append(try await Self.postLogoutToken(token, to: notice.uri, using: client))
        }
        return statuses
    }

    /// POSTs `token` as a provider does (`application/x-www-form-urlencoded`, `logout_token=…`)
    /// and returns the answer's status.
    public static func postLogoutToken(_ token: String, to uri: String, using client: HTTPClient) async throws -> Int {
        guard let components = URLComponents(string: uri), let scheme = components.scheme, let host = components.host else {
            throw HTTPClientError.invalidURL
        }
        let authority = host + (components.port.map { ":\($0)" } ?? "")
        var request = HTTPRequest(method: .post, scheme: scheme, authority: authority, path: components.percentEncodedPath)
        request.headerFields[.contentType] = "application/x-www-form-urlencoded"
        let body = Array(FormURLEncoding.encode([(name: "logout_token", value: token)]).utf8)
        return try await client.send(request, body: body, timeout: .seconds(10)).head.status.code
    }

    /// Signs `payload` as `signing` says, with header `typ` `type`.
    func sign(_ payload: [UInt8], type: String?, signing: LogoutTokenSigning) throws -> String {
        func header(_ members: [String: String]) -> String {
            var members = members
            members["typ"] = type
            let data = (try? JSONSerialization.data(withJSONObject: members, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
            return String(decoding: data, as: UTF8.self)
        }
        switch signing {
        case .published(let algorithm):
            let key = try endpoints.state.withLock { try $0.signingKey(for: algorithm).orThrow() }
            return try JWS.sign(payload: payload, algorithm: algorithm, keyID: key.keyID, type: type, using: key.privateKey)
        case .unsigned:
            return FakeEndpoints.unsafeToken(header: header(["alg": "none"]), payload: payload) { _ in [] }
        case .hmacWithPublishedKey:
            let rsa = try endpoints.state.withLock { try $0.signingKey(for: .rs256).orThrow() }
            return FakeEndpoints.unsafeToken(header: header(["alg": "HS256", "kid": rsa.keyID]), payload: payload) { input in
                Digest.hmacSHA256(key: rsa.jwk.json(), message: Array(input.utf8))
            }
        case .unpublishedKey(let keyID):
            let published = try endpoints.state.withLock { try $0.signingKey(for: .rs256).orThrow() }
            let stranger = try FakeSigningKey.make(.rs256, shared: .unpublished)
            return try JWS.sign(payload: payload, algorithm: .rs256, keyID: keyID ?? published.keyID, type: type, using: stranger.privateKey)
        }
    }
}

/// The event member that makes a JWT a logout token (Back-Channel Logout 1.0 §2.4).
public enum LogoutTokenEvent {
    public static let name = "http://schemas.openid.net/event/backchannel-logout"
}

/// The fake has no key for what was asked.
struct MissingKey: Error {}

extension Optional {
    fileprivate func orThrow() throws -> Wrapped {
        guard let value = self else { throw MissingKey() }
        return value
    }
}
