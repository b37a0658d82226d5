import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension TokenGateClient {
    /// What a logout ends.
    public enum LogoutScope: Sendable, Equatable {
        /// One account of this device; the others stay signed in.
        case account(String)
        /// Every account of this device.
        case device
        /// The account's sessions on every device (a lost phone, "sign out everywhere").
        case everywhere(String)
    }

    /// Logs out on the gateway, then forgets the accounts here. With `inBrowser` and a
    /// ``Configuration/postLogoutRedirectURI``, the provider's logout page is opened in the
    /// browser session too, and its way back to the app is checked (`state`); without, its URL is
    /// returned for the app to open or not. An account whose grant is already gone is forgotten
    /// all the same.
    @discardableResult
    public func logOut(_ scope: LogoutScope, inBrowser: Bool = false) async throws -> LogoutResult {
        let bearer: String
        var form: [(String, String)] = []
        let forgotten: [String]
        switch scope {
        case .account(let id):
            bearer = try accountID(id)
            form.append(("account", id))
            forgotten = [id]
        case .device:
            bearer = try accountID(nil)
            forgotten = try accounts().map(\.id)
        case .everywhere(let id):
            bearer = try accountID(id)
            form.append(("everywhere", "true"))
            forgotten = [id]
        }
        let returnState = PKCE.makeVerifier()
        let returnTo = inBrowser ? configuration.postLogoutRedirectURI : nil
        if let returnTo { form += [("post_logout_redirect_uri", returnTo), ("state", returnState)] }
        var request = URLRequest(url: endpoint("auth/logout"))
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(Form.encode(form).utf8)
        // The device's logout goes with any of its accounts' tokens: the current one's first, the
        // next one's when that account's grant is already gone.
        let bearers = scope == .device ? [bearer] + forgotten.filter { $0 != bearer } : [bearer]
        var answer: (Data, HTTPURLResponse)?
        for candidate in bearers where answer == nil {
            do {
                answer = try await data(for: request, account: candidate)
            } catch TokenGateClientError.signInRequired {
                // Nothing left to end on the gateway for that account (it is forgotten already).
                continue
            }
        }
        let result = answer.map { GatewayAnswer($0.0, $0.1) }
        if let result, result.status != 200 || result.object == nil { throw result.failure() }
        // Ended on the gateway, or nothing left there to end (every grant already gone).
        for id in forgotten { try forget(id) }
        if scope == .device { try update { $0.deviceSecret = nil } }
        guard let object = result?.object else { return LogoutResult(sessionsEnded: 0, accountsRemoved: 0, endSessionURL: nil) }
        let endSession = (object["end_session_url"] as? String).flatMap(URL.init(string:))
        if let returnTo, let endSession {
            let back = try await browser.authenticate(
                at: endSession,
                callbackScheme: callbackScheme(returnTo),
                ephemeral: configuration.ephemeralBrowserSession
            )
            guard Form.query(of: back)["state"] == returnState else { throw TokenGateClientError.stateMismatch }
        }
        return LogoutResult(
            sessionsEnded: object["sessions_ended"] as? Int ?? 0,
            accountsRemoved: object["accounts_removed"] as? Int ?? 0,
            endSessionURL: returnTo == nil ? endSession : nil
        )
    }

    /// The accounts the gateway holds for this device (`GET /auth/accounts`), which a sign-in on
    /// another instance of the app may have added.
    public func accountsOnGateway() async throws -> [Account] {
        let (data, response) = try await data(for: URLRequest(url: endpoint("auth/accounts")))
        let answer = GatewayAnswer(data, response)
        guard answer.status == 200 else { throw answer.failure() }
        struct Listing: Decodable { let accounts: [Account] }
        return try answer.decode(Listing.self).accounts
    }
}
