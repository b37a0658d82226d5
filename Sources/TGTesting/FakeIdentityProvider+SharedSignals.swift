import Foundation
import TGBase
import TGCrypto

/// The provider as an OpenID Shared Signals Framework 1.0 transmitter: security event tokens
/// (RFC 8417) signed with the provider's keys, or forged in the ways a receiver must refuse.
extension FakeIdentityProvider {
    /// The event type URIs of CAEP 1.0, RISC 1.0 and SSF 1.0 a transmitter sends.
    public enum SecurityEvent {
        public static let sessionRevoked = "https://schemas.openid.net/secevent/caep/event-type/session-revoked"
        public static let credentialChange = "https://schemas.openid.net/secevent/caep/event-type/credential-change"
        public static let tokenClaimsChange = "https://schemas.openid.net/secevent/caep/event-type/token-claims-change"
        public static let accountDisabled = "https://schemas.openid.net/secevent/risc/event-type/account-disabled"
        public static let accountPurged = "https://schemas.openid.net/secevent/risc/event-type/account-purged"
        public static let sessionsRevoked = "https://schemas.openid.net/secevent/risc/event-type/sessions-revoked"
        public static let verification = "https://schemas.openid.net/secevent/ssf/event-type/verification"
    }

    /// A security event token (SSF 1.0 §4): `iss`, `aud` (`audience`), `iat` now, a fresh `jti`,
    /// `events` with each of `events` (an empty payload, or `payload`), and, when `subject` is
    /// given, `sub_id` in the `iss_sub` format with this provider's issuer; header `typ` `type`
    /// (none when nil). `claims` then replaces (a value) or removes (nil) members.
    public func securityEventToken(
        _ events: [String],
        subject: String? = nil,
        payload: [String: any Sendable] = [:],
        audience: String = "tokengate",
        type: String? = "secevent+jwt",
        signing: LogoutTokenSigning = .published(),
        claims changes: [String: (any Sendable)?] = [:]
    ) throws -> String {
        let now = Int(now.timeIntervalSince1970)
        var claims: [String: Any] = [
            "iss": issuer, "aud": audience, "iat": now, "jti": SecureRandom.token(byteCount: 16),
            "events": Dictionary(uniqueKeysWithValues: events.map { ($0, payload as [String: Any]) }),
        ]
        if let subject { claims["sub_id"] = ["format": "iss_sub", "iss": issuer, "sub": subject] }
        for (name, value) in changes {
            if let value { claims[name] = value } else { claims.removeValue(forKey: name) }
        }
        let json = Array(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys, .withoutEscapingSlashes]))
        return try sign(json, type: type, signing: signing)
    }
}
