import Foundation
import TGBase
import TGOIDC

/// An app's `grant_type=urn:ietf:params:oauth:grant-type:token-exchange` request (RFC 8693 §2.1):
/// its TokenGate access token in, an upstream access token for one API out.
public struct TokenExchangeRequest: Sendable {
    public static let grantType = "urn:ietf:params:oauth:grant-type:token-exchange"
    public static let accessTokenType = "urn:ietf:params:oauth:token-type:access_token"

    public var subjectToken: String
    public var subjectTokenType: String
    /// An upstream's name (or `audience`, its synonym here).
    public var resource: String?
    public var scope: String?
    public var requestedTokenType: String?
    public var clientID: String?
    /// The request's verified DPoP proof, if it had one: a bound `subject_token` is exchanged
    /// only with a proof of its key, recorded once the token is found good.
    public var dpop: DPoPProof?

    public init(
        subjectToken: String,
        subjectTokenType: String,
        resource: String? = nil,
        scope: String? = nil,
        requestedTokenType: String? = nil,
        clientID: String? = nil,
        dpop: DPoPProof? = nil
    ) {
        self.dpop = dpop
        self.subjectToken = subjectToken
        self.subjectTokenType = subjectTokenType
        self.resource = resource
        self.scope = scope
        self.requestedTokenType = requestedTokenType
        self.clientID = clientID
    }
}

/// RFC 8693 §2.2.1's answer.
public struct ExchangedToken: Sendable, Encodable, Equatable {
    public var accessToken: String
    public var issuedTokenType = TokenExchangeRequest.accessTokenType
    public var tokenType = "Bearer"
    public var expiresIn: Int
    public var scope: String

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case issuedTokenType = "issued_token_type"
        case tokenType = "token_type"
        case expiresIn = "expires_in"
        case scope
    }
}

extension TokenGrants {
    /// Swaps a TokenGate access token for an upstream access token: for `resource` (an upstream's
    /// name) with its configured scopes, or for `scope` among the scopes the account's provider
    /// is configured with. Errors are RFC 6749 §5.2 / RFC 8693 §2.2.2 ones.
    public func exchange(_ request: TokenExchangeRequest) async throws -> ExchangedToken {
        guard request.subjectTokenType == TokenExchangeRequest.accessTokenType else {
            throw OAuthError(.invalidRequest, "subject_token_type must be \(TokenExchangeRequest.accessTokenType).")
        }
        if let requested = request.requestedTokenType, requested != TokenExchangeRequest.accessTokenType {
            throw OAuthError(.invalidRequest, "requested_token_type may only be \(TokenExchangeRequest.accessTokenType).")
        }
        let context: SessionContext
        do {
            context = try await upstream.authenticateForAPI(accessToken: request.subjectToken)
        } catch let problem as AuthProblem where problem.code == .invalidToken {
            throw OAuthError(.invalidGrant, "subject_token is invalid or expired. Refresh it, or log in again.")
        }
        if let clientID = request.clientID, clientID != context.clientID {
            throw OAuthError(.invalidGrant, "subject_token was issued to another client.")
        }
        if let bound = context.dpopJKT {
            guard let proof = request.dpop, proof.jkt == bound else { throw DPoPBinding.otherDPoPKey }
            // The subject token is good and bound to the proof's key: now the proof is used.
            do {
                try await dpop.recordProof(proof)
            } catch let error as DPoPError {
                throw OAuthError(error)
            }
        }
        let scopes = try exchangeScopes(request, provider: context.account.provider)
        let token: UpstreamAccessToken
        do {
            token = try await upstream.upstreamAccessToken(for: context, scopes: scopes)
        } catch let problem as AuthProblem {
            switch problem.code {
            case .interactionRequired: throw OAuthError(.interactionRequired, problem.detail)
            case .consentRequired: throw OAuthError(.invalidScope, problem.detail)
            case .idpUnavailable: throw OAuthError(.temporarilyUnavailable, problem.detail, retryAfter: problem.retryAfter)
            default: throw OAuthError(.invalidGrant, problem.detail)
            }
        }
        return ExchangedToken(
            accessToken: token.value,
            expiresIn: max(0, Int(token.expiresAt.timeIntervalSince(clock.now()))),
            scope: token.scopes.joined(separator: " ")
        )
    }

    private func exchangeScopes(_ request: TokenExchangeRequest, provider: String) throws(OAuthError) -> [String] {
        let asked = request.scope.map { $0.split(separator: " ").map(String.init) }
        guard let name = request.resource else {
            guard let asked, !asked.isEmpty else { throw OAuthError(.invalidRequest, "Name the API with resource, or ask for a scope.") }
            // Only scopes of APIs that allow token exchange: `scope=` cannot get around an API's `token_exchange: false`.
            var allowed: Set<String> = []
            for resource in resources.values where resource.provider == provider && resource.allowsTokenExchange {
                allowed.formUnion(resource.scopes)
            }
            guard Set(asked).isSubset(of: allowed) else {
                throw OAuthError(
                    .invalidScope,
                    "Ask only for scopes of this account's provider's APIs that allow token exchange (upstreams[].token_exchange)."
                )
            }
            return asked
        }
        guard let resource = resources[name] else {
            throw OAuthError(.invalidTarget, "resource names no configured API. Use an upstream's name.")
        }
        guard resource.allowsTokenExchange else {
            throw OAuthError(
                .invalidTarget,
                "This API's token is not handed to apps (upstreams[].token_exchange is off); call it through /api/\(name)/ instead."
            )
        }
        guard resource.provider == provider else {
            throw OAuthError(.invalidTarget, "This API takes tokens of provider \(resource.provider); log in with it first.")
        }
        guard let asked else { return resource.scopes }
        guard !asked.isEmpty, Set(asked).isSubset(of: Set(resource.scopes)) else {
            throw OAuthError(.invalidScope, "Ask only for scopes this API is configured with: \(resource.scopes.joined(separator: " ")).")
        }
        return asked
    }
}
