import Foundation
import TGBase
import TGCrypto
import TGStore

/// Where an app asked to be sent back after the provider's logout page.
public struct LogoutReturn: Sendable, Equatable {
    /// One of the app's `post_logout_redirect_uris`.
    public var uri: String
    /// The app's own `state`, handed back with it.
    public var state: String?

    public init(uri: String, state: String?) {
        self.uri = uri
        self.state = state
    }
}

/// What the `state` TokenGate sends to the provider's end-session endpoint carries, sealed
/// (AES-256-GCM, so it can be neither read nor forged): no database row is needed.
private struct SealedLogoutReturn: Codable {
    var client: String
    var uri: String
    var state: String?
    var expires: Date
}

extension Logouts {
    /// TokenGate's landing route, registered at providers as the post-logout redirect URI.
    public static let logoutReturnPath = "/auth/logout/return"

    private static let logoutReturnContext = "logout_return"

    func sealLogoutReturn(_ returnTo: LogoutReturn, clientID: String) throws -> String {
        let value = SealedLogoutReturn(
            client: clientID,
            uri: returnTo.uri,
            state: returnTo.state,
            expires: clock.now().addingTimeInterval(settings.pendingLoginTTL)
        )
        let json = String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
        return Base64URL.encode(try vault.seal(json, context: Self.logoutReturnContext).bytes)
    }

    /// Where the landing route sends the browser: the app's URI with its `state`, if the
    /// provider handed back a `state` TokenGate sealed, not expired, for a URI the app still has
    /// registered. Nil without a `state` (Cognito sends none back): the browser gets a page.
    public func logoutReturn(state: String?) throws -> String? {
        guard let state else { return nil }
        let invalid = AuthProblem(
            .invalidRequest,
            "The logout's state is unknown, altered or expired; the app can simply be reopened (the logout itself is done)."
        )
        guard state.utf8.count <= 4096, let blob = try? Base64URL.decode(state),
            let json = try? vault.open(SealedBlob(blob), context: Self.logoutReturnContext),
            let value = try? JSONDecoder().decode(SealedLogoutReturn.self, from: Data(json.utf8))
        else { throw invalid }
        guard value.expires > clock.now(), clients[value.client]?.allows(postLogoutRedirectURI: value.uri) == true else { throw invalid }
        return FormURLEncoding.url(value.uri, adding: value.state.map { [("state", $0)] } ?? [])
    }
}
