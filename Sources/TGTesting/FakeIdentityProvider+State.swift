import Foundation
import TGCrypto

/// A value behind a lock. `NSLock`, like the rest of TGTesting: `Synchronization.Mutex` draws
/// ThreadSanitizer false positives between libmicrohttpd threads and Swift tasks (docs/c-libraries.md).
final class Locked<Value: Sendable>: @unchecked Sendable {
    // Invariant: `value` is only read or written inside `withLock`, with `lock` held.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// A registered client.
struct FakeClient: Sendable {
    var id: String
    var secret: String?
    var publicKey: JWK?
    var redirectURIs: [String]?
    var methods: Set<FakeIdentityProvider.ClientAuthenticationMethod>?
}

/// One login: what the tokens issued from one authorization code share.
struct FakeGrant: Sendable {
    var clientID: String
    var subject: String
    var scope: String
    var nonce: String?
    var authTime: Date
    /// The `prompt` values of the authorization request.
    var prompt: [String] = []
    /// How the user signed in (`acr`): the first of the request's `acr_values`, or the `acrs`
    /// value an Entra-style `claims` request names; nil when neither asked.
    var acr: String?
    var revoked = false
    /// The provider session the login belongs to (`sid` in its ID tokens): one per authorization.
    var sessionID = "sid-" + SecureRandom.token(byteCount: 12)
}

struct FakeCode: Sendable {
    var grantID: Int
    var redirectURI: String
    var codeChallenge: String
    var expires: Date
    var used = false
}

struct FakeAccessToken: Sendable {
    var grantID: Int
    var expires: Date
    var revoked = false
}

struct FakeRefreshToken: Sendable {
    enum Status: Sendable { case active, rotated, revoked }
    var grantID: Int
    var expires: Date?
    var status = Status.active
}

/// A key pair the fake signs with, and its published half.
struct FakeSigningKey: Sendable {
    var privateKey: PrivateKey
    var algorithm: JWSAlgorithm
    var jwk: JWK

    /// A key with a new random `kid`: new material, or the process's shared material for `purpose`.
    static func make(_ algorithm: JWSAlgorithm, shared purpose: SharedKeyMaterial.Purpose? = nil) throws -> FakeSigningKey {
        let key = try purpose.map { try SharedKeyMaterial.key(algorithm, for: $0) } ?? SharedKeyMaterial.generate(algorithm)
        let keyID = (algorithm == .es256 ? "ec-" : "rsa-") + SecureRandom.token(byteCount: 6)
        return FakeSigningKey(privateKey: key, algorithm: algorithm, jwk: key.publicJWK(keyID: keyID, algorithm: algorithm.rawValue, use: "sig"))
    }

    var keyID: String { jwk.keyID ?? "" }
}

/// Key material generated once per process: an RSA-2048 key costs about a third of a second of
/// CPU, and a test run starts dozens of providers. Each provider still gives its keys their own
/// `kid`s; ``FakeIdentityProvider/start(pathPrefix:settings:freshKeys:now:)`` can ask for material
/// of its own, and rotation always makes new material.
enum SharedKeyMaterial {
    enum Purpose: String, Sendable {
        /// The keys a provider starts with.
        case published
        /// The key of the "signed by a key not in the JWKS" misbehaviour.
        case unpublished
    }

    private static let cache = Locked<[String: PrivateKey]>([:])

    static func key(_ algorithm: JWSAlgorithm, for purpose: Purpose) throws -> PrivateKey {
        // Generating under the lock makes concurrent first callers wait instead of duplicating work.
        try cache.withLock { cache in
            let name = algorithm.rawValue + "/" + purpose.rawValue
            if let key = cache[name] { return key }
            let key = try generate(algorithm)
            cache[name] = key
            return key
        }
    }

    static func generate(_ algorithm: JWSAlgorithm) throws -> PrivateKey {
        try PrivateKey.generate(algorithm == .es256 ? .ec(.p256) : .rsa(bits: 2048))
    }
}

struct ActiveMisbehaviour: Sendable {
    var misbehaviour: FakeIdentityProvider.TokenMisbehaviour
    var remaining: Int?
    var grantType: String?
}

/// Everything the fake knows, behind one lock.
struct FakeState: Sendable {
    var issuer = ""
    var settings: FakeIdentityProvider.Settings
    var clockOffset: Duration = .zero

    var clients: [String: FakeClient] = [:]
    var grants: [Int: FakeGrant] = [:]
    var nextGrantID = 1
    var codes: [String: FakeCode] = [:]
    var accessTokens: [String: FakeAccessToken] = [:]
    var refreshTokens: [String: FakeRefreshToken] = [:]
    var seenAssertionIDs: Set<String> = []

    /// Published keys, newest first; the first of an algorithm signs.
    var keys: [FakeSigningKey]
    /// Keys never published, for the "wrong key" misbehaviour (made on first use).
    var unpublishedKeys: [JWSAlgorithm: FakeSigningKey] = [:]
    var misbehaviours: [ActiveMisbehaviour] = []

    var requests: [FakeIdentityProvider.RecordedRequest] = []
    var discoveryFetchCount = 0
    var jwksFetchCount = 0
    var refreshCount = 0
    var tokenAuthenticationMethods: [FakeIdentityProvider.ClientAuthenticationMethod] = []
    var revokedTokens: [String] = []
    var logoutRequests: [[String: String]] = []
    var lastAuthorizationQuery: [String: String]?
    /// Each client's back-channel logout URI (`backchannel_logout_uri`), when registered.
    var backChannelLogoutURIs: [String: String] = [:]

    init(settings: FakeIdentityProvider.Settings, keys: [FakeSigningKey]) {
        self.settings = settings
        self.keys = keys
    }

    func signingKey(for algorithm: JWSAlgorithm) -> FakeSigningKey? {
        keys.first { $0.algorithm == algorithm }
    }

    /// The grant behind an access token that is live (known, not revoked, not expired).
    func liveGrant(accessToken: String, at now: Date) -> FakeGrant? {
        guard let token = accessTokens[accessToken], !token.revoked, token.expires > now,
            let grant = grants[token.grantID], !grant.revoked
        else { return nil }
        return grant
    }

    /// Takes the misbehaviours for the next token request of `grantType`, counting them down.
    mutating func takeMisbehaviours(grantType: String?) -> [FakeIdentityProvider.TokenMisbehaviour] {
        var taken: [FakeIdentityProvider.TokenMisbehaviour] = []
        var replaced = false
        for index in misbehaviours.indices {
            let entry = misbehaviours[index]
            if let wanted = entry.grantType, wanted != grantType { continue }
            if entry.misbehaviour.replacesAnswer {
                // Only the first answer replacement applies; later ones wait for their turn.
                if replaced { continue }
                replaced = true
            }
            taken.append(entry.misbehaviour)
            if let remaining = entry.remaining { misbehaviours[index].remaining = remaining - 1 }
        }
        misbehaviours.removeAll { ($0.remaining ?? 1) <= 0 }
        return taken
    }
}

extension FakeIdentityProvider.TokenMisbehaviour {
    /// Whether it replaces the whole answer (decided before the grant is looked at).
    var replacesAnswer: Bool {
        switch self {
        case .error, .serverError, .tooManyRequests, .serviceUnavailable, .malformedJSON, .raw: true
        default: false
        }
    }
}
