import Foundation

/// What an API behind the gateway wants of the sign-in before it answers (RFC 9470 step-up, or
/// Entra's Conditional Access claims challenge), as the gateway's `step_up_required` says it.
/// Hand it to ``TokenGateClient/stepUp(_:account:)`` when the user agrees to sign in again.
public struct StepUpChallenge: Sendable, Equatable {
    /// Authentication context classes the sign-in must use (space-separated), when asked.
    public var acrValues: String?
    /// The most seconds since the user last authenticated, when asked.
    public var maxAge: Int?
    /// An OpenID Connect claims request (JSON), from Entra's claims challenge.
    public var claims: String?
    /// The API's name on the gateway (`/api/<resource>/…`).
    public var resource: String?

    public init(acrValues: String? = nil, maxAge: Int? = nil, claims: String? = nil, resource: String? = nil) {
        self.acrValues = acrValues
        self.maxAge = maxAge
        self.claims = claims
        self.resource = resource
    }

    /// Read from the gateway's `step_up_required` problem document.
    init(problem object: [String: Any]) {
        acrValues = object["acr_values"] as? String
        maxAge = (object["max_age"] as? NSNumber)?.intValue
        claims = object["claims"] as? String
        resource = object["resource"] as? String
    }

    /// The `/auth/login` parameters that ask for it.
    var loginParameters: [(String, String)] {
        var parameters: [(String, String)] = []
        if let acrValues { parameters.append(("acr_values", acrValues)) }
        if let maxAge { parameters.append(("max_age", String(maxAge))) }
        if let claims { parameters.append(("claims", claims)) }
        if let resource { parameters.append(("resource", resource)) }
        return parameters
    }
}

extension TokenGateClient {
    /// Signs `account` (the current one when nil) in again as `challenge` asks, through the
    /// browser: the gateway checks that the provider did sign in that way and as that account's
    /// user (else ``TokenGateClientError/authorizationFailed(error:description:)`` with
    /// `insufficient_user_authentication` or `access_denied`), and the account's credentials on
    /// this device become the new sign-in's (the current account stays the current one). Then
    /// send the refused request again.
    @discardableResult
    public func stepUp(_ challenge: StepUpChallenge, account: String? = nil) async throws -> Account {
        let id = try accountID(account)
        let current = try state().currentAccountID
        return try await signIn(extra: challenge.loginParameters + [("account", id)], makeCurrent: current == nil || current == id)
    }
}
