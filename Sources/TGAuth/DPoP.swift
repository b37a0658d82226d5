public import Foundation
import Synchronization
public import TGBase
public import TGCrypto
public import TGStore

/// Whether an app's tokens are bound to a key it holds (RFC 9449), per app.
public enum DPoPMode: String, Sendable, Hashable, CaseIterable {
    /// Bearer tokens; a `DPoP` header is ignored.
    case off
    /// Tokens are bound when the token request carries a proof.
    case allowed
    /// Every token request must carry a proof; every token is bound.
    case required
}

/// How DPoP proofs are checked (docs/architecture.md, "DPoP").
public struct DPoPSettings: Sendable {
    /// The signature algorithms a proof may use (never `none` or HMAC: ``JWSAlgorithm`` has neither).
    public var algorithms: [JWSAlgorithm] = [.es256, .es384, .edDSA, .ps256, .rs256]
    /// A proof's `iat` may be at most this old.
    public var proofMaxAge: TimeInterval = 60
    /// …and at most this far in the future (clock skew).
    public var futureSkew: TimeInterval = 5
    /// Every proof must carry a nonce TokenGate issued (`DPoP-Nonce`, RFC 9449 §8).
    public var requireNonce = false
    /// A nonce is issued anew this often and accepted for twice as long.
    public var nonceLifetime: TimeInterval = 300
    /// Proofs remembered per instance for the replay check (`jti`); past it, proofs are refused.
    public var replayCapacity = 1_000_000

    public init() {}
}

/// A refused DPoP proof (RFC 9449 §7.1 and §8): the caller answers 400 at the token endpoint,
/// 401 with a `DPoP` challenge at a resource.
public struct DPoPError: Error, Sendable, Equatable {
    public enum Code: String, Sendable {
        case invalidProof = "invalid_dpop_proof"
        /// The proof lacks a current nonce: retry with ``DPoPError/nonce``.
        case useNonce = "use_dpop_nonce"
        /// At a resource: a bound token sent as `Bearer`, or an unbound one as `DPoP`.
        case invalidToken = "invalid_token"
    }

    public var code: Code
    /// What is wrong; never a token or the proof.
    public var description: String
    /// With ``Code/useNonce``: the nonce to send.
    public var nonce: String?
    /// The `alg` values proofs may use (a resource's challenge names them).
    public var algorithms: [String] = []

    public init(_ code: Code, _ description: String, nonce: String? = nil) {
        self.code = code
        self.description = description
        self.nonce = nonce
    }

    static func invalid(_ description: String) -> DPoPError { DPoPError(.invalidProof, description) }
}

/// The HTTP request a proof must match.
public struct DPoPTarget: Sendable {
    /// `htm`: the request's method.
    public var method: String
    /// `htu`: TokenGate's public base URL and the request's path, without query or fragment.
    public var uri: String
    /// At a resource: the access token presented with the proof (its hash is the proof's `ath`).
    public var accessToken: Substring?

    public init(method: String, uri: String, accessToken: Substring? = nil) {
        self.method = method
        self.uri = uri
        self.accessToken = accessToken
    }
}

/// A proof that verified (``DPoPVerifier/verify(_:for:boundTo:)``) and is not yet recorded as
/// used: the caller records it (``DPoPBinding/recordProof(_:)``, or a grant in its transaction)
/// once the rest of the request is authentic, so that a request with a made-up token or grant
/// takes no place in the replay record.
public struct DPoPProof: Sendable, Equatable {
    /// The RFC 7638 thumbprint of the proof's key.
    public let jkt: String
    /// 128 bits of SHA-256 over `jkt` and the proof's `jti`: what the replay record keeps.
    let replayKey: DPoPReplayCache.Key
    /// Past this the proof's `iat` is too old to be accepted: it need not be remembered longer.
    let acceptableUntil: Date
}

/// DPoP at TokenGate (RFC 9449): the proofs' checks (``DPoPVerifier``), the record of used
/// proofs every instance shares, and the key an app's new tokens are bound to.
public final class DPoPBinding: Sendable {
    /// Checks a proof's own rules; no I/O.
    public let verifier: DPoPVerifier
    /// TokenGate's public base URL: a proof's `htu` is it and the request's path.
    public let issuer: String
    let clients: [String: AppClient]
    let clock: WallClock
    let metrics: AuthMetrics
    /// The shared record of DPoP proofs, by group commit (``recordProof(_:)``).
    let proofRecords: GroupCommit<PendingProof, Bool>

    public init(
        settings: DPoPSettings = DPoPSettings(),
        vault: TokenVault,
        store: Store,
        clients: [String: AppClient],
        issuer: String,
        clock: WallClock = .system,
        metrics: AuthMetrics = AuthMetrics()
    ) {
        verifier = DPoPVerifier(settings: settings, vault: vault, clock: clock)
        self.issuer = issuer
        self.clients = clients
        self.clock = clock
        self.metrics = metrics
        proofRecords = Self.proofRecorder(store)
    }

    /// Verifies a proof (the `DPoP` header's value) for `method` at TokenGate's `path`; with an
    /// `accessToken`, its hash must be the proof's `ath`; with `boundTo`, a proof of another key
    /// is refused before its signature is checked. Does not record the proof.
    public func verify(
        _ proof: String,
        method: String,
        path: some StringProtocol,
        accessToken: Substring? = nil,
        boundTo: String? = nil
    ) throws(DPoPError) -> DPoPProof {
        try verifier.verify(proof, for: DPoPTarget(method: method, uri: issuer + path, accessToken: accessToken), boundTo: boundTo)
    }

    /// The `alg` values proofs may use (a resource's challenge names them).
    public var algorithmNames: [String] { verifier.algorithmNames }

    /// The nonce to hand out now (`DPoP-Nonce`), when nonces are required.
    public func currentNonce() -> String? { verifier.currentNonce() }

    /// Whether `client`'s tokens are bound to a key (``DPoPMode/off`` for an unknown app).
    public func mode(ofClient client: String) -> DPoPMode { clients[client]?.dpop ?? .off }

    /// The key new tokens of `client` are bound to: the verified proof's (`proofKey`) when the app
    /// uses DPoP, none when it does not; a token request without a proof is refused when the app
    /// requires one.
    func bindingKey(_ proofKey: String?, client: String) throws(OAuthError) -> String? {
        switch clients[client]?.dpop ?? .off {
        case .off:
            return nil
        case .allowed:
            return proofKey
        case .required:
            guard let proofKey else {
                throw OAuthError(.invalidDPoPProof, "This app's tokens are DPoP-bound (RFC 9449): send a DPoP proof with the token request.")
            }
            return proofKey
        }
    }

    static let otherDPoPKey = OAuthError(
        .invalidDPoPProof,
        "This token is DPoP-bound: send a DPoP proof signed by the key it is bound to."
    )

    /// The `token_type` of tokens bound to `jkt` (RFC 9449 §5).
    static func tokenType(_ jkt: String?) -> String { jkt == nil ? "Bearer" : "DPoP" }
}
