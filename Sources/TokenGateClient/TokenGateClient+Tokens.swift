public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

extension TokenGateClient {
    /// An access token for `account` (the current one when nil): the one in memory while it has
    /// more than ``Configuration/refreshMargin`` left, else a refreshed one. Callers asking at the
    /// same moment share one refresh. Throws ``TokenGateClientError/signInRequired(account:provider:loginHint:)``
    /// when the grant is gone (the account is then removed from this device) and
    /// ``TokenGateClientError/unavailable(retryAfter:)`` when the gateway cannot answer now.
    public func accessToken(for account: String? = nil) async throws -> AccessToken {
        let id = try accountID(account)
        if let token = accessTokens[id], token.expiresAt.timeIntervalSince(now()) > configuration.refreshMargin { return token }
        return try await refresh(id)
    }

    /// The refresh of `id` in flight, or a new one.
    func refresh(_ id: String) async throws -> AccessToken {
        if let running = refreshes[id] { return try await running.value }
        // On the actor: it starts once this call waits, after it is registered, and leaves the
        // register as it ends (not when its first caller resumes, which a caller that refuses its
        // token in between would otherwise join).
        let task = Task {
            defer { self.refreshes[id] = nil }
            return try await self.performRefresh(id)
        }
        refreshes[id] = task
        return try await task.value
    }

    /// A fresh token after the gateway refused `rejected`: unless another caller has already
    /// replaced it (then that one), one refresh shared by every caller of the moment.
    func refresh(_ id: String, rejected: String) async throws -> AccessToken {
        if let token = accessTokens[id], token.value != rejected { return token }
        accessTokens[id] = nil
        return try await refresh(id)
    }

    private func performRefresh(_ id: String) async throws -> AccessToken {
        guard let entry = try state().entry(id) else { throw TokenGateClientError.unknownAccount(id) }
        let answer = try await tokenRequest([
            ("grant_type", "refresh_token"), ("refresh_token", entry.refreshToken), ("client_id", configuration.clientID),
        ])
        guard answer.status == 200 else {
            let failure = answer.failure(account: id)
            if case .signInRequired = failure { try forget(id) }
            throw failure
        }
        return try keep(try answer.decode(TokenResponse.self), makeCurrent: false)
    }

    func accountID(_ account: String?) throws -> String {
        if let account {
            guard try state().entry(account) != nil else { throw TokenGateClientError.unknownAccount(account) }
            return account
        }
        guard let current = try currentAccount() else { throw TokenGateClientError.signInRequired(account: nil, provider: nil, loginHint: nil) }
        return current.id
    }

    /// Sends `request` to the gateway (its `/api/…` routes, `/auth/me`, …) with `account`'s token
    /// (the current account's when nil) and, for a bound token, a proof for this request. A 401
    /// gets one refresh and one retry (a nonce challenge one retry with the nonce). Only the
    /// gateway's origin gets a token: any other URL throws ``TokenGateClientError/foreignOrigin(_:)``
    /// before anything is sent. The gateway's own refusals come back typed (sign in again,
    /// consent, a step-up, unavailable); an API's answers come back as they are.
    public func data(for request: URLRequest, account: String? = nil) async throws -> (Data, HTTPURLResponse) {
        guard let url = request.url, let origin = Origin(url), origin == gatewayOrigin else {
            throw TokenGateClientError.foreignOrigin(request.url ?? configuration.gatewayURL)
        }
        let id = try accountID(account)
        var token = try await accessToken(for: id)
        var refreshed = false
        var nonceRetried = false
        var request = request
        var redirects = 0
        while true {
            let answer = try await send(authorized(request, with: token))
            // The gateway's own redirects (an API's `Location` it rewrote to itself) are followed
            // with a fresh proof; any other goes back to the app as it is, unfollowed.
            if (300..<400).contains(answer.status), answer.status != 304, redirects < 5, let location = answer.header("Location"),
                let target = URL(string: location, relativeTo: request.url)?.absoluteURL, Origin(target) == gatewayOrigin
            {
                redirects += 1
                request.url = target
                if answer.status == 303 || (answer.status != 307 && answer.status != 308 && request.httpMethod == "POST") {
                    request.httpMethod = "GET"
                    request.httpBody = nil
                }
                continue
            }
            if answer.status == 401, !nonceRetried, token.isDPoPBound, DPoPProof.asksForNonce(answer) {
                nonceRetried = true
                continue
            }
            if let failure = gatewayFailure(answer, account: id) {
                if case .signInRequired = failure { try forget(id) }
                throw failure
            }
            if answer.status == 401, !refreshed {
                refreshed = true
                token = try await refresh(id, rejected: token.value)
                continue
            }
            return (answer.data, answer.response)
        }
    }

    /// `request` with the token's `Authorization` and, for a bound token, its `DPoP` proof.
    func authorized(_ request: URLRequest, with token: AccessToken) throws -> URLRequest {
        var request = request
        if token.isDPoPBound, let key = try key() {
            request.setValue("DPoP " + token.value, forHTTPHeaderField: "Authorization")
            let proof = try DPoPProof.make(
                key: key,
                method: request.httpMethod ?? "GET",
                url: request.url!,
                accessToken: token.value,
                nonce: dpopNonce,
                now: now()
            )
            request.setValue(proof, forHTTPHeaderField: "DPoP")
        } else {
            request.setValue("Bearer " + token.value, forHTTPHeaderField: "Authorization")
        }
        return request
    }

    /// The gateway's own refusals an app acts on (problem+json with the gateway's codes); nil for
    /// anything else, an API's answers included.
    func gatewayFailure(_ answer: GatewayAnswer, account: String) -> TokenGateClientError? {
        guard answer.status >= 400, (answer.header("Content-Type") ?? "").hasPrefix("application/problem+json") else { return nil }
        switch answer.errorCode {
        case "interaction_required", "consent_required": return answer.failure(account: account)
        case "idp_unavailable", "database_unavailable", "request_timeout": return .unavailable(retryAfter: answer.retryAfter)
        case "step_up_required": return .stepUpRequired(StepUpChallenge(problem: answer.object ?? [:]))
        default: return nil
        }
    }
}
