import Foundation
import TGBase
import TGOIDC
import TGStore

/// A login's step-up part (RFC 9470): the account whose user must sign in, and the API whose
/// token the stronger sign-in is for. Both optional; neither is a secret (a step-up only narrows
/// who may finish the login).
struct StepUpTarget: Sendable {
    var account: UUID?
    var resource: String?
    /// The account's email or username, sent as `login_hint` when the app gave none.
    var loginHint: String?
}

extension LoginFlow {
    /// Checks a login's `account` and `resource`: the account must be an active one of
    /// `provider`, and the resource an API that takes `provider`'s tokens.
    func stepUp(_ request: LoginRequest, provider: String) async throws -> StepUpTarget {
        var target = StepUpTarget()
        if let name = request.resource {
            guard let resource = upstream.resources[name], resource.provider == provider else {
                throw AuthProblem(.invalidRequest, "resource names no API that takes this provider's tokens.")
            }
            target.resource = resource.name
        }
        if let text = request.account {
            guard let id = UUID(uuidString: text), let account = try await store.accounts.findActive(id),
                account.provider == provider
            else {
                throw AuthProblem(
                    .invalidRequest,
                    "account names no signed-in account of this provider; sign in without account= to add a new one."
                )
            }
            let summary = AccountSummary(stored: account)
            target.account = id
            target.loginHint = summary.email ?? summary.preferredUsername
        }
        return target
    }

    /// Why a step-up login's ID token does not do what was asked (RFC 9470 §5), or nil.
    func stepUpShortfall(_ login: PendingLoginRecord, _ idToken: IDToken, provider: OpenIDProvider, now: Date) -> String? {
        let requirement = AuthenticationRequirement(
            acrValues: login.acrValues.map { $0.split(separator: " ").map(String.init) } ?? [],
            maxAge: login.maxAge
        )
        return requirement.shortfall(of: idToken, now: now, clockSkew: provider.configuration.clockSkew)
    }
}

extension LoginFlow {
    /// Whether the login asked for a stronger or fresher sign-in, or for an API's step-up.
    static func isStepUp(_ login: PendingLoginRecord) -> Bool {
        login.acrValues != nil || login.maxAge != nil || login.stepUpResource != nil || login.stepUpAccount != nil
    }

    /// The API whose step-up token a login keeps apart, when it names one that does and the
    /// account is already signed in (a first sign-in is an ordinary one whatever it asked).
    /// `account`: the sign-in's account if it exists already.
    func apartResource(_ login: PendingLoginRecord, account: UUID?) async throws -> UpstreamResource? {
        guard let name = login.stepUpResource, let resource = upstream.resources[name], resource.keepsStepUpApart else { return nil }
        guard let account, try await store.accounts.grant(account) != nil else { return nil }
        return resource
    }

    /// The step-up sign-in's token for `resource`: its own access token when it was granted the
    /// API's scopes, else one refresh of its grant for them (the grant is then dropped: the
    /// account keeps its everyday one).
    func apartToken(
        _ tokens: TokenResponse,
        for resource: UpstreamResource,
        refreshToken: String,
        provider: OpenIDProvider,
        policy: String?,
        subject: String,
        now: Date
    ) async throws -> UpstreamAccessToken {
        var issued = tokens
        if !resource.scopes.isEmpty, !Set(tokens.scopes ?? []).isSuperset(of: resource.scopes) {
            issued = try await provider.refresh(refreshToken, scopes: resource.scopes, policy: policy, subject: subject).tokens
        }
        return UpstreamAccessToken(
            value: issued.accessToken,
            expiresAt: now.addingTimeInterval(issued.accessTokenLifetime ?? settings.upstreamDefaultLifetime),
            scopes: resource.scopes,
            issuedAt: now
        )
    }
}
