import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension TokenGateClient {
    /// Asks the gateway for a transfer code for this device's accounts and keeps it, with the
    /// verifier it is bound to, in the ``TransferStore``, which survives a lost Keychain. Call it
    /// after the device's accounts change (a code restores the accounts it was made for).
    @discardableResult
    public func prepareTransferCode(account: String? = nil) async throws -> TransferCode {
        guard let transfers else { throw TokenGateClientError.noTransferCode }
        let verifier = PKCE.makeVerifier()
        var request = URLRequest(url: endpoint("auth/transfer"))
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(Form.encode([("code_challenge", PKCE.challenge(for: verifier)), ("code_challenge_method", "S256")]).utf8)
        let (data, response) = try await data(for: request, account: account)
        let answer = GatewayAnswer(data, response)
        guard answer.status == 200, let object = answer.object, let code = object["transfer_code"] as? String,
            let expiresIn = object["expires_in"] as? Int
        else { throw answer.failure() }
        let kept = TransferCode(code: code, verifier: verifier, expiresAt: now().addingTimeInterval(TimeInterval(expiresIn)))
        try transfers.save(kept)
        return kept
    }

    /// On a fresh install (or after the credential store was lost): redeems the kept transfer code,
    /// once. The restored accounts are signed in with a new device secret (and, with DPoP, bound to
    /// this install's key); the ones the gateway could not restore are returned with what a new
    /// sign-in needs. The code is spent either way and removed from the store.
    public func restoreFromTransferCode() async throws -> TransferRestore {
        guard let transfers, let kept = try transfers.load() else { throw TokenGateClientError.noTransferCode }
        let answer = try await tokenRequest([
            ("grant_type", "urn:tokengate:params:oauth:grant-type:transfer-code"), ("transfer_code", kept.code),
            ("code_verifier", kept.verifier), ("client_id", configuration.clientID),
        ])
        guard answer.status == 200 || answer.errorCode == "interaction_required" else { throw answer.failure() }
        let redeemed = try answer.decode(TransferResponse.self)
        try transfers.remove()
        if let secret = redeemed.deviceSecret { try update { $0.deviceSecret = secret } }
        var restored: [Account] = []
        for (index, tokens) in (redeemed.accounts ?? []).enumerated() {
            _ = try keep(tokens, makeCurrent: index == 0)
            restored.append(tokens.account)
        }
        let hints = (redeemed.interactionRequired ?? []).map {
            SignInHint(accountID: $0.accountID, provider: $0.provider, loginHint: $0.loginHint)
        }
        return TransferRestore(restored: restored, signInRequired: hints)
    }
}
